# generated_table.py: the markdown tables of generated_h200.sh's run: per task, what the generator
# did on the GPU (checked PASS/FAIL, or why not), and per shape the timings side by side.
# Usage: python generated_table.py WORK TASK...
import json
import os
import sys


def status(path):
    try:
        return json.load(open(path)).get("status", "?")
    except Exception:
        return "-"


def main():
    work, tasks = sys.argv[1], sys.argv[2:]
    print("## Correctness on the GPU (kwiki baseline --no-timing, every shape)\n")
    print("| task | generated V0 | CuteDSL V0 | hand family | hand V0 |\n| --- | --- | --- | --- | --- |")
    for t in tasks:
        hand = "-"
        try:
            hand = json.load(open(os.path.join(work, t + ".hand.plan.json")))["pattern"]["name"]
        except Exception:
            pass
        gen = status(os.path.join(work, t + ".gen.check.json"))
        if gen == "-":  # no check: the plan declined the task, or the run never reached it
            try:
                named = json.load(open(os.path.join(work, t + ".gen.plan.json")))["pattern"]["name"]
                gen = "not lowered" if named != "generated" else "planned, not checked"
            except Exception:
                gen = "not checked (not reached)" if not os.path.exists(os.path.join(work, t + ".gen.plan.err")) else "not lowered"
        print("| %s | %s | %s | %s | %s |" % (t, gen, status(os.path.join(work, t + ".cute.check.json")), hand, status(os.path.join(work, t + ".hand.check.json")) if hand not in ("-", "generated") else "-"))
    rows = []
    path = os.path.join(work, "results.jsonl")
    if os.path.exists(path):
        rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        return
    c = next(r["ceilings"] for r in rows if "ceilings" in r)
    print("\n## Timings (us, median of 50 CUDA-graph replays, L2 flushed; one process per task)\n")
    print("Measured in the same run: copy bandwidth %.2f TB/s (1 GiB read + written), launch floor %.2f us (one tiny kernel replayed).\n" %
          (c["copy_tb_s"], c["launch_floor_us"]))
    print("| task | shape | MB moved | generated | hand | CuteDSL | eager | torch.compile | gen % of copy BW | gen / floor | gen vs eager | gen vs compile |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:  # the task's process failed before or while timing: say so in the shape column
            print("| %s | %s |%s" % (r["task"], "not timed: " + r["error"].replace("|", "/"), " - |" * 10))
            continue
        g, h, u = r.get("gen", {}), r.get("hand"), r.get("cute")
        gm = g.get("median") if g.get("ok") else None
        hm = h.get("median") if h and h.get("ok") else None
        um = u.get("median") if u and u.get("ok") else None
        e, k = r["eager"]["median"], (r.get("compile") or {}).get("median")  # no compile: a --no-compile run
        bw = r["bytes"] / (gm * 1e-6) / 1e12 if gm else None
        cell = lambda v: "%.2f" % v if v is not None else "-"
        print("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["task"], r["shape"], r["bytes"] / 1e6, cell(gm) if g.get("ok") else ("FAIL" if g else "-"),
            cell(hm) if h else "-", cell(um) if u else "-", cell(e), cell(k), "%.0f%%" % (100 * bw / r["ceilings"]["copy_tb_s"]) if bw else "-",
            "%.2f" % (gm / r["ceilings"]["launch_floor_us"]) if gm else "-", "%.2fx" % (e / gm) if gm else "-", "%.2fx" % (k / gm) if gm and k else "-"))

    lib = [r for r in rows if r.get("library")]
    if lib:
        print("\n## The hand V0 against torch's library path (same run; rates on each one's own work: a padded batch does more)\n")
        print("| task | shape | hand us | hand TFLOP/s | library | library us | library TFLOP/s | hand rate / library rate |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in lib:
            h, b = r.get("hand") or {}, r["library"]
            hm = h.get("median") if h.get("ok") else None
            hr = r["library"]["v0_flops"] / (hm * 1e-6) / 1e12 if hm else None
            br = b["flops"] / (b["median"] * 1e-6) / 1e12
            print("| %s | %s | %s | %s | %s | %.2f | %.1f | %s |" % (r["task"], r["shape"], "%.2f" % hm if hm else "-", "%.1f" % hr if hr else "-",
                                                                 b["label"], b["median"], br, "%.0f%%" % (100 * hr / br) if hr else "-"))


if __name__ == "__main__":
    main()
