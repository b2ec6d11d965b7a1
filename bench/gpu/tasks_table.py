# tasks_table.py: the table of bench/gpu/tasks_h200.sh: per task, what was expected and claimed,
# the CPU-twin proof, the V0's correctness on the GPU, and its median latency against the reference's.
# Usage: python3 tasks_table.py DATA_TASKS WORK_DIR
import json
import os
import sys

tasks, work = sys.argv[1], sys.argv[2]


def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return None


def result_json(log):
    try:
        line = [l for l in open(log) if l.startswith("[test_kernel] RESULT_JSON=")][-1]
        return json.loads(line.split("=", 1)[1])
    except Exception:
        return None


print("| task | expected | claimed | GPU check | shapes | V0 us (median per shape) | reference us | speedup (geomean) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
wrong = 0
for name in sorted(os.listdir(tasks)):
    expected = load(os.path.join(tasks, name, "expected.json"))
    if expected is None:
        continue
    plan = load(os.path.join(work, name + ".plan.json")) or {}
    claimed = plan.get("pattern", {}).get("name", "plan failed")
    want = expected.get("family") or "no V0"
    check = load(os.path.join(work, name + ".check.json"))
    status = check.get("status") if check else ("-" if claimed == "unknown" else "not run")
    timed = result_json(os.path.join(work, name + ".time.log"))
    lat = timed.get("latency_us_by_shape", {}) if timed else {}
    ref = timed.get("reference_latency_us_by_shape", {}) if timed else {}
    fmt = lambda d: ", ".join("%s %.3g" % (k, v) for k, v in d.items()) or "-"
    speed = timed.get("speedup_vs_ref_geomean") if timed else None
    if claimed not in ("unknown", "plan failed") and claimed != expected.get("family"):
        wrong += 1
    print("| %s | %s | %s | %s | %d | %s | %s | %s |" % (name, want, "no V0" if claimed == "unknown" else claimed, status, len(lat), fmt(lat), fmt(ref),
                                                         "%.2fx" % speed if speed else "-"))
print("\nwrong families claimed: %d" % wrong)
