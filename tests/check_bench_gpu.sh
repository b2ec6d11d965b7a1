#!/usr/bin/env bash
# Compiles (without linking) every GPU bench program under bench/gpu for sm_90a, so a change to
# a template or to bench_cuda.cuh cannot leave them broken until the next GPU session.
# Usage: tests/check_bench_gpu.sh SOURCE_DIR OUT_DIR     (exit 77 = skipped: no nvcc)
set -uo pipefail
source "$(dirname "$0")/nvcc_script.sh"
nvcc_script_start "$1" "$2" "compile the GPU bench programs"
src=$in
fail=0
for f in "$src"/bench/gpu/*.cu; do
  name=$(basename "$f" .cu)
  if "$nvcc" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I "$src/baseline/kernels" -c "$f" -o "$out/$name.o" > "$out/$name.log" 2>&1; then
    echo "ok   $name"
  else
    echo "FAIL $name"; sed 's/^/    /' "$out/$name.log" | head -20; fail=1
  fi
done
exit $fail
