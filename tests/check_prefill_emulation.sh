#!/usr/bin/env bash
# Runs the prefill_attention template on the host emulation (bench/gpu/host_emulation: a thread per
# GPU thread, barriers for __syncthreads) against the fp64 twin: the kernel's indexing, masks and
# online softmax checked without a GPU, for the CUDA-core kernel and the tensor-core one. Usage: tests/check_prefill_emulation.sh SOURCE_DIR OUT_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
mkdir -p "$2"
work=$(cd "$2" && pwd)
emu="$src/bench/gpu/host_emulation"
cp "$emu/compat_host.hpp" "$work/kwiki_compat.cuh"
sed -E 's/([A-Za-z_0-9]+<[^<>;]*>)<<<([^,]+), ([^,]+), 0, stream>>>\(/kwiki_emu::launch(\2, \3, \1, /' \
  "$src/baseline/kernels/prefill_attention.cuh" > "$work/prefill_attention.cuh"
if grep -q '<<<' "$work/prefill_attention.cuh"; then echo "a launch in prefill_attention.cuh was not rewritten" >&2; exit 1; fi
# The CUDA-core kernel (V0), then the tensor-core one (mma.sync and ldmatrix emulated).
for tc in 0 1; do
  "${CXX:-g++}" -std=c++20 -O2 -pthread -DKWIKI_PREFILL_TENSOR_CORES=$tc -I "$work" -I "$src/planner/twin" "$emu/prefill_emulation.cpp" \
    "$src/planner/twin/cpu_reference.cpp" -o "$work/prefill$tc"
  "$work/prefill$tc"
done
