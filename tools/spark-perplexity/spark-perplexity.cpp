//===- spark-perplexity.cpp - perplexity and KL divergence of a build -----===//
//
// spark-perplexity BUILD --data FILE [--reference REF_BUILD] [--threads T]
//                  [--chunk C] [--json PATH] [--quiet]
//
// Runs every token sequence of FILE (ids, one sequence per line: the format
// of spark-compile --calib) through the host build BUILD, teacher-forced, and
// scores each position's prediction of the next token: perplexity over all
// scored positions. With --reference (usually the fp32 build of the same
// checkpoint) it also compares the two builds' next-token distributions at
// every position, the figures llama.cpp's `llama-perplexity --kl-divergence`
// reports: KL(reference || build) (mean with its standard error, median,
// 99th percentile, maximum), how often both pick the same top token, and the
// change of the correct token's probability (mean and RMS of
// p_build - p_reference).
//
// All sums are in double; the log-softmax of each row is exact to rounding.
// Prints a summary and writes it as JSON when --json is given.
//
//===----------------------------------------------------------------------===//
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
    "usage: spark-perplexity BUILD --data FILE [--reference REF_BUILD]\n"
    "                        [--threads T] [--chunk C] [--json PATH] "
    "[--quiet]\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "spark-perplexity: error: %s\n", message.c_str());
  return 1;
}

using Run = spark::ModelSession;

/// log-softmax of one row, in double.
void logSoftmax(const float *row, int32_t n, std::vector<double> &out) {
  out.resize(n);
  double top = *std::max_element(row, row + n);
  double sum = 0;
  for (int32_t i = 0; i < n; ++i)
    sum += std::exp(double(row[i]) - top);
  double logSum = top + std::log(sum);
  for (int32_t i = 0; i < n; ++i)
    out[i] = double(row[i]) - logSum;
}

int32_t argmax(const std::vector<double> &row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

/// Value at quantile q of sorted values (linear interpolation).
double quantile(const std::vector<double> &sorted, double q) {
  if (sorted.empty())
    return NAN;
  double at = q * double(sorted.size() - 1);
  size_t lo = size_t(std::floor(at)), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - double(lo));
}

/// `v` for the JSON; null when not finite.
llvm::json::Value jsonNumber(double v) {
  if (!std::isfinite(v))
    return nullptr;
  return v;
}

} // namespace

