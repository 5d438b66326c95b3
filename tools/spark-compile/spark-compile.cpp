//===- spark-compile.cpp - the compiler driver ----------------------------===//
//
// spark-compile CKPT --emit=mlir|opt|plan|driver|halide|asm [-o FILE]
// spark-compile CKPT [--target=host] [--dtype=f32|bf16|f16] -o OUT
//
// Toy-style driver: each --emit stage stops the pipeline there and prints
// (or writes) what it produced. On any error it exits with status 1 and
// leaves no output behind; an existing output is replaced only on success.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Compile.h"
#include "spark/Codegen/Emit.h"
#include "spark/Codegen/PlanIR.h"
#include "spark/Import/Checkpoint.h"
#include "spark/Kernels/DataFiles.h"

#include "Calibrate.h"
#include "Fidelity.h"
#include "ModelLoader.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {

enum class EmitStage {
  MLIR,
  Optimized,
  Plan,
  Driver,
  Halide,
  Assembly,
  Library,
  Executable
};

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
               clEnumValN(EmitStage::Plan, "plan",
                          "the kernel plan (spark_kernel IR): the distinct "
                          "kernels, pack tensors, caches and one step's "
                          "calls"),
               clEnumValN(EmitStage::Driver, "driver",
                          "the generated step driver (C): CPU dispatch, the "
                          "step's kernel calls, the tables and the "
                          "spark_model_def"),
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
    cl::init(spark::kDefaultGroupSize), cl::cat(category));

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

cl::opt<bool> gptq(
    "gptq",
    cl::desc("With --calib: round the 4-bit weights by GPTQ, each column's "
             "rounding error spread over the columns after it through the "
             "inverse of the calibrated second moment of the product's input "
             "(instead of each group's own best grid; memory and time grow "
             "with the square and cube of each product's input width)"),
    cl::init(false), cl::cat(category));

