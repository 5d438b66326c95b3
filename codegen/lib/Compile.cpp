//===- Compile.cpp - one build of a checkpoint, from import to folder -----===//
//
// See Compile.h.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Compile.h"
#include "spark/Codegen/Emit.h"
#include "spark/Codegen/PackReader.h"
#include "spark/Import/Checkpoint.h"
#include "spark/Import/Importer.h"
#include "spark/Kernels/DataFiles.h"
#include "spark/Passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <thread>

using namespace llvm;
using namespace spark;

namespace {

Error error(const Twine &message) { return createStringError(message); }

/// An output folder built beside its final place (OUT.partial-XXXXXX) and
/// renamed into place when complete: an error leaves nothing, and an earlier
/// build is replaced only by a complete one. An existing OUT that is not an
/// earlier build (no manifest.json) is refused.
class OutputFolder {
public:
  /// The folder `path` (as given: errors name it so); `quiet`: no line
  /// listing what was written.
  OutputFolder(StringRef path, bool quiet) : given(path.str()), quiet(quiet) {}

  Error create() {
    out = given;
    // Absolute, so that the staging folder is created beside OUT (a relative
    // model would put it in the temporary directory, maybe on another file
    // system, where the final rename fails).
    if (std::error_code ec = sys::fs::make_absolute(out))
      return error(given + ": " + ec.message());
    sys::path::remove_dots(out, /*remove_dot_dot=*/true);
    if (sys::fs::exists(out) && !isEmptyFolder(out)) {
      SmallString<256> manifest(out);
      sys::path::append(manifest, "manifest.json");
      if (!sys::fs::is_directory(out) || !sys::fs::exists(manifest))
        return error(given + " exists and is not a spark-compile output "
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
        return error(given + " exists and its manifest.json is not a "
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
        return error(given + ": cannot create its parent folder " + parent +
                     ": " + ec.message());
    SmallString<256> model(out);
    model += ".partial-%%%%%%";
    SmallString<256> created;
    if (std::error_code ec = sys::fs::createUniqueDirectory(model, created))
      return error(given +
                   ": cannot create a folder beside it: " + ec.message());
    // createUniqueDirectory appends its own suffix to the model.
    staging.path = std::string(created);
    return Error::success();
  }

  const std::string &path() const { return staging.path; }
  std::string file(StringRef name) const {
    SmallString<256> path(staging.path);
    sys::path::append(path, name);
    return std::string(path);
  }

  /// Swaps the finished folder into place.
  Error commit() {
    std::string previous;
    if (sys::fs::exists(out)) {
      // A name of our own (an empty folder created here, which rename
      // replaces): never a folder of the user's, such as OUT.old.
      SmallString<256> model(out), created;
      model += ".previous-%%%%%%";
      if (std::error_code ec = sys::fs::createUniqueDirectory(model, created))
        return error(given +
                     ": cannot create a folder beside it: " + ec.message());
      previous = std::string(created);
      if (std::error_code ec = sys::fs::rename(out, previous)) {
        sys::fs::remove(previous);
        return error(given +
                     ": cannot move the previous build aside: " + ec.message());
      }
    }
    if (std::error_code ec = sys::fs::rename(staging.path, out)) {
      if (!previous.empty())
        sys::fs::rename(previous, out);
      return error(given +
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
    return Error::success();
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

} // namespace

Build spark::fp32Build(const Build &like, StringRef out, TargetKind target,
                       bool probeInputs) {
  Build build;
  build.out = out.str();
  build.options.target = target;
  build.options.activations = Activations::None; // no quantized products
  build.options.maxContext = like.options.maxContext;
  build.options.maxChunk = like.options.maxChunk;
  build.fusion = like.fusion;
  build.decomposedImport = like.decomposedImport;
  build.options.probeInputs = probeInputs;
  build.options.quiet = true;
  build.reproduce = like.reproduce;
  return build;
}

BuildOptions spark::buildOptions(const Build &build) {
  BuildOptions options = build.options;
  options.calibrated = build.calibration != nullptr;
  if (build.calibration && build.weightImportance)
    options.importance = build.calibration->importance;
  if (build.calibration && build.gptq)
    options.secondMoments = &build.calibration->secondMoments;
  return options;
}

double spark::steadySeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void PhaseClock::done(const Twine &phase) {
  double t = steadySeconds();
  if (!quiet)
    errs() << formatv("spark-compile: {0}: {1:f1} s\n", phase.str(), t - last);
  last = t;
}

void PhaseClock::total() {
  if (!quiet)
    errs() << formatv("spark-compile: total {0:f1} s\n",
                      steadySeconds() - start);
}

void spark::printWarnings(mlir::MLIRContext &context) {
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &diag) {
    if (diag.getSeverity() != mlir::DiagnosticSeverity::Warning)
      return mlir::failure(); // errors: the default printing
    WithColor::warning(errs(), "spark-compile") << diag.str() << "\n";
    return mlir::success();
  });
}

Expected<mlir::OwningOpRef<mlir::ModuleOp>>
spark::importModule(mlir::MLIRContext &context, const Checkpoint &checkpoint,
                    const Build &build) {
  ImportOptions importOptions;
  importOptions.maxContext = build.options.maxContext;
  importOptions.decomposed = build.decomposedImport;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importCheckpoint(context, checkpoint, importOptions);
  if (!module)
    return error("internal error: the imported module of " +
                 checkpoint.directory() + " does not verify");
  return module;
}

mlir::LogicalResult spark::runPasses(mlir::MLIRContext &context,
                                     mlir::ModuleOp module,
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
  if (build.fusion) {
    fusion->addPass(createSparkFuseRMSNorm());
    fusion->addPass(createSparkFuseGeglu());
    fusion->addPass(createSparkFuseHeadGate());
    fusion->addPass(createSparkFuseProjections());
  }
  if (failed(fusion->run(module)))
    return mlir::failure();
  // The ranges name the fused products, as the fp32 build that measured them
  // (compiled with the same fusion options) has them.
  if (calibration)
    if (Error e = attachInputRanges(module, calibration->ranges)) {
      module.emitError() << "calibration: " << toString(std::move(e));
      return mlir::failure();
    }
  auto pm = pipeline();
  if (!pm)
    return mlir::failure();
  if (build.options.quant != QuantScheme::None) {
    SparkQuantizeWeightsOptions quantize;
    quantize.scheme = stringifyQuantScheme(build.options.quant).str();
    quantize.activations =
        stringifyActivations(build.options.activations).str();
    quantize.groupSize = build.options.groupSize;
    quantize.activationBlock = build.activationBlock;
    quantize.recipe.assign(build.options.quantRecipe.begin(),
                           build.options.quantRecipe.end());
    pm->addPass(createSparkQuantizeWeights(quantize));
  }
  SparkKVLayoutOptions layout;
  layout.maxContext = build.options.maxContext;
  layout.cacheType = build.kvCache;
  pm->addPass(createSparkKVLayout(layout));
  SparkRopeTablesOptions tables;
  tables.maxContext = build.options.maxContext;
  pm->addPass(createSparkRopeTables(tables));
  SparkPlanMemoryOptions memory;
  memory.maxChunk = build.options.maxChunk;
  memory.rowMultiple = kPrefillRowMultiple;
  pm->addPass(createSparkPlanMemory(memory));
  return pm->run(module);
}

Error spark::compileLibrary(const Checkpoint &checkpoint, const Build &build,
                            double started) {
  PhaseClock phases(build.options.quiet, started);
  const bool quiet = build.options.quiet;
  mlir::MLIRContext context;
  printWarnings(context);
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      importModule(context, checkpoint, build);
  if (!module)
    return module.takeError();
  phases.done("reading and importing the checkpoint");
  if (failed(runPasses(context, **module, build)))
    return error("the pass pipeline failed on " + checkpoint.directory());
  phases.done("passes");
  const Calibration *calibration = build.calibration;
  Expected<ModelPlan> plan =
      planModel(**module, checkpoint, buildOptions(build));
  if (!plan)
    return plan.takeError();
  OutputFolder folder(build.out, quiet);
  if (Error e = folder.create())
    return e;
  if (!quiet)
    errs() << "spark-compile: " << plan->kernels.size() << " kernels, "
           << plan->tensors.size() << " pack tensors, arena "
           << plan->arenaFloats * 4 / 1024 << " KiB\n";
  if (!quiet && plan->weightsFrom)
    errs() << "spark-compile: "
           << llvm::count_if(
                  plan->tensors,
                  [](const PackTensor &t) { return !t.stored.empty(); })
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
    const double started = steadySeconds();
    if (Error e = writeWeightPack(*plan, folder.file("model.spkw")))
      packFailure = toString(std::move(e));
    packSeconds = steadySeconds() - started;
  });
  const double libraryStarted = steadySeconds();
  Error libraryError =
      buildLibrary(*plan, folder.path(), build.options.executable);
  const double librarySeconds = steadySeconds() - libraryStarted;
  packWriter.join();
  if (libraryError)
    return libraryError;
  if (!packFailure.empty())
    return error(packFailure);
  phases.done(formatv("kernels and library ({0:f1} s) and the weight pack "
                      "({1:f1} s), side by side",
                      librarySeconds, packSeconds));
  uint64_t packBytes = 0;
  sys::fs::file_size(folder.file("model.spkw"), packBytes);
  if (calibration)
    if (Error e =
            writeTextFile(folder.file("calibration.json"), calibration->json))
      return e;
  // The text layer's files travel with the build, so that spark-run OUT
  // --prompt works and an app ships one folder.
  for (const char *name : {"tokenizer.json", "tokenizer_config.json",
                           "chat_template.jinja", "generation_config.json"}) {
    SmallString<256> from(checkpoint.directory());
    sys::path::append(from, name);
    if (!sys::fs::is_regular_file(from))
      continue;
    if (std::error_code ec = sys::fs::copy_file(from, folder.file(name)))
      return error(std::string(from) +
                   ": cannot copy into the build: " + ec.message());
  }
  if (Error e = writeTextFile(folder.file("manifest.json"),
                              emitManifest(*plan, packBytes, build.reproduce)))
    return e;
  if (Error e = folder.commit())
    return e;
  phases.total();
  return Error::success();
}

Error spark::buildS25Bundle(const Checkpoint &checkpoint, const Build &build) {
  const bool quiet = build.options.quiet;
  OutputFolder folder(build.out, quiet);
  if (Error e = folder.create())
    return e;
  if (build.calibration)
    if (Error e = writeTextFile(folder.file("calibration.json"),
                                build.calibration->json))
      return e;
  json::Object parts;
  // The two parts store the same quantized weights (both row-major, the
  // same options): the hexagon part copies the arm64 part's.
  for (TargetKind kind : {TargetKind::Arm64, TargetKind::Hexagon}) {
    const StringRef sub = stringifyTargetKind(kind);
    if (!quiet)
      errs() << "s25: building the " << sub << " part\n";
    Build part = build;
    part.options.target = kind;
    part.out = folder.file(sub);
    if (kind == TargetKind::Hexagon)
      part.options.weightsFrom = folder.file("arm64/model.spkw");
    if (Error e = compileLibrary(checkpoint, part))
      return error(Twine("--target=s25: the ") + sub +
                   " part: " + toString(std::move(e)));
  }
  Expected<TargetInfo> arm64 = targetFor(TargetKind::Arm64);
  if (!arm64)
    return arm64.takeError();
  if (!quiet)
    errs() << "s25: building the runtime for arm64\n";
  if (Error e = buildRuntimeLibrary(*arm64, folder.file("runtime")))
    return e;
  // The FastRPC interface of the DSP part, its DSP-side implementation
  // (which calls the part's entry point through its spark_model.h) and the
  // integration notes: fixed files of the data folder.
  for (auto [from, to] : {std::pair<const char *, const char *>{
                              "spark_dsp.idl", "hexagon/spark_dsp.idl"},
                          {"spark_dsp_imp.c", "hexagon/spark_dsp_imp.c"},
                          {"INTEGRATION.md", "INTEGRATION.md"}}) {
    const std::string source =
        dataPath(std::string("targets/hexagon/s25/") + from);
    if (std::error_code ec = sys::fs::copy_file(source, folder.file(to)))
      return error(source + ": cannot copy into the bundle (" + ec.message() +
                   "); reinstall spark-compile");
  }
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
  if (Error e = writeTextFile(
          folder.file("manifest.json"),
          formatv("{0:2}", json::Value(std::move(manifest))).str() + "\n"))
    return e;
  return folder.commit();
}

Expected<JSONFile> spark::readJSONFile(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return error(path + ": " + buffer.getError().message());
  Expected<json::Value> value = json::parse((*buffer)->getBuffer());
  if (!value)
    return error(path + ": not JSON: " + toString(value.takeError()));
  return JSONFile{(*buffer)->getBuffer().str(), std::move(*value)};
}

TemporaryFolder::~TemporaryFolder() {
  if (!path.empty())
    sys::fs::remove_directories(path);
}