int main(int argc, char **argv) {
  spark::Arguments args(argc, argv,
                        {{"data", true},
                         {"reference", true},
                         {"threads", true},
                         {"chunk", true},
                         {"json", true},
                         {"quiet", false},
                         {"help", false}});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  long long threads = args.getInt("threads", 0);
  long long chunk = args.getInt("chunk", 0);
  if (!args.error().empty())
    return fail(args.error() + "\n" + kUsage);
  if (args.positional().size() != 1)
    return fail(std::string("expected one build folder\n") + kUsage);
  if (!args.has("data"))
    return fail(std::string("--data FILE is required (token ids, one "
                            "sequence per line)\n") +
                kUsage);
  if (threads < 0 || chunk < 0)
    return fail("--threads and --chunk must not be negative");
  const std::string build = args.positional()[0];
  const bool quiet = args.has("quiet");
  const bool compare = args.has("reference");

  Run test, reference;
  if (std::string e = test.open(build, int(threads)); !e.empty())
    return fail(e);
  if (compare) {
    if (std::string e = reference.open(args.get("reference", ""), int(threads));
        !e.empty())
      return fail(e);
    if (reference.info.vocab_size != test.info.vocab_size)
      return fail("--reference " + args.get("reference", "") + ": vocabulary " +
                  std::to_string(reference.info.vocab_size) + ", " + build +
                  ": " + std::to_string(test.info.vocab_size) +
                  "; expected two builds of one checkpoint");
  }
  const int32_t vocab = test.info.vocab_size;
  int32_t maxContext = test.info.max_context;
  if (compare)
    maxContext = std::min(maxContext, reference.info.max_context);
  std::vector<std::vector<int32_t>> sequences;
  if (std::string e = spark::readTokenSequences(args.get("data", ""), vocab,
                                                maxContext, sequences);
      !e.empty())
    return fail(e + " (the build's max context is " +
                std::to_string(maxContext) + ")");

  double nll = 0, nllReference = 0;
  std::vector<double> kld, deltaP; // per scored position
  long long scored = 0, sameTop = 0;
  std::vector<float> testLogits, referenceLogits;
  std::vector<double> lp, lq;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<int32_t> &ids = sequences[s];
    const int32_t n = int32_t(ids.size());
    if (n < 2)
      continue; // nothing to predict
    testLogits.resize(size_t(n) * vocab);
    spark_session_reset(test.session);
    if (spark_session_eval(test.session, ids.data(), n, int32_t(chunk),
                           testLogits.data()) != SPARK_OK)
      return fail(build + ": failed on sequence " + std::to_string(s + 1));
    if (compare) {
      referenceLogits.resize(size_t(n) * vocab);
      spark_session_reset(reference.session);
      if (spark_session_eval(reference.session, ids.data(), n, int32_t(chunk),
                             referenceLogits.data()) != SPARK_OK)
        return fail(args.get("reference", "") + ": failed on sequence " +
                    std::to_string(s + 1));
    }
    for (int32_t r = 0; r + 1 < n; ++r) {
      const int32_t next = ids[r + 1];
      logSoftmax(&testLogits[size_t(r) * vocab], vocab, lq);
      nll -= lq[next];
      if (compare) {
        logSoftmax(&referenceLogits[size_t(r) * vocab], vocab, lp);
        nllReference -= lp[next];
        double kl = 0;
        for (int32_t v = 0; v < vocab; ++v)
          kl += std::exp(lp[v]) * (lp[v] - lq[v]);
        kld.push_back(std::max(kl, 0.0));
        deltaP.push_back(std::exp(lq[next]) - std::exp(lp[next]));
        sameTop += argmax(lp) == argmax(lq);
      }
      ++scored;
    }
    if (!quiet)
      std::fprintf(stderr, "spark-perplexity: sequence %zu/%zu: %d tokens\n",
                   s + 1, sequences.size(), n);
  }
  if (scored == 0)
    return fail(args.get("data", "") +
                ": no sequence has two or more tokens; nothing to score");

  const double ppl = std::exp(nll / double(scored));
  std::printf("%s: %lld scored positions in %zu sequences\n", build.c_str(),
              scored, sequences.size());
  std::printf("perplexity: %.4f\n", ppl);
  llvm::json::Object report{{"build", build},
                            {"data", args.get("data", "")},
                            {"sequences", int64_t(sequences.size())},
                            {"positions", int64_t(scored)},
                            {"perplexity", jsonNumber(ppl)}};
  if (compare) {
    const double pplReference = std::exp(nllReference / double(scored));
    double sum = 0, sumSquares = 0, dpSum = 0, dpSquares = 0;
    for (size_t i = 0; i < kld.size(); ++i) {
      sum += kld[i];
      sumSquares += kld[i] * kld[i];
      dpSum += deltaP[i];
      dpSquares += deltaP[i] * deltaP[i];
    }
    const double count = double(kld.size());
    const double mean = sum / count;
    const double stderrMean =
        count > 1 ? std::sqrt(std::max(0.0, sumSquares / count - mean * mean) /
                              (count - 1))
                  : 0.0;
    std::vector<double> sorted = kld;
    std::sort(sorted.begin(), sorted.end());
    const double median = quantile(sorted, 0.5), p99 = quantile(sorted, 0.99),
                 maximum = sorted.back();
    const double same = double(sameTop) / count;
    const double dpMean = dpSum / count, dpRms = std::sqrt(dpSquares / count);
    std::printf("reference perplexity: %.4f (%s)\n", pplReference,
                args.get("reference", "").c_str());
    std::printf("ln(PPL / PPL(reference)): %.6f\n",
                std::log(ppl / pplReference));
    std::printf("KL divergence: mean %.6f +- %.6f, median %.6f, 99%% %.6f, "
                "max %.6f\n",
                mean, stderrMean, median, p99, maximum);
    std::printf("same top token: %.3f %%\n", 100.0 * same);
    std::printf("delta p (correct token): mean %.4f %%, RMS %.4f %%\n",
                100.0 * dpMean, 100.0 * dpRms);
    report["reference"] = args.get("reference", "");
    report["reference_perplexity"] = jsonNumber(pplReference);
    report["ln_ppl_ratio"] = jsonNumber(std::log(ppl / pplReference));
    report["kld"] = llvm::json::Object{{"mean", jsonNumber(mean)},
                                       {"mean_stderr", jsonNumber(stderrMean)},
                                       {"median", jsonNumber(median)},
                                       {"p99", jsonNumber(p99)},
                                       {"max", jsonNumber(maximum)}};
    report["same_top"] = jsonNumber(same);
    report["delta_p"] = llvm::json::Object{{"mean", jsonNumber(dpMean)},
                                           {"rms", jsonNumber(dpRms)}};
  }
  const std::string json =
      llvm::formatv("{0:2}", llvm::json::Value(std::move(report))).str() + "\n";
  if (args.has("json")) {
    if (std::string e = spark::writeFileAtomically(args.get("json", ""), json);
        !e.empty())
      return fail(e);
    if (!quiet)
      std::fprintf(stderr, "spark-perplexity: wrote %s\n",
                   args.get("json", "").c_str());
  }
  return 0;
}
