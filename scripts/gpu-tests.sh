#!/usr/bin/env bash
# On the GPU host: the GPU tests, one pytest run per file (a fault in one file's process never
# reaches the next), each file's closing line printed and, when OUT is set, its log and JUnit XML
# kept in $OUT/gpu-tests/. GPU_TEST_JOBS=N (default 1) runs up to N files at once, in the order
# named (name the longest first); the files that time the device, kill workers or race launches
# (ALONE) run one at a time after the others, whatever N. Run one at a time the whole suite takes
# longer than one device call may run (about 28 minutes): name the files of each call.
# Usage: [GPU_TEST_JOBS=N] bash scripts/gpu-tests.sh [tests/gpu/test_X.py ...]   (default: every file)
set -uo pipefail
. scripts/gpu-env.sh
ALONE=" test_ceilings_gpu.py test_clocks_gpu.py test_repeatability_gpu.py test_faults_gpu.py test_resume_gpu.py test_launch_gpu.py "
logs=${OUT:-/tmp}/gpu-tests
mkdir -p "$logs"
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(tests/gpu/test_*.py)

run() {  # one file's pytest run; prints its closing line
  local file=$1 name start rc
  name=$(basename "$file" .py)
  start=$(date +%s)
  python3 -m pytest "$file" -q -p no:cacheprovider --junitxml "$logs/$name.xml" >"$logs/$name.log" 2>&1
  rc=$?
  echo "$file: $(tail -n 1 "$logs/$name.log") ($(( $(date +%s) - start )) s)"
  return $rc
}

shared=() alone=() pids=()
for file in "${files[@]}"; do
  case "$ALONE" in *" $(basename "$file") "*) alone+=("$file") ;; *) shared+=("$file") ;; esac
done
failed=0
for file in "${shared[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "${GPU_TEST_JOBS:-1}" ]; do sleep 1; done
  run "$file" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
for file in "${alone[@]}"; do run "$file" || failed=1; done
exit $failed
