#!/usr/bin/env bash
# tasks_h200.sh: kwiki plan + baseline of every data/tasks task on the GPU here (an H200), and a
# table of what kwiki claimed, whether the V0 passed, and its latency against the reference.
# Phase check: plan and correctness, several tasks at a time (--no-timing: the GPU is shared).
# Phase time: the timing pass, one task at a time (fixed seed, in one process per task), so no
# timing shares the GPU. Phase table: the markdown table (bench/gpu/tasks_table.py) on stdout.
# Usage: bench/gpu/tasks_h200.sh KWIKI WORK_DIR check|time|table|all [JOBS]
#        (needs nvcc and a torch with CUDA; kwiki built, or carried with its libraries)
set -uo pipefail
kwiki=$(readlink -f "$1")
work=$(mkdir -p "$2" && cd "$2" && pwd)
phase=${3:-all}
jobs=${4:-8}
root=$(cd "$(dirname "$0")/../.." && pwd)
export KWIKI_BUNDLED_WIKI=${KWIKI_BUNDLED_WIKI:-$root/gpu-wiki} KWIKI_INDEX=${KWIKI_INDEX:-$work/index}
one() {  # plan and check one task, correctness only
  local t=$1 name
  name=$(basename "$t")
  "$kwiki" plan --task "$t" --gpu H200 --workspace "$work/ws/$name" --json > "$work/$name.plan.json" 2> "$work/$name.plan.err"
  if [[ $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pattern']['name'])" "$work/$name.plan.json" 2>/dev/null) != unknown ]]; then
    "$kwiki" baseline --workspace "$work/ws/$name" --no-timing --no-commit --json > "$work/$name.check.json" 2> "$work/$name.check.err"
  fi
}
if [[ $phase == check || $phase == all ]]; then
  "$kwiki" index --json > "$work/index.json" || exit 1
  export -f one
  export kwiki work
  # $TASKS (names, space-separated) limits the run to some tasks; default: all of data/tasks.
  if [[ -n ${TASKS:-} ]]; then for t in $TASKS; do echo "$root/data/tasks/$t/"; done; else ls -d "$root"/data/tasks/*/; fi |
    xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {}
fi
if [[ $phase == time || $phase == all ]]; then
  for plan in "$work"/*.plan.json; do
    name=$(basename "$plan" .plan.json)
    [[ -z ${TASKS:-} || " $TASKS " == *" $name "* ]] || continue
    [[ -f $work/$name.check.json ]] || continue
    if python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['status']=='PASS' else 1)" "$work/$name.check.json" 2>/dev/null; then
      (cd "$work/ws/$name" && KWIKI_KERNEL_SO=$work/ws/$name/build/kernel.so timeout 300 python3 test_kernel.py --fixed-seed-only --in-process \
        > "$work/$name.time.log" 2>&1)
    fi
  done
fi
if [[ $phase == table || $phase == all ]]; then
  python3 "$root/bench/gpu/tasks_table.py" "$root/data/tasks" "$work"
fi
