#!/usr/bin/env bash
# measure_ceilings.sh: measure this machine's GPU ceilings (device copy bandwidth, vendor-BLAS bf16
# GEMM rate, empty-kernel launch cost) and write them as gpu-wiki measured-ceiling records.
# Usage: bench/measure_ceilings.sh OUT_DIR [--product P --arch A --spec-record ID
#        --spec-bandwidth TB/s --spec-bf16 TFLOPS]
# NVIDIA (nvidia-smi + nvcc): CUDA toolkit and cuBLAS; defaults are an H200 SXM.
# AMD (rocminfo + hipcc): ROCm with rocBLAS; the product defaults from the gfx target
# (gfx942 -> mi300x, gfx950 -> mi355x) with its spec-sheet peaks; pass --product/--spec-* for
# MI325X, MI308X, MI350X. KWIKI_GPU_VENDOR=nvidia|amd overrides the detection.
# Reads the card as it is: no clock, power or mode changes. Copy the records into
# gpu-wiki/hardware_wiki/records/measured-ceiling/<vendor>/<arch>/.
set -euo pipefail
out=${1:?usage: bench/measure_ceilings.sh OUT_DIR [options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"

vendor=${KWIKI_GPU_VENDOR:-}
if [[ -z $vendor ]]; then
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then vendor=nvidia
  elif command -v rocminfo > /dev/null && rocminfo > /dev/null 2>&1; then vendor=amd
  else
    echo "measure_ceilings: no NVIDIA (nvidia-smi) or AMD (rocminfo) GPU found" >&2
    exit 5
  fi
fi

if [[ $vendor == nvidia ]]; then
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
    "$here/gpu/measure_ceilings.cu" -lcublas -o "$out/measure_ceilings"
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv \
    > "$out/nvidia-smi-before.csv" 2>/dev/null || true
  "$out/measure_ceilings" --out "$out" "$@"
  # The driver release is nvidia-smi's to tell; fold it into each record's device object.
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
  if [[ -n "$driver" ]]; then
    for f in "$out"/*.json; do sed -i "s/\"cuda_driver_api\"/\"driver\": \"$driver\", \"cuda_driver_api\"/" "$f"; done
  fi
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$out/nvidia-smi-after.csv" 2>/dev/null || true
  rm -f "$out/measure_ceilings"
  exit 0
fi

# AMD: the first GPU agent's gfx target picks the defaults; explicit options come later and win.
gfx=$(rocminfo 2>/dev/null | awk '/^ *Name: *gfx[0-9a-f]+/ {print $2; exit}')
case $gfx in
  gfx942) defaults=(--product mi300x --arch cdna3 --spec-record amd.cdna3.spec-sheet.mi300x --spec-bandwidth 5.3 --spec-bf16 1307.4) ;;
  gfx950) defaults=(--product mi355x --arch cdna4 --spec-record amd.cdna4.spec-sheet.mi355x --spec-bandwidth 8.0 --spec-bf16 2516.6) ;;
  *)
    echo "measure_ceilings: $gfx has no recorded spec sheet; pass --product, --arch, --spec-record and --spec-* yourself" >&2
    defaults=(--arch "${gfx:-unknown}")
    ;;
esac
rocblas_lib=()
for root in "${ROCM_PATH:-/opt/rocm}" /usr; do
  if [[ -f $root/include/rocblas/rocblas.h ]]; then rocblas_lib=(-lrocblas); break; fi
done
[[ ${#rocblas_lib[@]} -eq 0 ]] && echo "measure_ceilings: rocBLAS headers not found, the GEMM ceiling is skipped" >&2
hipcc -O3 -std=c++17 --offload-arch="${gfx:-native}" "$here/gpu/measure_ceilings.hip" "${rocblas_lib[@]}" -o "$out/measure_ceilings_hip"
{ amd-smi static --asic --clock --limit 2>/dev/null || rocm-smi --showproductname --showmaxpower --showclocks 2>/dev/null || true; } > "$out/amd-smi-before.txt"
"$out/measure_ceilings_hip" --vendor amd "${defaults[@]}" --out "$out" "$@"
{ amd-smi metric --clock --power --temperature 2>/dev/null || rocm-smi --showclocks --showpower --showtemp 2>/dev/null || true; } > "$out/amd-smi-after.txt"
rm -f "$out/measure_ceilings_hip"
