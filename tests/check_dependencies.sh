#!/usr/bin/env bash
# Every external program and library the build and the tests use resolves to a file owned by a
# Debian package that scripts/dev.sh installs (or one apt pulls in for them), so a newcomer's
# first run never depends on what a developer installed by hand. Programs outside Debian main
# (nvcc, nvidia-smi) are optional: the tests that need them skip and say so; this lists them.
# Usage: tests/check_dependencies.sh SOURCE_DIR PYTHON [CLANGXX]
set -uo pipefail
src=$1
python=$2
clangxx=${3:-}
mapfile -t wanted < <("$src/scripts/dev.sh" packages)
if ((${#wanted[@]} == 0)); then
  echo "FAIL: scripts/dev.sh packages listed nothing"
  exit 1
fi
# Packages dev.sh installs and everything they depend on (what apt installs along).
mapfile -t closure < <(apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${wanted[@]}" 2>/dev/null | sed -n 's/^\([a-z0-9][a-z0-9.+-]*\).*/\1/p' | sed 's/:.*//' | sort -u)
declare -A installs=()
for p in "${closure[@]}" "${wanted[@]}"; do installs[$p]=1; done

failures=0
# owner PATH: the package owning PATH (or, for a link not owned itself, its target).
owner() {
  local path=$1 pkg
  pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)
  if [[ -z $pkg ]]; then
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1)
  fi
  echo "$pkg"
}
check() {  # check WHAT PATH USED_BY
  local what=$1 path=$2 used=$3 pkg
  if [[ -z $path || ! -e $path ]]; then
    echo "FAIL: $what not found (used by $used); scripts/dev.sh must install it"
    failures=$((failures + 1))
    return
  fi
  pkg=$(owner "$path")
  if [[ -z $pkg ]]; then
    echo "FAIL: $what is $path, which no Debian package owns (used by $used): installed by hand?"
    failures=$((failures + 1))
  elif [[ -z ${installs[$pkg]:-} ]]; then
    echo "FAIL: $what is $path from package $pkg, which scripts/dev.sh does not install (used by $used)"
    failures=$((failures + 1))
  else
    printf 'ok    %-28s %-52s %s\n' "$what" "$path" "$pkg"
  fi
}
program() { check "$1" "$(command -v "$1" 2>/dev/null)" "$2"; }

program cmake "the build"
program ninja "the build"
program pkg-config "the build"
program c++ "the build"
program git "kwiki plan, kwiki baseline, tests"
program setpriv "index tests run as nobody"
program xapian-tcpsrv "the shard tests"
program sqlite3 "the store tests"
program clang++-19 "HIP builds (kwiki baseline, templates.compile_hip_gfx942)"
program llvm-as-19 "the ROCm root kwiki baseline prepares"
program ld.lld-19 "HIP device links"
check "python (tests)" "$python" "the harness, library and security tests (KWIKI_PYTHON)"
check "clang-offload-bundler" "$(dirname "$(readlink -f "$(command -v clang++-19)")")/clang-offload-bundler" "HIP builds"
if [[ -n $clangxx ]]; then
  check "fuzzer compiler" "$(command -v "$clangxx" 2>/dev/null || echo "$clangxx")" "the libFuzzer targets"
  # The runtimes -fsanitize=fuzzer,address,undefined links, wherever this clang keeps them.
  for rt in libclang_rt.fuzzer libclang_rt.asan libclang_rt.ubsan_standalone; do
    found=$("$clangxx" -print-file-name="$rt-x86_64.a" 2>/dev/null)
    [[ -e $found ]] || found=$("$clangxx" -print-file-name="$rt.a" 2>/dev/null)
    check "$rt" "$found" "the libFuzzer targets"
  done
fi
for header in xapian.h re2/re2.h sqlite3.h nlohmann/json.hpp CLI/CLI.hpp gtest/gtest.h gmock/gmock.h benchmark/benchmark.h \
  valijson/validator.hpp rapidjson/reader.h hip/hip_runtime.h; do
  check "<$header>" "/usr/include/$header" "the build"
done
check "ROCm device bitcode" /usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ockl.bc "HIP builds"
# Modules the tests' python imports.
for module in json ctypes torch numpy; do
  file=$("$python" -c "import $module, sys; print($module.__file__)" 2>/dev/null)
  check "python module $module" "$file" "the harness and library tests"
done

# Outside Debian main: present or not, the tests that need them skip with the reason.
for optional in nvcc nvidia-smi cuobjdump; do
  path=$(command -v "$optional" 2>/dev/null)
  if [[ -n $path && -n $(owner "$path") ]]; then
    printf 'ok    %-28s %-52s %s\n' "$optional" "$path" "$(owner "$path")"
  else
    printf 'opt   %-28s %-52s %s\n' "$optional" "${path:-absent}" "not from Debian main; tests needing it skip without it"
  fi
done
if ((failures > 0)); then
  echo "$failures dependency problem(s): add the packages to DEPS in scripts/dev.sh"
  exit 1
fi
echo "every dependency comes from a package scripts/dev.sh installs"
