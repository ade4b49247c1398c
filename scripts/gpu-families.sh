#!/usr/bin/env bash
# On the GPU host (issues 3 and 5): the GPU tests of ragged3d, gemm, TMA and launch, then each named
# sweep (default: ragged3d gemm gemm_wgmma gemm_skinny) with the strategy its TOML file states, its
# replay recording and results/benchmarks/<name>.json. Usage: bash scripts/gpu-families.sh [name ...]
set -euo pipefail
. scripts/gpu-env.sh
python3 -m pytest tests/gpu/test_ragged3d_gpu.py tests/gpu/test_gemm_gpu.py tests/gpu/test_tma_gpu.py \
  tests/gpu/test_launch_gpu.py -q -p no:cacheprovider
for name in "${@:-ragged3d gemm gemm_wgmma gemm_skinny}"; do
  for sweep in $name; do
    bash scripts/gpu-sweep.sh "$sweep" "bash scripts/gpu-families.sh $sweep"
  done
done
[ -n "${OUT:-}" ] && cp results/winners.sqlite "$OUT/" || true
