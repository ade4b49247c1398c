#!/usr/bin/env bash
# On the GPU host: records, or goes on recording, an exhaustive ground-truth sweep (spaces/NAME.toml,
# strategy exhaustive) within one device call: the sweep runs for at most SECONDS (default 540) and
# is then interrupted as Ctrl-C would (its log keeps every evaluation made); the next call resumes it.
# Each call packs the sweep directory into $OUT/NAME-sweep.tgz: unpack it under results/sweeps/ here
# and carry results/sweeps/NAME (an ignored path) to the next call. The call that finishes the sweep
# also writes its log, gzip-compressed, to results/recordings/NAME.jsonl.gz (the replay recording;
# $OUT/NAME.jsonl.gz).
# Usage: bash scripts/gpu-truth.sh NAME [SECONDS]
set -euo pipefail
. scripts/gpu-env.sh
name=$1
limit=${2:-540}
set +e
timeout --signal=INT --kill-after=30 "$limit" \
  python3 -m tunebox tune "spaces/$name.toml" --backend gpu --results results --quiet
status=$?
set -e
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/$name-sweep.tgz" -C results/sweeps "$name"
fi
if [ "$status" -eq 0 ]; then
  gzip -9n < "results/sweeps/$name/evals.jsonl" > "results/recordings/$name.jsonl.gz"
  if [ -n "${OUT:-}" ]; then cp "results/recordings/$name.jsonl.gz" "$OUT/"; fi
  echo "recorded $name: results/recordings/$name.jsonl.gz"
else
  echo "$name: part recorded (exit $status); carry results/sweeps/$name back and run this again"
fi
