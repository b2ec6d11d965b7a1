# trace_task.py: runs a task's reference per shape and records what it computes (run by kwiki plan).
# Usage: python trace_task.py [--twin LIB --families A,B,...] TASK_DIR OUT_DIR SHAPE_ID...
# Per shape: (1) the true tensors at the given sizes, from a run on the meta device (shapes and
# dtypes, no data), else on the CPU; (2) a run on the CPU at a proportionally smaller size under a
# dispatch recorder: the aten ops executed (the graph), and the inputs, parameters and outputs
# saved as raw files in OUT_DIR; (3) with --twin, each family's CPU twin run on those inputs
# (kwiki_families.prove) against the reference's outputs. One JSON line on stdout.
import array
import importlib.util
import inspect
import json
import math
import os
import signal
import sys
import traceback

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64", "int8": "int8", "uint8": "uint8",
          "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool", "float8_e4m3fn": "fp8_e4m3fn",
          "float8_e4m3fnuz": "fp8_e4m3fnuz", "float8_e5m2": "fp8_e5m2"}
MAX_OPS = 4000            # ops recorded per shape (a Python loop over sequences records many)
MAX_SAVED = 4 << 20       # elements per saved tensor: beyond this the shape is not proven here
REAL_CPU_SECONDS = 10     # the real-size CPU fallback gives up after this (the meta run is the usual path)


def dtype_name(dtype):
    return DTYPES.get(str(dtype).replace("torch.", ""), str(dtype).replace("torch.", ""))


