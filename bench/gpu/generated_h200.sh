#!/usr/bin/env bash
# generated_h200.sh: the generator's V0s on the GPU here (an H200): every task planned with
# --pattern generated and checked by kwiki baseline (correctness, all shapes); the hand family's
# V0 beside it where one is proven; then each task timed in one process (generated_bench.py:
# generated, hand template, torch eager, torch.compile) and the table printed (generated_table.py).
# With $KWIKI_DSL_PYTHON set (a python that imports cutlass.cute), the task's CuteDSL V0 is planned,
# checked and timed beside them: the hand family's own when it has one (the gemm family), else the
# generator's IR in CuteDSL (--pattern generated --framework cutedsl).
# Usage: bench/gpu/generated_h200.sh KWIKI WORK [TASK...]   (default: every data/tasks task)
#        Phases by $PHASES (default "check warm time table"); $JOBS parallel checks (default 8);
#        $GEN_ONLY: tasks whose hand family is not planned beside the generated V0;
#        $KINDS: which V0s the check phase plans (default "gen hand", and "cute" with the DSL);
#        $BENCH_FLAGS: extra flags of generated_bench.py's timing (--no-compile).
set -uo pipefail
kwiki=$(readlink -f "$1")
work=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${JOBS:-8}
phases=${PHASES:-check warm time table}
export KWIKI_BUNDLED_WIKI=${KWIKI_BUNDLED_WIKI:-$root/gpu-wiki} KWIKI_INDEX=${KWIKI_INDEX:-$work/index}
tasks=("$@")
KINDS=${KINDS:-gen hand${KWIKI_DSL_PYTHON:+ cute}}
if ((${#tasks[@]} == 0)); then
  for d in "$root"/data/tasks/*/; do tasks+=("$(basename "$d")"); done
fi
check() {  # plan (generated, CuteDSL, and the default family unless $GEN_ONLY names the task) and check on the GPU, no timing
  local t=$1 kind kinds
  read -r -a kinds <<< "$KINDS"
  for kind in "${kinds[@]}"; do
    [[ $kind == hand && " ${GEN_ONLY:-} " == *" $t "* ]] && continue
    local ws=$work/ws/$t/$kind args=()
    [[ $kind == gen ]] && args=(--pattern generated)
    rm -rf "$ws"
    if [[ $kind == cute ]]; then  # the family's CuteDSL V0 where it has one, else the generator's
      "$kwiki" plan --task "$root/data/tasks/$t" --gpu H200 --workspace "$ws" --framework cutedsl --json > "$work/$t.$kind.plan.json" 2> "$work/$t.$kind.plan.err" ||
        { rm -rf "$ws"; args=(--pattern generated --framework cutedsl); }
    fi
    [[ -d $ws ]] || "$kwiki" plan --task "$root/data/tasks/$t" --gpu H200 --workspace "$ws" "${args[@]}" --json > "$work/$t.$kind.plan.json" 2> "$work/$t.$kind.plan.err"
    local fam
    fam=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pattern']['name'])" "$work/$t.$kind.plan.json" 2>/dev/null)
    if [[ $fam == unknown || -z $fam || ($kind == hand && $fam == generated) ]]; then
      rm -rf "$ws"
      continue
    fi
    "$kwiki" baseline --workspace "$ws" --no-timing --no-commit --json > "$work/$t.$kind.check.json" 2> "$work/$t.$kind.check.err"
  done
}
passed() { python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get('status')=='PASS' else 1)" "$1" 2>/dev/null; }
if [[ " $phases " == *" check "* ]]; then
  "$kwiki" index --json > "$work/index.json" || exit 1
  export -f check
  export kwiki work root GEN_ONLY KINDS
  printf '%s\n' "${tasks[@]}" | xargs -P "$jobs" -I{} bash -c 'check "$@"' _ {}
fi
ready=()  # the tasks with a V0 that passed on the GPU: generated, hand or CuteDSL
for t in "${tasks[@]}"; do
  for kind in gen hand cute; do
    if passed "$work/$t.$kind.check.json"; then ready+=("$t"); break; fi
  done
done
if [[ " $phases " == *" warm "* ]]; then  # torch.compile's caches filled in parallel, before any timing
  printf '%s\n' "${ready[@]}" | xargs -P "$jobs" -I{} sh -c 'python3 "$0/bench/gpu/generated_bench.py" "$1" "$0/data/tasks/$2" --warm-only > "$1/$2.warm.log" 2>&1' "$root" "$work" {}
fi
if [[ " $phases " == *" time "* ]]; then  # one task at a time: no timing shares the GPU
  dirs=()
  for t in "${ready[@]}"; do dirs+=("$root/data/tasks/$t"); done
  python3 "$root/bench/gpu/generated_bench.py" "$work" "${dirs[@]}" ${BENCH_FLAGS:-} > "$work/results.jsonl" 2> "$work/time.err"
fi
if [[ " $phases " == *" table "* ]]; then
  python3 "$root/bench/gpu/generated_table.py" "$work" "${tasks[@]}"
fi
