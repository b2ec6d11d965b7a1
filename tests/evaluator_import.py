# evaluator_import.py: imports a workspace's kernel.py the way an external kernel evaluator does and
# checks it against reference.py on the CPU: Model(**init_kwargs)(**inputs), the same output
# structure (tensor, tuple, dict keys), dtypes and shapes, values within the harness's tolerance.
# Usage: python evaluator_import.py WORKSPACE   (after kwiki baseline --device cpu built build/kernel_cpu.so)
import importlib.util
import inspect
import json
import os
import sys

ws = os.path.abspath(sys.argv[1])
sys.path.insert(0, ws)
import torch  # noqa: E402
import kwiki_device  # noqa: E402

kwiki_device.map_cuda_to("cpu")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


reference = load("reference", os.path.join(ws, "reference.py"))
kernel = load("kernel", os.path.join(ws, "kernel.py"))
factory = load("kwiki_input", os.path.join(ws, "task", "input.py"))
from kwiki_families import compare  # noqa: E402

shapes = json.load(open(os.path.join(ws, "task", "shapes.json")))
checked = 0
for sid, spec in shapes.items():
    spec = spec or {}
    init, kw = spec.get("init_kwargs") or {}, dict(spec.get("input_kwargs") or {})
    s = kwiki_device.shrink_factor([init, kw])
    init, kw = kwiki_device.shrunk(init, s), kwiki_device.shrunk(kw, s)
    if "device" in inspect.signature(factory._make_inputs).parameters:
        kw["device"] = "cpu"
    torch.manual_seed(0)
    inputs = factory._make_inputs(**kw)
    clone = lambda d: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in d.items()}
    with torch.no_grad():
        want = reference.Model(**init)(**clone(inputs))
        got = kernel.Model(**init)(**clone(inputs))
    assert type(got) is type(want) or (isinstance(got, tuple) and isinstance(want, (tuple, list))), "%s: %s vs %s" % (sid, type(got), type(want))
    if isinstance(want, dict):
        assert list(got.keys()) == list(want.keys()), "%s: keys %s vs %s" % (sid, list(got), list(want))
        pairs = [(k, got[k], want[k]) for k in want]
    elif torch.is_tensor(want):
        pairs = [("out", got, want)]
    else:
        assert len(got) == len(want), "%s: %d outputs vs %d" % (sid, len(got), len(want))
        pairs = [("out%d" % i, g, w) for i, (g, w) in enumerate(zip(got, want))]
    for name, g, w in pairs:
        ok, msg, _, _ = compare(name, g, w)
        assert ok, "%s: %s" % (sid, msg)
    checked += 1
print("evaluator import: %d shape(s) match the reference" % checked)
