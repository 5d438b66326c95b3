/* model_dir.h - open a host build's output folder (C, no LLVM).
 *
 * dlopen()s DIR/libspark_model.so and opens DIR/model.spkw (or another pack
 * of the same build) with it through the runtime. Shared by spark-run (C) and
 * the C++ tools. */
#ifndef SPARK_TOOLS_MODEL_DIR_H
#define SPARK_TOOLS_MODEL_DIR_H

#include "spark/runtime.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opens `pack`, or DIR/model.spkw when it is NULL. On success returns 0 and
 * sets *model and *library (pass both to spark_close_model_dir). Otherwise
 * writes a message naming the file at fault into error[error_bytes] and
 * returns -1. */
int spark_open_model_dir(const char *dir, const char *pack,
                         spark_open_params params, spark_model **model,
                         void **library, char *error, size_t error_bytes);
void spark_close_model_dir(spark_model *model, void *library);

#ifdef __cplusplus
}
#endif

#endif
