//===- Bundle.cpp - the pieces of the --target=s25 bundle -----------------===//
//
// The runtime built for a cross target, and the FastRPC interface, DSP-side
// implementation and integration notes that let an Android app run the
// hexagon part on the DSP. The model libraries themselves come from
// buildLibrary().
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Emit.h"
#include "spark/Kernels/DataFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace spark {

Error buildRuntimeLibrary(const TargetInfo &target, StringRef dir) {
  SmallString<256> include(dir);
  sys::path::append(include, "include", "spark");
  if (std::error_code ec = sys::fs::create_directories(include))
    return createStringError(ec, "%s: %s", include.c_str(),
                             ec.message().c_str());
  for (const char *header : {"runtime.h", "model_abi.h", "pack_format.h"}) {
    SmallString<256> from(dataPath("runtime/include")), to(include);
    sys::path::append(from, "spark", header);
    sys::path::append(to, header);
    if (std::error_code ec = sys::fs::copy_file(from, to))
      return createStringError(ec, "%s: %s", from.c_str(),
                               ec.message().c_str());
  }
  SmallString<256> object(dir), archive(dir);
  sys::path::append(object, "runtime.o");
  sys::path::append(archive, "libspark_runtime.a");
  if (Error e = compileC(target, dataPath("runtime/lib/runtime.c"), object, {},
                         "compiling the runtime for " +
                             stringifyTargetKind(target.kind).str()))
    return e;
  if (Error e = archiveObject(object, "runtime.o", archive))
    return e;
  sys::fs::remove(object);
  return Error::success();
}

} // namespace spark
