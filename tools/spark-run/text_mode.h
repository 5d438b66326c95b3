/* text_mode.h - spark-run's text modes (host build only). */
#ifndef SPARK_RUN_TEXT_MODE_H
#define SPARK_RUN_TEXT_MODE_H

#include "spark/runtime.h"

typedef struct text_options {
  const char *prompt;        /* --prompt TEXT (the first message with --chat) */
  const char *system;        /* --system TEXT */
  const char *tools;         /* --tools FILE */
  const char *tools_json;    /* its contents */
  const char *tokenizer_dir; /* --tokenizer DIR, or the build folder */
  int tokenizer_given;
  int chat;                  /* --chat */
  int grammar;               /* --grammar tools */
  long long n_predict, chunk, top_k, seed, think_budget;
  double temperature, top_p;
} text_options;

/* The message of a failed step (spark-run.c). */
const char *spark_run_step_error(spark_model *model, spark_status status);

/* Runs a text mode on an open model; returns the exit code. */
int spark_run_text(spark_model *model, const text_options *options);

#endif
