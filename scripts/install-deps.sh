#!/usr/bin/env bash
# Installs the Debian 12 packages spark-compile builds and tests with.
# Usage: scripts/install-deps.sh [--if-missing]
#   --if-missing  only call apt-get when a package is not installed yet
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ git
  libgtest-dev
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22
  libhalide14-0-dev
  python3 python3-numpy
  # spark-nano's test runs the training script's PyTorch model.
  python3-torch
  # Cross targets: arm64 (cross compiler, qemu) and hexagon (lld, qemu).
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static lld-22
  # The text layer: PCRE2 (split patterns), ICU (normalization), JSON reader.
  libpcre2-dev libicu-dev nlohmann-json3-dev pkg-config
  # examples/phone-agent reads uiautomator XML with expat.
  libexpat1-dev
  # `file` identifies the executables --emit=exe writes (lit tests).
  file
  # Sanitizer runtimes for clang-22: the ASan/UBSan and TSan tests, fuzzing.
  libclang-rt-22-dev
)

if [[ "${1:-}" == "--if-missing" ]]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && exit 0
  echo "spark-compile: installing missing packages: ${missing[*]}"
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  SUDO=(sudo)
fi
"${SUDO[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${PACKAGES[@]}"
