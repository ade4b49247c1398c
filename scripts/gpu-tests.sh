#!/usr/bin/env bash
# On the GPU host: the GPU tests, one pytest run per file (a fault in one file's process never
# reaches the next), each file's closing line printed and, when OUT is set, the whole log kept in
# $OUT/gpu-tests.log. The whole suite takes longer than one device call may run: name the files
# of each call. Usage: bash scripts/gpu-tests.sh [tests/gpu/test_X.py ...]   (default: every file)
set -uo pipefail
. scripts/gpu-env.sh
log=${OUT:-/tmp}/gpu-tests.log
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(tests/gpu/test_*.py)
failed=0
for file in "${files[@]}"; do
  start=$(date +%s)
  python3 -m pytest "$file" -q -p no:cacheprovider >>"$log" 2>&1 || failed=1
  echo "$file: $(tail -n 1 "$log") ($(( $(date +%s) - start )) s)"
done
exit $failed
