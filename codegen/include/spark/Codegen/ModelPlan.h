//===- ModelPlan.h - a spark module lowered to kernel calls
//----------------===//
//
// planModel() walks the step function of an imported (and optimized) spark
// module and produces everything the emitters need: the distinct kernels,
// the weight pack's tensors, the caches, the sequence of kernel calls and
// cache writes with their buffer views, and a static activation arena.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_CODEGEN_MODELPLAN_H
#define SPARK_CODEGEN_MODELPLAN_H

#include "spark/Codegen/Quantize.h"
#include "spark/Import/Checkpoint.h"
#include "spark/Kernels/Kernels.h"
#include "spark/Passes/Passes.h"
#include "spark/Targets/Target.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace spark {

class PackReader;

struct BuildOptions {
  TargetKind target = TargetKind::Host;
  DType dtype = DType::F32; // weights of the matrix kernels
  int64_t maxContext = 4096;
  int64_t maxChunk = 64;
  bool quiet = false;
  AmxKernel amxKernel = AmxKernel::Tiles; // --target=spr: --amx-kernel
  /// --halide-kernels (arm64, hexagon): Halide's kernels where microkernels
  /// would serve (all of them, or the attention kernels only).
  HalideKernels halideKernels = HalideKernels::None;
  QuantScheme quant = QuantScheme::None;  // --quant
  int64_t groupSize = kDefaultGroupSize;  // --group-size (4-bit schemes)
  std::vector<std::string> quantRecipe; // --quant-recipe / --quant-override
  /// Calibrated importance of each product's input channels (mean x^2), by
  /// the weight it reads: weights the 4-bit group search (--calib).
  std::map<std::string, std::vector<float>> importance;
  /// --gptq: the calibrated second moment E[x x^T] of each product's input
  /// (K x K, row-major), by the weight it reads: 4-bit weights with one are
  /// rounded by GPTQ (gptqInt4). Owned by the build's Calibration.
  const std::map<std::string, std::vector<float>> *secondMoments = nullptr;
  bool executable = false;             // --emit=exe: also a static spark-run
  /// --activations: int8 input scales (dynamic, static) or 16-bit inputs.
  Activations activations = Activations::Dynamic;
  /// Calibration builds: the layer probe also sees every matrix product's
  /// input (probe ids num_layers + i, ModelPlan::inputProbes[i]).
  bool probeInputs = false;
  bool calibrated = false; // --calib: OUT/calibration.json is written
  /// --entry-point: the one global symbol of libspark_model.a, the function
  /// returning the model's spark_model_def (distinct names let one program
  /// link several models).
  std::string entryPoint = "spark_model_definition";
  /// --cflags: extra flags for the C code of ours built for the target (the
  /// step driver; with --emit=exe the runner and runtime), e.g. -g.
  std::vector<std::string> cflags;
  /// --weights-from: a weight pack built with these same options for another
  /// target (--target=s25's arm64 part, for its hexagon part); its quantized
  /// tensors are copied instead of quantized again where their name, dtype
  /// and shape match.
  std::string weightsFrom;
};

