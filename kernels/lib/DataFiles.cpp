//===- DataFiles.cpp - where the files compiled into libraries live -------===//
#include "spark/Kernels/DataFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace spark {

const std::string &dataDir() {
  static const std::string dir = [] {
    // The running executable (/proc/self/exe on Linux), then ../share.
    std::string exe = sys::fs::getMainExecutable(nullptr, (void *)&dataDir);
    SmallString<256> path(sys::path::parent_path(sys::path::parent_path(exe)));
    sys::path::append(path, "share", "spark-compile");
    return std::string(path);
  }();
  return dir;
}

std::string dataPath(StringRef relative) {
  SmallString<256> path(dataDir());
  sys::path::append(path, relative);
  return std::string(path);
}

Error checkDataFiles() {
  for (const char *file :
       {"runtime/lib/runtime.c", "runtime/include/spark/runtime.h",
        "tools/spark-run/spark-run.c", "tools/loader/options.h",
        "targets/common/lib/microkernel_support.h",
        "targets/common/lib/driver_support.h",
        "targets/common/lib/spark_model.h.in"})
    if (!sys::fs::exists(dataPath(file)))
      return createStringError(
          inconvertibleErrorCode(),
          "%s: missing (spark-compile's data files belong in %s, beside its "
          "bin/ folder: reinstall, or rebuild the build tree)",
          dataPath(file).c_str(), dataDir().c_str());
  return Error::success();
}

} // namespace spark
