# check_gemm_cutedsl.py: the gemm family's CuteDSL V0 (baseline/kernels/gemm_cutedsl.py) on this GPU against
# torch, at every shape of the gemm tasks (f_linear_with_bias_inputs, hf_linear_no_bias, linear_bf16) and a
# few tail shapes (M, N, K not multiples of the 128 x 128 x 64 tile). kernel.py is made from the template as
# `kwiki baseline` makes it, and each shape goes through its _launcher (what Model.prepare calls after the
# family's adapter): out NaN-filled first, so an element the kernel never writes shows as NaN. Per shape:
# PASS/FAIL by the harness's bf16 rule (kwiki_families.compare), max abs error, NaN count, and the median
# time of the kernel beside torch.nn.functional.linear (CUDA events). The shapes run in a child process; when
# it dies (a device fault poisons its CUDA context) or a shape hangs past SHAPE_TIMEOUT_S, that shape FAILs
# and a new child takes the rest, so one failing shape does not stop the others.
# Usage (on the GPU machine, the DSL importable): python3 bench/gpu/check_gemm_cutedsl.py
import importlib.util
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import traceback

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = os.path.join(ROOT, "data", "tasks")
REPS, WARMUP = 50, 10
SHAPE_TIMEOUT_S = 300  # one shape, its first compile included
# (name, M, N, K, bias) beyond the tasks': tails in M, N and K (K % 64 != 0 but K % 8 == 0: still TMA).
EXTRA = [("tail_m77_n200_k136_bias", 77, 200, 136, True), ("tail_m130_n136_k72", 130, 136, 72, False),
         ("tail_m1_n8_k8_bias", 1, 8, 8, True), ("tail_m300_n1000_k40", 300, 1000, 40, False)]


def task_shapes():
    """(name, M, N, K, bias) of each shape in the gemm tasks' shapes.json."""
    def qkv(i, _):
        return i["num_tokens"], (i["num_heads"] + 2 * i["num_kv_heads"]) * i["head_dim"], i["hidden_size"], True

    def hf(i, n):
        return i["batch_size"] * i["seq_len"], n["out_features"], i["hidden_size"], False

    def lin(i, n):
        return i["num_tokens"], n["out_features"], i["in_features"], bool(n.get("bias", False))

    shapes = []
    for task, size in (("f_linear_with_bias_inputs", qkv), ("hf_linear_no_bias", hf), ("linear_bf16", lin)):
        with open(os.path.join(TASKS, task, "shapes.json")) as f:
            for sid, s in json.load(f).items():
                shapes.append(("%s/%s" % (task, sid),) + size(s["input_kwargs"], s["init_kwargs"]))
    return shapes


