//===- ModelLoader.h - load a host build in this process ------------------===//
//
// The tools that run builds (spark-bench, spark-fidelity, spark-perplexity,
// and spark-compile for --calib and --report-fidelity) load a host build's
// shared library with dlopen and its pack with spark_model_open
// (model_dir.h, shared with the C spark-run). Calibrate.h and Fidelity.h
// measure builds loaded this way.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TOOLS_MODELLOADER_H
#define SPARK_TOOLS_MODELLOADER_H

#include "spark/runtime.h"

#include <map>
#include <string>
#include <vector>

namespace spark {

/// dlopen()s OUT/libspark_model.so and opens OUT/model.spkw with it.
struct LoadedModel {
  void *library = nullptr;
  spark_model *model = nullptr;

  /// Opens `pack` ("": OUT/model.spkw). Returns "" on success, else a
  /// message naming the file at fault.
  std::string load(const std::string &outDir, spark_open_params params,
                   const std::string &pack = "");
  ~LoadedModel();
};

/// A loaded build with one session, as spark-fidelity and spark-perplexity
/// use it.
struct ModelSession {
  LoadedModel loaded;
  spark_session *session = nullptr;
  spark_model_info info{};
  /// Loads OUT with `threads` (0: the runtime's default) and creates the
  /// session; returns "" or a message naming the folder.
  std::string open(const std::string &outDir, int threads);
  ~ModelSession();
};

/// Writes `text` to `path` through a temporary name beside it, renamed into
/// place (llvm::writeToOutput);
/// returns "" or a message naming the file.
std::string writeFileAtomically(const std::string &path,
                                const std::string &text);

/// The command line of the tools that run a compiled model: positional
/// arguments, --name value / --name=value options, --flag alone for
/// booleans; the parser spark-run (C) uses too (options.h).
class Arguments {
public:
  /// `options` maps each accepted name to whether it takes a value.
  Arguments(int argc, char **argv, const std::map<std::string, bool> &options);
  const std::string &error() const { return message; }
  const std::vector<std::string> &positional() const { return positionals; }
  bool has(const std::string &name) const { return values.count(name) != 0; }
  std::string get(const std::string &name, const std::string &fallback) const;
  /// Integer option; sets error() when malformed.
  long long getInt(const std::string &name, long long fallback);
  double getDouble(const std::string &name, double fallback);

private:
  std::map<std::string, std::string> values;
  std::vector<std::string> positionals;
  std::string message;
};

/// Reads a calibration file: token ids, one sequence per line, separated by
/// spaces or commas; blank lines and lines starting with '#' are skipped.
/// Returns "" or a message naming the file and line at fault (an id outside
/// [0, vocab), a sequence longer than maxTokens, no sequence at all).
std::string readTokenSequences(const std::string &path, int32_t vocab,
                               int32_t maxTokens,
                               std::vector<std::vector<int32_t>> &sequences);

} // namespace spark

#endif // SPARK_TOOLS_MODELLOADER_H