def load(task_dir, name):
    spec = importlib.util.spec_from_file_location("kwiki_task_" + name, os.path.join(task_dir, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def flatten_outputs(result):
    import torch
    if torch.is_tensor(result):
        return "tensor", [("out", result)]
    if isinstance(result, dict):
        return "dict", list(result.items())
    if isinstance(result, (tuple, list)):
        return "tuple", [("out%d" % i, v) for i, v in enumerate(result)]
    return "other", [("out", result)]


def make_inputs(factory, kwargs, device):
    kw = dict(kwargs)
    if "device" in inspect.signature(factory._make_inputs).parameters:
        kw["device"] = device
    return factory._make_inputs(**kw)


def spec_of(name, value, kind):
    import torch
    if not torch.is_tensor(value):
        return {"name": name, "kind": kind, "python": type(value).__name__, "value": value if isinstance(value, (int, float, bool, str)) else None}
    return {"name": name, "kind": kind, "shape": list(value.shape), "dtype": dtype_name(value.dtype), "stride": list(value.stride())}


def storage_key(t):
    """The identity of the memory a tensor views (None on the meta device, which has none)."""
    if t.device.type == "meta":
        return None
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return t.storage().data_ptr()  # torch 1.x


class Recorder:
    """The aten ops a forward executes, with tensor identities, shapes, strides, dtypes and scalars.
    Each tensor reference also names the tensor whose memory it views ("base": an input, a
    parameter or an earlier result) and its element offset there, so a view chain reads as one
    strided access of its base."""

    def __init__(self, named):
        self.ops, self.truncated = [], False
        self.ids, self.keep, self.count = {}, [], 0
        self.owners, self.offsets = {}, {}
        for name, t in named:
            self.ids[id(t)] = name
            self.keep.append(t)
            self._own(t, name)

    def _own(self, t, name):
        key = storage_key(t)
        if key is None:
            return
        if key in self.owners and self.owners[key] != name:
            self.owners[key] = "?"  # two named tensors share memory: no view of it is attributed
        else:
            self.owners[key] = name
            self.offsets[name] = t.storage_offset()

    def ref(self, v):
        import torch
        if torch.is_tensor(v):
            if id(v) not in self.ids:
                self.count += 1
                self.ids[id(v)] = "t%d" % self.count
                self.keep.append(v)  # the object stays alive, so its id (and its memory) is never reused
                key = storage_key(v)
                if key is not None and key not in self.owners:
                    self._own(v, self.ids[id(v)])
            name = self.ids[id(v)]
            entry = {"t": name, "shape": list(v.shape), "dtype": dtype_name(v.dtype), "stride": list(v.stride())}
            owner = self.owners.get(storage_key(v))
            if owner is not None:
                entry["base"] = owner
                if owner != "?":
                    entry["offset"] = v.storage_offset() - self.offsets.get(owner, 0)
            else:
                entry["offset"] = v.storage_offset()
            if owner in (None, name) and v.numel() == 1 and v.device.type != "meta" and (v.dtype.is_floating_point or v.dtype in (torch.int32, torch.int64, torch.bool)):
                entry["value"] = v.item() if not v.dtype.is_floating_point else float(v.float().item())  # its value (a constant made in Python)
            return entry
        if isinstance(v, (list, tuple)):
            return [self.ref(x) for x in v]
        if isinstance(v, (bool, int, float)) or v is None:
            return {"s": v}
        return {"v": str(v)}

    def record(self, func, args, kwargs, out):
        if len(self.ops) >= MAX_OPS:
            self.truncated = True
            return
        entry = {"op": str(func), "args": [self.ref(a) for a in args], "out": self.ref(out)}
        if kwargs:
            entry["kwargs"] = {k: self.ref(v) for k, v in kwargs.items()}
        self.ops.append(entry)


# Ops that move or view data without arithmetic (their FLOPs are 0).
NO_FLOPS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "slice", "select", "unsqueeze", "squeeze",
            "clone", "copy_", "_to_copy", "to", "detach", "alias", "lift_fresh", "contiguous", "cat", "stack", "split", "split_with_sizes",
            "chunk", "narrow", "as_strided", "index", "index_select", "gather", "scatter", "empty", "empty_like", "empty_strided",
            "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "fill", "fill_", "new_empty", "new_zeros", "arange",
            "unbind", "flip", "roll", "repeat", "masked_fill", "_reshape_alias", "view_as", "resize_", "set_", "item", "_local_scalar_dense"}
# Ops whose work scales with their input, not their output (FLOPs per input element).
REDUCTIONS = {"sum": 1, "mean": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "var": 3, "std": 3, "var_mean": 3, "norm": 2, "argmax": 1,
              "argmin": 1, "_softmax": 5, "_log_softmax": 5, "softmax": 5, "log_softmax": 5, "logsumexp": 4, "topk": 2, "sort": 2,
              "cumsum": 1, "cumprod": 1, "prod": 1}


class Counter:
    """FLOPs of the ops a forward executes: matrix products 2*M*N*K, reductions per input element,
    other arithmetic one per output element; data movement none."""

    def __init__(self):
        self.matrix, self.vector = 0.0, 0.0

    def count(self, func, args, out):
        import torch
        name = str(func).split(".")[1] if str(func).count(".") >= 1 else str(func)
        tensors = [a for a in args if torch.is_tensor(a)]
        outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if torch.is_tensor(o)]
        numel = lambda t: float(t.numel())
        if name in ("mm", "bmm", "addmm", "baddbmm", "addbmm") and len(tensors) >= 2:
            a = tensors[-2]
            k = a.shape[-1]
            self.matrix += 2.0 * numel(outs[0]) * k
            if name.startswith("add"):
                self.vector += numel(outs[0])
        elif "scaled_dot_product" in name and len(tensors) >= 3:
            q, k = tensors[0], tensors[1]
            self.matrix += 4.0 * numel(q) * k.shape[-2]
            self.vector += 5.0 * numel(q) / q.shape[-1] * k.shape[-2]
        elif name in NO_FLOPS or not outs:
            return
        elif name in REDUCTIONS and tensors:
            self.vector += REDUCTIONS[name] * numel(tensors[0])
        elif outs[0].dtype.is_floating_point:
            self.vector += numel(outs[0])


def counting_mode(counter, recorder=None):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            counter.count(func, args, out)
            if recorder is not None:
                recorder.record(func, args, kwargs or {}, out)
            return out

    return Mode()


