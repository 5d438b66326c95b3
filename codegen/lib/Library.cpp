//===- Library.cpp - compile kernels and driver into a target's library ---===//
#include "spark/Codegen/Emit.h"
#include "spark/Kernels/DataFiles.h"

#include "llvm/ObjCopy/ConfigManager.h"
#include "llvm/ObjCopy/ObjCopy.h"
#include "llvm/Object/ArchiveWriter.h"
#include "llvm/Object/Binary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <map>
#include <set>

using namespace llvm;

namespace spark {

namespace {

std::string join(StringRef dir, StringRef file) {
  SmallString<256> path(dir);
  sys::path::append(path, file);
  return std::string(path);
}

/// Runs a compiler or linker. Its diagnostics are kept out of the user's
/// way (a cross linker warns about dlopen in static programs, for one) and
/// shown only when it fails.
Error run(ArrayRef<StringRef> argv, StringRef what) {
  SmallString<128> log;
  if (std::error_code ec =
          sys::fs::createTemporaryFile("spark-compile-tool", "log", log))
    return createStringError(ec, "cannot create a temporary file: %s",
                             ec.message().c_str());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  std::string message;
  int rc = sys::ExecuteAndWait(argv[0], argv, std::nullopt, redirects, 0, 0,
                               &message);
  std::string output;
  if (auto text = MemoryBuffer::getFile(log, /*IsText=*/true))
    output = (*text)->getBuffer().str();
  sys::fs::remove(log);
  if (rc != 0) {
    std::string command;
    for (StringRef a : argv)
      command += a.str() + " ";
    return createStringError(
        inconvertibleErrorCode(), "%s failed (exit %d%s%s): %s\n%s",
        what.str().c_str(), rc, message.empty() ? "" : ", ", message.c_str(),
        command.c_str(), output.c_str());
  }
  return Error::success();
}

/// Builds, schedules and compiles one kernel for one variant into `outputs`.
Error compileKernel(
    const TargetInfo &target, const KernelSpec &spec,
    const TargetVariant &variant,
    const std::map<Halide::OutputFileType, std::string> &outputs) {
  std::string symbol = kernelSymbol(spec, variant.name);
  try {
    KernelAlgorithm kernel = buildKernel(spec, variant.matrixTiles);
    target.schedule(kernel, variant);
    Halide::Pipeline pipeline(kernel.output);
    pipeline.compile_to(outputs, kernel.arguments, symbol, variant.halide);
  } catch (const Halide::Error &e) {
    return createStringError(inconvertibleErrorCode(),
                             "Halide could not compile kernel %s for %s: %s",
                             spec.name().c_str(), variant.name.c_str(),
                             e.what());
  }
  return Error::success();
}

/// Whether --cflags asks for the sanitizer `name` ("address", "thread").
bool sanitizes(const BuildOptions &options, StringRef name) {
  for (StringRef flag : options.cflags)
    if (flag.consume_front("-fsanitize=")) {
      SmallVector<StringRef> names;
      flag.split(names, ',');
      if (llvm::is_contained(names, name))
        return true;
    }
  return false;
}

/// --cflags as our C is compiled with them: ASan's dead-strippable globals
/// metadata does not survive linking the library into one object (its
/// registration faults), so ASan builds use the plain kind.
std::vector<std::string> userCFlags(const BuildOptions &options) {
  std::vector<std::string> flags = options.cflags;
  if (sanitizes(options, "address"))
    flags.push_back("-fno-sanitize-address-globals-dead-stripping");
  return flags;
}

/// Links `objects` into the one relocatable object `out` and makes every
/// symbol in it local but `entryPoint`: the kernels, microkernels, driver
/// and Halide runtime become private to the library, so a program can link
/// several model libraries (each with its own Halide runtime and thread
/// pool) as long as their entry points differ.
Error linkPrivateObject(ArrayRef<std::string> objects, StringRef entryPoint,
                        StringRef out) {
  ErrorOr<std::string> lld = sys::findProgramByName("ld.lld-22");
  if (!lld)
    lld = sys::findProgramByName("ld.lld", {"/usr/lib/llvm-22/bin"});
  if (!lld)
    return createStringError(lld.getError(),
                             "ld.lld not found (Debian package lld-22); it "
                             "links the library's objects into one");
  std::string combined = (out + ".all.o").str();
  std::vector<StringRef> args = {*lld, "-r", "-o", combined};
  for (const std::string &object : objects)
    args.push_back(object);
  if (Error e = run(args, "linking the library's objects into one"))
    return e;
  objcopy::ConfigManager config;
  config.Common.InputFilename = combined;
  config.Common.OutputFilename = out;
  if (Error e = config.Common.SymbolsToKeepGlobal.addMatcher(
          objcopy::NameOrPattern::create(entryPoint,
                                         objcopy::MatchStyle::Literal,
                                         [](Error e) { return e; })))
    return e;
  Expected<object::OwningBinary<object::Binary>> binary =
      object::createBinary(combined);
  if (!binary)
    return binary.takeError();
  std::error_code ec;
  raw_fd_ostream os(out, ec);
  if (ec)
    return createStringError(ec, "%s: %s", out.str().c_str(),
                             ec.message().c_str());
  if (Error e =
          objcopy::executeObjcopyOnBinary(config, *binary->getBinary(), os))
    return createStringError(inconvertibleErrorCode(),
                             "making the library's symbols private: %s",
                             toString(std::move(e)).c_str());
  sys::fs::remove(combined);
  return Error::success();
}

} // namespace

Error writeTextFile(StringRef path, StringRef text) {
  return writeToOutput(path, [&](raw_ostream &os) {
    os << text;
    return Error::success();
  });
}

Error compileC(const TargetInfo &target, StringRef source, StringRef object,
               ArrayRef<std::string> extraFlags, StringRef what) {
  const std::string includes[] = {"-I" + dataPath("runtime/include"),
                                  "-I" SPARK_HALIDE_INCLUDE_DIR,
                                  "-I" + dataPath("targets/common/lib")};
  std::vector<StringRef> args = {target.cc, "-std=gnu11", "-O2", "-Wall",
                                 "-Werror=implicit-function-declaration"};
  for (const std::string &flag : target.cflags)
    args.push_back(flag);
  for (const std::string &flag : extraFlags)
    args.push_back(flag);
  for (const std::string &include : includes)
    args.push_back(include);
  for (StringRef a : {StringRef("-c"), source, StringRef("-o"), object})
    args.push_back(a);
  return run(args, what);
}

Error archiveObject(StringRef object, StringRef memberName, StringRef archive) {
  Expected<NewArchiveMember> member =
      NewArchiveMember::getFile(object, /*Deterministic=*/true);
  if (!member)
    return member.takeError();
  member->MemberName = memberName; // not the object's temporary path
  std::vector<NewArchiveMember> members;
  members.push_back(std::move(*member));
  return writeArchive(archive, members, SymtabWritingMode::NormalSymtab,
                      object::Archive::K_GNU, /*Deterministic=*/true,
                      /*Thin=*/false);
}

Error emitKernelText(const ModelPlan &plan, KernelText kind,
                     StringRef scratchDir, raw_ostream &os) {
  Expected<TargetInfo> target = targetFor(
      plan.options.target, plan.options.amxKernel, plan.options.halideKernels);
  if (!target)
    return target.takeError();
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : target->variants) {
      if (!target->compilesKernel(variant, spec))
        continue;
      std::string file = join(scratchDir, "kernel.txt");
      Halide::OutputFileType type = kind == KernelText::HalideStatements
                                        ? Halide::OutputFileType::stmt
                                        : Halide::OutputFileType::assembly;
      if (Error e = compileKernel(*target, spec, variant, {{type, file}}))
        return e;
      auto text = MemoryBuffer::getFile(file, /*IsText=*/true);
      if (!text)
        return createStringError(text.getError(), "%s: %s", file.c_str(),
                                 text.getError().message().c_str());
      os << "// ===== kernel " << spec.name() << " (" << variant.name
         << ") =====\n"
         << (*text)->getBuffer() << "\n";
      sys::fs::remove(file);
    }
  return Error::success();
}

