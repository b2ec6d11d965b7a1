#!/usr/bin/env bash
# run_moe.sh: builds and runs moe_emulation.cpp, the fused_moe template on the host emulation (compat_host.hpp)
# against the kernels' fp32 formulas and a stable sort of the routing, for 32- and 64-lane warps. No GPU needed;
# about a minute on two cores. Usage: bench/gpu/host_emulation/run_moe.sh [CXX]
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