def meta_mode(counter, recorder_box=None):
    """Every tensor made while active is made on the meta device (shapes and dtypes, no data or
    random numbers), and every op is counted (and recorded once recorder_box[0] is set): the given
    sizes cost nothing to run."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = torch.device("meta")
            if "generator" in kwargs:
                kwargs["generator"] = None  # no random numbers on the meta device (randn.generator keeps its overload)
            out = func(*args, **kwargs)
            counter.count(func, args, out)
            if recorder_box and recorder_box[0] is not None:
                recorder_box[0].record(func, args, kwargs, out)
            return out

    return Mode()


def recording_mode(recorder):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            recorder.record(func, args, kwargs, out)
            return out

    return Mode()


def save(out_dir, index, value):
    """Raw little-endian file: float32 for floating tensors, int64 for integers, uint8 for bool."""
    import torch
    t = value.detach().cpu()
    if t.dtype == torch.bool:
        t, kind = t.to(torch.uint8), "u8"
    elif t.dtype.is_floating_point:
        t, kind = t.to(torch.float32), "f32"
    else:
        t, kind = t.to(torch.int64), "i64"
    path = os.path.join(out_dir, "t%d.bin" % index)
    # Through Python's array module, not numpy: torch 2's wheels do not need numpy, nor does kwiki.
    values = t.contiguous().reshape(-1).tolist()
    data = array.array({"f32": "f", "i64": "q"}[kind], values).tobytes() if kind != "u8" else bytes(values)
    with open(path, "wb") as f:
        f.write(data)
    return os.path.basename(path), kind


def real_run(factory, reference, spec, small):
    """Tensors at the given sizes: on the meta device, else on the CPU (same size as the small
    run: its tensors; else a bounded CPU run)."""
    import torch
    init, kw = spec["init_kwargs"], spec["input_kwargs"]
    counter = Counter()
    try:
        # First everything on the meta device: the factory, the model's parameters, the forward.
        box = [None]
        with meta_mode(counter, box):
            inputs = make_inputs(factory, kw, "cpu")
            model = reference.Model(**init)
            named = list(model.named_parameters()) + list(model.named_buffers())
            box[0] = Recorder([(k, v) for k, v in inputs.items() if torch.is_tensor(v)] + [("param:" + n, p) for n, p in named])
            with torch.no_grad():
                form, outs = flatten_outputs(model(**inputs))
        specs = [spec_of(k, v, "input") for k, v in inputs.items()] + [spec_of(n, p, "param") for n, p in model.named_parameters()]
        # The ops at the given sizes (strides and shapes only; which memory a view reads is the
        # small run's): the generator fits its size expressions to both.
        out_specs = [spec_of(n, v, "output") for n, v in outs]
        for e, (n, v) in zip(out_specs, outs):
            if torch.is_tensor(v) and id(v) in box[0].ids:
                e["graph_name"] = box[0].ids[id(v)]
        return {"device": "meta", "inputs": specs, "outputs": out_specs, "form": form,
                "flops": {"matrix": counter.matrix, "vector": counter.vector},
                "graph": {"ops": box[0].ops, "truncated": box[0].truncated},
                "params": [spec_of(n, p, "param") for n, p in named]}
    except Exception:
        counter = Counter()  # data-dependent code (an .item(), a loop over values): real inputs
    inputs = make_inputs(factory, kw, "cpu")
    model = reference.Model(**init)

    def recorded(mod, args):
        named = list(mod.named_parameters()) + list(mod.named_buffers())
        rec = Recorder([(k, v) for k, v in args.items() if torch.is_tensor(v)] + [("param:" + n, p) for n, p in named])
        with torch.no_grad():
            with counting_mode(counter, rec):
                result = flatten_outputs(mod(**args))
        return rec, named, result

    try:
        meta_inputs = {k: (v.to("meta") if torch.is_tensor(v) else v) for k, v in inputs.items()}
        meta_model = model.to("meta")
        rec, named, (form, outs) = recorded(meta_model, meta_inputs)
        device = "meta"
    except Exception:
        model = reference.Model(**init)

        def expired(signum, frame):
            raise TimeoutError("the CPU run at full size took over %d s" % REAL_CPU_SECONDS)

        old = signal.signal(signal.SIGALRM, expired)
        signal.alarm(REAL_CPU_SECONDS)
        counter = Counter()
        try:
            rec, named, (form, outs) = recorded(model, inputs)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        device = "cpu"
    specs = [spec_of(k, v, "input") for k, v in inputs.items()] + [spec_of(n, p, "param") for n, p in model.named_parameters()]
    out_specs = [spec_of(n, v, "output") for n, v in outs]
    for e, (n, v) in zip(out_specs, outs):
        if torch.is_tensor(v) and id(v) in rec.ids:
            e["graph_name"] = rec.ids[id(v)]
    return {"device": device, "inputs": specs, "outputs": out_specs, "form": form,
            "flops": {"matrix": counter.matrix, "vector": counter.vector},
            "graph": {"ops": rec.ops, "truncated": rec.truncated}, "params": [spec_of(n, p, "param") for n, p in named]}


def graph_scalars(ops):
    """The Python numbers the recorded ops were called with (epsilons, scales, clamps)."""
    found = []

    def walk(v):
        if isinstance(v, dict):
            if "s" in v and isinstance(v["s"], (int, float)) and not isinstance(v["s"], bool):
                found.append(v["s"])
            for x in v.get("kwargs", {}).values() if "op" in v else []:
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for op in ops:
        walk(op["args"])
        walk(list(op.get("kwargs", {}).values()))
    return found


# Ops that read a tensor's metadata only (its shape, dtype, device), never its data.
METADATA_ONLY = {"empty_like", "zeros_like", "ones_like", "full_like", "new_empty", "new_zeros", "new_ones", "new_full", "sym_size",
                 "sym_stride", "size", "stride", "dim"}


def names_read(ops):
    """The tensor names whose data some recorded op reads."""
    found = set()

    def walk(v):
        if isinstance(v, dict) and "t" in v:
            found.add(v["t"])
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for op in ops:
        name = op["op"].split(".")[1] if op["op"].count(".") >= 1 else op["op"]
        if name in METADATA_ONLY:
            continue
        walk(op["args"])
        walk(list(op.get("kwargs", {}).values()))
    return found


def small_run(factory, reference, spec, out_dir, shape_index, twin):
    import torch
    init, kw = spec["init_kwargs"], spec["input_kwargs"]
    import kwiki_device
    s = kwiki_device.shrink_factor([init, kw])
    init_s, kw_s = kwiki_device.shrunk(init, s), kwiki_device.shrunk(kw, s)
    torch.manual_seed(0)
    inputs = make_inputs(factory, kw_s, "cpu")
    model = reference.Model(**init_s)
    before = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in inputs.items()}
    versions = {k: v._version for k, v in inputs.items() if torch.is_tensor(v)}
    params = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers()]
    recorder = Recorder([(k, v) for k, v in inputs.items() if torch.is_tensor(v)] + [("param:" + n, p) for n, p in params])
    with torch.no_grad():
        with recording_mode(recorder):
            result = model(**inputs)
    form, outs = flatten_outputs(result)
    saved = [0]
    too_large = []

    def entry(name, value, kind, alias=None):
        e = spec_of(name, value, kind)
        if torch.is_tensor(value):
            if value.numel() > MAX_SAVED:
                too_large.append(name)
            else:
                saved[0] += 1
                e["file"], e["storage"] = save(out_dir, shape_index * 1000 + saved[0], value)
        if alias:
            e["alias_of"] = alias
        return e

    record = {"factor": s, "init_kwargs": init_s, "input_kwargs": kw_s, "form": form}
    record["inputs"] = [entry(k, before[k], "input") for k in inputs]
    for e, k in zip(record["inputs"], inputs):
        if torch.is_tensor(inputs[k]):
            e["stride"] = list(inputs[k].stride())  # the layout forward saw (before[k] is a contiguous copy)
    for e, k in zip(record["inputs"], inputs):
        if torch.is_tensor(inputs[k]) and inputs[k]._version != versions[k]:
            e["updated"] = True
    record["params"] = [entry(n, p, "param") for n, p in params]
    record["outputs"] = []
    for n, v in outs:
        alias = next((k for k, t in inputs.items() if t is v), None) if torch.is_tensor(v) else None
        record["outputs"].append(entry(n, v, "output", alias))
        if torch.is_tensor(v) and id(v) in recorder.ids:
            record["outputs"][-1]["graph_name"] = recorder.ids[id(v)]  # the tensor of the graph it is
    record["updated"] = [entry(k, inputs[k], "updated") for k in inputs if torch.is_tensor(inputs[k]) and inputs[k]._version != versions[k]]
    record["graph"] = {"ops": recorder.ops, "truncated": recorder.truncated}
    if too_large:
        record["not_saved"] = too_large
    if twin is not None:
        import kwiki_families
        lib, families = twin
        structure = kwiki_families.Structure([(k, before[k]) for k in inputs], params, outs, form,
                                             [k for k in inputs if torch.is_tensor(inputs[k]) and inputs[k]._version != versions[k]],
                                             graph_scalars(recorder.ops), init_s,
                                             None if recorder.truncated else names_read(recorder.ops))
        updated_after = {k: inputs[k] for k in inputs if torch.is_tensor(inputs[k]) and inputs[k]._version != versions[k]}
        record["proof"] = kwiki_families.prove(lib, structure, before, outs, updated_after, families)
    return record


def annotate_bases(small, real):
    """The meta run has no memory, so which tensor a view reads is taken from the small run, op by
    op (the two graphs must be the same sequence of ops; otherwise the real one is marked so)."""
    # A constant made in Python (torch.tensor(127.0)) is lifted on the CPU and not on the meta
    # device: those identity ops are left out of the pairing.
    def lifted(ops):  # without the lifts and the device moves of what they lifted (the meta run's _to_copy)
        out, consts = [], set()
        for o in ops:
            arg = o["args"][0] if o["args"] and isinstance(o["args"][0], dict) else {}
            if o["op"].startswith("aten.lift_fresh") or (o["op"] == "aten._to_copy.default" and arg.get("t") in consts):
                if isinstance(o["out"], dict) and "t" in o["out"]:
                    consts.add(o["out"]["t"])
                continue
            out.append(o)
        return out

    lifts = lambda ops: [o for o in ops if o["op"].startswith("aten.lift_fresh")]
    for x, y in zip(lifts(small["ops"]), lifts(real["ops"])):  # the k-th constant of each run is the same one
        for rx, ry in ((x["args"][0], y["args"][0]), (x["out"], y["out"])):
            if isinstance(rx, dict) and isinstance(ry, dict) and "value" in rx:
                ry["value"] = rx["value"]
    a, b = lifted(small["ops"]), lifted(real["ops"])
    if len(a) != len(b) or any(x["op"] != y["op"] for x, y in zip(a, b)):
        real["differs_from_small"] = True
        return

    def walk(x, y):
        if isinstance(x, dict) and isinstance(y, dict) and "t" in x and "t" in y:
            if "base" in x:
                y["base"] = x["base"]
            elif "base" not in y:
                y.pop("offset", None)
            if "value" in x and "value" not in y:
                y["value"] = x["value"]
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for u, v in zip(x, y):
                walk(u, v)

    for x, y in zip(a, b):
        walk(x["args"], y["args"])
        walk(x["out"], y["out"])
        walk(list(x.get("kwargs", {}).values()), list(y.get("kwargs", {}).values()))


def strict(value):
    """JSON has no infinities or NaN: an infinity becomes the largest double, NaN null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else math.copysign(sys.float_info.max, value)
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def emit(out):
    print(json.dumps(strict(out), allow_nan=False))