/// One tensor of the weight pack.
struct PackTensor {
  /// A tensor of its own, or the scales or zero points of a quantized one
  /// (named after it: NAME.scales, NAME.zeros).
  enum class Role { Data, Scales, Zeros } role = Role::Data;
  std::string name;
  DType dtype = DType::F32;
  int layout = 0; // spark_layout
  std::vector<int64_t> shape;
  /// The checkpoint tensors it holds (planModel): its own name, or the parts
  /// of a stacked weight, row after row; loadWeights() maps them to source
  /// or parts.
  std::vector<std::string> sources;
  /// A quantized weight's scales and (dense asymmetric 4-bit codes) zero
  /// points: indices into ModelPlan::tensors, or -1.
  int scales = -1, zeros = -1;
  const TensorView *source = nullptr;    // checkpoint data, converted to dtype
  std::vector<const TensorView *> parts; // or stacked checkpoint tensors
  std::vector<float> values;             // or values computed at compile time
  /// Quantized (dtype I8): each row's scale; readElements() gives the codes.
  std::vector<float> rowScales;
  /// 4-bit (dtype U8, two codes a byte, low nibble first; shape [N, K/2]):
  /// the logical row length K, the group size and each group's scale and
  /// zero point ([N][K / group]); readElements() gives the packed bytes.
  /// 6-bit (codeBits 6; shape [N, 3K/4]): each row's codes' low nibbles as
  /// 4-bit ones, then their top two bits, four a byte (spark_six_bit_top).
  int64_t codeCols = 0, group = 0;
  int codeBits = 4;
  std::vector<float> groupScales, groupZeros;
  /// Or each weight's 4-bit code, one a byte ([N][K]), where GPTQ chose them
  /// (they are not the nearest codes of the weights) or the checkpoint
  /// brought them with their scales and zero points (`gridImported`).
  std::vector<uint8_t> codes;
  bool gridImported = false;
  /// Symmetric 4-bit codes (w4a8): every zero point is 8, none is stored.
  bool symmetricGroups = false;
  /// 4-bit grouped rows (layout SPARK_LAYOUT_GROUPED_ROWS, shape [N,
  /// rowBytes]): each row's K/2 code bytes, its f16 scales, then (asymmetric)
  /// its f16 zero points, zero-padded; readElements() gives those bytes, and
  /// no scales or zeros tensor of its own is stored. 0: dense codes.
  int64_t rowBytes = 0;
  /// Or the bytes an earlier build of the same options stored
  /// (BuildOptions::weightsFrom), written as they are, and their checksum;
  /// the scales and codes above are then not computed.
  llvm::ArrayRef<uint8_t> stored;
  uint64_t storedChecksum = 0;
  /// Stored elements [first, first + count) (row-major) into out: the
  /// values, or for a quantized tensor their (not yet rounded) codes, for
  /// 4-bit ones each byte's two codes as low + 16 * high.
  void readElements(int64_t first, int64_t count, float *out) const;
  /// 4-bit: code bytes [first, first + count) of the dense [N][K/2] codes.
  void readCodeBytes(int64_t first, int64_t count, float *out) const;
  /// 6-bit: bytes [first, first + count) of the [N][3K/4] codes.
  void readSixBitBytes(int64_t first, int64_t count, float *out) const;
  /// 4- or 6-bit: the codes of values [first, first + count) (row-major
  /// [N][K]): the chosen ones (`codes`), or each value's nearest on its grid.
  void valueCodes(int64_t first, int64_t count, float *out) const;
  /// The largest code: 15, or 63 for 6-bit codes.
  float topCode() const { return float((1 << codeBits) - 1); }
  /// Real values [first, first + count), whichever the origin, into out.
  void readValues(int64_t first, int64_t count, float *out) const;
  /// Drops the checkpoint pages behind values [first, first + count) (value
  /// indices, not stored elements) from the process's resident set.
  void releaseValues(int64_t first, int64_t count) const;
  /// The same for the values behind stored elements [first, first + count)
  /// (grouped rows: the rows that end in the range).
  void releaseElements(int64_t first, int64_t count) const;

  int64_t elements() const;
  uint64_t bytes() const;
};

struct CacheSpec {
  int layer = 0;
  bool keys = true;
  bool ring = false;
  int64_t slots = 0, kvHeads = 0, headDim = 0;
  DType dtype = DType::F32; // F32, BF16 or F16
  uint64_t bytes() const {
    return uint64_t(slots * kvHeads * headDim) * dtypeSize(dtype);
  }
};

/// A strided view of a buffer, as a kernel sees it.
struct View {
  enum class Base { Arena, Weight, Cache, Tokens, Logits } base = Base::Arena;
  int64_t index = 0;  // arena value id, pack tensor or cache index
  int64_t column = 0; // elements from the row start (split results)
  DType type = DType::F32;
  bool isInt32 = false;                  // token ids
  std::vector<int64_t> extents, strides; // inner dims first
  bool hasRows = false;                  // a last dim over the call's rows
  int64_t rowStride = 0;
};

