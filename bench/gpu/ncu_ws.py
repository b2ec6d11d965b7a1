# ncu_ws.py WS [SHAPE]: launches a built workspace's V0 (kernel.py's prepare) 5 times on one task shape (default the first), then the
# torch reference 5 times: a process for ncu to profile with a kernel-name filter (session 17: layer_norm, bench/results/layer_norm_ab_h200-session17.txt).
import importlib.util, json, os, sys, torch
ws = sys.argv[1]; sys.path.insert(0, ws)
def load(n, p):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); sys.modules[n] = m; s.loader.exec_module(m); return m
task = os.path.join(ws, "task")
factory = load("inp", os.path.join(task, "input.py")); load("reference", os.path.join(task, "reference.py"))
shapes = json.load(open(os.path.join(task, "shapes.json")))
sid = sys.argv[2] if len(sys.argv) > 2 else next(iter(shapes))
spec = shapes[sid] or {}
init, kw = spec.get("init_kwargs") or {}, spec.get("input_kwargs") or {}
inputs = factory._make_inputs(**kw)
km = load("kernel", os.path.join(ws, "kernel.py"))
model = km.Model(**init).cuda()
launch, result = model.prepare(**inputs)
ref = sys.modules["reference"].Model(**init).cuda()
for _ in range(5): launch()
torch.cuda.synchronize()
with torch.no_grad():
    for _ in range(5): ref(**inputs)
torch.cuda.synchronize()
print("ok", sid)
