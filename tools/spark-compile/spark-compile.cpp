//===- spark-compile.cpp - the compiler driver ----------------------------===//
//
// spark-compile CKPT --emit=mlir|opt|halide|asm [-o FILE]
// spark-compile CKPT [--target=host] [--dtype=f32|bf16|f16] -o OUT
//
// Toy-style driver: each --emit stage stops the pipeline there and prints
// (or writes) what it produced. On any error it exits with status 1 and
// leaves no output behind; an existing output is replaced only on success.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Emit.h"
#include "spark/Codegen/PackReader.h"
#include "spark/Import/Importer.h"
#include "spark/Kernels/DataFiles.h"
#include "spark/Passes/Passes.h"

#include "ModelLoader.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <thread>

using namespace llvm;

namespace {

enum class EmitStage { MLIR, Optimized, Halide, Assembly, Library, Executable };

cl::OptionCategory category("spark-compile options");

cl::opt<std::string> checkpointDir(cl::Positional, cl::Required,
                                   cl::desc("<checkpoint directory>"),
                                   cl::cat(category));

cl::opt<EmitStage> emit(
    "emit", cl::desc("What to produce (default: lib)"),
    cl::values(clEnumValN(EmitStage::MLIR, "mlir",
                          "the imported spark IR (one decoder step)"),
               clEnumValN(EmitStage::Optimized, "opt",
                          "the spark IR after the compiler's passes"),
               clEnumValN(EmitStage::Halide, "halide",
                          "every kernel's lowered Halide statements"),
               clEnumValN(EmitStage::Assembly, "asm",
                          "every kernel's assembly, per ISA variant"),
               clEnumValN(EmitStage::Library, "lib",
                          "the model library, weight pack, header and "
                          "manifest in the -o folder"),
               clEnumValN(EmitStage::Executable, "exe",
                          "lib, plus OUT/spark-run: a static executable for "
                          "the target (runner + runtime + model) that reads "
                          "OUT/model.spkw")),
    cl::init(EmitStage::Library), cl::cat(category));

cl::opt<std::string> outputPath(
    "o",
    cl::desc("Output: a folder for --emit=lib; a file for --emit=mlir "
             "('-' or absent: stdout)"),
    cl::value_desc("path"), cl::init("-"), cl::cat(category));

cl::opt<std::string> target("target",
                            cl::desc("Device to compile for: host (x86-64 "
                                     "AVX2 / AVX-512, chosen at run time), "
                                     "spr (adds AMX prefill kernels), "
                                     "arm64 (NEON, dot product), hexagon "
                                     "(HVX 128 B, v66) or s25 (Snapdragon "
                                     "8 Elite: arm64 + hexagon bundle)"),
                            cl::init("host"), cl::cat(category));

cl::opt<spark::DType> dtype(
    "dtype", cl::desc("Precision of the weight matrices (activations f32)"),
    cl::values(clEnumValN(spark::DType::F32, "f32", "float32 (default)"),
               clEnumValN(spark::DType::BF16, "bf16", "bfloat16"),
               clEnumValN(spark::DType::F16, "f16",
                          "float16 (IEEE half; arm64 and Hexagon compute in "
                          "it natively)")),
    cl::init(spark::DType::F32), cl::cat(category));

cl::opt<int64_t> maxChunk(
    "max-chunk",
    cl::desc("Most tokens one prefill call evaluates (default 64, at most "
             "--max-context)"),
    cl::init(64), cl::cat(category));

enum class ImportForm { Fused, Decomposed };
cl::opt<ImportForm> importForm(
    "import-form", cl::desc("How the importer writes norms and GEGLU"),
    cl::values(clEnumValN(ImportForm::Fused, "fused",
                          "spark.rms_norm / spark.geglu (default)"),
               clEnumValN(ImportForm::Decomposed, "decomposed",
                          "pow/mean/add/rsqrt/mul and gelu/mul, as a generic "
                          "exporter writes them (the fusion passes undo it)")),
    cl::init(ImportForm::Fused), cl::cat(category));

cl::opt<bool> noFusion(
    "no-fusion",
    cl::desc("Skip the fusion passes (spark-fuse-rms-norm, spark-fuse-geglu, "
             "spark-fuse-head-gate, spark-fuse-projections)"),
    cl::init(false), cl::cat(category));

cl::opt<std::string> amxKernel(
    "amx-kernel",
    cl::desc("--target=spr prefill on AMX: tiles (hand-written full-depth "
             "microkernel where shapes allow, default) or halide (Halide 14's "
             "tile lowering)"),
    cl::init("tiles"), cl::cat(category));

cl::opt<std::string> quant(
    "quant",
    cl::desc("Quantization: none (default); w8a16 (int8 weights per output "
             "channel), w8a8 (the same, with int8 activations per token), "
             "w4a16 (4-bit asymmetric, groups of --group-size) or w4a8 (4-bit "
             "symmetric, int8 activations); the head is included, the "
             "head-wise gate kept in full precision"),
    cl::init("none"), cl::cat(category));

cl::opt<int64_t> groupSize(
    "group-size",
    cl::desc("w4a16 / w4a8: weights per 4-bit group along the input "
             "dimension, 32, 64, 128 (default) or 256; each group stores an "
             "f16 scale (and for w4a16 an f16 zero point)"),
    cl::init(128), cl::cat(category));

cl::opt<int64_t> activationBlock(
    "activation-block",
    cl::desc("w8a8 / w4a8 with dynamic activations: one int8 scale per token "
             "and block of this many inputs, 32, 64, 128 or 256 (default 0: "
             "one scale per token). Hand-written kernels take per-token "
             "scales only; blocks run on Halide kernels"),
    cl::init(0), cl::cat(category));

cl::opt<bool> weightImportance(
    "weight-importance",
    cl::desc("With --calib or --calib-ranges: weight each 4-bit group's "
             "search by the calibrated mean x^2 of the input channels "
             "(activation-aware rounding; default on, "
             "--weight-importance=false to turn it off)"),
    cl::init(true), cl::cat(category));

cl::opt<std::string> quantRecipe(
    "quant-recipe",
    cl::desc("A precision recipe: one rule PATTERN = PRECISION per line "
             "('#' comments): weights whose fused name matches the glob get "
             "int8, int4, int4:G (4-bit groups of G) or none (the build's "
             "--dtype) instead of the --quant scheme's precision; the last "
             "matching rule wins (docs/quantization.md)"),
    cl::value_desc("file"), cl::init(""), cl::cat(category));

cl::list<std::string> quantOverride(
    "quant-override",
    cl::desc("Recipe rules on the command line, PATTERN=PRECISION, "
             "comma-separated or repeated; applied after --quant-recipe"),
    cl::CommaSeparated, cl::cat(category));

/// The recipe's rules: --quant-recipe's lines, then --quant-override.
std::vector<std::string> recipeRules;

cl::opt<std::string> calib(
    "calib",
    cl::desc("Calibration token ids, one sequence per line: the compiler runs "
             "its fp32 build of the checkpoint on them and stores the range "
             "of every matrix product's input in the IR (input_range) and in "
             "OUT/calibration.json; --activations=static quantizes with "
             "them; --report-fidelity compares on them"),
    cl::value_desc("file"), cl::init(""), cl::cat(category));

cl::opt<std::string> calibRanges(
    "calib-ranges",
    cl::desc("The ranges of an earlier calibration (an OUT/calibration.json) "
             "instead of running --calib again"),
    cl::value_desc("file"), cl::init(""), cl::cat(category));

cl::opt<std::string> activations(
    "activations",
    cl::desc("Inputs of the quantized matrix products. w8a8 / w4a8: dynamic "
             "(an int8 scale per token at run time, default) or static (one "
             "calibrated scale per product; needs --calib or --calib-ranges). "
             "w8a16 / w4a16: bf16 (default on x86), f16 (default on arm64 "
             "and hexagon) or f32"),
    cl::init(""), cl::cat(category));

cl::opt<std::string> weightsFrom(
    "weights-from",
    cl::desc("A weight pack (model.spkw) built with these same options for "
             "another target: its quantized tensors are copied instead of "
             "quantized again (--target=s25 passes its arm64 part's to its "
             "hexagon part)"),
    cl::value_desc("file"), cl::init(""), cl::Hidden, cl::cat(category));

cl::opt<bool> probeInputs(
    "probe-inputs",
    cl::desc("Calibration builds: the layer probe also sees every matrix "
             "product's input"),
    cl::init(false), cl::Hidden, cl::cat(category));

cl::opt<bool> reportFidelity(
    "report-fidelity",
    cl::desc("After the build, compile an fp32 reference build of the same "
             "checkpoint, run both on the --calib sequences and write "
             "OUT/fidelity.json (per-layer and logits SNR, max error, greedy "
             "agreement); needs --calib"),
    cl::init(false), cl::cat(category));

cl::opt<bool> quiet("quiet", cl::desc("No progress output"), cl::init(false),
                    cl::cat(category));

cl::opt<int64_t> maxContext(
    "max-context",
    cl::desc("Positions the build holds; sizes the caches (default 4096)"),
    cl::init(4096), cl::cat(category));

cl::opt<std::string> kvCache(
    "kv-cache",
    cl::desc("Element type of the key / value caches: f32 (default), bf16 or "
             "f16 (half the bytes a decode step reads from the caches; keys "
             "and values rounded when written)"),
    cl::init("f32"), cl::cat(category));

cl::opt<bool>
    skipFiniteCheck("skip-finite-check",
                    cl::desc("Do not scan weights for NaN/Inf (faster import)"),
                    cl::init(false), cl::cat(category));

cl::opt<std::string> entryPoint(
    "entry-point",
    cl::desc("Name of libspark_model.a's one global symbol, the function "
             "returning the model's definition (default "
             "spark_model_definition); give each model its own to link "
             "several into one program"),
    cl::init("spark_model_definition"), cl::cat(category));

cl::opt<std::string> extraCFlags(
    "cflags",
    cl::desc("Extra compiler flags, separated by spaces, for the C built for "
             "the target around the kernels: the step driver, and with "
             "--emit=exe the runner and the runtime (e.g. \"-g\" or "
             "\"-fsanitize=thread\")"),
    cl::init(""), cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "spark-compile") << message << "\n";
  return 1;
}

