#!/usr/bin/env bash
# Compiles every kernel template for sm_90a with nvcc and checks the static evidence: no spills,
# 16-byte global loads in memory-bound templates, tensor-core MMA (mma.sync and wgmma) in the GEMM. The evidence is
# read from the SASS when cuobjdump is installed, else from the PTX (ld.global.v4, mma.sync).
# Usage: tests/check_templates.sh KERNELS_DIR OUT_DIR     (exit 77 = skipped: no nvcc)
set -uo pipefail
source "$(dirname "$0")/nvcc_script.sh"
nvcc_script_start "$1" "$2" "compile the templates"
kernels=$in
cuobjdump=$(dirname "$nvcc")/cuobjdump
mkdir -p "$out"
fail=0
for t in "$kernels"/*.cuh; do
  name=$(basename "$t" .cuh)
  [[ $name == kwiki_* ]] && continue  # shared headers (kwiki_compat, kwiki_hopper), not templates
  for type in __nv_bfloat16 half; do
    src="$out/$name-$type.cu"
    printf '#define KWIKI_T %s\n#define KWIKI_DEFINE_LAUNCHER 1\n#include "%s"\n' "$type" "$t" > "$src"
    if ! "$nvcc" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -shared -Xcompiler -fPIC \
        -o "$out/$name-$type.so" "$src" > "$out/$name-$type.log" 2>&1; then
      echo "FAIL $name ($type): does not compile"; sed 's/^/    /' "$out/$name-$type.log" | head -20; fail=1; continue
    fi
    spills=$(grep -Eo '[0-9]+ bytes spill stores' "$out/$name-$type.log" | awk '{s+=$1} END {print s+0}')
    if [[ -x $cuobjdump ]]; then
      listing=$("$cuobjdump" --dump-sass "$out/$name-$type.so" 2>/dev/null)
      ldg128=$(grep -c 'LDG.E.128' <<< "$listing")
      hmma=$(grep -c 'HMMA' <<< "$listing")
      wgmma=$(grep -c 'HGMMA' <<< "$listing")
    else
      "$nvcc" -std=c++17 -O3 -gencode=arch=compute_90a,code=compute_90a -ptx -o "$out/$name-$type.ptx" "$src" 2>/dev/null
      listing=$(cat "$out/$name-$type.ptx" 2>/dev/null)
      ldg128=$(grep -Ec 'ld\.global(\.[a-z0-9:_]+)*\.v4\.(b32|u32|f32|s32)|ld\.global(\.[a-z0-9:_]+)*\.v2\.(b64|u64)' <<< "$listing")
      hmma=$(grep -c 'mma.sync' <<< "$listing")
      wgmma=$(grep -c 'wgmma.mma_async' <<< "$listing")
    fi
    verdict=ok
    [[ $spills -ne 0 ]] && verdict="FAIL: $spills bytes of spill stores"
    if [[ $name == gemm ]]; then
      [[ $hmma -eq 0 ]] && verdict="FAIL: no tensor-core MMA (HMMA / mma.sync) in the listing"
      [[ $wgmma -eq 0 ]] && verdict="FAIL: no warpgroup MMA (HGMMA / wgmma.mma_async) in the listing"
    elif [[ $ldg128 -eq 0 ]]; then
      verdict="FAIL: no 16-byte global loads (LDG.E.128 / ld.global.v4) in the listing"
    fi
    echo "$name ($type): spills=$spills 16-byte-loads=$ldg128 mma=$hmma wgmma=${wgmma:-0} -> $verdict"
    [[ $verdict != ok ]] && fail=1
  done
done
exit $fail
