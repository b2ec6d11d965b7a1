#!/usr/bin/env bash
# measure_ceilings.sh: measure this machine's GPU ceilings (device copy bandwidth, cuBLAS bf16
# GEMM rate, empty-kernel launch cost) and write them as gpu-wiki measured-ceiling records.
# Usage: bench/measure_ceilings.sh OUT_DIR [--product h200-sxm --arch hopper --spec-record ID
#        --spec-bandwidth 4.8 --spec-bf16 989.5]    (defaults: an H200 SXM)
# Needs the CUDA toolkit (nvcc, cuBLAS) and one NVIDIA GPU. Reads the card as it is: no clock,
# power or mode changes. Copy the records into gpu-wiki/hardware_wiki/records/measured-ceiling/.
set -euo pipefail
out=${1:?usage: bench/measure_ceilings.sh OUT_DIR [options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
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
