#!/usr/bin/env bash
# The main job on the embedded default: build, generate the tiny checkpoint,
# and compile it (today: print its imported spark IR).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SPARK_BUILD_DIR:-$ROOT/build}"

"$ROOT/scripts/build.sh"
CKPT="$BUILD/demo/tiny"
rm -rf "$CKPT"
"$BUILD/bin/spark-mkmodel" --preset tiny -o "$CKPT"
"$BUILD/bin/spark-compile" "$CKPT" --emit=mlir
