#!/usr/bin/env bash
# Installs kwiki into a temporary prefix, builds docs/examples/consumer against it with
# find_package(kwiki), runs the C++ and C consumers, and runs the ctypes example.
# Usage: tests/library_test.sh SOURCE_DIR BUILD_DIR [PYTHON]
set -euo pipefail
src=$1
build=$2
python=${3:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
test -f "$tmp/prefix/include/kwiki/kwiki.h"
test -f "$tmp/prefix/lib/pkgconfig/kwiki.pc"
test -x "$tmp/prefix/bin/kwiki"
test -d "$tmp/prefix/share/kwiki/gpu-wiki/hardware_wiki/records"
# The installed CLI finds its installed gpu-wiki.
"$tmp/prefix/bin/kwiki" index --index "$tmp/index" --json > /dev/null
cmake -S "$src/docs/examples/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" -G Ninja > "$tmp/configure.log"
cmake --build "$tmp/consumer" > "$tmp/build.log"
export LD_LIBRARY_PATH="$tmp/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$tmp/consumer/consumer_cpp" "$tmp/index"
"$tmp/consumer/consumer_c" "$tmp/index"
"$python" "$src/docs/examples/kwiki_ctypes.py" "$tmp/prefix/lib/libkwiki.so" "$tmp/index"
echo "library test passed"
