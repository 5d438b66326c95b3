//===- Bundle.cpp - the pieces of the --target=s25 bundle ------------------===//
//
// The runtime built for a cross target, and the FastRPC interface, DSP-side
// implementation and integration notes that let an Android app run the
// hexagon part on the DSP. The model libraries themselves come from
// buildLibrary().
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Emit.h"
#include "spark/Kernels/DataFiles.h"

#include "llvm/Object/ArchiveWriter.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

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
      return createStringError(ec, "%s: %s", from.c_str(), ec.message().c_str());
  }
  SmallString<256> object(dir), archive(dir);
  sys::path::append(object, "runtime.o");
  sys::path::append(archive, "libspark_runtime.a");
  std::vector<StringRef> args = {target.cc, "-std=gnu11", "-O2"};
  for (const std::string &flag : target.cflags)
    args.push_back(flag);
  std::string includeFlag = "-I" + dataPath("runtime/include");
  std::string source = dataPath("runtime/lib/runtime.c");
  for (StringRef a : {StringRef(includeFlag), StringRef("-c"), StringRef(source),
                      StringRef("-o"), StringRef(object)})
    args.push_back(a);
  std::string message;
  if (sys::ExecuteAndWait(target.cc, args, std::nullopt, {}, 0, 0, &message))
    return createStringError(inconvertibleErrorCode(),
                             "compiling the runtime for %s failed%s%s",
                             stringifyTargetKind(target.kind).data(),
                             message.empty() ? "" : ": ", message.c_str());
  Expected<NewArchiveMember> member =
      NewArchiveMember::getFile(object, /*Deterministic=*/true);
  if (!member)
    return member.takeError();
  member->MemberName = "runtime.o";
  std::vector<NewArchiveMember> members;
  members.push_back(std::move(*member));
  if (Error e = writeArchive(archive, members, SymtabWritingMode::NormalSymtab,
                             object::Archive::K_GNU, /*Deterministic=*/true,
                             /*Thin=*/false))
    return e;
  sys::fs::remove(object);
  return Error::success();
}

} // namespace spark