def main():
    args = sys.argv[1:]
    twin_path, families = None, []
    while args and args[0].startswith("--"):
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--twin":
            twin_path = value
        elif flag == "--families":
            families = [f for f in value.split(",") if f]
    task_dir, out_dir, shape_ids = args[0], args[1], args[2:]
    out = {"python": sys.executable, "torch": None, "shapes": {}, "limitations": []}
    try:
        import torch
    except Exception as e:
        out["skipped"] = "torch is not importable by %s (%s)" % (sys.executable, e)
        emit(out)
        return
    out["torch"] = torch.__version__
    out["cuda"] = bool(torch.cuda.is_available())
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kwiki_device
    kwiki_device.map_cuda_to("cpu")  # the semantics are read on the CPU, whatever the task's device
    twin = None
    if twin_path:
        import kwiki_families
        twin = (kwiki_families.open_twin(twin_path), families)
    if not hasattr(torch, "float8_e4m3fn"):
        out["limitations"].append("torch %s has no float8 dtypes: a reference that uses them cannot run here" % torch.__version__)
    try:
        from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401
    except Exception:
        out["skipped"] = "torch %s has no dispatch modes, so kwiki cannot record what the reference executes" % torch.__version__
        emit(out)
        return
    shapes = json.load(open(os.path.join(task_dir, "shapes.json")))
    try:
        reference, factory = load(task_dir, "reference"), load(task_dir, "input")
    except Exception as e:
        out["error"] = {"stage": "import", "message": "%s: %s" % (type(e).__name__, e), "detail": traceback.format_exc(limit=4)}
        emit(out)
        return
    for index, sid in enumerate(shape_ids):
        raw = shapes.get(sid) or {}
        spec = {"init_kwargs": raw.get("init_kwargs") or {}, "input_kwargs": raw.get("input_kwargs") or {}}
        entry = {}
        for stage, run in (("small", lambda: small_run(factory, reference, spec, out_dir, index, twin)),
                           ("real", lambda: real_run(factory, reference, spec, entry.get("small")))):
            try:
                entry[stage] = run()
            except Exception as e:
                tb = traceback.extract_tb(e.__traceback__)
                where = "input.py" if any(f.filename.endswith("input.py") for f in tb) and not any(f.filename.endswith("reference.py") for f in tb) else "reference.py"
                entry[stage + "_error"] = {"stage": where, "message": "%s: %s" % (type(e).__name__, e)}
        if "small" in entry and "graph" in entry.get("real", {}):
            annotate_bases(entry["small"]["graph"], entry["real"]["graph"])
        out["shapes"][sid] = entry
    emit(out)


if __name__ == "__main__":
    main()
