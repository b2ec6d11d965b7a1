#!/usr/bin/env bash
# tasks_h200.sh: kwiki plan + baseline of every data/tasks task on the GPU here (an H200), and a
# table of what kwiki claimed, whether the V0 passed, and its latency against the reference.
# Correctness first, several tasks at a time (--no-timing: the GPU is shared); then the timing
# pass one task at a time (the fixed seed only), so no timing shares the GPU.
# Usage: bench/gpu/tasks_h200.sh KWIKI OUT_DIR [JOBS]     (needs nvcc, torch with CUDA, kwiki built)
set -uo pipefail
kwiki=$(readlink -f "$1")
out=$(mkdir -p "$2" && cd "$2" && pwd)
jobs=${3:-8}
root=$(cd "$(dirname "$0")/../.." && pwd)
export KWIKI_BUNDLED_WIKI=${KWIKI_BUNDLED_WIKI:-$root/gpu-wiki} KWIKI_INDEX=${KWIKI_INDEX:-$out/index}
"$kwiki" index --json > "$out/index.json" || exit 1
work=$out/ws
mkdir -p "$work"
one() {  # plan and check one task, correctness only
  local t=$1 name
  name=$(basename "$t")
  "$kwiki" plan --task "$t" --gpu H200 --workspace "$work/$name" --json > "$work/$name.plan.json" 2> "$work/$name.plan.err"
  if [[ $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pattern']['name'])" "$work/$name.plan.json" 2>/dev/null) != unknown ]]; then
    "$kwiki" baseline --workspace "$work/$name" --no-timing --no-commit --json > "$work/$name.check.json" 2> "$work/$name.check.err"
  fi
}
export -f one
export kwiki work
ls -d "$root"/data/tasks/*/ | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {}
# Timing: the harness alone, one task at a time, on each claimed task that passed.
for plan in "$work"/*.plan.json; do
  name=$(basename "$plan" .plan.json)
  check=$work/$name.check.json
  [[ -f $check ]] || continue
  if python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['status']=='PASS' else 1)" "$check" 2>/dev/null; then
    (cd "$work/$name" && KWIKI_KERNEL_SO=$work/$name/build/kernel.so python3 test_kernel.py --fixed-seed-only > "$work/$name.time.log" 2>&1)
  fi
done
python3 "$root/bench/gpu/tasks_table.py" "$root/data/tasks" "$work" > "$out/tasks_h200.md"
cat "$out/tasks_h200.md"
