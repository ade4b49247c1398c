#!/usr/bin/env bash
# On the GPU host, after a change that voids recorded results: re-records each named sweep
# (spaces/NAME.toml, with the strategy its file states). Its evaluation log becomes the replay
# recording results/recordings/NAME.jsonl.gz (gzip) and its finalists results/benchmarks/NAME.json (gather,
# scatter and gather_elements together: results/benchmarks/gather.json); winners go to
# results/winners.sqlite. When OUT is set, everything written so far is packed into $OUT/results.tgz
# after each sweep (a device call returns at most 8 files, and what is under $OUT comes back even if
# the call is stopped). After a change of a family's kernels, leave its old winners in the database: each
# re-recorded problem measures its winner under the older sources among its first variants; once every stale
# problem is re-recorded (or carried by scripts/rehash_winners.py), delete the rest with
# `tunebox coverage FAMILY --db results/winners.sqlite --prune-stale`. Usage: bash scripts/gpu-record.sh NAME...
set -euo pipefail
. scripts/gpu-env.sh
command="bash scripts/gpu-record.sh $*"
pack() {
  if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/results.tgz" results/recordings results/benchmarks results/winners.sqlite \
      $(ls results/sweeps/*/summary.json 2>/dev/null) || true
  fi
}
indexed=()
for name in "$@"; do
  start=$(date +%s)
  rm -rf "results/sweeps/$name"  # a fresh recording, never a resumed one (a warm machine keeps ignored files)
  python3 -m tunebox tune "spaces/$name.toml" --backend gpu --results results --quiet
  gzip -9n < "results/sweeps/$name/evals.jsonl" > "results/recordings/$name.jsonl.gz"
  case $name in
    gather | scatter | gather_elements) indexed+=("spaces/$name.toml") ;;
    *) python3 -m tunebox benchmark "spaces/$name.toml" --results results --out "results/benchmarks/$name.json" \
         --command "$command" ;;
  esac
  pack
  echo "recorded $name in $(( $(date +%s) - start )) s"
done
if [ ${#indexed[@]} -gt 0 ]; then
  python3 -m tunebox benchmark "${indexed[@]}" --results results --out results/benchmarks/gather.json --command "$command"
  pack
fi
