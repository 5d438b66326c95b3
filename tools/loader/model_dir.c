/* model_dir.c - open a host build's output folder (see model_dir.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "model_dir.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int spark_open_model_dir(const char *dir, const char *pack,
                         spark_open_params params, spark_model **model,
                         void **library, char *error, size_t error_bytes) {
  char library_path[4096], pack_path[4096];
  *model = NULL;
  *library = NULL;
  snprintf(library_path, sizeof(library_path), "%s/libspark_model.so", dir);
  if (pack)
    snprintf(pack_path, sizeof(pack_path), "%s", pack);
  else
    snprintf(pack_path, sizeof(pack_path), "%s/model.spkw", dir);
  if (access(library_path, R_OK) != 0) {
    snprintf(error, error_bytes,
             "%s: missing; expected a spark-compile output folder of a "
             "target that runs here (host, spr)",
             library_path);
    return -1;
  }
  char *absolute = realpath(library_path, NULL);
  /* RTLD_NODELETE: the library's kernel workers (thread_pool.c) live as long
   * as the process and spin in its code for a while after a step, so its
   * code stays mapped after dlclose (a program that loads a build, closes it
   * and goes on, such as spark-compile --calib, would otherwise run them
   * into unmapped pages). */
  *library = dlopen(absolute ? absolute : library_path,
                    RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  free(absolute);
  if (!*library) {
    snprintf(error, error_bytes, "%s: %s", library_path, dlerror());
    return -1;
  }
  typedef const spark_model_def *(*definition_fn)(void);
  definition_fn definition =
      (definition_fn)dlsym(*library, "spark_model_definition");
  if (!definition) {
    snprintf(error, error_bytes, "%s: no spark_model_definition symbol",
             library_path);
    dlclose(*library);
    *library = NULL;
    return -1;
  }
  char message[512] = "";
  params.error_message = message;
  params.error_message_bytes = sizeof(message);
  spark_status status = spark_model_open(definition(), pack_path, &params, model);
  if (status != SPARK_OK) {
    snprintf(error, error_bytes, "%s (%s)", message, spark_status_string(status));
    dlclose(*library);
    *library = NULL;
    return -1;
  }
  return 0;
}

void spark_close_model_dir(spark_model *model, void *library) {
  spark_model_close(model);
  if (library)
    dlclose(library);
}
