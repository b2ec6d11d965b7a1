#!/usr/bin/env bash
# Builds and runs tests/gpu/mma_fragments_check.cu on the host: the tensor-core paths' ldmatrix /
# mma.sync fragment layouts against an emulation of the two instructions (no GPU needed; nvcc is).
# Usage: tests/check_mma_fragments.sh SOURCE_DIR OUT_DIR     (exit 77 = skipped: no nvcc)
set -uo pipefail
source "$(dirname "$0")/nvcc_script.sh"
nvcc_script_start "$1" "$2" "build the fragment check"
src=$in
if ! "$nvcc" -std=c++17 -O2 -I "$src/baseline/kernels" "$src/tests/gpu/mma_fragments_check.cu" -o "$out/mma_fragments_check" > "$out/build.log" 2>&1; then
  echo "FAIL: does not build"; sed 's/^/    /' "$out/build.log" | head -20
  exit 1
fi
"$out/mma_fragments_check"
