#!/usr/bin/env bash
# Builds and runs tests/gpu/fp8_mma_fragments_check.cu on the host: fp8_block_gemm's tensor-core
# stage and mma.sync m16n8k32 e4m3 fragments against an emulation of the instruction (no GPU
# needed; nvcc is). Usage: tests/check_fp8_mma_fragments.sh SOURCE_DIR OUT_DIR   (exit 77 = skipped: no nvcc)
set -uo pipefail
source "$(dirname "$0")/nvcc_script.sh"
nvcc_script_start "$1" "$2" "build the fp8 fragment check"
src=$in
if ! "$nvcc" -std=c++17 -O2 -I "$src/baseline/kernels" "$src/tests/gpu/fp8_mma_fragments_check.cu" -o "$out/fp8_mma_fragments_check" \
    > "$out/build.log" 2>&1; then
  echo "FAIL: does not build"; sed 's/^/    /' "$out/build.log" | head -20
  exit 1
fi
"$out/fp8_mma_fragments_check"
