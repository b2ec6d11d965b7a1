#!/usr/bin/env bash
# dev.sh: install kwiki's Debian 12 dependencies (only those missing), build, test, demo.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KWIKI_BUILD_DIR:-$ROOT/build}
JOBS=${KWIKI_JOBS:-$(nproc)}
DEPS=(
  build-essential cmake ninja-build pkg-config git util-linux
  libxapian-dev xapian-tools libsqlite3-dev sqlite3 nlohmann-json3-dev libre2-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libvalijson-dev rapidjson-dev python3 python3-venv
  python3-torch
  clang-19 clang-tools-19 libclang-rt-19-dev lld-19 llvm-19 libamdhip64-dev rocm-device-libs
)

usage() {
  cat <<'USAGE'
usage: scripts/dev.sh COMMAND
  deps    install the Debian packages kwiki needs (only those missing; uses sudo when not root)
  packages  list those packages, one per line (tests/check_dependencies.sh reads it)
  build   deps, then configure and build into ./build
  test    build, then run the whole test suite with ctest (GPU tests skip without a device)
  demo    build, index the bundled gpu-wiki into the default index, and answer a real request
  torch2  also install a torch 2.x from PyPI into ./.venv-torch (about 3 GB of wheels: CUDA builds are
          all PyPI has for Linux) and print the KWIKI_PYTHON to export; proofs of float8 tasks need it.
          The default (Debian's python3-torch 1.13, CPU) proves every other task.
  dsl     also install the kernel DSLs from PyPI into ./.venv-dsl (nvidia-cutlass-dsl 4.8, about 105 MB of
          wheels; flydsl 0.4, 77 MB; about 590 MB installed), seeing Debian's torch, and print the
          KWIKI_DSL_PYTHON to export: the dsl tests (ctest -L dsl) compile the CuteDSL and FlyDSL V0s with it
          and skip without it. The default build and tests stay C++ only.
USAGE
}

install_deps() {
  local missing=()
  for pkg in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    echo "dev.sh: all ${#DEPS[@]} packages present" >&2
    return
  fi
  echo "dev.sh: installing ${missing[*]}" >&2
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  install_deps
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j "$JOBS"
}

case ${1:-} in
  deps) install_deps ;;
  packages) printf '%s\n' "${DEPS[@]}" ;;
  build) build ;;
  test)
    build
    ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
    ;;
  demo)
    build
    "$BUILD/cli/kwiki" index --text
    "$BUILD/cli/kwiki" query --text --max-records 6 \
      "my bf16 rmsnorm on H200 only reaches 70% of DRAM bandwidth; what should I change?"
    "$BUILD/cli/kwiki" hw --product H200 --field memory.bandwidth_tb_s --text
    ;;
  torch2)
    install_deps
    /usr/bin/python3 -m venv "$ROOT/.venv-torch"
    "$ROOT/.venv-torch/bin/pip" install --quiet "torch>=2.4"
    echo "export KWIKI_PYTHON=$ROOT/.venv-torch/bin/python"
    ;;
  dsl)
    install_deps
    # --system-site-packages: the venv keeps Debian's torch, which kernel.py and the plan's proof import.
    /usr/bin/python3 -m venv --system-site-packages "$ROOT/.venv-dsl"
    "$ROOT/.venv-dsl/bin/pip" install --quiet "nvidia-cutlass-dsl>=4.8,<4.9" "flydsl>=0.4,<0.5"
    echo "export KWIKI_DSL_PYTHON=$ROOT/.venv-dsl/bin/python"
    ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
