#!/usr/bin/env bash
# run.sh: builds and runs serving_emulation.cpp, the kv_cache_write and topk_filter templates on
# the host emulation (compat_host.hpp) against the CPU twin's formulas, for 32- and 64-lane warps;
# and prefill_emulation.cpp, the prefill_attention template against the fp64 twin (cpu_reference.cpp).
# No GPU needed; a few minutes on two cores. Usage: bench/gpu/host_emulation/run.sh [CXX]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kernels="$here/../../../baseline/kernels"
cxx="${1:-g++}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/compat_host.hpp" "$work/kwiki_compat.cuh"
for f in kv_cache_write topk_filter prefill_attention; do
  # name<T, W><<<grid, block, 0, stream>>>(args) -> kwiki_emu::launch(grid, block, name<T, W>, args)
  sed -E 's/([A-Za-z_0-9]+<[^<>;]*>)<<<([^,]+), ([^,]+), 0, stream>>>\(/kwiki_emu::launch(\2, \3, \1, /' "$kernels/$f.cuh" > "$work/$f.cuh"
  grep -q '<<<' "$work/$f.cuh" && { echo "run.sh: a launch in $f.cuh was not rewritten" >&2; exit 2; }
done
for warp in 32 64; do
  "$cxx" -std=c++20 -O2 -pthread -DEMU_WARP=$warp -I "$work" "$here/serving_emulation.cpp" -o "$work/emu$warp"
  "$work/emu$warp"
done
# fp8_block_gemm (issue 20): its CUDA-core kernel against the twin's formula (cpu_reference.cpp).
sed -E 's/([A-Za-z_0-9]+<[^<>;]*>)<<<([^,]+), ([^,]+), 0, stream>>>\(/kwiki_emu::launch(\2, \3, \1, /' "$kernels/fp8_block_gemm.cuh" > "$work/fp8_block_gemm.cuh"
grep -q '<<<' "$work/fp8_block_gemm.cuh" && { echo "run.sh: a launch in fp8_block_gemm.cuh was not rewritten" >&2; exit 2; }
twin="$here/../../../planner/twin"
for warp in 32 64; do
  "$cxx" -std=c++20 -O2 -pthread -DEMU_WARP=$warp -I "$work" -I "$twin" "$here/fp8_block_gemm_emulation.cpp" "$twin/cpu_reference.cpp" -o "$work/fp8emu$warp"
  "$work/fp8emu$warp"
done
# prefill_attention against the fp64 twin: the CUDA-core kernel, then the tensor-core one (32-lane warps).
twin="$here/../../../planner/twin"
for tc in 0 1; do
  "$cxx" -std=c++20 -O2 -pthread -DKWIKI_PREFILL_TENSOR_CORES=$tc -I "$work" -I "$twin" "$here/prefill_emulation.cpp" "$twin/cpu_reference.cpp" \
    -o "$work/prefill$tc"
  "$work/prefill$tc"
done
