#!/usr/bin/env bash
# run_moe.sh: builds and runs moe_emulation.cpp, the fused_moe template on the host emulation (compat_host.hpp)
# against the kernels' fp32 formulas and a stable sort of the routing, and moe_fp8_emulation.cpp, the fused_moe_fp8
# template against the fp64 twin, for 32- and 64-lane warps. No GPU needed; about two minutes on two cores. Usage: bench/gpu/host_emulation/run_moe.sh [CXX]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kernels="$here/../../../baseline/kernels"
cxx="${1:-g++}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/compat_host.hpp" "$work/kwiki_compat.cuh"
# name<T><<<grid, block, 0, stream>>>(args) -> kwiki_emu::launch(grid, block, name<T>, args)
sed -E 's/([A-Za-z_0-9]+<[^<>;]*>)<<<([^,]+), ([^,]+), 0, stream>>>\(/kwiki_emu::launch(\2, \3, \1, /' "$kernels/fused_moe.cuh" > "$work/fused_moe.cuh"
grep -q '<<<' "$work/fused_moe.cuh" && { echo "run_moe.sh: a launch in fused_moe.cuh was not rewritten" >&2; exit 2; }
for warp in 32 64; do
  "$cxx" -std=c++20 -O2 -pthread -DEMU_WARP=$warp -I "$work" "$here/moe_emulation.cpp" -o "$work/emu$warp"
  "$work/emu$warp"
done
# fused_moe_fp8 (issue 20): fused_moe's routing, fp8_block_gemm's decoder and fp8_quant's encoder under its
# own kernels, against the fp64 twin (cpu_reference.cpp). Of fp8_quant.cuh only the encoder and abs_max are
# taken (the rest is its row-kernel machinery, which the emulation does not provide); launches named with a
# namespace are rewritten too.
sed -E 's/([A-Za-z_0-9:]+<[^<>;]*>)<<<([^,]+), ([^,]+), 0, stream>>>\(/kwiki_emu::launch(\2, \3, \1, /' "$kernels/fp8_block_gemm.cuh" > "$work/fp8_block_gemm.cuh"
sed -E 's/([A-Za-z_0-9:]+<[^<>;]*>)<<<([^,]+), ([^,]+), 0, stream>>>\(/kwiki_emu::launch(\2, \3, \1, /' "$kernels/fused_moe_fp8.cuh" > "$work/fused_moe_fp8.cuh"
{
  printf '#pragma once\n#include "kwiki_compat.cuh"\nnamespace kwiki_fp8_quant {\n'
  sed -n '/^template <bool kFnuz>$/,/^}$/p' "$kernels/fp8_quant.cuh"
  sed -n '/^KWIKI_DEVICE float abs_max(/,/^}$/p' "$kernels/fp8_quant.cuh"
  printf '}  // namespace kwiki_fp8_quant\n'
} > "$work/fp8_quant.cuh"
for f in fp8_block_gemm fused_moe_fp8; do
  grep -q '<<<' "$work/$f.cuh" && { echo "run_moe.sh: a launch in $f.cuh was not rewritten" >&2; exit 2; }
done
grep -q 'float_to_e4m3' "$work/fp8_quant.cuh" && grep -q 'abs_max' "$work/fp8_quant.cuh" || { echo "run_moe.sh: fp8_quant.cuh's encoder or abs_max not found" >&2; exit 2; }
twin="$here/../../../planner/twin"
for warp in 32 64; do
  "$cxx" -std=c++20 -O2 -pthread -DEMU_WARP=$warp -I "$work" -I "$twin" "$here/moe_fp8_emulation.cpp" "$twin/cpu_reference.cpp" -o "$work/fp8emu$warp"
  "$work/fp8emu$warp"
done
