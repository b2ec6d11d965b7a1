# nvcc_script.sh: sourced by the nvcc check scripts. nvcc_script_start IN_DIR OUT_DIR WHAT sets
# `in` and `out` (absolute; OUT_DIR made) and `nvcc`, or exits 77 (skipped) naming WHAT.
nvcc_script_start() {
  in=$(cd "$1" && pwd)
  mkdir -p "$2"
  out=$(cd "$2" && pwd)
  nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  if [[ ! -x $nvcc ]]; then
    echo "SKIPPED: no nvcc (install the CUDA toolkit to $3)"
    exit 77
  fi
}