cl::opt<std::string> quantRecipe(
    "quant-recipe",
    cl::desc("A precision recipe: one rule PATTERN = PRECISION per line "
             "('#' comments): weights whose fused name matches the glob get "
             "int8, int4, int4:G (4-bit groups of G), int6, int6:G (6-bit "
             "asymmetric groups, for the tied head) or none (the build's "
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

cl::opt<std::string> halideKernelsOption(
    "halide-kernels",
    cl::desc("--target=arm64, hexagon or s25: every kernel from Halide, no "
             "hand-written microkernel (to compare the microkernels against "
             "Halide's kernels of the same build); =attention: the attention "
             "kernels only"),
    cl::value_desc("all|attention"), cl::ValueOptional, cl::init(""),
    cl::Hidden, cl::cat(category));

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

/// When the program started: the phase of the build the command line asks
/// for also counts opening the checkpoint.
const double programStart = spark::steadySeconds();

int fail(const Twine &message) {
  WithColor::error(errs(), "spark-compile") << message << "\n";
  return 1;
}

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

/// --target, --quant, --activations, --amx-kernel and --halide-kernels,
/// parsed by main.
spark::TargetKind targetKind = spark::TargetKind::Host;
spark::QuantScheme scheme = spark::QuantScheme::None;
spark::Activations activationKind = spark::Activations::None;
spark::AmxKernel amxKernelKind = spark::AmxKernel::Tiles;
spark::HalideKernels halideKernels = spark::HalideKernels::None;

/// The build the command line asks for (its options checked by main).
spark::Build commandLineBuild(std::string reproduce) {
  spark::Build build;
  build.out = outputPath;
  build.options.target = targetKind;
  build.options.dtype = dtype;
  build.options.quant = scheme;
  build.options.activations = activationKind;
  build.options.groupSize = groupSize;
  build.activationBlock = activationBlock;
  build.options.quantRecipe = recipeRules;
  build.kvCache = kvCache;
  build.options.amxKernel = amxKernelKind;
  build.options.halideKernels = halideKernels;
  build.options.entryPoint = entryPoint;
  SmallVector<StringRef> flags;
  StringRef(extraCFlags).split(flags, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef flag : flags)
    build.options.cflags.push_back(flag.str());
  build.options.weightsFrom = weightsFrom;
  build.options.probeInputs = probeInputs;
  build.options.executable = emit == EmitStage::Executable;
  build.options.maxContext = maxContext;
  build.options.maxChunk = maxChunk;
  build.fusion = !noFusion;
  build.decomposedImport = importForm == ImportForm::Decomposed;
  build.weightImportance = weightImportance;
  build.gptq = gptq;
  build.options.quiet = quiet;
  build.reproduce = std::move(reproduce);
  return build;
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
Expected<spark::Calibration> readCalibration(StringRef path) {
  auto fileError = [&](const Twine &what) {
    return createStringError("--calib-ranges: " + path + ": " + what);
  };
  Expected<spark::JSONFile> file = spark::readJSONFile(path);
  if (!file)
    return createStringError("--calib-ranges: " + toString(file.takeError()));
  json::Object *object = file->value.getAsObject();
  json::Object *ranges = object ? object->getObject("ranges") : nullptr;
  if (!object || object->getString("format") != StringRef(kCalibrationFormat) ||
      !ranges)
    return fileError(Twine("expected the calibration.json of a build made "
                           "with --calib (format \"") +
                     kCalibrationFormat + "\", an object \"ranges\")");
  spark::Calibration calibration;
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

/// An fp32 build of `checkpoint` into `out` for `buildTarget`
/// (spark::fp32Build of `like`); an error says `what` failed and why.
Error compileFp32Build(const spark::Checkpoint &checkpoint,
                       const spark::Build &like, StringRef out,
                       spark::TargetKind buildTarget, bool probeInputs,
                       const Twine &what) {
  if (Error e = spark::compileLibrary(
          checkpoint, spark::fp32Build(like, out, buildTarget, probeInputs)))
    return createStringError(what + " failed: " + toString(std::move(e)));
  return Error::success();
}

/// --calib: compiles the checkpoint for the host in fp32 with input probes,
/// loads that build here and runs the sequences through it (Calibrate.h, as
/// spark-fidelity --ranges-out does), and pairs each product's measured
/// input with the weight it reads.
Expected<spark::Calibration> runCalibration(const spark::Checkpoint &checkpoint,
                                            const spark::Build &like) {
  SmallString<128> created;
  if (std::error_code ec =
          sys::fs::createUniqueDirectory("spark-calibration", created))
    return createStringError("cannot create a temporary folder: " +
                             ec.message());
  spark::TemporaryFolder scratch;
  scratch.path = std::string(created);
  std::string build = scratch.path + "/fp32";
  if (!quiet)
    errs() << "calibration: compiling the fp32 build with input probes\n";
  if (Error e =
          compileFp32Build(checkpoint, like, build, spark::TargetKind::Host,
                           /*probeInputs=*/true, "calibration: the fp32 build"))
    return e;
  if (!quiet)
    errs() << "calibration: running " << calib << "\n";
  // The build runs here: its library loaded, every sequence through it.
  spark::ModelSession run;
  if (std::string e = run.open(build, /*threads=*/0); !e.empty())
    return createStringError("calibration: " + e);
  std::vector<std::vector<int32_t>> sequences;
  if (std::string e = spark::readTokenSequences(
          calib, run.info.vocab_size, run.info.max_context, sequences);
      !e.empty())
    return createStringError("calibration: " + e);
  std::vector<spark::MeasuredInput> measured;
  if (std::string e = spark::measureProductInputs(run, build, sequences,
                                                  measured, like.gptq);
      !e.empty())
    return createStringError("calibration: " + e);
  if (!quiet) {
    size_t tokens = 0;
    for (const std::vector<int32_t> &ids : sequences)
      tokens += ids.size();
    errs() << "calibration: " << measured.size() << " product inputs over "
           << tokens << " tokens in " << sequences.size() << " sequences\n";
  }
  Expected<spark::JSONFile> manifest =
      spark::readJSONFile(build + "/manifest.json");
  if (!manifest)
    return manifest.takeError();
  const json::Object *manifestObject = manifest->value.getAsObject();
  const json::Array *names =
      manifestObject ? manifestObject->getArray("input_probes") : nullptr;
  if (!names || names->size() != measured.size())
    return createStringError("calibration: the fp32 build's input probes and "
                             "the measured inputs do not pair up");
  spark::Calibration calibration;
  json::Object ranges, largest, importance;
  for (size_t i = 0; i < names->size(); ++i) {
    std::optional<StringRef> name = (*names)[i].getAsString();
    const spark::MeasuredInput &m = measured[i];
    if (!name || !m.seen)
      return createStringError("calibration: product input " + Twine(i) +
                               " was not seen on the calibration tokens");
    // An input that was all zeros still needs a positive range.
    float range = std::max(float(m.clip), 1e-30f);
    calibration.ranges[*name] = range;
    ranges[*name] = double(range);
    largest[*name] = m.largest;
    std::vector<float> &values = calibration.importance[name->str()];
    values.assign(m.importance.begin(), m.importance.end());
    importance[*name] = json::Array(values);
    if (like.gptq)
      calibration.secondMoments[name->str()] = m.secondMoment;
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

/// --report-fidelity: an fp32 reference build next to OUT (removed again),
/// then both builds compared on the --calib sequences in this process, as
/// spark-fidelity OUT --reference REF --calib FILE does: the table printed,
/// OUT/fidelity.json written.
int reportFidelityOf(const spark::Checkpoint &checkpoint,
                     const spark::Build &like) {
  // The reference build goes in a folder of our own beside OUT.
  spark::TemporaryFolder scratch;
  SmallString<256> model(outputPath), created;
  model += ".fidelity-%%%%%%";
  if (std::error_code ec = sys::fs::createUniqueDirectory(model, created))
    return fail(outputPath +
                ": cannot create a folder beside it: " + ec.message());
  scratch.path = std::string(created);
  spark::TemporaryFolder reference;
  reference.path = scratch.path + "/fp32";
  if (!quiet)
    errs() << "fidelity: compiling the fp32 reference build\n";
  if (Error e = compileFp32Build(checkpoint, like, reference.path, targetKind,
                                 /*probeInputs=*/false,
                                 "--report-fidelity: the fp32 reference build"))
    return fail(toString(std::move(e)));
  // Both builds load here and run the sequences (Fidelity.h, what
  // spark-fidelity does).
  spark::FidelityRequest request;
  request.build = outputPath;
  request.reference = reference.path;
  request.calib = calib;
  request.quiet = quiet;
  request.tool = "fidelity";
  if (std::string e = spark::reportFidelity(request); !e.empty())
    return fail("--report-fidelity: " + e);
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
  if (std::optional<spark::QuantScheme> parsed =
          spark::symbolizeQuantScheme(quant))
    scheme = *parsed;
  else
    return fail("--quant=" + quant +
                " is not known; expected none, w8a16, "
                "w8a8, w4a16 or w4a8");
  const bool quantized = scheme != spark::QuantScheme::None;
  const bool int8Activations = spark::hasInt8Inputs(scheme);
  if ((!quantRecipe.empty() || !quantOverride.empty()) && !quantized)
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
  if (activationBlock && !int8Activations)
    return fail("--activation-block applies to int8 activations (--quant=w8a8 "
                "or w4a8), not --quant=" +
                quant);
  if (activationBlock && !spark::isSupportedBlock(activationBlock))
    return fail("--activation-block=" + Twine(activationBlock) +
                " is not supported; expected 32, 64, 128 or 256");
  if (groupSize.getNumOccurrences() && !spark::hasFourBitWeights(scheme))
    return fail("--group-size applies to the 4-bit schemes (--quant=w4a16 or "
                "w4a8), not --quant=" +
                quant);
  if (!spark::isSupportedBlock(groupSize))
    return fail("--group-size=" + Twine(groupSize) +
                " is not supported; expected 32, 64, 128 or 256");
  if (std::optional<spark::AmxKernel> parsed =
          spark::symbolizeAmxKernel(amxKernel))
    amxKernelKind = *parsed;
  else
    return fail("--amx-kernel=" + amxKernel +
                " is not known; expected tiles "
                "or halide");
  if (halideKernelsOption.getNumOccurrences()) {
    if (halideKernelsOption.empty() || halideKernelsOption == "all")
      halideKernels = spark::HalideKernels::All;
    else if (halideKernelsOption == "attention")
      halideKernels = spark::HalideKernels::Attention;
    else
      return fail("--halide-kernels=" + halideKernelsOption +
                  " is not known; expected all (the default) or attention");
  }
  if (std::optional<spark::TargetKind> parsed =
          spark::symbolizeTargetKind(target))
    targetKind = *parsed;
  else
    return fail("--target=" + target + " is not supported yet; expected " +
                spark::knownTargets());
  const bool bundle = targetKind == spark::TargetKind::S25;
  if (!bundle)
    if (Expected<spark::TargetInfo> info =
            spark::targetFor(targetKind, amxKernelKind, halideKernels);
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
  if (bundle && !library)
    return fail("--target=s25 builds a bundle of libraries; --emit=" +
                std::string(emit == EmitStage::MLIR
                                ? "mlir"
                                : "opt/plan/driver/halide/asm") +
                " applies to one target (arm64 or hexagon)");
  if (reportFidelity && bundle)
    return fail("--report-fidelity runs the build here; --target=s25 does not "
                "run on this machine");
  if (reportFidelity && !spark::targetFor(targetKind, amxKernelKind)->native)
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
  if (gptq && calib.empty())
    return fail("--gptq needs --calib FILE: GPTQ rounds against the second "
                "moment of each product's input, measured on those tokens "
                "(--calib-ranges does not hold them)");
  if (gptq && !spark::hasFourBitWeights(scheme) && recipeRules.empty())
    return fail("--gptq rounds 4-bit weights; expected --quant=w4a16 or w4a8 "
                "(or a --quant-recipe / --quant-override giving int4)");
  if (!calib.empty() && !calibRanges.empty())
    return fail("--calib and --calib-ranges both give the ranges; expected "
                "one of them");
  const bool calibrated = !calib.empty() || !calibRanges.empty();
  if (calibrated && emit == EmitStage::MLIR)
    return fail("--calib and --calib-ranges apply to --emit=opt and later: "
                "the ranges name the products after fusion");
  if (!quantized && !activations.empty())
    return fail("--activations applies to --quant=w8a16, w4a16 (f32, bf16, "
                "f16) and w8a8, w4a8 (dynamic, static)");
  // int8 activations: dynamic by default, also when calibrated: per-token
  // scales cost one pass over the input and are more faithful than one
  // calibrated scale per product (mini, w8a8: 22.5 dB dynamic, 16.2 dB
  // static). 16-bit activations: bf16 on x86, f16 on arm64 and Hexagon.
  const bool x86 = targetKind == spark::TargetKind::Host ||
                   targetKind == spark::TargetKind::Spr;
  if (activations.empty() && quantized)
    activations = int8Activations ? "dynamic" : x86 ? "bf16" : "f16";
  if (quantized)
    activationKind = spark::symbolizeActivations(activations)
                         .value_or(spark::Activations::None);
  const bool int8Kind = activationKind == spark::Activations::Dynamic ||
                        activationKind == spark::Activations::Static;
  if (int8Activations && !int8Kind)
    return fail("--activations=" + activations + " does not apply to --quant=" +
                quant + "; expected dynamic or static (int8 activations)");
  if (quantized && !int8Activations &&
      (int8Kind || activationKind == spark::Activations::None))
    return fail("--activations=" + activations + " does not apply to --quant=" +
                quant + "; expected f32, bf16 or f16 (16-bit activations)");
  const bool staticActivations = activationKind == spark::Activations::Static;
  if (staticActivations && activationBlock)
    return fail("--activation-block gives dynamic scales per block; it does "
                "not combine with --activations=static");
  if (staticActivations && !calibrated)
    return fail("--activations=static needs calibrated activation ranges: "
                "give --calib FILE (token ids, one sequence per line) or "
                "--calib-ranges OUT/calibration.json; spark-compile does not "
                "make ranges up");

  spark::Build build = commandLineBuild(commandLineOf(argc, argv));
  std::optional<spark::Calibration> calibration;
  if (calibrated) {
    Expected<spark::Calibration> measured =
        calib.empty() ? readCalibration(calibRanges)
                      : runCalibration(**checkpoint, build);
    if (!measured)
      return fail(toString(measured.takeError()));
    calibration = std::move(*measured);
    if (!quiet)
      errs() << "calibration: " << calibration->ranges.size()
             << " product input ranges; int8 activations " << activations
             << "\n";
  }
  build.calibration = calibration ? &*calibration : nullptr;

  if (bundle) {
    if (Error e = spark::buildS25Bundle(**checkpoint, build))
      return fail(toString(std::move(e)));
    return 0;
  }
  if (library) {
    if (Error e = spark::compileLibrary(**checkpoint, build, programStart))
      return fail(toString(std::move(e)));
    return reportFidelity ? reportFidelityOf(**checkpoint, build) : 0;
  }

  // The IR and kernel stages, printed to -o (or stdout).
  spark::PhaseClock phases(quiet, programStart);
  mlir::MLIRContext context;
  spark::printWarnings(context);
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> imported =
      spark::importModule(context, **checkpoint, build);
  if (!imported)
    return fail(toString(imported.takeError()));
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*imported);
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

  if (failed(spark::runPasses(context, *module, build)))
    return fail("the pass pipeline failed on " + checkpointDir);
  phases.done("passes");
  if (emit == EmitStage::Optimized)
    return writeText(printModule);

  // The plan and the driver need the pack's structure, not its data: no
  // weight is quantized for them.
  Expected<spark::ModelPlan> plan =
      spark::planModel(*module, spark::buildOptions(build));
  if (!plan)
    return fail(toString(plan.takeError()));
  spark::setPlanConfig(*plan, (*checkpoint)->config());
  if (emit == EmitStage::Plan) {
    Expected<mlir::OwningOpRef<mlir::ModuleOp>> planIR =
        spark::planToIR(*plan, context);
    if (!planIR)
      return fail(toString(planIR.takeError()));
    return writeText([&](raw_ostream &os) {
      (*planIR)->print(os);
      return Error::success();
    });
  }
  if (emit == EmitStage::Driver) {
    Expected<spark::TargetInfo> info =
        spark::targetFor(targetKind, amxKernelKind, halideKernels);
    if (!info)
      return fail(toString(info.takeError()));
    Expected<std::string> driver = spark::emitDriverSource(*plan, *info);
    if (!driver)
      return fail(toString(driver.takeError()));
    return writeText([&](raw_ostream &os) {
      os << *driver;
      return Error::success();
    });
  }
  spark::TemporaryFolder scratch;
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
