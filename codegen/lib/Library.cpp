//===- Library.cpp - compile kernels and driver into a target's library ---===//
#include "spark/Codegen/Emit.h"

#include "llvm/Object/ArchiveWriter.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

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
    return createStringError(inconvertibleErrorCode(),
                             "%s failed (exit %d%s%s): %s\n%s",
                             what.str().c_str(), rc, message.empty() ? "" : ", ",
                             message.c_str(), command.c_str(), output.c_str());
  }
  return Error::success();
}

Error writeText(StringRef path, StringRef text) {
  std::error_code ec;
  raw_fd_ostream os(path, ec);
  if (ec)
    return createStringError(ec, "%s: %s", path.str().c_str(),
                             ec.message().c_str());
  os << text;
  return Error::success();
}

/// Builds, schedules and compiles one kernel for one variant into `outputs`.
Error compileKernel(const TargetInfo &target, const KernelSpec &spec,
                    const TargetVariant &variant,
                    const std::map<Halide::OutputFileType, std::string> &outputs) {
  std::string symbol = "spark_" + spec.name() + "_" + variant.name;
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

/// Compiles C `source` to `object` with the target's compiler.
Error compileC(const TargetInfo &target, StringRef source, StringRef object,
               ArrayRef<std::string> extraFlags, StringRef what) {
  static const std::string includes[] = {
      "-I" SPARK_RUNTIME_INCLUDE_DIR, "-I" SPARK_HALIDE_INCLUDE_DIR,
      "-I" SPARK_TARGETS_DIR "/common/lib"};
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

} // namespace

Error emitKernelText(const ModelPlan &plan, KernelText kind, StringRef scratchDir,
                     raw_ostream &os) {
  Expected<TargetInfo> target =
      targetFor(plan.options.target, plan.options.amxKernel);
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
  Expected<TargetInfo> targetOrError =
      targetFor(plan.options.target, plan.options.amxKernel);
  if (!targetOrError)
    return targetOrError.takeError();
  const TargetInfo &target = *targetOrError;
  SmallString<128> objDir(dir);
  sys::path::append(objDir, "obj");
  if (std::error_code ec = sys::fs::create_directories(objDir))
    return createStringError(ec, "%s: %s", objDir.c_str(),
                             ec.message().c_str());
  const std::vector<TargetVariant> &variants = target.variants;
  std::vector<std::string> objects;
  size_t total = 0, done = 0;
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants)
      total += target.compilesKernel(variant, spec);
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants) {
      if (!target.compilesKernel(variant, spec))
        continue;
      ++done;
      if (!plan.options.quiet)
        errs() << formatv("[{0}/{1}] kernel {2} ({3})\n", done, total,
                          spec.name(), variant.name);
      std::string symbol = "spark_" + spec.name() + "_" + variant.name;
      std::string object = join(objDir, symbol + ".o");
      if (Error e = compileKernel(target, spec, variant,
                                  {{Halide::OutputFileType::object, object}}))
        return e;
      objects.push_back(object);
    }
  std::string runtime = join(objDir, "halide_runtime.o");
  try {
    Halide::compile_standalone_runtime(runtime, target.runtime);
  } catch (const Halide::Error &e) {
    return createStringError(inconvertibleErrorCode(),
                             "Halide runtime: %s", e.what());
  }
  objects.push_back(runtime);

  // The hand-written microkernels the kernels use: one object per source
  // file, compiled with every flag its kernels need.
  std::map<std::string, std::set<std::string>> microkernelSources;
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants)
      if (const Microkernel *m = target.microkernelFor(variant, spec))
        microkernelSources[m->source].insert(m->flags.begin(), m->flags.end());
  for (const auto &[file, flags] : microkernelSources) {
    std::string object = join(objDir, sys::path::stem(file).str() + ".o");
    std::vector<std::string> flagList(flags.begin(), flags.end());
    if (Error e = compileC(target, join(target.microkernelDir, file), object,
                           flagList, "compiling the microkernel " + file))
      return e;
    objects.push_back(object);
  }

  std::string driverSource = join(objDir, "spark_model_driver.c");
  std::string driverObject = join(objDir, "spark_model_driver.o");
  if (Error e = writeText(driverSource, emitDriverSource(plan, target)))
    return e;
  if (!plan.options.quiet)
    errs() << "compiling the step driver\n";
  if (Error e = compileC(target, driverSource, driverObject, {},
                         "compiling the generated step driver"))
    return e;
  objects.push_back(driverObject);

  // The static library applications link.
  std::vector<NewArchiveMember> members;
  for (const std::string &object : objects) {
    Expected<NewArchiveMember> member =
        NewArchiveMember::getFile(object, /*Deterministic=*/true);
    if (!member)
      return member.takeError();
    member->MemberName = sys::path::filename(object); // not the temp path
    members.push_back(std::move(*member));
  }
  if (Error e = writeArchive(join(dir, "libspark_model.a"), members,
                             SymtabWritingMode::NormalSymtab,
                             object::Archive::K_GNU, /*Deterministic=*/true,
                             /*Thin=*/false))
    return e;

  // Native targets: the shared object spark-run, spark-bench and
  // spark-fidelity load.
  if (target.native) {
    std::vector<StringRef> link = {target.cc, "-shared", "-o"};
    std::string shared = join(dir, "libspark_model.so");
    link.push_back(shared);
    for (const std::string &object : objects)
      link.push_back(object);
    for (StringRef lib : {"-lpthread", "-ldl", "-lm"})
      link.push_back(lib);
    if (Error e = run(link, "linking libspark_model.so"))
      return e;
  }

  // --emit=exe: the runner and the runtime built for the target, linked
  // statically with the model.
  if (executable) {
    if (!plan.options.quiet)
      errs() << "linking spark-run for " << target.name << "\n";
    std::string runnerObject = join(objDir, "spark_run.o");
    std::string runtimeObject = join(objDir, "spark_runtime.o");
    if (Error e = compileC(target, SPARK_RUNNER_SOURCE, runnerObject,
                           {"-DSPARK_RUN_STATIC_MODEL"}, "compiling spark-run"))
      return e;
    if (Error e = compileC(target, SPARK_RUNTIME_SOURCE, runtimeObject, {},
                           "compiling the runtime"))
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
    for (const std::string &object : objects)
      link.push_back(object);
    for (const std::string &lib : target.exeLibs)
      link.push_back(lib);
    if (Error e = run(link, "linking spark-run"))
      return e;
  }
  sys::fs::remove_directories(objDir);
  return Error::success();
}

} // namespace spark