Error buildLibrary(const ModelPlan &plan, StringRef dir, bool executable) {
  Expected<TargetInfo> targetOrError = targetFor(
      plan.options.target, plan.options.amxKernel, plan.options.halideKernels);
  if (!targetOrError)
    return targetOrError.takeError();
  const TargetInfo &target = *targetOrError;
  SmallString<128> objDir(dir);
  sys::path::append(objDir, "obj");
  if (std::error_code ec = sys::fs::create_directories(objDir))
    return createStringError(ec, "%s: %s", objDir.c_str(),
                             ec.message().c_str());
  const std::vector<TargetVariant> &variants = target.variants;

  // The C the library needs (the microkernels, the thread pool and the
  // generated step driver) compiles in the background, one process per
  // core, while this thread compiles the Halide kernels: the driver alone
  // takes clang several seconds.
  struct CJob {
    std::string source, object, what;
    std::vector<std::string> flags;
    std::string failure; // compileC's error message, if it failed
  };
  std::vector<CJob> cJobs;
  // The hand-written microkernels the kernels use: one object per source
  // file, compiled with every flag its kernels need.
  std::map<std::string, std::set<std::string>> microkernelSources;
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants)
      if (const Microkernel *m = target.microkernelFor(variant, spec))
        microkernelSources[m->source].insert(m->flags.begin(), m->flags.end());
  for (const auto &[file, flags] : microkernelSources)
    cJobs.push_back({join(target.microkernelDir, file),
                     join(objDir, sys::path::stem(file).str() + ".o"),
                     "compiling the microkernel " + file,
                     std::vector<std::string>(flags.begin(), flags.end()), ""});
  if (target.threadPool)
    cJobs.push_back({dataPath("targets/common/lib/thread_pool.c"),
                     join(objDir, "thread_pool.o"), "compiling the thread pool",
                     userCFlags(plan.options), ""});
  std::string driverSource = join(objDir, "spark_model_driver.c");
  Expected<std::string> driver = emitDriverSource(plan, target);
  if (!driver)
    return driver.takeError();
  if (Error e = writeTextFile(driverSource, *driver))
    return e;
  // The model's header, one of the library's files: the driver includes it
  // (the entry point's prototype).
  Expected<std::string> header = emitModelHeader(plan);
  if (!header)
    return header.takeError();
  if (Error e = writeTextFile(join(dir, "spark_model.h"), *header))
    return e;
  std::vector<std::string> driverFlags = userCFlags(plan.options);
  driverFlags.push_back("-I" + target.microkernelDir); // dispatchHeader
  driverFlags.push_back("-I" + dir.str());             // spark_model.h
  cJobs.push_back({driverSource, join(objDir, "spark_model_driver.o"),
                   "compiling the generated step driver", driverFlags, ""});
  if (!plan.options.quiet)
    errs() << formatv("compiling the step driver and {0} other C file(s) in "
                      "the background\n",
                      cJobs.size() - 1);
  DefaultThreadPool pool(hardware_concurrency());
  for (CJob &job : cJobs)
    pool.async([&target, &job] {
      if (Error e =
              compileC(target, job.source, job.object, job.flags, job.what))
        job.failure = toString(std::move(e));
    });
  // The pool (declared after cJobs) waits for its jobs when it goes away;
  // the C errors are reported before the kernels'.
  auto finishCJobs = [&]() -> Error {
    pool.wait();
    Error all = Error::success();
    for (const CJob &job : cJobs)
      if (!job.failure.empty())
        all = joinErrors(
            std::move(all),
            createStringError(inconvertibleErrorCode(), job.failure));
    return all;
  };

  std::vector<std::string> objects;
  size_t total = 0, done = 0;
  const auto started = std::chrono::steady_clock::now();
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants)
      total += target.compilesKernel(variant, spec);
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants) {
      if (!target.compilesKernel(variant, spec))
        continue;
      ++done;
      if (!plan.options.quiet) {
        // The time left, from the kernels done so far.
        double elapsed = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - started)
                             .count();
        std::string left =
            done > 1
                ? formatv(", about {0:f0} s left",
                          elapsed / double(done - 1) * double(total - done + 1))
                      .str()
                : std::string();
        errs() << formatv("[{0}/{1}] kernel {2} ({3}){4}\n", done, total,
                          spec.name(), variant.name, left);
      }
      std::string symbol = kernelSymbol(spec, variant.name);
      std::string object = join(objDir, symbol + ".o");
      if (Error e = compileKernel(target, spec, variant,
                                  {{Halide::OutputFileType::object, object}}))
        return joinErrors(finishCJobs(), std::move(e));
      objects.push_back(object);
    }
  std::string runtime = join(objDir, "halide_runtime.o");
  // Sanitized builds (--cflags): the Halide runtime with its hooks for the
  // sanitizer (its thread pool's own synchronization, told to TSan).
  Halide::Target runtimeTarget = target.runtime;
  if (sanitizes(plan.options, "thread"))
    runtimeTarget = runtimeTarget.with_feature(Halide::Target::TSAN);
  try {
    Halide::compile_standalone_runtime(runtime, runtimeTarget);
  } catch (const Halide::Error &e) {
    return joinErrors(finishCJobs(),
                      createStringError(inconvertibleErrorCode(),
                                        "Halide runtime: %s", e.what()));
  }
  objects.push_back(runtime);
  if (!plan.options.quiet)
    errs() << "waiting for the C compiles\n";
  if (Error e = finishCJobs())
    return e;
  // In the order the objects had when they were compiled one by one.
  for (const CJob &job : cJobs)
    objects.push_back(job.object);

  // The static library applications link: one object whose only global
  // symbol is the entry point.
  std::string privateObject = join(objDir, "spark_model.o");
  if (Error e =
          linkPrivateObject(objects, plan.options.entryPoint, privateObject))
    return e;
  if (Error e = archiveObject(privateObject, "spark_model.o",
                              join(dir, "libspark_model.a")))
    return e;

  // Native targets: the shared object spark-run, spark-bench and
  // spark-fidelity load.
  if (target.native) {
    std::vector<StringRef> link = {target.cc, "-shared", "-o"};
    std::string shared = join(dir, "libspark_model.so");
    link.push_back(shared);
    link.push_back(privateObject);
    for (const std::string &flag : plan.options.cflags)
      link.push_back(flag);
    // The tools find every build's definition under the default name.
    std::string alias =
        "-Wl,--defsym=spark_model_definition=" + plan.options.entryPoint;
    if (plan.options.entryPoint != "spark_model_definition")
      link.push_back(alias);
    // Never unmapped by dlclose: the thread pool's workers (thread_pool.c)
    // live as long as the process, in this object's code.
    link.push_back("-Wl,-z,nodelete");
    for (StringRef lib : {"-lpthread", "-ldl", "-lm"})
      link.push_back(lib);
    if (Error e = run(link, "linking libspark_model.so"))
      return e;
  }

  // --emit=exe: the runner and the runtime built for the target, linked
  // statically with the model.
  if (executable) {
    if (!plan.options.quiet)
      errs() << "linking spark-run for " << stringifyTargetKind(target.kind)
             << "\n";
    std::string runnerObject = join(objDir, "spark_run.o");
    std::string runtimeObject = join(objDir, "spark_runtime.o");
    std::vector<std::string> runnerFlags = userCFlags(plan.options);
    runnerFlags.push_back("-DSPARK_RUN_STATIC_MODEL");
    runnerFlags.push_back("-Dspark_model_definition=" +
                          plan.options.entryPoint);
    if (Error e = compileC(target, dataPath("tools/spark-run/spark-run.c"),
                           runnerObject, runnerFlags, "compiling spark-run"))
      return e;
    if (Error e =
            compileC(target, dataPath("runtime/lib/runtime.c"), runtimeObject,
                     userCFlags(plan.options), "compiling the runtime"))
      return e;
    std::vector<std::string> exeObjects = {runnerObject, runtimeObject};
    for (const std::string &source : target.exeSources) {
      exeObjects.push_back(join(objDir, sys::path::stem(source).str() + ".o"));
      if (Error e = compileC(target, source, exeObjects.back(), {},
                             "compiling " + sys::path::filename(source).str()))
        return e;
    }
    std::string exe = join(dir, "spark-run");
    std::vector<StringRef> link = {target.cc};
    for (const std::string &flag : target.exeFlags)
      link.push_back(flag);
    link.push_back("-o");
    link.push_back(exe);
    for (const std::string &object : exeObjects)
      link.push_back(object);
    link.push_back(privateObject);
    for (const std::string &flag : plan.options.cflags)
      link.push_back(flag);
    for (const std::string &lib : target.exeLibs)
      link.push_back(lib);
    if (Error e = run(link, "linking spark-run"))
      return e;
  }
  sys::fs::remove_directories(objDir);
  return Error::success();
}

} // namespace spark
