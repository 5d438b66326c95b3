#!/usr/bin/env bash
# Trains spark-nano from scratch, deterministically (seed 1): installs what
# training needs, then runs tools/train/train_nano.py with the settings of
# the committed models/spark-nano. Writes OUT (default: a new folder
# models/spark-nano.new; the committed model is never overwritten). About an
# hour on 2 cores. Usage: scripts/train-nano.sh [OUT]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/models/spark-nano.new}"
CORPUS="$("$ROOT/scripts/install-train-deps.sh" | tail -n 1)"
exec /usr/bin/python3 "$ROOT/tools/train/train_nano.py" --brown "$CORPUS" --out "$OUT" --steps 750 --seed 1
