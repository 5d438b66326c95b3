//===- spark-fidelity.cpp - compare a build with a reference build --------===//
//
// spark-fidelity OUT --reference REF_OUT --calib FILE [--n-predict N]
//                [--threads T] [--chunk C] [--json PATH] [--quiet]
//
// Loads two host builds of the same checkpoint (typically a quantized build
// and an fp32 one), feeds both every sequence of the calibration file chunk
// by chunk, and compares, on the same inputs (teacher forcing):
//   - each decoder layer's output (the residual stream), through the model
//     libraries' layer probe: SNR in dB and max |error|;
//   - the logits: SNR, max |error|, per-position greedy agreement;
// then lets each build generate N greedy tokens after each sequence and
// counts the tokens generated identically before the first difference.
// Prints a table and writes the numbers as JSON (default OUT/fidelity.json).
//
// spark-fidelity BUILD --calib FILE --ranges-out PATH [--threads T]
//
// Calibration: BUILD is a build with input probes (what spark-compile
// --calib makes of the checkpoint in fp32); runs every sequence through it
// and writes, for each probed product input (a JSON array by probe id -
// num_layers), the largest |x| it saw, the clipping range that gives the
// least int8 quantization error over those values, and each input
// channel's mean x^2 (its importance for weight quantization).
//
//===----------------------------------------------------------------------===//
#include "Calibrate.h"
#include "ModelLoader.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char *kUsage =
    "usage: spark-fidelity OUT --reference REF_OUT --calib FILE\n"
    "                      [--n-predict N] [--threads T] [--chunk C]\n"
    "                      [--json PATH] [--quiet]\n"
    "       spark-fidelity BUILD --calib FILE --ranges-out PATH [--threads "
    "T]\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "spark-fidelity: error: %s\n", message.c_str());
  return 1;
}

/// Signal and error energy plus the largest |error| of one compared tensor.
struct Agreement {
  double signal = 0, error = 0, maxError = 0;
  void add(const float *ours, const float *truth, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      double d = double(ours[i]) - double(truth[i]);
      signal += double(truth[i]) * double(truth[i]);
      error += d * d;
      maxError = std::max(maxError, std::fabs(d));
    }
  }
  double snr() const {
    if (error == 0)
      return INFINITY;
    return 10.0 * std::log10(signal / error);
  }
};

/// Layer outputs of the reference build, kept for the build under test.
struct ProbeState {
  int32_t width = 0;
  bool recording = true;
  std::vector<std::vector<float>> reference; // [layer][rows * width]
  std::vector<Agreement> layers;
};

void probe(void *user, int32_t layer, int32_t rows, int32_t width,
           const float *hidden, int32_t rowStride) {
  auto *state = static_cast<ProbeState *>(user);
  if (layer < 0 || size_t(layer) >= state->layers.size())
    return;
  std::vector<float> &saved = state->reference[layer];
  if (state->recording) {
    saved.resize(size_t(rows) * width);
    for (int32_t r = 0; r < rows; ++r)
      std::memcpy(&saved[size_t(r) * width], hidden + size_t(r) * rowStride,
                  sizeof(float) * width);
    return;
  }
  if (saved.size() != size_t(rows) * width)
    return; // not the same step shape: not comparable
  for (int32_t r = 0; r < rows; ++r)
    state->layers[layer].add(hidden + size_t(r) * rowStride,
                             &saved[size_t(r) * width], width);
}

using Run = spark::ModelSession;

int argmax(const float *row, int32_t n) {
  return int(std::max_element(row, row + n) - row);
}

/// Greedy continuation of the session's current state.
std::vector<int32_t> generate(Run &run, int32_t count) {
  std::vector<int32_t> ids;
  const float *logits = nullptr;
  for (int32_t i = 0; i < count; ++i) {
    if (spark_session_logits(run.session, &logits) != SPARK_OK)
      break;
    ids.push_back(argmax(logits, run.info.vocab_size));
    if (i + 1 < count &&
        spark_session_decode(run.session, ids.back()) != SPARK_OK)
      break;
  }
  return ids;
}

