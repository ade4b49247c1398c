#!/usr/bin/env bash
# On the GPU host (issue 4): gather/scatter/gather_elements GPU tests, exhaustive sweeps of
# spaces/gather.toml, spaces/scatter.toml and spaces/gather_elements.toml (their replay recordings),
# and results/benchmarks/gather.json.
set -euo pipefail
. scripts/gpu-env.sh
python3 -m pytest tests/gpu/test_gather_gpu.py -q -p no:cacheprovider
for sweep in gather scatter gather_elements; do
  python3 -m tunebox tune "spaces/$sweep.toml" --backend gpu --strategy exhaustive --results results --quiet
  cp "results/sweeps/$sweep/evals.jsonl" "results/recordings/$sweep.jsonl"
done
python3 -m tunebox benchmark spaces/gather.toml spaces/scatter.toml spaces/gather_elements.toml --results results \
  --out results/benchmarks/gather.json --command "bash scripts/gpu-gather.sh"
if [ -n "${OUT:-}" ]; then
  cp results/recordings/gather.jsonl results/recordings/scatter.jsonl results/recordings/gather_elements.jsonl \
    results/benchmarks/gather.json results/winners.sqlite "$OUT/"
fi
