//===- Fidelity.cpp - compare a build with a reference build --------------===//
//
// See Fidelity.h.
//
//===----------------------------------------------------------------------===//
#include "Fidelity.h"
#include "ModelLoader.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace spark;

namespace {

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

int argmax(const float *row, int32_t n) {
  return int(std::max_element(row, row + n) - row);
}

/// Greedy continuation of the session's current state.
std::vector<int32_t> generate(ModelSession &run, int32_t count) {
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

} // namespace

std::string spark::reportFidelity(const FidelityRequest &request) {
  const std::string &out = request.build;
  const std::string jsonPath =
      request.json.empty() ? out + "/fidelity.json" : request.json;
  const bool quiet = request.quiet;
  const long long nPredict = request.nPredict;
  const int threads = request.threads;

  ModelSession test, reference;
  if (std::string e = test.open(out, int(threads)); !e.empty())
    return e;
  if (std::string e = reference.open(request.reference, int(threads));
      !e.empty())
    return e;
  if (test.info.vocab_size != reference.info.vocab_size)
    return ("the builds disagree on the vocabulary (" +
            std::to_string(test.info.vocab_size) + " vs " +
            std::to_string(reference.info.vocab_size) +
            "); expected two builds of one checkpoint");
  const int32_t vocab = test.info.vocab_size;
  const int32_t maxContext =
      std::min(test.info.max_context, reference.info.max_context);
  std::vector<std::vector<int32_t>> sequences;
  if (std::string e = readTokenSequences(
          request.calib, vocab, int32_t(maxContext - nPredict), sequences);
      !e.empty())
    return e + " (with --n-predict " + std::to_string(nPredict) + ")";
  int32_t chunk = request.chunk;
  chunk = std::min({chunk ? chunk : test.info.max_chunk, test.info.max_chunk,
                    reference.info.max_chunk});

  ProbeState state;
  const int32_t layers = reference.info.num_layers;
  if (test.info.num_layers != layers)
    return "the builds disagree on the layer count; expected two builds "
           "of one checkpoint";
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
        return "the reference build failed on sequence " +
               std::to_string(s + 1);
      state.recording = false;
      if (spark_session_eval(test.session, &ids[at], n, n, testLogits.data()) !=
          SPARK_OK)
        return out + ": failed on sequence " + std::to_string(s + 1);
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
      std::fprintf(stderr, "%s: sequence %zu/%zu: %zu tokens\n", request.tool,
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
      {"reference", request.reference},
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
  if (std::string e = writeFileAtomically(jsonPath, json); !e.empty())
    return e;
  if (!quiet)
    std::fprintf(stderr, "%s: wrote %s\n", request.tool, jsonPath.c_str());
  return "";
}