/// --ranges-out: runs the sequences through one build with input probes and
/// writes what it measured of each product input as JSON.
int calibrate(Run &run, const std::string &build, const std::string &calib,
              const std::string &path, bool quiet) {
  std::vector<std::vector<int32_t>> sequences;
  if (std::string e = spark::readTokenSequences(
          calib, run.info.vocab_size, run.info.max_context, sequences);
      !e.empty())
    return fail(e);
  std::vector<spark::MeasuredInput> inputs;
  if (std::string e =
          spark::measureProductInputs(run, build, sequences, inputs);
      !e.empty())
    return fail(e);
  llvm::json::Array entries;
  for (const spark::MeasuredInput &m : inputs)
    entries.push_back(m.seen ? llvm::json::Value(llvm::json::Object{
                                   {"max", m.largest},
                                   {"clip", m.clip},
                                   {"importance", m.importance}})
                             : llvm::json::Value(nullptr));
  const std::string text =
      llvm::formatv("{0:2}", llvm::json::Value(std::move(entries))).str() +
      "\n";
  if (std::string e = spark::writeFileAtomically(path, text); !e.empty())
    return fail(e);
  long long tokens = 0;
  for (const std::vector<int32_t> &ids : sequences)
    tokens += (long long)ids.size();
  if (!quiet)
    std::fprintf(stderr,
                 "spark-fidelity: %zu product inputs over %lld tokens in %zu "
                 "sequences -> %s\n",
                 inputs.size(), tokens, sequences.size(), path.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  spark::Arguments args(argc, argv,
                        {{"reference", true},
                         {"calib", true},
                         {"n-predict", true},
                         {"threads", true},
                         {"chunk", true},
                         {"json", true},
                         {"quiet", false},
                         {"ranges-out", true},
                         {"help", false}});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  long long nPredict = args.getInt("n-predict", 32);
  long long threads = args.getInt("threads", 0);
  long long chunkOption = args.getInt("chunk", 0);
  if (!args.error().empty())
    return fail(args.error() + "\n" + kUsage);
  if (args.positional().size() != 1)
    return fail(std::string("expected one output folder (the build to "
                            "check)\n") +
                kUsage);
  if (args.has("ranges-out")) {
    if (!args.has("calib") || args.has("reference"))
      return fail(std::string("--ranges-out takes one build and --calib, no "
                              "--reference\n") +
                  kUsage);
    Run run;
    if (std::string e = run.open(args.positional()[0], int(threads));
        !e.empty())
      return fail(e);
    return calibrate(run, args.positional()[0], args.get("calib", ""),
                     args.get("ranges-out", ""), args.has("quiet"));
  }
  if (!args.has("reference") || !args.has("calib"))
    return fail(std::string("--reference and --calib are required\n") + kUsage);
  if (nPredict < 0 || threads < 0 || chunkOption < 0)
    return fail("--n-predict, --threads and --chunk must not be negative");
  const std::string out = args.positional()[0];
  const std::string jsonPath = args.get("json", out + "/fidelity.json");
  const bool quiet = args.has("quiet");

  Run test, reference;
  if (std::string e = test.open(out, int(threads)); !e.empty())
    return fail(e);
  if (std::string e = reference.open(args.get("reference", ""), int(threads));
      !e.empty())
    return fail(e);
  if (test.info.vocab_size != reference.info.vocab_size)
    return fail("the builds disagree on the vocabulary (" +
                std::to_string(test.info.vocab_size) + " vs " +
                std::to_string(reference.info.vocab_size) +
                "); expected two builds of one checkpoint");
  const int32_t vocab = test.info.vocab_size;
  const int32_t maxContext =
      std::min(test.info.max_context, reference.info.max_context);
  std::vector<std::vector<int32_t>> sequences;
  if (std::string e =
          spark::readTokenSequences(args.get("calib", ""), vocab,
                                    int32_t(maxContext - nPredict), sequences);
      !e.empty())
    return fail(e + " (with --n-predict " + std::to_string(nPredict) + ")");
  int32_t chunk = int32_t(chunkOption ? chunkOption : 0);
  chunk = std::min({chunk ? chunk : test.info.max_chunk, test.info.max_chunk,
                    reference.info.max_chunk});

  ProbeState state;
  const int32_t layers = reference.info.num_layers;
  if (test.info.num_layers != layers)
    return fail("the builds disagree on the layer count; expected two builds "
                "of one checkpoint");
  state.reference.resize(layers);
  state.layers.resize(layers);
  spark_model_set_layer_probe(reference.loaded.model, probe, &state);
  spark_model_set_layer_probe(test.loaded.model, probe, &state);

  Agreement logits;
  long long positions = 0, agreeing = 0, generated = 0, identical = 0,
            identicalPrefix = 0;
  std::vector<float> testLogits(size_t(chunk) * vocab),
      referenceLogits(size_t(chunk) * vocab);
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<int32_t> &ids = sequences[s];
    spark_session_reset(test.session);
    spark_session_reset(reference.session);
    for (size_t at = 0; at < ids.size(); at += chunk) {
      int32_t n = int32_t(std::min<size_t>(chunk, ids.size() - at));
      state.recording = true;
      if (spark_session_eval(reference.session, &ids[at], n, n,
                             referenceLogits.data()) != SPARK_OK)
        return fail("the reference build failed on sequence " +
                    std::to_string(s + 1));
      state.recording = false;
      if (spark_session_eval(test.session, &ids[at], n, n, testLogits.data()) !=
          SPARK_OK)
        return fail(out + ": failed on sequence " + std::to_string(s + 1));
      logits.add(testLogits.data(), referenceLogits.data(), size_t(n) * vocab);
      for (int32_t r = 0; r < n; ++r)
        agreeing += argmax(&testLogits[size_t(r) * vocab], vocab) ==
                    argmax(&referenceLogits[size_t(r) * vocab], vocab);
      positions += n;
    }
    // Free generation: each build on its own tokens.
    spark_model_set_layer_probe(reference.loaded.model, nullptr, nullptr);
    spark_model_set_layer_probe(test.loaded.model, nullptr, nullptr);
    std::vector<int32_t> a = generate(test, int32_t(nPredict)),
                         b = generate(reference, int32_t(nPredict));
    spark_model_set_layer_probe(reference.loaded.model, probe, &state);
    spark_model_set_layer_probe(test.loaded.model, probe, &state);
    size_t prefix = 0;
    while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix])
      ++prefix;
    identicalPrefix += prefix;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      identical += a[i] == b[i];
    generated += std::min(a.size(), b.size());
    if (!quiet)
      std::fprintf(stderr, "spark-fidelity: sequence %zu/%zu: %zu tokens\n",
                   s + 1, sequences.size(), ids.size());
  }
  spark_model_set_layer_probe(reference.loaded.model, nullptr, nullptr);
  spark_model_set_layer_probe(test.loaded.model, nullptr, nullptr);

  // Table.
  std::printf("| tensor | SNR dB | max abs error |\n|---|---:|---:|\n");
  for (int32_t l = 0; l < layers; ++l)
    std::printf("| layer %d | %.2f | %.4g |\n", l, state.layers[l].snr(),
                state.layers[l].maxError);
  std::printf("| logits | %.2f | %.4g |\n", logits.snr(), logits.maxError);
  const double agreement = positions ? double(agreeing) / positions : 0.0;
  std::printf("\n%lld positions in %zu sequences: greedy agreement %.4f; "
              "%lld generated tokens per build: %lld identical, %lld before "
              "the first difference\n",
              positions, sequences.size(), agreement, generated, identical,
              identicalPrefix);

  // JSON (llvm::json: names are escaped), through a temporary name.
  auto number = [](double v) -> llvm::json::Value {
    if (std::isinf(v))
      return nullptr; // identical: no error at all
    return v;
  };
  llvm::json::Array layerRows;
  for (int32_t l = 0; l < layers; ++l)
    layerRows.push_back(llvm::json::Object{
        {"layer", l},
        {"snr_db", number(state.layers[l].snr())},
        {"max_abs_error", number(state.layers[l].maxError)}});
  llvm::json::Object report{
      {"build", out},
      {"reference", args.get("reference", "")},
      {"sequences", int64_t(sequences.size())},
      {"positions", int64_t(positions)},
      {"layers", std::move(layerRows)},
      {"logits", llvm::json::Object{{"snr_db", number(logits.snr())},
                                    {"max_abs_error", number(logits.maxError)},
                                    {"greedy_agreement", number(agreement)}}},
      {"generation",
       llvm::json::Object{
           {"tokens_per_build", int64_t(generated)},
           {"identical", int64_t(identical)},
           {"identical_before_first_difference", int64_t(identicalPrefix)}}}};
  const std::string json =
      llvm::formatv("{0:2}", llvm::json::Value(std::move(report))).str() + "\n";
  if (std::string e = spark::writeFileAtomically(jsonPath, json); !e.empty())
    return fail(e);
  if (!quiet)
    std::fprintf(stderr, "spark-fidelity: wrote %s\n", jsonPath.c_str());
  return 0;
}
