#!/usr/bin/env bash
# On the GPU host (issues 3 and 5): the GPU tests of ragged3d, gemm, TMA and launch, sweeps of
# spaces/ragged3d.toml (exhaustive) and spaces/gemm.toml (TPE), their replay recordings, and
# results/benchmarks/ragged3d.json and gemm.json. Usage: bash scripts/gpu-families.sh [ragged3d] [gemm]
set -euo pipefail
. scripts/gpu-env.sh
python3 -m pytest tests/gpu/test_ragged3d_gpu.py tests/gpu/test_gemm_gpu.py tests/gpu/test_tma_gpu.py \
  tests/gpu/test_launch_gpu.py -q -p no:cacheprovider
for sweep in "${@:-ragged3d gemm}"; do
  for name in $sweep; do
    strategy=$([ "$name" = ragged3d ] && echo exhaustive || echo tpe)
    python3 -m tunebox tune "spaces/$name.toml" --backend gpu --strategy "$strategy" --results results --quiet
    cp "results/sweeps/$name/evals.jsonl" "results/recordings/$name.jsonl"
    python3 -m tunebox benchmark "spaces/$name.toml" --results results --out "results/benchmarks/$name.json" \
      --command "bash scripts/gpu-families.sh $name"
    [ -n "${OUT:-}" ] && cp "results/recordings/$name.jsonl" "results/benchmarks/$name.json" "$OUT/"
  done
done
[ -n "${OUT:-}" ] && cp results/winners.sqlite "$OUT/" || true
