#!/usr/bin/env bash
# On the GPU host (issues 2 and 3): the tile_copy GPU tests, then the TPE sweeps of
# spaces/tile_copy.toml (ld/st vectors and cp.async) and spaces/tile_copy_tma.toml (TMA), their replay
# recordings, the winners database and results/benchmarks/tile_copy.json and tile_copy_tma.json.
# Copies the outputs to $OUT when it is set.
set -euo pipefail
. scripts/gpu-env.sh
python3 -m pytest tests/gpu/test_tile_copy_gpu.py tests/gpu/test_tma_gpu.py -q -p no:cacheprovider
for name in tile_copy tile_copy_tma; do
  bash scripts/gpu-sweep.sh "$name" "bash scripts/gpu-benchmark.sh"
done
[ -n "${OUT:-}" ] && cp results/winners.sqlite "$OUT/" || true
