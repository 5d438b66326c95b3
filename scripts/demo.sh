#!/usr/bin/env bash
# The main job on the embedded default: build, generate the tiny checkpoint,
# compile it for this machine, run it, and show the reference's answer.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SPARK_BUILD_DIR:-$ROOT/build}"
BIN="$BUILD/bin"

"$ROOT/scripts/build.sh"
DEMO="$BUILD/demo"
rm -rf "$DEMO/tiny"
mkdir -p "$DEMO"
"$BIN/spark-mkmodel" --preset tiny --dtype f32 -o "$DEMO/tiny"
"$BIN/spark-compile" "$DEMO/tiny" --target=host --max-context=256 -o "$DEMO/out"
PROMPT=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20
echo "spark-run (compiled):"
"$BIN/spark-run" "$DEMO/out" --prompt-ids "$PROMPT" --n-predict 16 --print-dispatch
echo "reference (float64 NumPy):"
/usr/bin/python3 "$ROOT/tools/reference/spark_reference.py" "$DEMO/tiny" \
  --prompt-ids "$PROMPT" --n-predict 16

# Text in, tool call out: the trained spark-nano, one turn of a phone agent.
NANO="$ROOT/models/spark-nano"
"$BIN/spark-compile" "$NANO" --quant=w8a16 -o "$DEMO/nano" --quiet
echo "spark-nano (w8a16), one agent turn through the chat template:"
"$BIN/spark-run" "$DEMO/nano" --system "$(cat "$NANO/agent-system.txt")" \
  --tools "$NANO/agent-tools.json" --n-predict 64 \
  --prompt "$(printf 'Task: Turn on Wi-Fi\nScreen: Home\n[0] Clock (app)\n[1] Settings (app)\n[2] Camera (app)')"
