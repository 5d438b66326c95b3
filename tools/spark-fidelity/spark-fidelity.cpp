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
#include "Fidelity.h"
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

using Run = spark::ModelSession;

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
  spark::FidelityRequest request;
  request.build = args.positional()[0];
  request.reference = args.get("reference", "");
  request.calib = args.get("calib", "");
  request.json = args.get("json", "");
  request.nPredict = nPredict;
  request.threads = int(threads);
  request.chunk = int(chunkOption);
  request.quiet = args.has("quiet");
  if (std::string e = spark::reportFidelity(request); !e.empty())
    return fail(e);
  return 0;
}
