//===- HostLibrary.cpp - compile kernels and driver into the host library -===//
#include "spark/Codegen/Emit.h"

#include "spark/Targets/X86.h"

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

Error run(ArrayRef<StringRef> argv, StringRef what) {
  std::string message;
  int rc = sys::ExecuteAndWait(argv[0], argv, std::nullopt, {}, 0, 0, &message);
  if (rc != 0) {
    std::string command;
    for (StringRef a : argv)
      command += a.str() + " ";
    return createStringError(inconvertibleErrorCode(),
                             "%s failed (exit %d%s%s): %s", what.str().c_str(),
                             rc, message.empty() ? "" : ", ", message.c_str(),
                             command.c_str());
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
Error compileKernel(const KernelSpec &spec, const TargetVariant &variant,
                    const std::map<Halide::OutputFileType, std::string> &outputs) {
  std::string symbol = "spark_" + spec.name() + "_" + variant.name;
  try {
    KernelAlgorithm kernel = buildKernel(spec, variant.matrixTiles);
    scheduleX86(kernel, variant);
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

} // namespace

Error emitKernelText(const ModelPlan &plan, KernelText kind, StringRef scratchDir,
                     raw_ostream &os) {
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : x86Variants(plan.options.target, plan.options.amxKernel)) {
      if (!compilesKernel(variant, spec))
        continue;
      std::string file = join(scratchDir, "kernel.txt");
      Halide::OutputFileType type = kind == KernelText::HalideStatements
                                        ? Halide::OutputFileType::stmt
                                        : Halide::OutputFileType::assembly;
      if (Error e = compileKernel(spec, variant, {{type, file}}))
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

Error buildHostLibrary(const ModelPlan &plan, StringRef dir) {
  SmallString<128> objDir(dir);
  sys::path::append(objDir, "obj");
  if (std::error_code ec = sys::fs::create_directories(objDir))
    return createStringError(ec, "%s: %s", objDir.c_str(),
                             ec.message().c_str());
  std::vector<TargetVariant> variants = x86Variants(plan.options.target, plan.options.amxKernel);
  std::vector<std::string> objects;
  size_t total = 0, done = 0;
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants)
      total += compilesKernel(variant, spec);
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants) {
      if (!compilesKernel(variant, spec))
        continue;
      ++done;
      if (!plan.options.quiet)
        errs() << formatv("[{0}/{1}] kernel {2} ({3})\n", done, total,
                          spec.name(), variant.name);
      std::string symbol = "spark_" + spec.name() + "_" + variant.name;
      std::string object = join(objDir, symbol + ".o");
      if (Error e = compileKernel(spec, variant,
                                  {{Halide::OutputFileType::object, object}}))
        return e;
      objects.push_back(object);
    }
  std::string runtime = join(objDir, "halide_runtime.o");
  try {
    Halide::compile_standalone_runtime(runtime, x86RuntimeTarget());
  } catch (const Halide::Error &e) {
    return createStringError(inconvertibleErrorCode(),
                             "Halide runtime: %s", e.what());
  }
  objects.push_back(runtime);

  // The hand-written microkernels the kernels use.
  // One object per source file, compiled with every flag its kernels need.
  std::map<std::string, std::set<std::string>> microkernelSources;
  for (const KernelSpec &spec : plan.kernels)
    for (const TargetVariant &variant : variants)
      if (const Microkernel *m = microkernelFor(variant, spec))
        microkernelSources[m->source].insert(m->flags.begin(), m->flags.end());
  for (const auto &[file, flags] : microkernelSources) {
    std::string object = join(objDir, sys::path::stem(file).str() + ".o");
    std::string source = join(SPARK_MICROKERNEL_DIR, file);
    std::string halideInclude = "-I" SPARK_HALIDE_INCLUDE_DIR;
    std::vector<StringRef> args = {SPARK_CLANG, "-std=c11", "-O2", "-fPIC"};
    for (const std::string &flag : flags)
      args.push_back(flag);
    for (StringRef a : {StringRef("-c"), StringRef(halideInclude),
                        StringRef(source), StringRef("-o"), StringRef(object)})
      args.push_back(a);
    if (Error e = run(args, "compiling the microkernel " + file))
      return e;
    objects.push_back(object);
  }

  std::string driverSource = join(objDir, "spark_model_driver.c");
  std::string driverObject = join(objDir, "spark_model_driver.o");
  if (Error e = writeText(driverSource, emitDriverSource(plan, variants)))
    return e;
  if (!plan.options.quiet)
    errs() << "compiling the step driver\n";
  std::string runtimeInclude = "-I" SPARK_RUNTIME_INCLUDE_DIR;
  std::string halideInclude = "-I" SPARK_HALIDE_INCLUDE_DIR;
  if (Error e = run({SPARK_CLANG, "-std=c11", "-O2", "-fPIC", "-Wall",
                     "-Werror=implicit-function-declaration", "-c",
                     runtimeInclude, halideInclude, driverSource, "-o",
                     driverObject},
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

  // The shared object spark-run and spark-bench load.
  std::vector<StringRef> link = {SPARK_CLANG, "-shared", "-o"};
  std::string shared = join(dir, "libspark_model.so");
  link.push_back(shared);
  for (const std::string &object : objects)
    link.push_back(object);
  link.push_back("-lpthread");
  link.push_back("-ldl");
  link.push_back("-lm");
  if (Error e = run(link, "linking libspark_model.so"))
    return e;
  sys::fs::remove_directories(objDir);
  return Error::success();
}

} // namespace spark