/// Progress of one build: the wall time of each phase, printed as it ends,
/// and the total (not when quiet).
class PhaseClock {
public:
  /// Seconds on the steady clock (differences of two are durations).
  static double seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
  }
  /// The program's start: the first phase of the build the command line
  /// asks for also counts opening the checkpoint.
  static const double programStart;

  PhaseClock(bool quiet, double start = seconds())
      : quiet(quiet), start(start), last(start) {}
  void done(const Twine &phase) {
    double t = seconds();
    if (!quiet)
      errs() << formatv("spark-compile: {0}: {1:f1} s\n", phase.str(),
                        t - last);
    last = t;
  }
  void total() {
    if (!quiet)
      errs() << formatv("spark-compile: total {0:f1} s\n", seconds() - start);
  }

private:
  bool quiet;
  double start, last;
};
const double PhaseClock::programStart = PhaseClock::seconds();

/// Removes a folder (and its contents) when it goes out of scope, unless
/// released.
struct TemporaryFolder {
  std::string path;
  ~TemporaryFolder() {
    if (!path.empty())
      sys::fs::remove_directories(path);
  }
};

struct Calibration {
  StringMap<float> ranges;
  /// Each product input channel's mean x^2, by the weight it reads.
  std::map<std::string, std::vector<float>> importance;
  std::string json;
};

/// Reads a JSON array of non-negative numbers; false if it is not one.
bool readImportance(const json::Value &value, std::vector<float> &out) {
  const json::Array *array = value.getAsArray();
  if (!array)
    return false;
  out.clear();
  for (const json::Value &v : *array) {
    std::optional<double> number = v.getAsNumber();
    if (!number || !std::isfinite(*number) || *number < 0)
      return false;
    out.push_back(float(*number));
  }
  return true;
}

/// One build of the checkpoint: the one the command line asks for, or one
/// this run makes on the way (the parts of --target=s25, the fp32 builds of
/// --calib and --report-fidelity), in this process. The context, chunk,
/// import and fusion options are the run's for all of them.
struct Build {
  std::string out; // the folder (library builds) or file (-o)
  std::string target = "host";
  spark::DType dtype = spark::DType::F32;
  std::string quant = "none";
  std::string activations; // empty: none (--quant=none)
  int64_t groupSize = 128;
  int64_t activationBlock = 0;
  std::vector<std::string> recipe;
  std::string kvCache = "f32";
  std::string amxKernel = "tiles";
  std::string entryPoint = "spark_model_definition";
  std::vector<std::string> cflags;
  std::string weightsFrom;
  bool probeInputs = false;
  bool executable = false; // --emit=exe
  bool quiet = false;
  const Calibration *calibration = nullptr;
  /// The command line recorded in the manifest as reproducing the build.
  std::string reproduce;
};

