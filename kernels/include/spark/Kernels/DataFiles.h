//===- DataFiles.h - the files spark-compile builds into libraries --------===//
//
// The runtime's headers and source, spark-run's source, the targets'
// microkernels and the Hexagon libc: compiled for the target at compile
// time. They live in share/spark-compile/ beside the running executable's
// bin/ folder: <prefix>/share/spark-compile once installed, and in a build
// tree build/share/spark-compile (links into the source tree, made when
// CMake configures). Nothing is read from the source tree by absolute path,
// so an installed compiler can be moved.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_KERNELS_DATAFILES_H
#define SPARK_KERNELS_DATAFILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace spark {

/// The folder holding the data files (without checking it).
const std::string &dataDir();

/// dataDir()/relative.
std::string dataPath(llvm::StringRef relative);

/// An error naming the folder when the data files are missing (an
/// incomplete installation), else success.
llvm::Error checkDataFiles();

} // namespace spark

#endif // SPARK_KERNELS_DATAFILES_H
