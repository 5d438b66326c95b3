/* options.h - the command-line parser of every spark tool that runs a
 * compiled model: spark-run (C, also built for the target by
 * `spark-compile --emit=exe`, so header-only and plain C) and, through
 * spark::Arguments (ModelLoader.h), spark-bench, spark-fidelity,
 * spark-perplexity and spark-kernelbench.
 *
 * Options are `--name value`, `--name=value` or flags (`--name`); any other
 * argument is a positional one. Each tool maps its short forms (-p, -n, ...)
 * to long names before parsing. */
#ifndef SPARK_TOOLS_OPTIONS_H
#define SPARK_TOOLS_OPTIONS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct spark_option {
  const char *name; /* without the leading "--" */
  int takes_value;  /* else a flag */
  /* Set by spark_options_parse: the value given last ("" for a flag), or
   * NULL when the option was not given. Points into argv. */
  const char *value;
} spark_option;

/* Parses argv[1..argc) against the `count` options (their values set, the
 * others left NULL) and stores up to `max_positionals` positional arguments
 * (more fail). Returns 0, or -1 with a sentence naming the argument at
 * fault in `message`: an unknown option, a flag given a value, a missing
 * value, an extra positional argument. */
static inline int spark_options_parse(int argc, char **argv,
                                      spark_option *options, size_t count,
                                      const char **positionals,
                                      size_t max_positionals,
                                      size_t *num_positionals, char *message,
                                      size_t message_bytes) {
  *num_positionals = 0;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
      if (*num_positionals == max_positionals) {
        snprintf(message, message_bytes, "unexpected argument '%s'", arg);
        return -1;
      }
      positionals[(*num_positionals)++] = arg;
      continue;
    }
    const char *name = arg + 2, *equals = strchr(name, '=');
    const size_t length = equals ? (size_t)(equals - name) : strlen(name);
    spark_option *option = NULL;
    for (size_t o = 0; o < count && !option; ++o)
      if (strlen(options[o].name) == length &&
          !strncmp(options[o].name, name, length))
        option = &options[o];
    if (!option) {
      snprintf(message, message_bytes, "unknown option --%.*s", (int)length,
               name);
      return -1;
    }
    if (!option->takes_value) {
      if (equals) {
        snprintf(message, message_bytes, "--%s takes no value", option->name);
        return -1;
      }
      option->value = "";
    } else if (equals) {
      option->value = equals + 1;
    } else if (i + 1 < argc) {
      option->value = argv[++i];
    } else {
      snprintf(message, message_bytes, "--%s needs a value", option->name);
      return -1;
    }
  }
  return 0;
}

/* The option called `name` (NULL if the table has none). */
static inline const spark_option *
spark_option_find(const spark_option *options, size_t count, const char *name) {
  for (size_t o = 0; o < count; ++o)
    if (!strcmp(options[o].name, name))
      return &options[o];
  return NULL;
}

/* An integer option's value: `fallback` when not given; -1 with a message
 * when its value is not a decimal integer. */
static inline int spark_option_int(const spark_option *option,
                                   long long fallback, long long *out,
                                   char *message, size_t message_bytes) {
  *out = fallback;
  if (!option || !option->value)
    return 0;
  char *end = NULL;
  errno = 0;
  const long long v = strtoll(option->value, &end, 10);
  if (!*option->value || *end || errno) {
    snprintf(message, message_bytes, "--%s: '%s' is not an integer",
             option->name, option->value);
    return -1;
  }
  *out = v;
  return 0;
}

/* A real option's value: `fallback` when not given; -1 with a message when
 * its value is not a number. */
static inline int spark_option_double(const spark_option *option,
                                      double fallback, double *out,
                                      char *message, size_t message_bytes) {
  *out = fallback;
  if (!option || !option->value)
    return 0;
  char *end = NULL;
  const double v = strtod(option->value, &end);
  if (!*option->value || *end) {
    snprintf(message, message_bytes, "--%s: '%s' is not a number", option->name,
             option->value);
    return -1;
  }
  *out = v;
  return 0;
}

#endif /* SPARK_TOOLS_OPTIONS_H */