/// The build the command line asks for (its options checked by main).
Build commandLineBuild(const Calibration *calibration, std::string reproduce) {
  Build build;
  build.out = outputPath;
  build.target = target;
  build.dtype = dtype;
  build.quant = quant;
  build.activations = activations;
  build.groupSize = groupSize;
  build.activationBlock = activationBlock;
  build.recipe = recipeRules;
  build.kvCache = kvCache;
  build.amxKernel = amxKernel;
  build.entryPoint = entryPoint;
  SmallVector<StringRef> flags;
  StringRef(extraCFlags).split(flags, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef flag : flags)
    build.cflags.push_back(flag.str());
  build.weightsFrom = weightsFrom;
  build.probeInputs = probeInputs;
  build.executable = emit == EmitStage::Executable;
  build.quiet = quiet;
  build.calibration = calibration;
  build.reproduce = std::move(reproduce);
  return build;
}

/// An fp32 build of the checkpoint for `buildTarget` into `out`, with every
/// other option at its default (the reference of --report-fidelity; with
/// `probeInputs`, the measuring build of --calib).
Build fp32Build(StringRef out, StringRef buildTarget, bool probeInputs,
                std::string reproduce) {
  Build build;
  build.out = out.str();
  build.target = buildTarget.str();
  build.probeInputs = probeInputs;
  build.quiet = true;
  build.reproduce = std::move(reproduce);
  return build;
}

spark::BuildOptions buildOptions(const Build &build) {
  spark::BuildOptions options;
  options.target = build.target;
  options.dtype = build.dtype;
  options.maxContext = maxContext;
  options.maxChunk = maxChunk;
  options.quiet = build.quiet;
  options.amxKernel = build.amxKernel;
  options.quant = build.quant;
  options.groupSize = build.groupSize;
  options.quantRecipe = build.recipe;
  options.executable = build.executable;
  options.activations = build.activations;
  options.probeInputs = build.probeInputs;
  options.calibrated = build.calibration != nullptr;
  if (build.calibration && weightImportance)
    options.importance = build.calibration->importance;
  options.entryPoint = build.entryPoint;
  options.weightsFrom = build.weightsFrom;
  options.cflags = build.cflags;
  return options;
}

/// Calibrated input ranges, by the weight each product reads, and their
/// JSON (OUT/calibration.json).
/// The optimization pipeline: fusions, the calibrated ranges (when given),
/// quantization, then the cache layout, RoPE tables and memory plan. MLIR's
/// pass-manager flags (--mlir-print-ir-after-all, --mlir-timing, ...) apply.
mlir::LogicalResult runPasses(mlir::MLIRContext &context, mlir::ModuleOp module,
                              const Build &build) {
  const Calibration *calibration = build.calibration;
  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope root = timing.getRootScope();
  auto pipeline = [&]() -> std::unique_ptr<mlir::PassManager> {
    auto pm = std::make_unique<mlir::PassManager>(
        &context, mlir::ModuleOp::getOperationName());
    if (failed(mlir::applyPassManagerCLOptions(*pm)))
      return nullptr;
    pm->enableTiming(root);
    return pm;
  };
  auto fusion = pipeline();
  if (!fusion)
    return mlir::failure();
  if (!noFusion) {
    fusion->addPass(spark::createSparkFuseRMSNorm());
    fusion->addPass(spark::createSparkFuseGeglu());
    fusion->addPass(spark::createSparkFuseHeadGate());
    fusion->addPass(spark::createSparkFuseProjections());
  }
  if (failed(fusion->run(module)))
    return mlir::failure();
  // The ranges name the fused products, as the fp32 build that measured them
  // (compiled with the same fusion options) has them.
  if (calibration)
    if (Error e = spark::attachInputRanges(module, calibration->ranges)) {
      fail("calibration: " + toString(std::move(e)));
      return mlir::failure();
    }
  auto pm = pipeline();
  if (!pm)
    return mlir::failure();
  if (build.quant != "none") {
    spark::SparkQuantizeWeightsOptions quantize;
    quantize.scheme = build.quant;
    quantize.activations = build.activations;
    quantize.groupSize = build.groupSize;
    quantize.activationBlock = build.activationBlock;
    quantize.recipe.assign(build.recipe.begin(), build.recipe.end());
    pm->addPass(spark::createSparkQuantizeWeights(quantize));
  }
  spark::SparkKVLayoutOptions layout;
  layout.maxContext = maxContext;
  layout.cacheType = build.kvCache;
  pm->addPass(spark::createSparkKVLayout(layout));
  spark::SparkRopeTablesOptions tables;
  tables.maxContext = maxContext;
  pm->addPass(spark::createSparkRopeTables(tables));
  spark::SparkPlanMemoryOptions memory;
  memory.maxChunk = maxChunk;
  memory.rowMultiple = spark::kPrefillRowMultiple;
  pm->addPass(spark::createSparkPlanMemory(memory));
  return pm->run(module);
}

struct JSONFile {
  std::string text;
  json::Value value = nullptr;
};
Expected<JSONFile> readJSONFile(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return createStringError(path + ": " + buffer.getError().message());
  Expected<json::Value> value = json::parse((*buffer)->getBuffer());
  if (!value)
    return createStringError(path +
                             ": not JSON: " + toString(value.takeError()));
  return JSONFile{(*buffer)->getBuffer().str(), std::move(*value)};
}

/// An output folder built beside its final place (OUT.partial-XXXXXX) and
/// renamed into place when complete: an error leaves nothing, and an earlier
/// build is replaced only by a complete one. An existing OUT that is not an
/// earlier build (no manifest.json) is refused.
class OutputFolder {
public:
  /// The folder `path` (as given: errors name it so); `quiet`: no line
  /// listing what was written.
  OutputFolder(StringRef path, bool quiet) : given(path.str()), quiet(quiet) {}

