# harness_gap.py: times one workspace kernel (made by `kwiki baseline`) several ways, to tell the
# harness's timing from the kernel's: CUDA-graph replay vs a plain launch, L2 zeroed vs not
# flushed, the task's random input vs a constant one.
# Usage (on the GPU machine): python3 bench/gpu/harness_gap.py WORKSPACE SHAPE_ID
import os
import sys

import torch

ws, shape_id = sys.argv[1], sys.argv[2]
sys.path.insert(0, ws)
os.chdir(ws)
import test_kernel as tk  # noqa: E402  (the workspace's own harness: load, time_kernel)

import json  # noqa: E402

spec = json.load(open(os.path.join(tk.TASK, "shapes.json")))[shape_id]
factory = tk.load("kwiki_input", os.path.join(tk.TASK, "input.py"))
kernel = tk.load("kernel", os.path.join(ws, "kernel.py"))
kw = dict(spec.get("input_kwargs", {}))
kw["seed"] = 0
model = kernel.Model(**spec.get("init_kwargs", {}))
inputs = factory._make_inputs(**kw)
l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
flush = torch.empty(max(2 * l2, 128 << 20), dtype=torch.uint8, device="cuda")


class NoFlush:
    def zero_(self):
        pass


reference = tk.load("reference", os.path.join(ws, "reference.py"))


def after_correctness(release):
    """As run_case does: the reference and the kernel run once on clones before the timing."""
    clone = lambda d: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in d.items()}
    want = tk.flatten(reference.Model(**spec.get("init_kwargs", {}))(**clone(inputs)))
    got = tk.flatten(model(**clone(inputs)))
    torch.cuda.synchronize()
    if release:
        del want, got
        torch.cuda.empty_cache()
    return tk.time_kernel(model, clone(inputs), flush)


with torch.no_grad():
    rows = [("after correctness, as run_case", after_correctness(False)),
            ("after correctness, cache emptied", after_correctness(True)),
            ("graph, L2 zeroed (harness)", tk.time_kernel(model, dict(inputs), flush)),
            ("graph, no flush", tk.time_kernel(model, dict(inputs), NoFlush()))]
    const = {k: (v.clone().fill_(0.75) if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in inputs.items()}
    rows.append(("graph, L2 zeroed, constant input", tk.time_kernel(model, const, flush)))
    tk_graph = torch.cuda.CUDAGraph  # keep a reference; force the plain path by breaking capture
    torch.cuda.CUDAGraph = None
    rows.append(("plain launch, L2 zeroed", tk.time_kernel(model, dict(inputs), flush)))
    torch.cuda.CUDAGraph = tk_graph
for name, r in rows:
    print("%-36s median %9.2f us  p10 %9.2f  p90 %9.2f  (%s)" % (name, r["median"], r["p10"], r["p90"], r["mode"]))
