/* main.c - opens the model spark_add_model() built, evaluates a prompt and
 * prints the greedy tokens; with the text layer, also the ids of a string.
 * Usage: hello MODEL.spkw N_PREDICT [TOKENIZER_DIR] */
#include "spark/runtime.h"
#include "spark_model.h" /* declares hello_model_definition() */
#ifdef HELLO_TEXT
#include "spark/text.h"
#endif

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.spkw N_PREDICT [TOKENIZER_DIR]\n", argv[0]);
    return 2;
  }
  char message[512] = "";
  spark_open_params params = spark_open_params_default();
  params.error_message = message;
  params.error_message_bytes = sizeof(message);
  spark_model *model;
  if (spark_model_open(hello_model_definition(), argv[1], &params, &model) != SPARK_OK) {
    fprintf(stderr, "%s\n", message);
    return 1;
  }
  spark_session *session;
  spark_sampler *sampler;
  spark_sampler_params sp = spark_sampler_params_default();
  int32_t prompt[6] = {1, 5, 9, 13, 17, 21};
  if (spark_session_create(model, NULL, &session) != SPARK_OK ||
      spark_sampler_create(&sp, SPARK_MODEL_VOCAB_SIZE, &sampler) != SPARK_OK ||
      spark_session_eval(session, prompt, 6, 0, NULL) != SPARK_OK)
    return 1;
  for (int i = 0, n = atoi(argv[2]); i < n; ++i) {
    const float *logits;
    int32_t token;
    if (spark_session_logits(session, &logits) != SPARK_OK ||
        spark_sampler_sample(sampler, logits, &token) != SPARK_OK)
      return 1;
    printf("%s%d", i ? " " : "", token);
    if (i + 1 < n && spark_session_decode(session, token) != SPARK_OK)
      return 1;
  }
  printf("\n");
#ifdef HELLO_TEXT
  if (argc > 3) {
    char error[512];
    spark_tokenizer *tokenizer;
    int32_t ids[64];
    size_t count = 0;
    if (spark_tokenizer_open(argv[3], &tokenizer, error, sizeof(error)) != SPARK_TEXT_OK ||
        spark_tokenizer_encode(tokenizer, "Hello", 5, 0, ids, 64, &count) != SPARK_TEXT_OK) {
      fprintf(stderr, "%s\n", error);
      return 1;
    }
    printf("text:");
    for (size_t i = 0; i < count; ++i)
      printf(" %d", ids[i]);
    printf("\n");
    spark_tokenizer_close(tokenizer);
  }
#endif
  spark_sampler_destroy(sampler);
  spark_session_destroy(session);
  spark_model_close(model);
  return 0;
}
