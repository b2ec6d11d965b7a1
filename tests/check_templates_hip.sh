#!/usr/bin/env bash
# Compiles every kernel template as HIP for gfx942 (and gfx90a) with clang++-19 and Debian's HIP
# headers and ROCm device libraries, and checks the ISA listing: v_mfma in the GEMM, 16-byte
# global loads in the memory-bound templates, no scratch (spills).
# Debian's rocm-device-libs predate gfx942: the missing oclc_isa_version_942.bc is assembled here.
# Usage: tests/check_templates_hip.sh KERNELS_DIR OUT_DIR        (exit 77 = skipped)
set -uo pipefail
kernels=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
clang=$(command -v clang++-19 || true)
llvm_as=$(command -v llvm-as-19 || true)
bitcode=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
if [[ -z $clang || -z $llvm_as || ! -f $bitcode/ockl.bc || ! -f /usr/include/hip/hip_runtime.h ]]; then
  echo "SKIPPED: needs clang-19, llvm-19, libamdhip64-dev and rocm-device-libs (scripts/dev.sh deps installs them)"
  exit 77
fi
root="$out/rocm-root"
mkdir -p "$root/amdgcn/bitcode"
for f in "$bitcode"/*.bc; do ln -sf "$f" "$root/amdgcn/bitcode/"; done
ln -sfn /usr/include "$root/include"
for spec in 942:9402 90a:9010; do
  gfx=${spec%%:*}; version=${spec##*:}
  [[ -f $bitcode/oclc_isa_version_$gfx.bc ]] && continue
  printf 'target triple = "amdgcn-amd-amdhsa"\n@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 %s, align 4\n' \
    "$version" > "$root/isa_$gfx.ll"
  rm -f "$root/amdgcn/bitcode/oclc_isa_version_$gfx.bc"
  "$llvm_as" "$root/isa_$gfx.ll" -o "$root/amdgcn/bitcode/oclc_isa_version_$gfx.bc"
done
fail=0
for arch in "gfx942:sramecc+:xnack-" gfx90a; do
  for t in "$kernels"/*.cuh; do
    name=$(basename "$t" .cuh)
    [[ $name == kwiki_* ]] && continue  # shared headers (kwiki_compat, kwiki_hopper), not templates
    tag="$name-${arch%%:*}"
    printf '#define KWIKI_T kwiki_bf16\n#define KWIKI_DEFINE_LAUNCHER 1\n#include "%s"\n' "$t" > "$out/$tag.hip"
    if ! "$clang" -x hip --offload-arch="$arch" --rocm-path="$root" -O3 -std=c++17 --offload-device-only -S \
        -o "$out/$tag.s" "$out/$tag.hip" > "$out/$tag.log" 2>&1; then
      echo "FAIL $tag: does not compile"; sed 's/^/    /' "$out/$tag.log" | head -20; fail=1; continue
    fi
    # The host side (launcher) compiles too.
    if ! "$clang" -x hip --offload-arch="$arch" --rocm-path="$root" -O3 -std=c++17 -c -o "$out/$tag.o" "$out/$tag.hip" >> "$out/$tag.log" 2>&1; then
      echo "FAIL $tag: host pass does not compile"; fail=1; continue
    fi
    mfma=$(grep -c 'v_mfma' "$out/$tag.s")
    x4=$(grep -Ec '\b(global|buffer)_load_dwordx4\b' "$out/$tag.s")
    scratch=$(grep -Eo 'ScratchSize: [0-9]+' "$out/$tag.s" | awk '{s+=$2} END {print s+0}')
    verdict=ok
    [[ $scratch -ne 0 ]] && verdict="FAIL: $scratch bytes of scratch"
    if [[ $name == gemm ]]; then
      [[ $mfma -eq 0 ]] && verdict="FAIL: no v_mfma in the listing"
    elif [[ $x4 -eq 0 ]]; then
      verdict="FAIL: no 16-byte global loads (global_load_dwordx4)"
    fi
    echo "$tag: v_mfma=$mfma dwordx4-loads=$x4 scratch=$scratch -> $verdict"
    [[ $verdict != ok ]] && fail=1
  done
done
exit $fail
