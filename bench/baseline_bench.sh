#!/usr/bin/env bash
# baseline_bench.sh: plans and baselines every sample task on this machine's GPU and prints one
# table (latency, reference latency, speedup, % of bandwidth or peak, % of SOL) per shape.
# Usage: bench/baseline_bench.sh OUT_DIR [GPU=H200] [KWIKI=build/cli/kwiki]
# SHAPES_FILE=path limits the run: lines "<task> <shape id>[,<shape id>...]" (other tasks skipped).
# Needs: a GPU of that product, nvcc, python3 with torch; kwiki built (or carried) with its libs.
set -uo pipefail
out=${1:?usage: bench/baseline_bench.sh OUT_DIR [GPU] [KWIKI]}
gpu=${2:-H200}
kwiki=${3:-build/cli/kwiki}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
index="$out/index"
"$kwiki" index --wiki "$root/gpu-wiki" --index "$index" --text >&2 || exit 4
for task in "$root"/data/tasks/*/; do
  name=$(basename "$task")
  ws="$out/ws/$name"
  shapes=()
  if [[ -n ${SHAPES_FILE:-} ]]; then
    line=$(awk -v t="$name" '$1 == t {print $2}' "$SHAPES_FILE")
    [[ -z $line ]] && continue
    shapes=(--shapes "$line")
  fi
  echo "== $name" >&2
  "$kwiki" plan --task "$task" --gpu "$gpu" --workspace "$ws" --index "$index" --force --text >&2 || { echo "plan failed: $name" >&2; continue; }
  start=$(date +%s)
  "$kwiki" baseline --workspace "$ws" "${shapes[@]}" --json > "$out/$name.baseline.json" 2> "$out/$name.baseline.err"
  echo "   baseline exit $? in $(( $(date +%s) - start )) s" >&2
  # Keep the report beside the JSON: its case table carries the messages of any failing shape.
  [[ -f $ws/baseline_report.md ]] && cp "$ws/baseline_report.md" "$out/$name.baseline_report.md"
done
python3 "$root/bench/baseline_table.py" "$out"
