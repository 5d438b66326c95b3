# Finds Debian's MLIR/LLVM 22, Halide 14, GoogleTest and Python 3 with NumPy.
# TOOLCHAIN.md records why each step is done the way it is.

set(SPARK_LLVM_PREFIX /usr/lib/llvm-22 CACHE PATH "Prefix of the LLVM/MLIR 22 install")
if(NOT MLIR_DIR)
  set(MLIR_DIR ${SPARK_LLVM_PREFIX}/lib/cmake/mlir)
endif()
if(NOT LLVM_DIR)
  set(LLVM_DIR ${SPARK_LLVM_PREFIX}/lib/cmake/llvm)
endif()

# MLIR's version file wants major.minor; a bare "22" does not match.
find_package(MLIR 22.1 REQUIRED CONFIG)
message(STATUS "Using MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")

# The config names a bare mlir-tblgen, which is not on PATH on Debian.
set(MLIR_TABLEGEN_EXE ${LLVM_TOOLS_BINARY_DIR}/mlir-tblgen)

list(APPEND CMAKE_MODULE_PATH ${MLIR_CMAKE_DIR} ${LLVM_CMAKE_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
add_definitions(${LLVM_DEFINITIONS})
if(NOT LLVM_ENABLE_RTTI)
  set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -fno-rtti")
endif()

set(SPARK_LLVM_TOOLS_DIR ${LLVM_TOOLS_BINARY_DIR})

# Halide 14 brings LLVM 14's CMake package along and overwrites every LLVM_*
# variable: keep ours and put them back afterwards, or LLVM 14 headers shadow 22's.
get_cmake_property(_spark_vars VARIABLES)
set(_spark_saved_llvm_vars)
foreach(_v IN LISTS _spark_vars)
  if(_v MATCHES "^(LLVM|MLIR)_")
    set(_spark_saved_${_v} "${${_v}}")
    list(APPEND _spark_saved_llvm_vars ${_v})
  endif()
endforeach()
find_package(Halide 14 CONFIG QUIET)
foreach(_v IN LISTS _spark_saved_llvm_vars)
  set(${_v} "${_spark_saved_${_v}}")
endforeach()
if(NOT Halide_FOUND)
  message(FATAL_ERROR "Halide 14 not found: install libhalide14-0-dev")
endif()
message(STATUS "Using Halide ${Halide_VERSION}")
find_path(SPARK_HALIDE_INCLUDE_DIR HalideRuntime.h PATHS /usr/include/halide14 REQUIRED)

# spark-compile drives clang-22 to compile the generated step driver and link
# the host model's shared object.
find_program(SPARK_CLANG clang PATHS ${LLVM_TOOLS_BINARY_DIR} NO_DEFAULT_PATH REQUIRED)

# --target=arm64 compiles C (driver, microkernels, runtime, runner) with
# Debian's AArch64 cross compiler and links static executables with it; the
# tests run them under qemu-aarch64-static. Optional: without them the arm64
# target reports what to install.
find_program(SPARK_ARM64_CC aarch64-linux-gnu-gcc)
if(NOT SPARK_ARM64_CC)
  set(SPARK_ARM64_CC "")
  message(STATUS "aarch64-linux-gnu-gcc not found: --target=arm64 unavailable "
                 "(apt-get install gcc-aarch64-linux-gnu)")
endif()
find_program(SPARK_QEMU_AARCH64 qemu-aarch64-static)

# --target=hexagon compiles C freestanding with clang-22 (its own headers from
# the resource dir, then targets/hexagon/libc) and links with lld.
execute_process(COMMAND ${SPARK_CLANG} -print-resource-dir
                OUTPUT_VARIABLE SPARK_CLANG_RESOURCE_DIR
                OUTPUT_STRIP_TRAILING_WHITESPACE)
find_program(SPARK_HEXAGON_LD NAMES ld.lld PATHS ${LLVM_TOOLS_BINARY_DIR}
             NO_DEFAULT_PATH)
if(NOT SPARK_HEXAGON_LD)
  find_program(SPARK_HEXAGON_LD NAMES ld.lld-22 ld.lld-14 ld.lld)
endif()
if(NOT SPARK_HEXAGON_LD)
  set(SPARK_HEXAGON_LD "")
  message(STATUS "ld.lld not found: --target=hexagon unavailable "
                 "(apt-get install lld-22)")
endif()

find_package(GTest REQUIRED)

# The reference and lit need Debian's python3 (with python3-numpy), not a
# virtualenv or pyenv interpreter that happens to be first on PATH.
set(SPARK_PYTHON /usr/bin/python3 CACHE FILEPATH "Python 3 with NumPy for tests")
