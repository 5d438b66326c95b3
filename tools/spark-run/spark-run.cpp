//===- spark-run.cpp - run a compiled host model on token ids -------------===//
//
// spark-run OUT --prompt-ids 1,2,3 --n-predict N [--threads T] [--chunk C]
//           [--logits-out F.npy] [--temperature X --top-k K --top-p P --seed S]
//           [--print-dispatch] [--no-verify]
//
// Loads OUT/libspark_model.so (the host build's shared library) and
// OUT/model.spkw through the C runtime, prefills the prompt, then samples
// N tokens (greedy by default) and prints their ids.
//
//===----------------------------------------------------------------------===//
#include "ModelLoader.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

const char *kUsage =
    "usage: spark-run OUT --prompt-ids 1,2,3 [--n-predict N] [--threads T]\n"
    "                 [--chunk C] [--logits-out F.npy] [--temperature X]\n"
    "                 [--top-k K] [--top-p P] [--seed S] [--print-dispatch]\n"
    "                 [--no-verify]\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "spark-run: error: %s\n", message.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  spark::Arguments args(argc, argv,
                        {{"prompt-ids", true}, {"n-predict", true},
                         {"threads", true}, {"chunk", true},
                         {"logits-out", true}, {"temperature", true},
                         {"top-k", true}, {"top-p", true}, {"seed", true},
                         {"print-dispatch", false}, {"no-verify", false},
                         {"help", false}});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  long long nPredict = args.getInt("n-predict", 16);
  long long threads = args.getInt("threads", 0);
  long long chunk = args.getInt("chunk", 0);
  long long topK = args.getInt("top-k", 0);
  long long seed = args.getInt("seed", 0);
  double temperature = args.getDouble("temperature", 0.0);
  double topP = args.getDouble("top-p", 1.0);
  if (!args.error().empty())
    return fail(args.error() + "\n" + kUsage);
  if (args.positional().size() != 1)
    return fail(std::string("expected one output folder\n") + kUsage);
  if (!args.has("prompt-ids"))
    return fail(std::string("--prompt-ids is required\n") + kUsage);

  std::vector<int32_t> prompt;
  std::string ids = args.get("prompt-ids", "");
  for (size_t start = 0; start <= ids.size();) {
    size_t comma = ids.find(',', start);
    std::string item = ids.substr(start, comma == std::string::npos
                                             ? std::string::npos
                                             : comma - start);
    char *end = nullptr;
    long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || value < INT32_MIN || value > INT32_MAX)
      return fail("--prompt-ids: '" + item + "' is not an integer token id");
    prompt.push_back(int32_t(value));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (nPredict < 1)
    return fail("--n-predict must be at least 1");
  if (threads < 0 || chunk < 0)
    return fail("--threads and --chunk must not be negative");

  spark::LoadedModel loaded;
  spark_open_params params = spark_open_params_default();
  params.num_threads = int(threads);
  params.verify_checksums = !args.has("no-verify");
  std::string error = loaded.load(args.positional()[0], params);
  if (!error.empty())
    return fail(error);
  spark_model_info info;
  spark_model_get_info(loaded.model, &info);
  if (args.has("print-dispatch"))
    std::fprintf(stderr, "spark-run: kernels: %s (chosen from CPUID; target %s)%s%s\n",
                 info.dispatch, info.target,
                 info.dispatch_reason ? "; " : "",
                 info.dispatch_reason ? info.dispatch_reason : "");
  for (int32_t id : prompt)
    if (id < 0 || id >= info.vocab_size)
      return fail("--prompt-ids: token " + std::to_string(id) +
                  " is outside the vocabulary [0, " +
                  std::to_string(info.vocab_size) + ")");
  if (prompt.size() + size_t(nPredict) - 1 > size_t(info.max_context))
    return fail("prompt + --n-predict need " +
                std::to_string(prompt.size() + nPredict - 1) +
                " positions; the build holds " +
                std::to_string(info.max_context) +
                " (spark-compile --max-context)");

  spark_session *session;
  if (spark_status s = spark_session_create(loaded.model, nullptr, &session))
    return fail(std::string("cannot create a session: ") +
                spark_status_string(s));
  spark_sampler_params samplerParams = spark_sampler_params_default();
  samplerParams.temperature = float(temperature);
  samplerParams.top_k = int32_t(topK);
  samplerParams.top_p = float(topP);
  samplerParams.seed = uint64_t(seed);
  spark_sampler *sampler;
  if (spark_status s =
          spark_sampler_create(&samplerParams, info.vocab_size, &sampler))
    return fail(std::string("sampler: ") + spark_status_string(s));

  const size_t vocab = size_t(info.vocab_size);
  const bool keepRows = args.has("logits-out");
  std::vector<float> rows(keepRows ? prompt.size() * vocab : 0);
  if (spark_status s =
          spark_session_eval(session, prompt.data(), int32_t(prompt.size()),
                             int32_t(chunk), keepRows ? rows.data() : nullptr))
    return fail(std::string("prefill: ") + spark_status_string(s));
  std::vector<int32_t> generated;
  for (long long i = 0; i < nPredict; ++i) {
    const float *logits;
    spark_session_logits(session, &logits);
    int32_t next;
    spark_sampler_sample(sampler, logits, &next);
    generated.push_back(next);
    if (i + 1 == nPredict)
      break;
    if (spark_status s = spark_session_decode(session, next))
      return fail(std::string("decode: ") + spark_status_string(s));
    if (keepRows) {
      spark_session_logits(session, &logits);
      rows.insert(rows.end(), logits, logits + vocab);
    }
  }
  for (size_t i = 0; i < generated.size(); ++i)
    std::printf("%s%d", i ? " " : "", generated[i]);
  std::printf("\n");
  spark_sampler_destroy(sampler);
  spark_session_destroy(session);
  if (keepRows) {
    error = spark::writeNpy(args.get("logits-out", ""), rows.data(),
                            rows.size() / vocab, vocab);
    if (!error.empty())
      return fail(error);
  }
  return 0;
}
