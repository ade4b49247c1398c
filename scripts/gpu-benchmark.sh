#!/usr/bin/env bash
# On the GPU host: GPU tests, then the exhaustive tile_copy sweep (the replay recording), the
# winners database and the benchmark file. Copies the outputs to $OUT when it is set.
set -euo pipefail
. scripts/gpu-env.sh
python3 -m pytest tests/gpu -q -p no:cacheprovider
python3 -m tunebox tune spaces/tile_copy.toml --backend gpu --strategy exhaustive --results results --quiet
python3 -m tunebox benchmark spaces/tile_copy.toml --results results --out results/benchmarks/tile_copy.json \
  --command "bash scripts/gpu-benchmark.sh"
if [ -n "${OUT:-}" ]; then
  cp results/sweeps/tile_copy/evals.jsonl "$OUT/tile_copy.jsonl"
  cp results/winners.sqlite "$OUT/winners.sqlite"
  cp results/benchmarks/tile_copy.json "$OUT/tile_copy.json"
fi
