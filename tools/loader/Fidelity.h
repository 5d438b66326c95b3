//===- Fidelity.h - compare a build with a reference build ----------------===//
//
// What spark-fidelity OUT --reference REF --calib FILE does and spark-compile
// --report-fidelity calls in its own process: both builds load here and run
// every calibration sequence chunk by chunk on the same inputs (teacher
// forcing); each decoder layer's output (through the layer probe) and the
// logits are compared (SNR, max |error|, greedy agreement), then each build
// generates greedily after each sequence. Prints the table to stdout and
// writes the numbers as JSON.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TOOLS_FIDELITY_H
#define SPARK_TOOLS_FIDELITY_H

#include <string>

namespace spark {

struct FidelityRequest {
  std::string build;       // the build under test (an output folder)
  std::string reference;   // the reference build, typically fp32
  std::string calib;       // token ids, one sequence per line
  std::string json;        // where the JSON goes; empty: BUILD/fidelity.json
  long long nPredict = 32; // greedy tokens each build generates per sequence
  int threads = 0;         // 0: the runtime's default
  int chunk = 0;           // tokens per eval; 0: the builds' max chunk
  bool quiet = false;      // no progress on stderr
  const char *tool = "spark-fidelity"; // names the progress lines
};

/// Runs the comparison; returns "" or a message naming the build or file at
/// fault.
std::string reportFidelity(const FidelityRequest &request);

} // namespace spark

#endif // SPARK_TOOLS_FIDELITY_H
