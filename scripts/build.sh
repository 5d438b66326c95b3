#!/usr/bin/env bash
# Installs missing packages, configures and builds into build/ (or $SPARK_BUILD_DIR).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SPARK_BUILD_DIR:-$ROOT/build}"

"$ROOT/scripts/install-deps.sh" --if-missing
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD"
