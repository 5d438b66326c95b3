#!/usr/bin/env bash
# The runtime, the text layer, spark-run and their tests under AddressSanitizer
# and UBSan: builds them with clang-22 in build-asan/ (CMake option
# SPARK_SANITIZE), then runs the text and kernel unit tests and end-to-end
# cases with the sanitized spark-run, runtime and test programs. Models are
# compiled by the main build's spark-compile (scripts/build.sh), with the
# step driver sanitized too (--cflags). Any sanitizer report fails the run.
# (ThreadSanitizer: ctest's e2e/test_parallel_sessions_under_tsan.)
# Usage: scripts/sanitize.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SPARK_SANITIZE_BUILD_DIR:-$ROOT/build-asan}"
MAIN="${SPARK_BUILD_DIR:-$ROOT/build}"
SANITIZERS=address,undefined

"$ROOT/scripts/install-deps.sh" --if-missing
if [[ ! -x "$MAIN/bin/spark-compile" ]]; then
  echo "sanitize.sh: $MAIN/bin/spark-compile not found; run scripts/build.sh first" >&2
  exit 1
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSPARK_SANITIZE="$SANITIZERS" \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 > /dev/null
# Only what runs here: none of it links MLIR or Halide.
cmake --build "$BUILD" --target spark-run spark-texttests spark-kerneltests spark_runtime

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1
status=0
step() {
  echo "== $*"
  if ! "$@"; then
    echo "FAILED: $*"
    status=1
  fi
}
step "$BUILD/bin/spark-texttests" --gtest_brief=1
step "$BUILD/bin/spark-kerneltests" --gtest_brief=1
export SPARK_BIN_DIR="$BUILD/bin" SPARK_LIB_DIR="$BUILD/lib" SPARK_SOURCE_DIR="$ROOT"
export SPARK_COMPILER_DIR="$MAIN/bin" SPARK_TEST_CC=clang-22
export SPARK_TEST_CFLAGS="-fsanitize=$SANITIZERS -fno-sanitize-recover=all"
step /usr/bin/python3 "$ROOT/test/e2e/test_e2e.py" \
  EndToEnd.test_mixed_layers_tied_gate_chunks_and_threads \
  EndToEnd.test_w4a16_build_of_mini EndToEnd.test_w8a8_build_of_mini \
  EndToEnd.test_runtime_c_api
step /usr/bin/python3 "$ROOT/test/e2e/test_nano.py" \
  SparkNano.test_agent_turn_through_text SparkNano.test_chat_keeps_the_session
if [[ $status -eq 0 ]]; then
  echo "sanitize.sh: clean ($SANITIZERS)"
fi
exit $status