  /// Returns 0, or the exit status after printing the error.
  int create() {
    out = given;
    // Absolute, so that the staging folder is created beside OUT (a relative
    // model would put it in the temporary directory, maybe on another file
    // system, where the final rename fails).
    if (std::error_code ec = sys::fs::make_absolute(out))
      return fail(given + ": " + ec.message());
    sys::path::remove_dots(out, /*remove_dot_dot=*/true);
    if (sys::fs::exists(out) && !isEmptyFolder(out)) {
      SmallString<256> manifest(out);
      sys::path::append(manifest, "manifest.json");
      if (!sys::fs::is_directory(out) || !sys::fs::exists(manifest))
        return fail(given + " exists and is not a spark-compile output "
                            "folder (no manifest.json); refusing to "
                            "replace it");
      // A manifest.json of some other program does not make a build.
      Expected<JSONFile> file = readJSONFile(manifest);
      const json::Object *object = file ? file->value.getAsObject() : nullptr;
      std::optional<StringRef> format =
          object ? object->getString("format") : std::nullopt;
      if (!file)
        consumeError(file.takeError());
      if (!format || !format->starts_with("spark-compile "))
        return fail(given + " exists and its manifest.json is not a "
                            "spark-compile manifest (no \"format\": "
                            "\"spark-compile ...\"); refusing to "
                            "replace it");
    }
    // -o a/b/c: the missing parent folders are made (and removed again,
    // while still empty, if the build fails).
    StringRef parent = sys::path::parent_path(out);
    for (StringRef p = parent; !p.empty() && !sys::fs::exists(p);
         p = sys::path::parent_path(p))
      createdParents.push_back(p.str());
    if (!createdParents.empty())
      if (std::error_code ec = sys::fs::create_directories(parent))
        return fail(given + ": cannot create its parent folder " + parent +
                    ": " + ec.message());
    SmallString<256> model(out);
    model += ".partial-%%%%%%";
    SmallString<256> created;
    if (std::error_code ec = sys::fs::createUniqueDirectory(model, created))
      return fail(given +
                  ": cannot create a folder beside it: " + ec.message());
    // createUniqueDirectory appends its own suffix to the model.
    staging.path = std::string(created);
    return 0;
  }

  const std::string &path() const { return staging.path; }
  std::string file(StringRef name) const {
    SmallString<256> path(staging.path);
    sys::path::append(path, name);
    return std::string(path);
  }

  /// Swaps the finished folder into place.
  int commit() {
    std::string previous;
    if (sys::fs::exists(out)) {
      // A name of our own (an empty folder created here, which rename
      // replaces): never a folder of the user's, such as OUT.old.
      SmallString<256> model(out), created;
      model += ".previous-%%%%%%";
      if (std::error_code ec = sys::fs::createUniqueDirectory(model, created))
        return fail(given +
                    ": cannot create a folder beside it: " + ec.message());
      previous = std::string(created);
      if (std::error_code ec = sys::fs::rename(out, previous)) {
        sys::fs::remove(previous);
        return fail(given +
                    ": cannot move the previous build aside: " + ec.message());
      }
    }
    if (std::error_code ec = sys::fs::rename(staging.path, out)) {
      if (!previous.empty())
        sys::fs::rename(previous, out);
      return fail(given +
                  ": cannot move the new build into place: " + ec.message());
    }
    staging.path.clear();
    createdParents.clear();
    if (!previous.empty())
      sys::fs::remove_directories(previous);
    if (!quiet) {
      std::error_code ec;
      std::vector<std::string> names;
      for (sys::fs::directory_iterator it(out, ec), end; it != end && !ec;
           it.increment(ec))
        names.push_back(sys::path::filename(it->path()).str());
      llvm::sort(names);
      errs() << "wrote " << out << " (" << llvm::join(names, ", ") << ")\n";
    }
    return 0;
  }

private:
  static bool isEmptyFolder(StringRef path) {
    std::error_code ec;
    sys::fs::directory_iterator it(path, ec);
    return sys::fs::is_directory(path) && !ec &&
           it == sys::fs::directory_iterator();
  }

  /// Parent folders made for OUT, deepest first: removed, while empty,
  /// when a failed build ends. Declared before `staging`, so that the
  /// staging folder inside them is gone first.
  struct CreatedFolders : std::vector<std::string> {
    ~CreatedFolders() {
      for (const std::string &dir : *this)
        sys::fs::remove(dir); // fails, harmlessly, on a non-empty folder
    }
  };

  std::string given;
  bool quiet;
  SmallString<256> out;
  CreatedFolders createdParents;
  TemporaryFolder staging;
};

/// Writes `text` to `path` through a temporary name.
int writeFile(const std::string &path, StringRef text) {
  if (Error e = writeToOutput(path, [&](raw_ostream &os) {
        os << text;
        return Error::success();
      }))
    return fail(toString(std::move(e)));
  return 0;
}

std::string commandLineOf(int argc, char **argv) {
  std::string commandLine;
  for (int i = 0; i < argc; ++i)
    commandLine += (i ? " " : "") + std::string(argv[i]);
  return commandLine;
}

constexpr const char *kCalibrationFormat = "spark-compile calibration 1";

/// The text of a JSON file and its value; an error names the file.
/// Reads an OUT/calibration.json (--calib-ranges).
Expected<Calibration> readCalibration(StringRef path) {
  auto fileError = [&](const Twine &what) {
    return createStringError("--calib-ranges: " + path + ": " + what);
  };
  Expected<JSONFile> file = readJSONFile(path);
  if (!file)
    return createStringError("--calib-ranges: " + toString(file.takeError()));
  json::Object *object = file->value.getAsObject();
  json::Object *ranges = object ? object->getObject("ranges") : nullptr;
  if (!object || object->getString("format") != StringRef(kCalibrationFormat) ||
      !ranges)
    return fileError(Twine("expected the calibration.json of a build made "
                           "with --calib (format \"") +
                     kCalibrationFormat + "\", an object \"ranges\")");
  Calibration calibration;
  for (const auto &[name, range] : *ranges) {
    std::optional<double> number = range.getAsNumber();
    if (!number || !std::isfinite(*number) || *number <= 0)
      return fileError("ranges." + name.str() +
                       ": expected a positive number (the calibrated range "
                       "of the product's input)");
    calibration.ranges[name.str()] = float(*number);
  }
  if (json::Object *importance = object->getObject("importance"))
    for (const auto &[name, values] : *importance)
      if (!readImportance(values, calibration.importance[name.str()]))
        return fileError("importance." + name.str() +
                         ": expected an array of non-negative numbers (the "
                         "mean x^2 of each input channel)");
  calibration.json = std::move(file->text);
  return calibration;
}