struct Step {
  enum class Kind { Call, CacheWrite } kind = Kind::Call;
  std::string comment;
  // Call: kernel (and, for matrix kernels, the one used when rows == 1).
  int kernel = -1, decodeKernel = -1;
  struct Arg {
    /// A view, or a scalar: the first row's position (pos0, int32), the
    /// rows the cache holds before the step (min(pos0, bound), int32), or a
    /// float constant.
    enum class Kind { View, Position, CachedRows, Float } kind = Kind::View;
    int64_t bound = 0;  // CachedRows
    float value = 0.0f; // Float
    View view;
    bool scalar() const { return kind != Kind::View; }
  };
  std::vector<Arg> args; // in the kernel's argument order, output last
  bool headRows = false; // runs on the rows whose logits are wanted
  int probeLayer = -1;   // its output is decoder layer probeLayer's output
  int probeInput = -1;   // probe id of its input (BuildOptions::probeInputs)
  int layer = -1;        // the decoder layer it was imported for, or -1
  // CacheWrite: copy each row of `source` into its cache slot.
  int cache = -1;
  View source;
};

struct ArenaValue {
  int64_t offset = 0; // in floats, from spark-plan-memory
};

struct ModelPlan {
  ModelConfig config;
  BuildOptions options;
  std::vector<KernelSpec> kernels;
  std::vector<PackTensor> tensors;
  std::vector<CacheSpec> caches;
  std::vector<Step> steps;
  /// With BuildOptions::probeInputs: the weight each probed product reads,
  /// by probe id - num_layers.
  std::vector<std::string> inputProbes;
  std::vector<ArenaValue> arena;
  int64_t arenaFloats = 0;
  uint64_t configHash = 0, abiHash = 0;
  /// BuildOptions::weightsFrom, mapped while the plan's tensors point into
  /// it (PackTensor::stored).
  std::shared_ptr<PackReader> weightsFrom;
};

/// An error of planModel() at an op of the module: message() is "LOC: TEXT";
/// spark-lower-to-kernels reports TEXT at the location.
class PlanError : public llvm::ErrorInfo<PlanError> {
public:
  static char ID;
  PlanError(mlir::Location location, std::string text)
      : loc(location), message_(std::move(text)) {}
  mlir::Location location() const { return loc; }
  const std::string &text() const { return message_; }
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  mlir::Location loc;
  std::string message_;
};

/// The kernel plan of a module the pass pipeline ran on: its distinct
/// kernels, the weight pack's tensors as they will be stored (shapes,
/// layouts, quantization; no data yet), the caches, the steps and the
/// arena. Needs no checkpoint (spark-lower-to-kernels prints it in
/// spark-opt); the config and hashes are set by setPlanConfig().
llvm::Expected<ModelPlan> planModel(mlir::ModuleOp module,
                                    const BuildOptions &options);
/// The model configuration, and the config and ABI hashes the driver and
/// the weight pack carry.
void setPlanConfig(ModelPlan &plan, const ModelConfig &config);
/// setPlanConfig() with the checkpoint's config, then the data of every pack
/// tensor: checkpoint tensors converted or quantized as the plan stores them
/// (the 4-bit group search, weighted by calibrated importance, or GPTQ
/// against calibrated second moments: BuildOptions), or the stored bytes of
/// BuildOptions::weightsFrom where they match. Errors name the tensor.
llvm::Error loadWeights(ModelPlan &plan, const Checkpoint &checkpoint);
/// planModel() and loadWeights(): the plan a library build writes.
llvm::Expected<ModelPlan> planModel(mlir::ModuleOp module,
                                    const Checkpoint &checkpoint,
                                    const BuildOptions &options);
/// The pack's name of a quantized tensor's scales (NAME.scales) or zero
/// points (NAME.zeros).
std::string sideTensorName(llvm::StringRef tensor, PackTensor::Role role);
/// 64-bit FNV-1a, for the config and ABI hashes.
uint64_t fnv1a(llvm::StringRef text, uint64_t seed = 0xcbf29ce484222325ull);

} // namespace spark

#endif // SPARK_CODEGEN_MODELPLAN_H
