# generated_bench.py: the generator's V0 against kwiki's hand template, torch eager and torch.compile,
# side by side in one process per task, on the GPU here, and torch's library path for the hand
# family's work where there is one (library_paths.py: SDPA-flash, cuBLAS, _scaled_mm). Every candidate is checked against the
# eager reference first, then timed the same way: captured in a CUDA graph and replayed (plain calls
# when capture fails), the L2 flushed before each repetition, median of REPS.
# Usage: python generated_bench.py WORK TASK_DIR... [--warm-only] [--no-compile]
#   --no-compile: torch.compile is neither built nor timed (a run that compares kwiki's own V0s).
#   WORK/ws/<task>/gen  (kwiki plan --pattern generated; kwiki baseline) and, when present,
#   WORK/ws/<task>/hand (the hand-written family's workspace) and WORK/ws/<task>/cute (the task's
#   CuteDSL V0, the family's own or the generator's: kernel.py launches the DSL kernel from
#   Model.forward; timed as forward calls captured in the graph). One JSON line per shape on stdout.
import importlib.util
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import library_paths  # noqa: E402

REPS, WARMUP = 50, 10


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def passed(path):
    try:
        return json.load(open(path)).get("status") == "PASS"
    except Exception:
        return False


def flatten(out):
    if isinstance(out, dict):
        return list(out.items())
    if isinstance(out, (tuple, list)):
        return [("out%d" % i, v) for i, v in enumerate(out)]
    return [("out", out)]


def timed(fn, flush):
    """Median, p10, p90 in us of fn() replayed from a CUDA graph (or called), L2 flushed each time."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    run, mode = fn, "call"
    try:
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph.replay()
        torch.cuda.synchronize()
        run, mode = graph.replay, "graph"
    except Exception:
        torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(REPS):
        flush.sum()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    times.sort()
    q = lambda p: times[min(len(times) - 1, int(round(p * (len(times) - 1))))]
    return {"median": q(0.5), "p10": q(0.1), "p90": q(0.9), "mode": mode}


def ceilings(flush):
    """The copy bandwidth (1 GiB read + written: the better of copy_ and an elementwise kernel
    writing a + 0) and the launch floor (one tiny kernel replayed)."""
    a = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    copy = min(timed(lambda: b.copy_(a), flush)["median"], timed(lambda: torch.add(a, 0.0, out=b), flush)["median"])
    tiny = torch.zeros(1, device="cuda")
    floor = timed(lambda: tiny.add_(1), flush)
    return {"copy_tb_s": 2 * a.numel() * 4 / (copy * 1e-6) / 1e12, "launch_floor_us": floor["median"]}


def bench_task(work, task_dir, warm_only, no_compile, flush, base):
    name = os.path.basename(task_dir.rstrip("/"))
    # kwiki_device and kwiki_families from whichever of the task's workspaces exists (their copies are the same)
    sys.path.insert(0, next(d for d in (os.path.join(work, "ws", name, k) for k in ("gen", "hand", "cute")) if os.path.isdir(d)))
    import kwiki_device  # noqa: F401  (the workspace's copy)
    import kwiki_families
    factory = load("kwiki_bench_input_" + name, os.path.join(task_dir, "input.py"))
    reference = load("reference", os.path.join(task_dir, "reference.py"))  # kernel.py imports it by this name
    candidates = {}
    for kind in ("gen", "hand"):
        ws = os.path.join(work, "ws", name, kind)
        if os.path.exists(os.path.join(ws, "build", "kernel.so")):
            os.environ["KWIKI_KERNEL_SO"] = os.path.join(ws, "build", "kernel.so")
            candidates[kind] = load("kernel_%s_%s" % (kind, name), os.path.join(ws, "kernel.py"))
            candidates[kind]._gpu_library()  # bind this workspace's library now (the variable changes below)
    os.environ.pop("KWIKI_KERNEL_SO", None)
    cute = os.path.join(work, "ws", name, "cute", "kernel.py")
    if not warm_only and passed(os.path.join(work, name + ".cute.check.json")):
        candidates["cute"] = load("kernel_cute_" + name, cute)
    shapes = json.load(open(os.path.join(task_dir, "shapes.json")))
    # Every shape's inputs before any capture: a capture that fails (and falls back to calls) can leave torch's
    # default CUDA generator in capture mode, and a factory drawing from it afterwards raises "Offset increment
    # outside graph capture" (vllm_w8a8_block_fp8_matmul, session 17).
    made = {}
    for sid, spec in shapes.items():
        torch.manual_seed(0)
        made[sid] = {k: (v.cuda() if torch.is_tensor(v) else v) for k, v in factory._make_inputs(**dict((spec or {}).get("input_kwargs") or {})).items()}
    for sid, spec in shapes.items():
        spec = spec or {}
        init = spec.get("init_kwargs") or {}
        inputs = made.pop(sid)
        ref = reference.Model(**init).cuda()
        clone = lambda: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in inputs.items()}
        with torch.no_grad():
            want = flatten(ref(**clone()))
        compiled = None if no_compile else torch.compile(ref)
        if compiled is not None:
            with torch.no_grad():
                compiled(**clone())
        if warm_only:
            continue
        row = {"task": name, "shape": sid, "bytes": sum(v.numel() * v.element_size() for v in inputs.values() if torch.is_tensor(v)) +
               sum(v.numel() * v.element_size() for _, v in want if torch.is_tensor(v)), "ceilings": base}
        for kind, mod in candidates.items():
            model = mod.Model(**init).cuda()
            args = clone()
            if hasattr(model, "prepare"):
                launch, result = model.prepare(**args)
                launch()
            else:  # a DSL kernel.py: forward allocates its outputs and launches
                held = {}
                launch = lambda: held.__setitem__("out", model(**args))
                result = lambda: held["out"]
                with torch.no_grad():
                    launch()
            torch.cuda.synchronize()
            got = flatten(result())
            ok = all(kwiki_families.compare(n, g, w)[0] for (n, g), (_, w) in zip(got, want)) and len(got) == len(want)
            row[kind] = {"ok": ok}
            if ok:
                row[kind].update(timed(launch, flush))
            if kind == "hand" and ok:  # torch's library path for the family's work, on the V0's own tensors
                family, tensors, dims, params = model.launch_arguments(**args)[:4]
                path = library_paths.library_path(family, tensors, dims, params)
                if path:
                    row["library"] = dict(timed(path.call, flush), label=path.label, flops=path.flops, v0_flops=path.v0_flops)
        fixed = clone()
        with torch.no_grad():
            row["eager"] = timed(lambda: ref(**fixed), flush)
            if compiled is not None:
                row["compile"] = timed(lambda: compiled(**fixed), flush)
        print(json.dumps(row), flush=True)


def main():
    """Usage: generated_bench.py WORK TASK_DIR... [--warm-only] [--no-compile]: the tasks one after another in this process."""
    work = sys.argv[1]
    warm_only = "--warm-only" in sys.argv
    no_compile = "--no-compile" in sys.argv
    flush = torch.zeros(2 * 128 * 1024 * 1024 // 4, device="cuda")  # 2x the H200's 50 MB L2, rounded up
    base = None if warm_only else ceilings(flush)
    for task_dir in [a for a in sys.argv[2:] if not a.startswith("--")]:
        try:
            bench_task(work, os.path.abspath(task_dir), warm_only, no_compile, flush, base)
        except Exception as e:  # one task's failure is reported, the others still run
            print(json.dumps({"task": os.path.basename(task_dir.rstrip("/")), "error": "%s: %s" % (type(e).__name__, e)}), flush=True)


if __name__ == "__main__":
    main()