/// Runs `args` (args[0] is the program); a failure is an error saying
/// `what` failed, with the program's output.
Error runProgram(ArrayRef<StringRef> args, const Twine &what) {
  std::string message;
  if (sys::ExecuteAndWait(args[0], args, std::nullopt, {}, 0, 0, &message) != 0)
    return createStringError(what + " failed" +
                             (message.empty() ? "" : ": " + message));
  return Error::success();
}

/// The path of a tool installed beside this program.
std::string toolPath(const char *argv0, StringRef name) {
  std::string self = sys::fs::getMainExecutable(argv0, (void *)&fail);
  SmallString<256> path(sys::path::parent_path(self));
  sys::path::append(path, name);
  return std::string(path);
}

int compileLibrary(const spark::Checkpoint &checkpoint, const Build &build,
                   double started = PhaseClock::seconds());

/// An fp32 build of `checkpoint` into `out` for `buildTarget` (fp32Build), in
/// this process; an error says `what` failed (its own error printed before).
Error compileFp32Build(const spark::Checkpoint &checkpoint, StringRef out,
                       StringRef buildTarget, bool probeInputs,
                       const std::string &reproduce, const Twine &what) {
  if (compileLibrary(checkpoint,
                     fp32Build(out, buildTarget, probeInputs, reproduce)) != 0)
    return createStringError(what + " failed");
  return Error::success();
}

/// --calib: compiles the checkpoint for the host in fp32 with input probes,
/// runs spark-fidelity --ranges-out on the sequences, and pairs each
/// product's measured range with the weight it reads.
Expected<Calibration> runCalibration(const char *argv0,
                                     const spark::Checkpoint &checkpoint,
                                     const std::string &reproduce) {
  std::string fidelityTool = toolPath(argv0, "spark-fidelity");
  SmallString<128> created;
  if (std::error_code ec =
          sys::fs::createUniqueDirectory("spark-calibration", created))
    return createStringError("cannot create a temporary folder: " +
                             ec.message());
  TemporaryFolder scratch;
  scratch.path = std::string(created);
  std::string build = scratch.path + "/fp32",
              rangesPath = scratch.path + "/ranges.json";
  if (!quiet)
    errs() << "calibration: compiling the fp32 build with input probes\n";
  if (Error e = compileFp32Build(checkpoint, build, "host",
                                 /*probeInputs=*/true, reproduce,
                                 "calibration: the fp32 build"))
    return e;
  if (!quiet)
    errs() << "calibration: running " << calib << "\n";
  std::vector<StringRef> run = {fidelityTool, build,          "--calib",
                                calib,        "--ranges-out", rangesPath};
  if (quiet)
    run.push_back("--quiet");
  if (Error e = runProgram(run, "calibration: spark-fidelity"))
    return e;
  Expected<JSONFile> manifest = readJSONFile(build + "/manifest.json");
  if (!manifest)
    return manifest.takeError();
  Expected<JSONFile> measured = readJSONFile(rangesPath);
  if (!measured)
    return measured.takeError();
  const json::Object *manifestObject = manifest->value.getAsObject();
  const json::Array *names =
      manifestObject ? manifestObject->getArray("input_probes") : nullptr;
  const json::Array *values = measured->value.getAsArray();
  if (!names || !values || names->size() != values->size())
    return createStringError("calibration: the fp32 build's input probes and "
                             "the measured ranges do not pair up");
  Calibration calibration;
  json::Object ranges, largest, importance;
  for (size_t i = 0; i < names->size(); ++i) {
    std::optional<StringRef> name = (*names)[i].getAsString();
    const json::Object *entry = (*values)[i].getAsObject();
    std::optional<double> clip =
        entry ? entry->getNumber("clip") : std::nullopt;
    std::optional<double> max = entry ? entry->getNumber("max") : std::nullopt;
    if (!name || !clip || !max)
      return createStringError("calibration: product input " + Twine(i) +
                               " was not seen on the calibration tokens");
    // An input that was all zeros still needs a positive range.
    float range = std::max(float(*clip), 1e-30f);
    calibration.ranges[*name] = range;
    ranges[*name] = double(range);
    largest[*name] = *max;
    if (const json::Value *channels = entry->get("importance")) {
      std::vector<float> &values = calibration.importance[name->str()];
      if (!readImportance(*channels, values))
        return createStringError("calibration: product input " + Twine(i) +
                                 " has no per-channel importance");
      importance[*name] = json::Array(values);
    }
  }
  SmallString<256> calibPath(calib);
  sys::fs::make_absolute(calibPath);
  json::Object file{{"format", kCalibrationFormat},
                    {"calib", calibPath.str()},
                    {"statistic",
                     "ranges: for each matrix product's input (named by the "
                     "weight it reads), the clipping range whose int8 codes "
                     "(scale range / 127) have the least squared error over "
                     "every calibration token's values in the fp32 build; "
                     "max: the largest |x| seen; importance: each input "
                     "channel's mean x^2 (weights the 4-bit group search)"},
                    {"ranges", std::move(ranges)},
                    {"max", std::move(largest)},
                    {"importance", std::move(importance)}};
  calibration.json =
      formatv("{0:2}", json::Value(std::move(file))).str() + "\n";
  return calibration;
}

/// The warnings of the passes (MLIR prints only errors by default), once
/// each.
void printWarnings(mlir::MLIRContext &context) {
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &diag) {
    if (diag.getSeverity() != mlir::DiagnosticSeverity::Warning)
      return mlir::failure(); // errors: the default printing
    WithColor::warning(errs(), "spark-compile") << diag.str() << "\n";
    return mlir::success();
  });
}

/// The checkpoint as spark IR in `context`; null after printing the error.
mlir::OwningOpRef<mlir::ModuleOp>
importModule(mlir::MLIRContext &context, const spark::Checkpoint &checkpoint) {
  spark::ImportOptions importOptions;
  importOptions.maxContext = maxContext;
  importOptions.decomposed = importForm == ImportForm::Decomposed;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      spark::importCheckpoint(context, checkpoint, importOptions);
  if (!module)
    fail("internal error: the imported module of " + checkpoint.directory() +
         " does not verify");
  return module;
}

