#!/usr/bin/env bash
# On the GPU host, after `. scripts/gpu-env.sh`: one sweep, spaces/NAME.toml, with the strategy its file
# states; its evaluation log becomes the replay recording results/recordings/NAME.jsonl and its
# benchmark results/benchmarks/NAME.json, which records COMMAND as the command that produced it.
# Copies both to $OUT when it is set. Usage: bash scripts/gpu-sweep.sh NAME COMMAND
set -euo pipefail
name=$1 command=$2
python3 -m tunebox tune "spaces/$name.toml" --backend gpu --results results --quiet
cp "results/sweeps/$name/evals.jsonl" "results/recordings/$name.jsonl"
python3 -m tunebox benchmark "spaces/$name.toml" --results results --out "results/benchmarks/$name.json" \
  --command "$command"
if [ -n "${OUT:-}" ]; then cp "results/recordings/$name.jsonl" "results/benchmarks/$name.json" "$OUT/"; fi