def load_kernel():
    """kernel.py from the template, its slots filled as kwiki baseline fills them (the family binding is not
    used on this path), beside kwiki_families.py and a stand-in reference module."""
    work = tempfile.mkdtemp(prefix="kwiki_gemm_cutedsl_")
    with open(os.path.join(ROOT, "baseline", "kernels", "gemm_cutedsl.py")) as f:
        text = f.read()
    for slot, value in (("@BINDING@", "{}"), ("@FORM@", "tensor"), ("@OUTPUT_NAMES@", '["out"]'), ("@TARGET@", "sm_90a")):
        text = text.replace(slot, value)
    with open(os.path.join(work, "kernel.py"), "w") as f:
        f.write(text)
    with open(os.path.join(ROOT, "planner", "python", "kwiki_families.py")) as src, open(os.path.join(work, "kwiki_families.py"), "w") as dst:
        dst.write(src.read())
    with open(os.path.join(work, "reference.py"), "w") as f:
        f.write("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    sys.path.insert(0, work)
    spec = importlib.util.spec_from_file_location("kernel", os.path.join(work, "kernel.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kernel"] = mod
    spec.loader.exec_module(mod)
    return mod


def median_us(fn):
    """Median time in us of fn() over REPS launches, each between two CUDA events."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return sorted(times)[len(times) // 2]


def check_shape(kernel, name, m, n, k, with_bias):
    """One shape: PASS/FAIL against torch in fp32, then both timings. Returns whether it passed."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
    w = (torch.randn(n, k, generator=g, device="cuda") / k ** 0.5).to(torch.bfloat16)
    bias = (0.5 * torch.randn(n, generator=g, device="cuda")).to(torch.bfloat16) if with_bias else None
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    want = x.float() @ w.float().t()
    if bias is not None:
        want = want + bias.float()
    want = want.to(torch.bfloat16)
    path = "tma" if kernel._tma_ok(x, w, k) else "simt"
    launch = kernel._launcher(x, w, bias, out)
    launch()
    torch.cuda.synchronize()
    nans = int(torch.isnan(out).sum())
    ok, why, _, _ = kernel._families.compare("out", out, want)
    max_abs = float(torch.nan_to_num((out.float() - want.float()).abs(), nan=0.0).max())  # over the non-NaN outputs
    us = median_us(launch)
    torch_us = median_us(lambda: F.linear(x, w, bias))
    print("%s %-52s M=%-5d N=%-5d K=%-5d bias=%d path=%s max_abs=%.3g nans=%d  cutedsl %.1f us  F.linear %.1f us%s"
          % ("PASS" if ok else "FAIL", name, m, n, k, with_bias, path, max_abs, nans, us, torch_us, "" if ok else "  (" + why + ")"),
          flush=True)
    return ok


def run_child(indices):
    """The child: the shapes at these indices, one "DONE index ok" line after each."""
    shapes = task_shapes() + EXTRA
    kernel = load_kernel()
    for i in indices:
        name, m, n, k, with_bias = shapes[i]
        try:
            ok = check_shape(kernel, name, m, n, k, with_bias)
        except Exception:
            ok = False
            print("FAIL %s: %s" % (name, traceback.format_exc().strip().splitlines()[-1]), flush=True)
            traceback.print_exc()
        print("DONE %d %d" % (i, ok), flush=True)


def forward_lines(stream, lines):
    """Every line of the child's stdout into the queue, then None when it closes."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_parent():
    """Children over the pending shapes until each has a result; returns the count of failures."""
    shapes = task_shapes() + EXTRA
    pending, failed = list(range(len(shapes))), 0
    while pending:
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child"] + [str(i) for i in pending],
                                 stdout=subprocess.PIPE, text=True)
        lines = queue.Queue()
        threading.Thread(target=forward_lines, args=(child.stdout, lines), daemon=True).start()
        while pending:
            try:
                line = lines.get(timeout=SHAPE_TIMEOUT_S)
            except queue.Empty:
                line = "TIMEOUT"
            if line is None or line == "TIMEOUT":
                # The child died or hangs at the first pending shape: that shape fails, a new child takes the rest.
                child.kill()
                child.wait()
                why = "no result in %d s" % SHAPE_TIMEOUT_S if line == "TIMEOUT" else "the process died (rc %s)" % child.returncode
                print("FAIL %s: %s" % (shapes[pending[0]][0], why), flush=True)
                failed += 1
                pending.pop(0)
                break
            if line.startswith("DONE "):
                _, index, ok = line.split()
                pending.remove(int(index))
                failed += ok != "1"
            else:
                print(line, end="", flush=True)
        else:
            child.wait()
    return failed


def main():
    if not torch.cuda.is_available():
        sys.exit("check_gemm_cutedsl.py: no CUDA device here")
    if sys.argv[1:2] == ["--child"]:
        run_child([int(i) for i in sys.argv[2:]])
        return
    print("device: %s" % torch.cuda.get_device_name(), flush=True)
    failed = run_parent()
    print("%s: %d shape(s) failed" % ("FAIL" if failed else "PASS", failed), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