/// A library build (--emit=lib or exe) of `checkpoint` into the folder
/// build.out: import, passes, plan, then the kernels, library and weight
/// pack, written beside the folder and moved into place when complete. The
/// first phase's time counts from `started`. Returns 0, or the exit status
/// after printing the error.
int compileLibrary(const spark::Checkpoint &checkpoint, const Build &build,
                   double started) {
  PhaseClock phases(build.quiet, started);
  const bool quiet = build.quiet;
  mlir::MLIRContext context;
  printWarnings(context);
  mlir::OwningOpRef<mlir::ModuleOp> module = importModule(context, checkpoint);
  if (!module)
    return 1;
  phases.done("reading and importing the checkpoint");
  if (failed(runPasses(context, *module, build)))
    return fail("the pass pipeline failed on " + checkpoint.directory());
  phases.done("passes");
  const Calibration *calibration = build.calibration;
  Expected<spark::ModelPlan> plan =
      spark::planModel(*module, checkpoint, buildOptions(build));
  if (!plan)
    return fail(toString(plan.takeError()));
  OutputFolder folder(build.out, quiet);
  if (int rc = folder.create())
    return rc;
  if (!quiet)
    errs() << "spark-compile: " << plan->kernels.size() << " kernels, "
           << plan->tensors.size() << " pack tensors, arena "
           << plan->arenaFloats * 4 / 1024 << " KiB\n";
  if (!quiet && plan->weightsFrom)
    errs() << "spark-compile: "
           << llvm::count_if(
                  plan->tensors,
                  [](const spark::PackTensor &t) { return !t.stored.empty(); })
           << " quantized tensors taken from " << plan->weightsFrom->path()
           << " (built for " << plan->weightsFrom->target() << ")\n";
  phases.done("planning (quantizing the weights)");
  // The weight pack is written on a thread of its own while the kernels and
  // the library compile: the one waits on the disk, the other on clang and
  // Halide.
  if (!quiet)
    errs() << "writing the weight pack beside the kernels\n";
  std::string packFailure;
  double packSeconds = 0.0;
  std::thread packWriter([&] {
    const double started = PhaseClock::seconds();
    if (Error e = spark::writeWeightPack(*plan, folder.file("model.spkw")))
      packFailure = toString(std::move(e));
    packSeconds = PhaseClock::seconds() - started;
  });
  const double libraryStarted = PhaseClock::seconds();
  Error libraryError =
      spark::buildLibrary(*plan, folder.path(), build.executable);
  const double librarySeconds = PhaseClock::seconds() - libraryStarted;
  packWriter.join();
  if (libraryError)
    return fail(toString(std::move(libraryError)));
  if (!packFailure.empty())
    return fail(packFailure);
  phases.done(formatv("kernels and library ({0:f1} s) and the weight pack "
                      "({1:f1} s), side by side",
                      librarySeconds, packSeconds)
                  .str()
                  .c_str());
  uint64_t packBytes = 0;
  sys::fs::file_size(folder.file("model.spkw"), packBytes);
  if (int rc = writeFile(folder.file("spark_model.h"),
                         spark::emitModelHeader(*plan)))
    return rc;
  if (calibration)
    if (int rc = writeFile(folder.file("calibration.json"), calibration->json))
      return rc;
  // The text layer's files travel with the build, so that spark-run OUT
  // --prompt works and an app ships one folder.
  for (const char *name : {"tokenizer.json", "tokenizer_config.json",
                           "chat_template.jinja", "generation_config.json"}) {
    SmallString<256> from(checkpoint.directory());
    sys::path::append(from, name);
    if (!sys::fs::is_regular_file(from))
      continue;
    if (std::error_code ec = sys::fs::copy_file(from, folder.file(name)))
      return fail(std::string(from) +
                  ": cannot copy into the build: " + ec.message());
  }
  if (int rc =
          writeFile(folder.file("manifest.json"),
                    spark::emitManifest(*plan, packBytes, build.reproduce)))
    return rc;
  if (int rc = folder.commit())
    return rc;
  phases.total();
  return 0;
}

/// --target=s25 (Snapdragon 8 Elite: Oryon CPU cores + Hexagon DSP): the
/// arm64 and the hexagon builds of this run's options (`build`, whose folder
/// is the bundle's), the runtime built for arm64, the FastRPC interface and
/// DSP-side skeleton source, a manifest saying which runs where, and the
/// integration notes, in one folder.
int emitBundle(const spark::Checkpoint &checkpoint, const Build &build) {
  const bool quiet = build.quiet;
  OutputFolder folder(build.out, quiet);
  if (int rc = folder.create())
    return rc;
  if (build.calibration)
    if (int rc =
            writeFile(folder.file("calibration.json"), build.calibration->json))
      return rc;
  json::Object parts;
  // The two parts store the same quantized weights (both row-major, the
  // same options): the hexagon part copies the arm64 part's.
  for (const char *sub : {"arm64", "hexagon"}) {
    if (!quiet)
      errs() << "s25: building the " << sub << " part\n";
    Build part = build;
    part.target = sub;
    part.out = folder.file(sub);
    if (StringRef(sub) == "hexagon")
      part.weightsFrom = folder.file("arm64/model.spkw");
    if (compileLibrary(checkpoint, part) != 0)
      return fail(std::string("--target=s25: the ") + sub + " part failed");
  }
  Expected<spark::TargetInfo> arm64 = spark::targetFor("arm64");
  if (!arm64)
    return fail(toString(arm64.takeError()));
  if (!quiet)
    errs() << "s25: building the runtime for arm64\n";
  if (Error e = spark::buildRuntimeLibrary(*arm64, folder.file("runtime")))
    return fail(toString(std::move(e)));
  for (auto [name, text] :
       {std::pair<const char *, std::string>{"hexagon/spark_dsp.idl",
                                             spark::emitFastRpcInterface()},
        {"hexagon/spark_dsp_imp.c",
         spark::emitFastRpcSkeleton(build.entryPoint)},
        {"INTEGRATION.md", spark::emitS25Integration()}})
    if (int rc = writeFile(folder.file(name), text))
      return rc;
  json::Object manifest{
      {"format", "spark-compile bundle manifest 1"},
      {"target", "s25"},
      {"device", "Snapdragon 8 Elite (Oryon CPU cores + Hexagon DSP with HVX)"},
      {"parts",
       json::Object{
           {"cpu", json::Object{{"folder", "arm64"},
                                {"runs_on", "the application processor (Oryon, "
                                            "AArch64), in the app's process"},
                                {"library", "arm64/libspark_model.a"},
                                {"pack", "arm64/model.spkw"},
                                {"runtime", "runtime/libspark_runtime.a"}}},
           {"dsp",
            json::Object{{"folder", "hexagon"},
                         {"runs_on", "the Hexagon DSP (v66 HVX code, runs on "
                                     "v68+), reached through FastRPC: one "
                                     "remote call per decoder step"},
                         {"library", "hexagon/libspark_model.a"},
                         {"pack", "hexagon/model.spkw"},
                         {"interface", "hexagon/spark_dsp.idl"},
                         {"skeleton_source", "hexagon/spark_dsp_imp.c"}}}}},
      {"verified",
       "both parts run end to end under qemu (qemu-aarch64-static, "
       "qemu-hexagon-static) in spark-compile's tests; the FastRPC path "
       "needs the Hexagon SDK and a device and was not run"},
      {"reproduce", build.reproduce}};
  if (int rc = writeFile(
          folder.file("manifest.json"),
          formatv("{0:2}", json::Value(std::move(manifest))).str() + "\n"))
    return rc;
  return folder.commit();
}

