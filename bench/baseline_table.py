# baseline_table.py: the per-shape table of a baseline_bench.sh run (reads each workspace's plan and memory).
import json
import math
import os
import sys

out = sys.argv[1]
rows = []
print("%-28s %-22s %-9s %10s %10s %8s %8s %8s %8s" % ("task", "shape", "status", "lat us", "ref us", "speedup", "%BW", "%peak", "%SOL"))
for name in sorted(os.listdir(os.path.join(out, "ws"))):
    ws = os.path.join(out, "ws", name)
    try:
        plan = json.load(open(os.path.join(ws, "plans", "v0_plan.json")))
        mem = json.load(open(os.path.join(ws, "memory", "v0.json")))
    except Exception as e:
        print("%-28s missing results: %s" % (name, e))
        continue
    facts = {f["metric"]: f.get("value") for f in plan["hardware_facts"]}
    bw = facts.get("bandwidth")
    measured_bw = facts.get("measured copy bandwidth")
    mpeak = next((v for k, v in facts.items() if k.startswith("matrix peak")), None)
    status = mem["correctness"]["status"]
    lat = mem["performance"]["latency_us_by_shape"]
    ref = mem["performance"]["reference_latency_us_by_shape"]
    for s in plan["shapes"]:
        sid = s["id"]
        if sid not in lat:
            print("%-28s %-22s %-9s %10s" % (name, sid, status, "not measured"))
            continue
        us = lat[sid]
        work = s.get("work") or {}
        byt = work.get("bytes_read", 0) + work.get("bytes_written", 0)
        flops = work.get("matrix_flops", 0) + work.get("vector_flops", 0)
        gbs = byt / (us * 1e-6) / 1e9
        pct_bw = 100 * gbs / (bw * 1e3) if bw else float("nan")
        pct_mbw = 100 * gbs / (measured_bw * 1e3) if measured_bw else float("nan")
        pct_peak = 100 * (work.get("matrix_flops", 0) / (us * 1e-6) / 1e12) / mpeak if mpeak and work.get("matrix_flops") else float("nan")
        sol = (s.get("roofline") or {}).get("sol_us")
        r = ref.get(sid)
        rows.append((name, sid, us, r, pct_bw, pct_mbw, pct_peak, 100 * sol / us if sol else float("nan")))
        print("%-28s %-22s %-9s %10.2f %10s %8s %8.1f %8s %8.1f   (%.1f%% of measured copy)" % (
            name, sid, status, us, "%.2f" % r if r else "-", "%.2fx" % (r / us) if r else "-", pct_bw,
            "%.1f" % pct_peak if not math.isnan(pct_peak) else "-", 100 * sol / us if sol else float("nan"), pct_mbw))
json.dump(rows, open(os.path.join(out, "table.json"), "w"), indent=1)
