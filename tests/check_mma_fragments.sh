#!/usr/bin/env bash
# Builds and runs tests/gpu/mma_fragments_check.cu on the host: the tensor-core paths' ldmatrix /
# mma.sync fragment layouts against an emulation of the two instructions (no GPU needed; nvcc is).
# Usage: tests/check_mma_fragments.sh SOURCE_DIR OUT_DIR     (exit 77 = skipped: no nvcc)
set -uo pipefail
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [[ ! -x $nvcc ]]; then
  echo "SKIPPED: no nvcc (install the CUDA toolkit to build the fragment check)"
  exit 77
fi
if ! "$nvcc" -std=c++17 -O2 -I "$src/baseline/kernels" "$src/tests/gpu/mma_fragments_check.cu" -o "$out/mma_fragments_check" > "$out/build.log" 2>&1; then
  echo "FAIL: does not build"; sed 's/^/    /' "$out/build.log" | head -20
  exit 1
fi
"$out/mma_fragments_check"