/// --report-fidelity: an fp32 reference build next to OUT (removed again),
/// then spark-fidelity OUT --reference REF --calib FILE, which prints the
/// table and writes OUT/fidelity.json.
int reportFidelityOf(const char *argv0, const spark::Checkpoint &checkpoint,
                     const std::string &reproduce) {
  // The reference build goes in a folder of our own beside OUT.
  TemporaryFolder scratch;
  SmallString<256> model(outputPath), created;
  model += ".fidelity-%%%%%%";
  if (std::error_code ec = sys::fs::createUniqueDirectory(model, created))
    return fail(outputPath +
                ": cannot create a folder beside it: " + ec.message());
  scratch.path = std::string(created);
  TemporaryFolder reference;
  reference.path = scratch.path + "/fp32";
  if (!quiet)
    errs() << "fidelity: compiling the fp32 reference build\n";
  if (Error e = compileFp32Build(checkpoint, reference.path, target,
                                 /*probeInputs=*/false, reproduce,
                                 "--report-fidelity: the fp32 reference build"))
    return fail(toString(std::move(e)));
  std::string fidelityTool = toolPath(argv0, "spark-fidelity");
  std::vector<StringRef> compare = {fidelityTool,   outputPath, "--reference",
                                    reference.path, "--calib",  calib};
  if (quiet)
    compare.push_back("--quiet");
  if (Error e = runProgram(compare, "--report-fidelity: spark-fidelity"))
    return fail(toString(std::move(e)));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  // --help lists the compiler's own options; MLIR's (--mlir-timing,
  // --mlir-print-ir-after-all, ...) still apply and --help-hidden lists
  // them with LLVM's.
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "spark-compile: ahead-of-time compiler for Spark-X2.5 checkpoints\n\n"
      "  spark-compile CHECKPOINT_DIR -o OUT [--target=host|spr|arm64|hexagon|"
      "s25] [--quant=...]\n\n"
      "MLIR's pass-manager and printing options (--mlir-timing, "
      "--mlir-print-ir-after-all, ...) also apply; --help-hidden lists "
      "them.\n");

  {
    StringRef name = entryPoint;
    bool identifier =
        !name.empty() && !isDigit(name[0]) &&
        llvm::all_of(name, [](char c) { return isAlnum(c) || c == '_'; });
    if (!identifier || name.starts_with("halide_") || name.starts_with("__") ||
        name == "main")
      return fail("--entry-point '" + name +
                  "': expected a C identifier of your own (letters, digits, "
                  "'_'; not main, not starting with a digit, '__' or "
                  "'halide_')");
  }
  if (maxContext < 1)
    return fail("--max-context must be a positive number of positions, got " +
                Twine(maxContext));
  if (kvCache != "f32" && kvCache != "bf16" && kvCache != "f16")
    return fail("--kv-cache=" + Twine(kvCache) +
                ": expected f32, bf16 or f16 (the caches' element type)");
  if (maxChunk.getNumOccurrences() == 0)
    maxChunk = std::min<int64_t>(maxChunk, maxContext);
  if (maxChunk < 1 || maxChunk > maxContext)
    return fail("--max-chunk must be between 1 and --max-context (" +
                Twine(maxContext) + "), got " + Twine(maxChunk));
  if (quant != "none" && quant != "w8a16" && quant != "w8a8" &&
      quant != "w4a16" && quant != "w4a8")
    return fail("--quant=" + quant +
                " is not known; expected none, w8a16, "
                "w8a8, w4a16 or w4a8");
  if ((!quantRecipe.empty() || !quantOverride.empty()) && quant == "none")
    return fail("--quant-recipe and --quant-override refine a quantization "
                "scheme; give --quant=w8a16, w8a8, w4a16 or w4a8");
  if (!quantRecipe.empty()) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
        MemoryBuffer::getFile(quantRecipe);
    if (!buffer)
      return fail("--quant-recipe " + quantRecipe + ": " +
                  buffer.getError().message());
    SmallVector<StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n');
    for (size_t i = 0; i < lines.size(); ++i) {
      StringRef line = lines[i].split('#').first.trim();
      if (line.empty())
        continue;
      if (!line.contains('='))
        return fail("--quant-recipe " + quantRecipe + ":" + Twine(i + 1) +
                    ": expected PATTERN = PRECISION, got '" + line + "'");
      recipeRules.push_back(line.str());
    }
  }
  for (const std::string &rule : quantOverride)
    recipeRules.push_back(rule);
  if (activationBlock && quant != "w8a8" && quant != "w4a8")
    return fail("--activation-block applies to int8 activations (--quant=w8a8 "
                "or w4a8), not --quant=" +
                quant);
  if (activationBlock && activationBlock != 32 && activationBlock != 64 &&
      activationBlock != 128 && activationBlock != 256)
    return fail("--activation-block=" + Twine(activationBlock) +
                " is not supported; expected 32, 64, 128 or 256");
  if (groupSize.getNumOccurrences() && quant != "w4a16" && quant != "w4a8")
    return fail("--group-size applies to the 4-bit schemes (--quant=w4a16 or "
                "w4a8), not --quant=" +
                quant);
  if (groupSize != 32 && groupSize != 64 && groupSize != 128 &&
      groupSize != 256)
    return fail("--group-size=" + Twine(groupSize) +
                " is not supported; expected 32, 64, 128 or 256");
  if (amxKernel != "tiles" && amxKernel != "halide")
    return fail("--amx-kernel=" + amxKernel +
                " is not known; expected tiles "
                "or halide");
  if (target != "s25")
    if (Expected<spark::TargetInfo> info = spark::targetFor(target, amxKernel);
        !info)
      return fail(toString(info.takeError()));
  const bool library =
      emit == EmitStage::Library || emit == EmitStage::Executable;
  if (library && outputPath == "-")
    return fail("-o OUT is required: the folder to write the library, pack, "
                "header and manifest into");
  if (library)
    if (Error e = spark::checkDataFiles())
      return fail(toString(std::move(e)));

  spark::CheckpointOptions checkpointOptions;
  checkpointOptions.checkFinite = !skipFiniteCheck;
  Expected<std::unique_ptr<spark::Checkpoint>> checkpoint =
      spark::Checkpoint::open(checkpointDir, checkpointOptions);
  if (!checkpoint)
    return fail(toString(checkpoint.takeError()));

  if (reportFidelity && calib.empty())
    return fail("--report-fidelity needs --calib FILE: the token sequences "
                "both builds are compared on");
  if (reportFidelity && !library)
    return fail("--report-fidelity applies to --emit=lib only");
  if (target == "s25" && !library)
    return fail(
        "--target=s25 builds a bundle of libraries; --emit=" +
        std::string(emit == EmitStage::MLIR ? "mlir" : "opt/halide/asm") +
        " applies to one target (arm64 or hexagon)");
  if (reportFidelity && target == "s25")
    return fail("--report-fidelity runs the build here; --target=s25 does not "
                "run on this machine");
  if (reportFidelity && !spark::targetFor(target, amxKernel)->native)
    return fail("--report-fidelity runs the build here; --target=" + target +
                " does not run on this machine");
  if (!calib.empty()) {
    // Checked before the long work: ids in the vocabulary, room in the
    // context for the report's 32 generated tokens.
    std::vector<std::vector<int32_t>> sequences;
    std::string error = spark::readTokenSequences(
        calib, int32_t((*checkpoint)->config().vocabSize),
        int32_t(maxContext - 32), sequences);
    if (!error.empty())
      return fail("--calib: " + error);
  }
  if (!calib.empty() && !calibRanges.empty())
    return fail("--calib and --calib-ranges both give the ranges; expected "
                "one of them");
  const bool calibrated = !calib.empty() || !calibRanges.empty();
  if (calibrated && emit == EmitStage::MLIR)
    return fail("--calib and --calib-ranges apply to --emit=opt and later: "
                "the ranges name the products after fusion");
  const bool int8Activations = quant == "w8a8" || quant == "w4a8";
  if (quant == "none" && !activations.empty())
    return fail("--activations applies to --quant=w8a16, w4a16 (f32, bf16, "
                "f16) and w8a8, w4a8 (dynamic, static)");
  // int8 activations: dynamic by default, also when calibrated: per-token
  // scales cost one pass over the input and are more faithful than one
  // calibrated scale per product (mini, w8a8: 22.5 dB dynamic, 16.2 dB
  // static). 16-bit activations: bf16 on x86, f16 on arm64 and Hexagon.
  if (activations.empty() && quant != "none")
    activations = int8Activations                       ? "dynamic"
                  : target == "host" || target == "spr" ? "bf16"
                                                        : "f16";
  if (int8Activations && activations != "dynamic" && activations != "static")
    return fail("--activations=" + activations + " does not apply to --quant=" +
                quant + "; expected dynamic or static (int8 activations)");
  if ((quant == "w8a16" || quant == "w4a16") && activations != "f32" &&
      activations != "bf16" && activations != "f16")
    return fail("--activations=" + activations + " does not apply to --quant=" +
                quant + "; expected f32, bf16 or f16 (16-bit activations)");
  if (activations == "static" && activationBlock)
    return fail("--activation-block gives dynamic scales per block; it does "
                "not combine with --activations=static");
  if (activations == "static" && !calibrated)
    return fail("--activations=static needs calibrated activation ranges: "
                "give --calib FILE (token ids, one sequence per line) or "
                "--calib-ranges OUT/calibration.json; spark-compile does not "
                "make ranges up");

  const std::string commandLine = commandLineOf(argc, argv);
  std::optional<Calibration> calibration;
  if (calibrated) {
    Expected<Calibration> measured =
        calib.empty() ? readCalibration(calibRanges)
                      : runCalibration(argv[0], **checkpoint, commandLine);
    if (!measured)
      return fail(toString(measured.takeError()));
    calibration = std::move(*measured);
    if (!quiet)
      errs() << "calibration: " << calibration->ranges.size()
             << " product input ranges; int8 activations " << activations
             << "\n";
  }
  const Calibration *ranges = calibration ? &*calibration : nullptr;

  const Build build = commandLineBuild(ranges, commandLine);
  if (target == "s25")
    return emitBundle(**checkpoint, build);
  if (library) {
    if (int rc = compileLibrary(**checkpoint, build, PhaseClock::programStart))
      return rc;
    return reportFidelity ? reportFidelityOf(argv[0], **checkpoint, commandLine)
                          : 0;
  }

  // The IR and kernel stages, printed to -o (or stdout).
  PhaseClock phases(quiet, PhaseClock::programStart);
  mlir::MLIRContext context;
  printWarnings(context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importModule(context, **checkpoint);
  if (!module)
    return 1;
  phases.done("reading and importing the checkpoint");

  // writeToOutput writes to a temporary file and renames it into place, so
  // an interrupted run never leaves a truncated output.
  auto writeText = [&](function_ref<Error(raw_ostream &)> write) {
    if (Error e = writeToOutput(outputPath, write))
      return fail(outputPath + ": " + toString(std::move(e)));
    return 0;
  };
  auto printModule = [&](raw_ostream &os) {
    module->print(os);
    return Error::success();
  };
  if (emit == EmitStage::MLIR)
    return writeText(printModule);

  if (failed(runPasses(context, *module, build)))
    return fail("the pass pipeline failed on " + checkpointDir);
  phases.done("passes");
  if (emit == EmitStage::Optimized)
    return writeText(printModule);

  Expected<spark::ModelPlan> plan =
      spark::planModel(*module, **checkpoint, buildOptions(build));
  if (!plan)
    return fail(toString(plan.takeError()));
  TemporaryFolder scratch;
  SmallString<128> created;
  if (std::error_code ec =
          sys::fs::createUniqueDirectory("spark-compile", created))
    return fail("cannot create a temporary folder: " + ec.message());
  scratch.path = std::string(created);
  return writeText([&](raw_ostream &os) {
    return spark::emitKernelText(*plan,
                                 emit == EmitStage::Halide
                                     ? spark::KernelText::HalideStatements
                                     : spark::KernelText::Assembly,
                                 scratch.path, os);
  });
}
