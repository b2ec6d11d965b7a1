# kwiki_families.py: each kernel family's fit to a reference (bind) and its launcher arguments (prepare).
# Used by kwiki plan's proof (the CPU twin against the reference) and by a workspace's kernel.py
# (the V0 kernel, or the CPU twin, behind the reference's Model interface): one reading of which
# tensor is which, in one place. The names are those of kwiki's family table (planner/family.cpp).
import ctypes
import math

import torch

DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.int32: 5, torch.int64: 6, torch.uint8: 7, torch.bool: 7}
for _name, _code in (("float8_e4m3fn", 3), ("float8_e4m3fnuz", 4)):
    if hasattr(torch, _name):
        DTYPE_CODES[getattr(torch, _name)] = _code
# Tolerances per dtype: (rtol, atol); fp8 is compared within one e4m3 step at the value's magnitude.
TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3)}


class NoFit(Exception):
    """The reference's tensors do not fit the family's launcher (the reason says how)."""


def is_float(t):
    return torch.is_tensor(t) and t.dtype.is_floating_point


def is_fp8_dtype(dtype):
    return "float8" in str(dtype)


def is_fp8(t):
    return torch.is_tensor(t) and is_fp8_dtype(t.dtype)


def compare(name, got, want):
    """(ok, message, max_abs, max_rel) of got against want, the harness's rule."""
    if tuple(got.shape) != tuple(want.shape):
        return False, "%s: shape %s, reference %s" % (name, tuple(got.shape), tuple(want.shape)), 0.0, 0.0
    if got.dtype != want.dtype:
        return False, "%s: dtype %s, reference %s" % (name, got.dtype, want.dtype), 0.0, 0.0
    if not got.dtype.is_floating_point:
        bad = int((got != want).sum())
        return bad == 0, ("%s: %d integer elements differ" % (name, bad)) if bad else "", float(bad), 0.0
    g, w = got.double(), want.double()
    g_nan, w_nan = torch.isnan(g), torch.isnan(w)
    if bool((g_nan != w_nan).any()):
        return False, "%s: %d NaN elements where the reference has none (or the reverse)" % (name, int((g_nan != w_nan).sum())), float("inf"), float("inf")
    g_inf, w_inf = torch.isinf(g), torch.isinf(w)
    if bool((g_inf != w_inf).any()) or bool((g[g_inf] != w[w_inf]).any()):
        return False, "%s: infinities differ from the reference" % name, float("inf"), float("inf")
    finite = ~(w_nan | w_inf)
    diff = (g - w).abs()[finite]
    scale = w.abs()[finite]
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / scale.clamp_min(1e-30)).max()) if diff.numel() else 0.0
    if is_fp8(got):
        fnuz = "fnuz" in str(got.dtype)
        exp = torch.floor(torch.log2(scale.clamp_min(2.0 ** (-7 if fnuz else -6))))
        ulp = torch.pow(2.0, exp - 3)
        bad = diff > ulp * 1.0001
        ok = not bool(bad.any())
        worst = float((diff / ulp).max()) if diff.numel() else 0.0
        return ok, "" if ok else "%s: %d elements beyond 1 fp8 ulp (worst %.2f ulp)" % (name, int(bad.sum()), worst), max_abs, max_rel
    rtol, atol = TOLERANCES.get(got.dtype, (1e-5, 1e-5))
    ok = bool((diff <= atol + rtol * scale).all())
    return ok, "" if ok else "%s: max abs err %.3g, max rel err %.3g beyond rtol %g / atol %g" % (name, max_abs, max_rel, rtol, atol), max_abs, max_rel


class Structure:
    """What a reference takes and returns, as one traced call shows it."""

    def __init__(self, inputs, params, outputs, form, updated, scalars, init_kwargs, read=None):
        self.inputs = list(inputs)      # (name, value) in forward's order
        self.read = read                # the tensor names some recorded op read (None: unknown)
        self.params = list(params)      # (name, tensor): parameters and buffers
        self.outputs = list(outputs)    # (name, tensor)
        self.form = form                # tensor | tuple | dict
        self.updated = set(updated)     # inputs written in place
        self.scalars = list(scalars)    # Python numbers the ops were called with
        self.init_kwargs = dict(init_kwargs or {})

    def tensor_inputs(self):
        return [(n, v) for n, v in self.inputs if torch.is_tensor(v)]

    def float_inputs(self):
        return [(n, v) for n, v in self.inputs if is_float(v)]

    def without_unread(self):
        """The same call without the tensor inputs no recorded op read (used for their shape or
        device only), or None when there are none: a kernel needs no pointer to them. Reads that
        bypass the dispatcher (.tolist()) are invisible here, so this is tried only second."""
        if self.read is None:
            return None
        kept = [(n, v) for n, v in self.inputs if not torch.is_tensor(v) or n in self.read]
        if len(kept) == len(self.inputs):
            return None
        other = Structure(kept, self.params, self.outputs, self.form, self.updated, self.scalars, self.init_kwargs)
        return other

    def sources(self):
        """Every tensor a role may come from: ("input", name) and ("param", name)."""
        return [(("input", n), v) for n, v in self.tensor_inputs()] + [(("param", n), v) for n, v in self.params]

    def small_constants(self):
        """Candidate epsilons: positive numbers below 0.1 from the ops and the init kwargs."""
        found = [float(v) for v in self.scalars if isinstance(v, float) and 0 < v < 0.1]
        found += [float(v) for v in self.init_kwargs.values() if isinstance(v, float) and 0 < v < 0.1]
        return sorted(set(found)) or [1e-6, 1e-5]


def activations(s):
    """The floating inputs a family may run over, the largest first."""
    floats = [(n, v) for n, v in s.float_inputs() if v.dim() >= 1]
    if not floats:
        raise NoFit("takes no floating-point tensor")
    return sorted(floats, key=lambda nv: -nv[1].numel())


def scalar_source(s, accept, names=None):
    """Where a per-call number comes from: a non-tensor input, else an init argument, whose value
    `accept` takes (and, with `names`, whose name is one of them); None when neither has one."""
    for kind, items in (("input", s.inputs), ("init", list(s.init_kwargs.items()))):
        for n, v in items:
            if not torch.is_tensor(v) and accept(v) and (names is None or n in names):
                return [kind, n]
    return None


def eps_source(s, eps):
    """The argument an epsilon comes from (it may differ per shape), or None for a constant."""
    return scalar_source(s, lambda v: isinstance(v, float) and not isinstance(v, bool) and v == eps)


def value_of(s, source):
    kind, name = source
    return dict(s.inputs)[name] if kind == "input" else s.init_kwargs[name]


def resolve(b, key, get):
    """A binding's parameter: read per call from its source when it has one, else the constant."""
    source = b["params"].get(key + "_from")
    return get(tuple(source)) if source else b["params"][key]


def the_activation(s):
    """The floating input with the most elements (the tensor a row family runs over)."""
    return activations(s)[0]


def one_output(s, like=None, last=None, dtype=None):
    if len(s.outputs) != 1:
        raise NoFit("returns %d outputs; the family returns one" % len(s.outputs))
    name, out = s.outputs[0]
    if not torch.is_tensor(out):
        raise NoFit("returns %s, not a tensor" % type(out).__name__)
    if like is not None:
        want = tuple(like.shape[:-1]) + ((last,) if last is not None else tuple(like.shape[-1:]))
        if tuple(out.shape) != want:
            raise NoFit("returns %s of shape %s; the family returns %s" % (name, tuple(out.shape), want))
    if dtype is not None and out.dtype != dtype:
        raise NoFit("returns %s as %s where the family stores the input's %s" % (name, out.dtype, dtype))
    return name, out


def vectors_of(s, size, exclude=()):
    """Sources of 1-D floating tensors of `size` elements (weights, biases)."""
    return [(src, v) for src, v in s.sources() if is_float(v) and v.dim() == 1 and v.numel() == size and src not in exclude]


def no_other_tensors(s, used):
    extra = [n for n, v in s.tensor_inputs() if ("input", n) not in used]
    if extra:
        raise NoFit("takes tensors the family has no place for: " + ", ".join(extra))
    if s.updated - {n for kind, n in used if kind == "input"}:
        raise NoFit("writes an input in place: " + ", ".join(sorted(s.updated)))


def empty(shape, dtype, device):
    if dtype.is_floating_point and not is_fp8_dtype(dtype):
        return torch.full(shape, float("nan"), dtype=dtype, device=device)  # an unwritten element cannot pass
    return torch.empty(shape, dtype=dtype, device=device)


def rows(t):
    return t.numel() // t.shape[-1] if t.dim() else 1


class RowNorm:
    """rms_norm and layer_norm: x[.., H], weight[H] (+ bias[H]), out like x; eps."""

    def __init__(self, name, bias):
        self.name, self.bias = name, bias

    def bind(self, s):
        xs, x = the_activation(s)
        out_name, _ = one_output(s, like=x, dtype=x.dtype)
        # The normalized rows are the weight's length: the last dim, or a part of it (per-head
        # norms of [tokens, heads * head_dim] rows, a view the reference makes).
        sizes = sorted({v.numel() for src, v in s.sources() if is_float(v) and v.dim() == 1 and src != ("input", xs)
                        and v.numel() > 1 and x.shape[-1] % v.numel() == 0}, reverse=True)
        if not sizes:
            raise NoFit("has no weight of %d elements (or of a divisor of it)" % x.shape[-1])
        found, misfits = [], []
        for h in sizes:
            try:
                found += self._bind_rows(s, xs, out_name, h)
            except NoFit as e:
                misfits.append(str(e))
        if not found:
            raise NoFit(misfits[0])
        return found

    def _bind_rows(self, s, xs, out_name, h):
        found = []
        for wsrc, _ in vectors_of(s, h, exclude=[("input", xs)]):
            biases = vectors_of(s, h, exclude=[("input", xs), wsrc]) if self.bias else [(None, None)]
            if not biases:
                raise NoFit("has no bias of %d elements (the family adds one)" % h)
            for bsrc, _ in biases:
                used = [("input", xs), wsrc] + ([bsrc] if bsrc else [])
                no_other_tensors(s, used)
                for eps in s.small_constants():
                    roles = {"x": ("input", xs), "weight": wsrc}
                    if bsrc:
                        roles["bias"] = bsrc
                    found.append({"roles": roles, "params": {"eps": eps, "eps_from": eps_source(s, eps)}, "outputs": {"out": out_name}})
        return found

    def prepare(self, b, get):
        x = get(b["roles"]["x"]).contiguous()
        w = get(b["roles"]["weight"])
        h = w.numel()  # the row: the weight's length (the last dim, or a head within it)
        out = empty(x.shape, x.dtype, x.device)
        tensors = [x, w] + ([get(b["roles"]["bias"])] if self.bias else []) + [out]
        return tensors, [x.numel() // h, h], [resolve(b, "eps", get)], {"out": out}


class FusedAddRmsNorm:
    name = "fused_add_rms_norm"

    def bind(self, s):
        floats = [(n, v) for n, v in s.float_inputs() if v.dim() >= 1]
        pairs = [(a, b) for a in floats for b in floats if a[0] != b[0] and a[1].shape == b[1].shape and a[1].dtype == b[1].dtype]
        if not pairs:
            raise NoFit("takes no two tensors of one shape (x and the residual)")
        if len(s.outputs) != 2 or not all(torch.is_tensor(v) for _, v in s.outputs):
            raise NoFit("returns %d outputs; the family returns the normalized rows and x + residual" % len(s.outputs))
        found = []
        for (xs, x), (rs, r) in pairs:
            if s.updated - {rs}:
                continue  # only the residual may be written in place
            h = x.shape[-1]
            for wsrc, _ in vectors_of(s, h, exclude=[("input", xs), ("input", rs)]):
                no_other_tensors(s, [("input", xs), ("input", rs), wsrc])
                for out_name, res_name in ((s.outputs[0][0], s.outputs[1][0]), (s.outputs[1][0], s.outputs[0][0])):
                    outs = dict(s.outputs)
                    if tuple(outs[out_name].shape) != tuple(x.shape) or outs[out_name].dtype != x.dtype:
                        continue
                    for eps in s.small_constants():
                        found.append({"roles": {"x": ("input", xs), "residual": ("input", rs), "weight": wsrc},
                                      "params": {"eps": eps, "eps_from": eps_source(s, eps)},
                                      "outputs": {"out": out_name, "residual": res_name}, "in_place": rs in s.updated})
        if not found:
            raise NoFit("no pairing of x, residual and a weight fits the family")
        return found

    def prepare(self, b, get):
        x = get(b["roles"]["x"]).contiguous()
        residual = get(b["roles"]["residual"])
        if not b.get("in_place"):
            residual = residual.clone()  # the reference leaves its residual as it was
        out = empty(x.shape, x.dtype, x.device)
        return [x, residual, get(b["roles"]["weight"]), out], [rows(x), x.shape[-1]], [resolve(b, "eps", get)], {"out": out, "residual": residual}


class RowMap:
    """softmax and the gated activations: one input x[.., N], one output over its rows."""

    def __init__(self, name, halves):
        self.name, self.halves = name, halves

    def bind(self, s):
        xs, x = the_activation(s)
        no_other_tensors(s, [("input", xs)])
        n = x.shape[-1]
        if self.halves and n % 2:
            raise NoFit("its last dimension %d is odd; the family splits it in halves" % n)
        out_name, _ = one_output(s, like=x, last=n // 2 if self.halves else None, dtype=x.dtype)
        return [{"roles": {"x": ("input", xs)}, "params": {}, "outputs": {"out": out_name}}]

    def prepare(self, b, get):
        x = get(b["roles"]["x"]).contiguous()
        n = x.shape[-1] // 2 if self.halves else x.shape[-1]
        out = empty(tuple(x.shape[:-1]) + (n,), x.dtype, x.device)
        return [x, out], [rows(x), n], [], {"out": out}


class RowReduce:
    name = "row_reduce"

    def bind(self, s):
        xs, x = the_activation(s)
        no_other_tensors(s, [("input", xs)])
        if len(s.outputs) != 1 or not torch.is_tensor(s.outputs[0][1]):
            raise NoFit("returns %d outputs; the family returns one" % len(s.outputs))
        out_name, out = s.outputs[0]
        kept = tuple(x.shape[:-1]) + (1,)
        if tuple(out.shape) not in (tuple(x.shape[:-1]), kept):
            raise NoFit("returns shape %s; a reduction over the last dim returns %s" % (tuple(out.shape), tuple(x.shape[:-1])))
        if out.dtype != x.dtype:
            raise NoFit("returns %s as %s where the family stores the input's %s" % (out_name, out.dtype, x.dtype))
        keep = tuple(out.shape) == kept and x.dim() > 0
        return [{"roles": {"x": ("input", xs)}, "params": {"op": op, "keepdim": keep}, "outputs": {"out": out_name}} for op in (0, 1, 2)]

    def prepare(self, b, get):
        x = get(b["roles"]["x"]).contiguous()
        out = empty(tuple(x.shape[:-1]) + ((1,) if b["params"]["keepdim"] else ()), x.dtype, x.device)
        return [x, out], [rows(x), x.shape[-1]], [b["params"]["op"]], {"out": out}


class Fp8Quant:
    name = "fp8_quant"

    def bind(self, s):
        xs, x = the_activation(s)
        no_other_tensors(s, [("input", xs)])
        if len(s.outputs) != 2:
            raise NoFit("returns %d outputs; the family returns q and a per-row scale" % len(s.outputs))
        q = [(n, v) for n, v in s.outputs if is_fp8(v)]
        sc = [(n, v) for n, v in s.outputs if torch.is_tensor(v) and v.dtype == torch.float32]
        if len(q) != 1 or len(sc) != 1:
            raise NoFit("does not return one fp8 tensor and one fp32 scale")
        if tuple(q[0][1].shape) != tuple(x.shape):
            raise NoFit("returns q of shape %s, not the input's" % (tuple(q[0][1].shape),))
        if sc[0][1].numel() != rows(x):
            raise NoFit("returns %d scales for %d rows: not one scale per row" % (sc[0][1].numel(), rows(x)))
        return [{"roles": {"x": ("input", xs)}, "params": {"fp8_max": 240.0 if "fnuz" in str(q[0][1].dtype) else 448.0},
                 "outputs": {"q": q[0][0], "scale": sc[0][0]}, "q_dtype": str(q[0][1].dtype).replace("torch.", ""),
                 "scale_shape": list(sc[0][1].shape[len(x.shape) - 1:]) if sc[0][1].dim() == x.dim() else []}]

    def prepare(self, b, get):
        x = get(b["roles"]["x"]).contiguous()
        q = torch.empty(x.shape, dtype=getattr(torch, b["q_dtype"]), device=x.device)
        scale = empty(tuple(x.shape[:-1]) + tuple(b["scale_shape"]), torch.float32, x.device)
        return [x, q, scale], [rows(x), x.shape[-1]], [b["params"]["fp8_max"]], {"q": q, "scale": scale}  # q as fp8: its bytes to the kernel, its format to the twin


class MoeGating:
    name = "moe_gating"

    def bind(self, s):
        tensors = s.tensor_inputs()
        if len(tensors) != 1 or tensors[0][1].dtype != torch.float32 or tensors[0][1].dim() != 2:
            raise NoFit("takes no single fp32 [tokens, experts] tensor of router logits")
        gs, g = tensors[0]
        no_other_tensors(s, [("input", gs)])
        if len(s.outputs) != 2:
            raise NoFit("returns %d outputs; the family returns top-k weights and ids" % len(s.outputs))
        w = [(n, v) for n, v in s.outputs if torch.is_tensor(v) and v.dtype == torch.float32]
        ids = [(n, v) for n, v in s.outputs if torch.is_tensor(v) and v.dtype in (torch.int32, torch.int64)]
        if len(w) != 1 or len(ids) != 1 or tuple(w[0][1].shape) != tuple(ids[0][1].shape) or w[0][1].dim() != 2:
            raise NoFit("does not return fp32 weights and integer ids of one [tokens, k] shape")
        k = w[0][1].shape[1]
        # k and renormalize per call: from an argument when the reference takes them as one.
        k_from = scalar_source(s, lambda v: isinstance(v, int) and not isinstance(v, bool) and v == k)
        renorm_from = scalar_source(s, lambda v: isinstance(v, bool), names=("renormalize", "norm_topk_prob", "normalize"))
        choices = [int(value_of(s, renorm_from))] if renorm_from else [0, 1]
        return [{"roles": {"gating": ("input", gs)}, "params": {"k": k, "k_from": k_from, "renormalize": r, "renormalize_from": renorm_from},
                 "outputs": {"weights": w[0][0], "ids": ids[0][0]}, "ids_dtype": str(ids[0][1].dtype).replace("torch.", "")} for r in choices]

    def prepare(self, b, get):
        g = get(b["roles"]["gating"]).contiguous()
        t, e = g.shape
        k = int(resolve(b, "k", get))
        w = empty((t, k), torch.float32, g.device)
        ids = torch.empty((t, k), dtype=torch.int32, device=g.device)
        post = None if b["ids_dtype"] == "int32" else (lambda outs: dict(outs, ids=outs["ids"].to(torch.int64)))
        return [g, w, ids], [t, e, k], [float(resolve(b, "renormalize", get))], {"weights": w, "ids": ids, "_post": post}


class Gemm:
    name = "gemm"

    def bind(self, s):
        found = []
        for xs, x in activations(s):
            found += self._bind_x(s, xs, x)
        if not found:
            raise NoFit("no input, [N, K] weight, bias and output of the family's shapes fit together (a [K, N] weight is not its layout)")
        return found

    def _bind_x(self, s, xs, x):
        k = x.shape[-1]
        mats = [(src, v) for src, v in s.sources() if is_float(v) and v.dim() == 2 and v.shape[1] == k and src != ("input", xs)]
        found = []
        for wsrc, w in mats:
            if w.dtype != x.dtype:
                continue
            n = w.shape[0]
            try:
                out_name, _ = one_output(s, like=x, last=n, dtype=x.dtype)
            except NoFit:
                continue
            for bsrc, _ in [(None, None)] + vectors_of(s, n, exclude=[("input", xs), wsrc]):
                used = [("input", xs), wsrc] + ([bsrc] if bsrc else [])
                try:
                    no_other_tensors(s, used)
                except NoFit:
                    continue
                roles = {"x": ("input", xs), "weight": wsrc}
                if bsrc:
                    roles["bias"] = bsrc
                found.append({"roles": roles, "params": {}, "outputs": {"out": out_name}})
        return found

    def prepare(self, b, get):
        x = get(b["roles"]["x"]).contiguous()
        w = get(b["roles"]["weight"])
        bias = get(b["roles"]["bias"]) if "bias" in b["roles"] else None
        n = w.shape[0]
        out = empty(tuple(x.shape[:-1]) + (n,), x.dtype, x.device)
        return [x, w, bias, out], [rows(x), n, x.shape[-1]], [], {"out": out}


class PagedDecodeAttention:
    name = "paged_decode_attention"

    def bind(self, s):
        t = s.tensor_inputs()
        q = [(n, v) for n, v in t if is_float(v) and v.dim() == 3]
        caches = [(n, v) for n, v in t if is_float(v) and v.dim() == 4]
        tables = [(n, v) for n, v in t if not v.dtype.is_floating_point and v.dim() == 2]
        lens = [(n, v) for n, v in t if not v.dtype.is_floating_point and v.dim() == 1]
        if len(q) != 1 or len(caches) != 2 or len(tables) != 1 or len(lens) != 1 or len(t) != 5:
            raise NoFit("does not take query [B, Hq, D], key and value caches [blocks, page, Hkv, D], block tables and sequence lengths")
        qn, qv = q[0]
        if caches[0][1].shape != caches[1][1].shape or caches[0][1].shape[3] != qv.shape[2] or qv.shape[1] % caches[0][1].shape[2]:
            raise NoFit("its caches are not [blocks, page, Hkv, D] with D and Hkv fitting the query")
        out_name, _ = one_output(s, like=qv, dtype=qv.dtype)
        no_other_tensors(s, [("input", n) for n, _ in t])
        d = qv.shape[2]
        scales = sorted(set([1.0 / math.sqrt(d)] + [float(v) for v in s.scalars if isinstance(v, float) and 0 < v < 1]))
        return [{"roles": {"query": ("input", qn), "key_cache": ("input", caches[0][0]), "value_cache": ("input", caches[1][0]),
                           "block_tables": ("input", tables[0][0]), "seq_lens": ("input", lens[0][0])},
                 "params": {"scale": sc, "scale_is_rsqrt_d": abs(sc - 1.0 / math.sqrt(d)) < 1e-12}, "outputs": {"out": out_name},
                 "symbolic": ["scale"] if abs(sc - 1.0 / math.sqrt(d)) < 1e-12 else []} for sc in scales]

    def prepare(self, b, get):
        r = b["roles"]
        q, kc, vc = get(r["query"]), get(r["key_cache"]), get(r["value_cache"])
        bt, sl = get(r["block_tables"]).to(torch.int32).contiguous(), get(r["seq_lens"]).to(torch.int32).contiguous()
        bsz, hq, d = q.shape
        _, page, hkv, _ = kc.shape
        mb = bt.shape[1]
        splits = 1
        if q.is_cuda:
            # The template's split-KV heuristic (bench/gpu/decode_kernel_bench.cu, decode_split_sweep.cu):
            # tensor-core kernel about one block per SM, the generic one about 16; at most one split per 512 tokens.
            props = torch.cuda.get_device_properties(q.device)
            mma = (torch.version.hip is None and props.major >= 8 and q.dtype in (torch.bfloat16, torch.float16)
                   and d in (64, 128) and hq // hkv <= 8 and page >= 16 and page & (page - 1) == 0)
            per_sm = props.multi_processor_count // (bsz * hkv) if mma else math.ceil(16 * props.multi_processor_count / (bsz * hkv))
            splits = max(1, min(math.ceil(mb * page / 512), per_sm))
        scale = 1.0 / math.sqrt(d) if b["params"].get("scale_is_rsqrt_d") else b["params"]["scale"]
        out = empty(q.shape, q.dtype, q.device)
        po = torch.empty((bsz, hq, splits, d), dtype=torch.float32, device=q.device)
        pl = torch.empty((bsz, hq, splits), dtype=torch.float32, device=q.device)
        return [q.contiguous(), kc.contiguous(), vc.contiguous(), bt, sl, out, po, pl], [bsz, hq, hkv, d, page, mb, splits], [scale], {"out": out}


def int_tensors(s, dim):
    return [(n, v) for n, v in s.tensor_inputs() if not v.dtype.is_floating_point and v.dtype != torch.bool and v.dim() == dim]


def splits_for(device, work_items, tokens, longest, shortest=64):
    """Splits of a split-KV decode kernel: enough (sequence, head) blocks to cover the GPU twice,
    at least one per `longest` tokens (the kernel's shared-memory bound), at most one per
    `shortest`. On the CPU (the twin) only the lower bound holds."""
    least = max(1, math.ceil(tokens / longest))
    if device.type != "cuda":
        return least
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(least, min(math.ceil(2 * sms / max(1, work_items)), math.ceil(tokens / shortest)))


def attention_scales(s, dim):
    """Candidate softmax scales: 1/sqrt(dim) and the fractions the reference was called with."""
    found = [float(v) for v in s.scalars if isinstance(v, float) and 0 < v < 1]
    found += [float(v) for v in s.init_kwargs.values() if isinstance(v, float) and not isinstance(v, bool) and 0 < v < 1]
    return sorted(set([1.0 / math.sqrt(dim)] + found))


class KvCacheWrite:
    """Writes new K/V rows into paged caches by slot (vLLM reshape_and_cache and its _flash form)."""
    name = "kv_cache_write"

    def bind(self, s):
        t = s.tensor_inputs()
        rows = [(n, v) for n, v in t if is_float(v) and v.dim() == 3]
        caches = [(n, v) for n, v in t if is_float(v) and v.dim() in (4, 5)]
        slots = int_tensors(s, 1)
        if len(rows) != 2 or len(caches) != 2 or len(slots) != 1 or len(t) != 5 or rows[0][1].shape != rows[1][1].shape:
            raise NoFit("does not take key and value rows [T, Hkv, D], two paged caches and a slot mapping [T]")
        tokens, hkv, d = rows[0][1].shape
        if slots[0][1].numel() != tokens:
            raise NoFit("its slot mapping has %d entries for %d rows" % (slots[0][1].numel(), tokens))
        if any(c.dtype != rows[0][1].dtype for _, c in caches) or rows[1][1].dtype != rows[0][1].dtype:
            raise NoFit("its caches do not hold the rows' dtype (an fp8 cache needs scales: not this family)")
        (an, a), (bn, b) = caches
        if a.dim() == 4 and b.dim() == 4 and a.shape == b.shape and tuple(a.shape[2:]) == (hkv, d):
            layout, orders = 1, [(an, bn), (bn, an)]
        else:
            kc = [(n, c) for n, c in caches if c.dim() == 5]
            vc = [(n, c) for n, c in caches if c.dim() == 4]
            if len(kc) != 1 or len(vc) != 1:
                raise NoFit("its caches are neither [NB, P, Hkv, D] twice nor vLLM's [NB, Hkv, D/x, P, x] and [NB, Hkv, D, P]")
            k, v = kc[0][1], vc[0][1]
            if (k.shape[0], k.shape[1], k.shape[2] * k.shape[4], k.shape[3]) != (v.shape[0], hkv, d, v.shape[3]) or tuple(v.shape[1:3]) != (hkv, d):
                raise NoFit("its vLLM-layout caches do not fit the rows' heads and head size")
            layout, orders = 0, [(kc[0][0], vc[0][0])]
        in_place = {an, bn} & s.updated
        if s.updated - {an, bn}:
            raise NoFit("writes an input in place other than the caches: " + ", ".join(sorted(s.updated - {an, bn})))
        if in_place and in_place != {an, bn}:
            raise NoFit("writes only one of the caches in place")
        outs = [(n, v) for n, v in s.outputs if torch.is_tensor(v)]
        if len(outs) != len(s.outputs) or len(outs) not in (0, 2):
            raise NoFit("returns %d outputs; the family returns the two caches (or nothing)" % len(s.outputs))
        if not outs and not in_place:
            raise NoFit("neither returns the caches nor writes them in place")
        found = []
        for key_rows, value_rows in ((rows[0][0], rows[1][0]), (rows[1][0], rows[0][0])):
            for kcn, vcn in orders:
                shapes = {kcn: dict(t)[kcn].shape, vcn: dict(t)[vcn].shape}
                out_orders = [(outs[0][0], outs[1][0]), (outs[1][0], outs[0][0])] if outs else [(kcn, vcn)]
                for ko, vo in out_orders:
                    if outs and (dict(outs)[ko].shape != shapes[kcn] or dict(outs)[vo].shape != shapes[vcn]):
                        continue
                    found.append({"roles": {"key": ("input", key_rows), "value": ("input", value_rows), "key_cache": ("input", kcn),
                                            "value_cache": ("input", vcn), "slot_mapping": ("input", slots[0][0])},
                                  "params": {"layout": layout}, "outputs": {"key_cache": ko, "value_cache": vo}, "in_place": bool(in_place)})
        if not found:
            raise NoFit("its outputs are not the two caches")
        return found

    def prepare(self, b, get):
        r = b["roles"]
        key, value = get(r["key"]).contiguous(), get(r["value"]).contiguous()
        kc, vc = get(r["key_cache"]), get(r["value_cache"])
        if not b["in_place"]:
            kc, vc = kc.clone(memory_format=torch.contiguous_format), vc.clone(memory_format=torch.contiguous_format)
        if not (kc.is_contiguous() and vc.is_contiguous()):
            raise RuntimeError("kv_cache_write writes the caches in place, which needs them contiguous")
        slots = get(r["slot_mapping"]).to(torch.int64).contiguous()
        tokens, hkv, d = key.shape
        layout = b["params"]["layout"]
        nb, page, x = (kc.shape[0], kc.shape[3], kc.shape[4]) if layout == 0 else (kc.shape[0], kc.shape[1], 1)
        return [key, value, kc, vc, slots], [tokens, hkv, d, nb, page, x, layout], [], {"key_cache": kc, "value_cache": vc}


class TopkFilter:
    """Per-row top-k threshold filter over the vocabulary: values below the k-th largest become -inf."""
    name = "topk_filter"

    def bind(self, s):
        xs, x = the_activation(s)
        if x.dim() < 1 or x.shape[-1] < 1:
            raise NoFit("has no rows to filter")
        n_rows, vocab = rows(x), x.shape[-1]
        if s.updated - {xs}:
            raise NoFit("writes an input in place: " + ", ".join(sorted(s.updated - {xs})))
        out_name, _ = one_output(s, like=x, dtype=x.dtype)
        ks = [(n, v) for n, v in s.tensor_inputs() if not v.dtype.is_floating_point and v.dtype != torch.bool and v.numel() == n_rows]
        found = []
        for kn, _ in ks:
            try:
                no_other_tensors(s, [("input", xs), ("input", kn)])
            except NoFit:
                continue
            found.append({"roles": {"logits": ("input", xs), "k": ("input", kn)}, "params": {"k": 0, "k_from": None},
                          "outputs": {"out": out_name}, "in_place": xs in s.updated})
        if not ks or not found:
            no_other_tensors(s, [("input", xs)])
            # A scalar k: an integer argument (or init argument) between 1 and the row length.
            for kind, items in (("input", s.inputs), ("init", list(s.init_kwargs.items()))):
                for n, v in items:
                    if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= vocab:
                        found.append({"roles": {"logits": ("input", xs)}, "params": {"k": v, "k_from": [kind, n]},
                                      "outputs": {"out": out_name}, "in_place": xs in s.updated})
        if not found:
            raise NoFit("has no k: neither an integer tensor of one entry per row nor an integer argument")
        return found

    def prepare(self, b, get):
        x = get(b["roles"]["logits"])
        if b["in_place"]:
            if not x.is_contiguous():
                raise RuntimeError("the reference filters its logits in place, which needs them contiguous here")
            out = x  # the kernel reads each element before it writes it
        else:
            x = x.contiguous()
            out = empty(x.shape, x.dtype, x.device)
        k = get(b["roles"]["k"]).to(torch.int64).contiguous() if "k" in b["roles"] else None
        kval = 0 if k is not None else int(resolve(b, "k", get))
        return [x, k, out], [rows(x), x.shape[-1]], [float(kval)], {"out": out}


class PagedDecodeAttentionVllm:
    """Paged decode attention in vLLM's cache layout (key [NB, Hkv, D/x, P, x], value [NB, Hkv, D, P])."""
    name = "paged_decode_attention_vllm"

    def bind(self, s):
        t = s.tensor_inputs()
        q = [(n, v) for n, v in t if is_float(v) and v.dim() == 3]
        kc = [(n, v) for n, v in t if is_float(v) and v.dim() == 5]
        vc = [(n, v) for n, v in t if is_float(v) and v.dim() == 4]
        tables, lens = int_tensors(s, 2), int_tensors(s, 1)
        if len(q) != 1 or len(kc) != 1 or len(vc) != 1 or len(tables) != 1 or len(lens) != 1 or len(t) != 5:
            raise NoFit("does not take query [B, Hq, D], vLLM's key cache [NB, Hkv, D/x, P, x] and value cache [NB, Hkv, D, P], "
                        "block tables and sequence lengths")
        (qn, qv), (kn, k), (vn, v) = q[0], kc[0], vc[0]
        bsz, hq, d = qv.shape
        nb, hkv, dx, page, x = k.shape
        if tuple(v.shape) != (nb, hkv, d, page) or dx * x != d or hq % hkv or k.dtype != qv.dtype or v.dtype != qv.dtype:
            raise NoFit("its caches are not vLLM's layout for the query's heads, head size and dtype")
        out_name, _ = one_output(s, like=qv, dtype=qv.dtype)
        no_other_tensors(s, [("input", n) for n, _ in t])
        return [{"roles": {"query": ("input", qn), "key_cache": ("input", kn), "value_cache": ("input", vn),
                           "block_tables": ("input", tables[0][0]), "seq_lens": ("input", lens[0][0])},
                 "params": {"scale": sc, "scale_is_rsqrt_d": abs(sc - 1.0 / math.sqrt(d)) < 1e-12}, "outputs": {"out": out_name},
                 "symbolic": ["scale"] if abs(sc - 1.0 / math.sqrt(d)) < 1e-12 else []} for sc in attention_scales(s, d)]

    def prepare(self, b, get):
        r = b["roles"]
        q, kc, vc = get(r["query"]).contiguous(), get(r["key_cache"]).contiguous(), get(r["value_cache"]).contiguous()
        bt, sl = get(r["block_tables"]).to(torch.int32).contiguous(), get(r["seq_lens"]).to(torch.int32).contiguous()
        bsz, hq, d = q.shape
        nb, hkv, _, page, x = kc.shape
        mb = bt.shape[1]
        splits = splits_for(q.device, bsz * hkv, mb * page, 512)
        scale = 1.0 / math.sqrt(d) if b["params"].get("scale_is_rsqrt_d") else b["params"]["scale"]
        out = empty(q.shape, q.dtype, q.device)
        po = torch.empty((bsz, hq, splits, d), dtype=torch.float32, device=q.device)
        pl = torch.empty((bsz, hq, splits), dtype=torch.float32, device=q.device)
        return [q, kc, vc, bt, sl, out, po, pl], [bsz, hq, hkv, d, page, mb, splits, x, nb], [scale], {"out": out}


class MlaDecode:
    """MLA decode: one latent KV head of Dqk dims (512 latent + 64 rope), value = its first Dv dims."""
    name = "mla_decode"
    HEAD_GROUP = 16  # query heads a kernel block serves (mla_decode.cuh, kHeadGroup)

    def bind(self, s):
        t = s.tensor_inputs()
        floats = [(n, v) for n, v in t if is_float(v) and v.dim() in (3, 4)]
        tables, lens = int_tensors(s, 2), int_tensors(s, 1)
        if len(floats) != 2 or len(tables) != 1 or len(lens) != 1 or len(t) != 4:
            raise NoFit("does not take a query [B, H, Dqk], one latent cache [NB, P, Dqk] (or [NB, P, 1, Dqk]), block tables and sequence lengths")
        if len(s.outputs) != 1 or not torch.is_tensor(s.outputs[0][1]):
            raise NoFit("returns %d outputs; the family returns one" % len(s.outputs))
        out_name, out = s.outputs[0]
        found = []
        for (qn, qv), (cn, c) in (floats, floats[::-1]):
            if qv.dim() != 3 or c.shape[-1] != qv.shape[-1] or (c.dim() == 4 and c.shape[2] != 1) or c.dtype != qv.dtype:
                continue
            bsz, h, dqk = qv.shape
            if out.dim() != 3 or tuple(out.shape[:2]) != (bsz, h) or not 0 < out.shape[2] <= dqk or out.dtype != qv.dtype:
                continue  # the other tensor may be the query
            for sc in attention_scales(s, dqk):
                found.append({"roles": {"query": ("input", qn), "kv_cache": ("input", cn), "block_tables": ("input", tables[0][0]),
                                        "seq_lens": ("input", lens[0][0])},
                              # The rope part (Dqk - Dv, 64 in DeepSeek) is the model's constant; Dv follows from the query.
                              "params": {"scale": sc, "scale_is_rsqrt_d": abs(sc - 1.0 / math.sqrt(dqk)) < 1e-12, "rope_dim": dqk - out.shape[2]},
                              "outputs": {"out": out_name}, "symbolic": ["scale"] if abs(sc - 1.0 / math.sqrt(dqk)) < 1e-12 else []})
        if not found:
            raise NoFit("has no query [B, H, Dqk] and cache [NB, P, Dqk] of one dtype with an output [B, H, Dv <= Dqk] in that dtype")
        return found

    def prepare(self, b, get):
        r = b["roles"]
        q, c = get(r["query"]).contiguous(), get(r["kv_cache"]).contiguous()
        bt, sl = get(r["block_tables"]).to(torch.int32).contiguous(), get(r["seq_lens"]).to(torch.int32).contiguous()
        bsz, h, dqk = q.shape
        nb, page = c.shape[0], c.shape[1]
        dv = dqk - int(b["params"]["rope_dim"])
        if not 0 < dv <= dqk:
            raise RuntimeError("the query's %d dims leave no value dims after the %d rope dims" % (dqk, int(b["params"]["rope_dim"])))
        mb = bt.shape[1]
        splits = splits_for(q.device, bsz * math.ceil(h / self.HEAD_GROUP), mb * page, 256)
        scale = 1.0 / math.sqrt(dqk) if b["params"].get("scale_is_rsqrt_d") else b["params"]["scale"]
        out = empty((bsz, h, dv), q.dtype, q.device)
        po = torch.empty((bsz, h, splits, dv), dtype=torch.float32, device=q.device)
        pl = torch.empty((bsz, h, splits), dtype=torch.float32, device=q.device)
        return [q, c, bt, sl, out, po, pl], [bsz, h, dqk, dv, page, mb, splits, nb], [scale], {"out": out}


class FusedMoe:
    """Fused MoE experts: hidden [T, H], w13 [E, 2I, H] (gate rows, then up rows), w2 [E, H, I], top-k weights and ids [T, k]."""
    name = "fused_moe"
    BLOCK_M = 16  # rows of a grouped-GEMM block (fused_moe.cuh, kBlockM): each expert's rows are padded to it
    CHUNK = 256   # (token, slot) entries of one routing block (fused_moe.cuh, kChunk)

    def bind(self, s):
        stacks = [(src, v) for src, v in s.sources() if is_float(v) and v.dim() == 3]
        ids = [(n, v) for n, v in s.tensor_inputs() if v.dim() == 2 and v.dtype in (torch.int32, torch.int64)]
        if len(stacks) != 2 or len(ids) != 1:
            raise NoFit("does not take two expert weight stacks (w13 [E, 2I, H] and w2 [E, H, I]) and one integer top-k id tensor [T, k]")
        if len(s.outputs) != 1 or not torch.is_tensor(s.outputs[0][1]):
            raise NoFit("returns %d outputs; the family returns one" % len(s.outputs))
        out_name, out = s.outputs[0]
        idn, idv = ids[0]
        t, k = idv.shape
        stack_inputs = {src[1] for src, _ in stacks if src[0] == "input"}
        found = []
        for (w13s, w13), (w2s, w2) in (stacks, stacks[::-1]):
            e, two_i, h = w13.shape
            if two_i % 2 or tuple(w2.shape) != (e, h, two_i // 2) or w2.dtype != w13.dtype:
                continue
            for xs, x in s.float_inputs():
                if xs in stack_inputs or x.dim() < 2 or x.shape[-1] != h or rows(x) != t or x.dtype != w13.dtype:
                    continue
                if tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype:
                    continue
                for ws, wv in s.float_inputs():
                    if ws in (xs,) or ws in stack_inputs or tuple(wv.shape) != (t, k):
                        continue
                    no_other_tensors(s, [("input", xs), ("input", ws), ("input", idn)] + [src for src in (w13s, w2s) if src[0] == "input"])
                    found.append({"roles": {"hidden": ("input", xs), "w13": w13s, "w2": w2s, "topk_weights": ("input", ws), "topk_ids": ("input", idn)},
                                  "params": {}, "outputs": {"out": out_name}})
        if not found:
            raise NoFit("has no hidden [T, H], w13 [E, 2I, H], w2 [E, H, I] of one dtype with top-k weights [T, k] and an output like hidden")
        return found

    @classmethod
    def routing_scratch(cls, entries, e, dev):
        """The routing's scratch (ABI.md): chunk counts, expert offsets, sorted ids, the expert of each row block."""
        capacity = entries + e * (cls.BLOCK_M - 1)
        return [torch.empty(max(1, (entries + cls.CHUNK - 1) // cls.CHUNK * e), dtype=torch.int32, device=dev),
                torch.empty(e + 1, dtype=torch.int32, device=dev),
                torch.empty(capacity, dtype=torch.int32, device=dev),
                torch.empty((capacity + cls.BLOCK_M - 1) // cls.BLOCK_M, dtype=torch.int32, device=dev)]

    def prepare(self, b, get):
        r = b["roles"]
        x, w13, w2 = get(r["hidden"]).contiguous(), get(r["w13"]).contiguous(), get(r["w2"]).contiguous()
        weights = get(r["topk_weights"]).to(torch.float32).contiguous()
        ids = get(r["topk_ids"]).to(torch.int32).contiguous()
        h, t = x.shape[-1], rows(x)
        e, i, k = w13.shape[0], w13.shape[1] // 2, ids.shape[-1]
        entries = t * k
        dev = x.device
        out = empty(x.shape, x.dtype, dev)
        # The scratch (ABI.md): the routing's (routing_scratch), act, per-slot outputs.
        scratch = FusedMoe.routing_scratch(entries, e, dev) + [
                   torch.empty((max(1, entries), i), dtype=x.dtype, device=dev),
                   torch.empty((max(1, entries), h), dtype=torch.float32, device=dev)]
        return [x, w13, w2, weights, ids, out] + scratch, [t, h, i, e, k, self.BLOCK_M], [], {"out": out}


class FusedMoeFp8:
    """Fused MoE experts with block-scaled fp8 weights (vLLM torch_experts, block_shape [128, 128]): hidden [T, H] (16-bit),
    w13 [E, 2I, H] and w2 [E, H, I] in e4m3 with fp32 scales [E, 2I/128, H/128] and [E, H/128, I/128], top-k weights and ids [T, k]."""
    name = "fused_moe_fp8"
    BLOCK_M = FusedMoe.BLOCK_M  # the routing is fused_moe's
    GROUP = 128  # quantization group and weight scale block (fused_moe_fp8.cuh, kGroup)

    def bind(self, s):
        t = s.tensor_inputs()
        stacks = [(src, v) for src, v in s.sources() if is_fp8(v) and v.dim() == 3]
        scales = [(src, v) for src, v in s.sources() if torch.is_tensor(v) and v.dtype == torch.float32 and v.dim() == 3]
        ids = [(n, v) for n, v in t if v.dim() == 2 and v.dtype in (torch.int32, torch.int64)]
        if len(stacks) != 2 or len(scales) != 2 or len(ids) != 1:
            raise NoFit("does not take two fp8 expert weight stacks (w13 [E, 2I, H], w2 [E, H, I]), their two fp32 block-scale tensors and one "
                        "integer top-k id tensor [T, k]")
        if len(s.outputs) != 1 or not torch.is_tensor(s.outputs[0][1]):
            raise NoFit("returns %d outputs; the family returns one" % len(s.outputs))
        out_name, out = s.outputs[0]
        idn, idv = ids[0]
        tokens, k = idv.shape
        g = self.GROUP
        used = {src for src, _ in stacks + scales}
        found, why = [], "has no hidden [T, H] of a 16-bit or fp32 dtype with top-k weights [T, k] and an output like hidden"
        for (w13s, w13), (w2s, w2) in (stacks, stacks[::-1]):
            e, two_i, h = w13.shape
            if two_i % 2 or tuple(w2.shape) != (e, h, two_i // 2) or w2.dtype != w13.dtype:
                continue
            i = two_i // 2
            if h % g or i % g:
                why = "H = %d and I = %d must be multiples of %d (the 1 x 128 activation groups)" % (h, i, g)
                continue
            for (w13ss, w13_s), (w2ss, w2_s) in (scales, scales[::-1]):
                if tuple(w13_s.shape) != (e, two_i // g, h // g) or tuple(w2_s.shape) != (e, h // g, i // g):
                    why = "its scales are %s and %s: not 128 x 128 weight blocks of w13 %s and w2 %s" % (
                        tuple(w13_s.shape), tuple(w2_s.shape), tuple(w13.shape), tuple(w2.shape))
                    continue
                for xs, x in s.float_inputs():
                    if is_fp8(x) or ("input", xs) in used or x.dim() < 2 or x.shape[-1] != h or rows(x) != tokens:
                        continue
                    if tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype:
                        continue
                    for ws, wv in s.float_inputs():
                        if ws == xs or ("input", ws) in used or tuple(wv.shape) != (tokens, k):
                            continue
                        no_other_tensors(s, [("input", xs), ("input", ws), ("input", idn)] + [src for src in used if src[0] == "input"])
                        found.append({"roles": {"hidden": ("input", xs), "w13": w13s, "w2": w2s, "w13_scale": w13ss, "w2_scale": w2ss,
                                                "topk_weights": ("input", ws), "topk_ids": ("input", idn)},
                                      "params": {"fnuz": 1.0 if "fnuz" in str(w13.dtype) else 0.0}, "outputs": {"out": out_name}})
        if not found:
            raise NoFit(why)
        return found

    def prepare(self, b, get):
        r = b["roles"]
        x, w13, w2 = get(r["hidden"]).contiguous(), get(r["w13"]).contiguous(), get(r["w2"]).contiguous()
        w13_s, w2_s = get(r["w13_scale"]).contiguous(), get(r["w2_scale"]).contiguous()
        weights = get(r["topk_weights"]).to(torch.float32).contiguous()
        ids = get(r["topk_ids"]).to(torch.int32).contiguous()
        h, t = x.shape[-1], rows(x)
        e, i, k = w13.shape[0], w13.shape[1] // 2, ids.shape[-1]
        entries = t * k
        dev = x.device
        out = empty(x.shape, x.dtype, dev)
        rows_k = max(1, entries)
        # The scratch (ABI.md): fused_moe's routing, the quantized hidden and intermediate with their group scales, per-slot outputs.
        scratch = FusedMoe.routing_scratch(entries, e, dev) + [
                   torch.empty((max(1, t), h), dtype=torch.uint8, device=dev),
                   torch.empty((max(1, t), h // self.GROUP), dtype=torch.float32, device=dev),
                   torch.empty((rows_k, i), dtype=torch.uint8, device=dev),
                   torch.empty((rows_k, i // self.GROUP), dtype=torch.float32, device=dev),
                   torch.empty((rows_k, h), dtype=torch.float32, device=dev)]
        return ([x, w13, w2, w13_s, w2_s, weights, ids, out] + scratch, [t, h, i, e, k, self.BLOCK_M], [b["params"]["fnuz"]], {"out": out})


class Fp8BlockGemm:
    """Block-scaled fp8 GEMM (DeepSeek-V3, vLLM w8a8_block_fp8_matmul): A[.., K] and B[N, K] in e4m3, As[.., K/128] and
    Bs[N/128, K/128] fp32 scales (1 x 128 activation groups, 128 x 128 weight blocks), out[.., N] in bf16."""
    name = "fp8_block_gemm"
    BLOCK = 128  # the only scale block the launcher serves (fp8_block_gemm.cuh)

    def bind(self, s):
        t = s.tensor_inputs()
        fp8 = [(n, v) for n, v in t if is_fp8(v)]
        scales = [(n, v) for n, v in t if torch.is_tensor(v) and v.dtype == torch.float32]
        if len(fp8) != 2 or len(scales) != 2 or len(t) != 4:
            raise NoFit("does not take two fp8 matrices and two fp32 scale tensors (A, B, As, Bs)")
        if len(s.outputs) != 1 or not torch.is_tensor(s.outputs[0][1]):
            raise NoFit("returns %d outputs; the family returns one" % len(s.outputs))
        out_name, out = s.outputs[0]
        if out.dtype != torch.bfloat16:
            raise NoFit("returns %s; the family's V0 stores bf16" % out.dtype)
        found, why = [], "no pairing of A[.., K], B[N, K] and their scales fits"
        for (an, a), (bn, b) in (fp8, fp8[::-1]):
            if b.dim() != 2 or a.dim() < 1 or a.shape[-1] != b.shape[1] or a.dtype != b.dtype:
                continue
            n, k = b.shape
            if tuple(out.shape) != tuple(a.shape[:-1]) + (n,):
                continue
            kb, nb = -(-k // self.BLOCK), -(-n // self.BLOCK)
            for (asn, a_s), (bsn, b_s) in (scales, scales[::-1]):
                if tuple(a_s.shape[:-1]) != tuple(a.shape[:-1]) or b_s.dim() != 2:
                    continue
                if a_s.shape[-1] != kb or tuple(b_s.shape) != (nb, kb):
                    why = "its scales are [%s] and %s: not 1 x 128 activation groups and 128 x 128 weight blocks (the only blocks the launcher serves)" % (
                        ", ".join(str(x) for x in a_s.shape), tuple(b_s.shape))
                    continue
                if k % 16:
                    why = "K = %d is not a multiple of 16 (the launcher reads 16-byte fp8 rows)" % k
                    continue
                found.append({"roles": {"A": ("input", an), "B": ("input", bn), "As": ("input", asn), "Bs": ("input", bsn)},
                              "params": {"fnuz": 1.0 if "fnuz" in str(a.dtype) else 0.0}, "outputs": {"out": out_name}})
        if not found:
            raise NoFit(why)
        return found

    def prepare(self, b, get):
        r = b["roles"]
        a, w = get(r["A"]), get(r["B"]).contiguous()
        n, k = w.shape
        a2 = a.reshape(-1, k).contiguous()
        m = a2.shape[0]
        a_s = get(r["As"]).reshape(m, -1).contiguous()
        b_s = get(r["Bs"]).contiguous()
        out = empty(tuple(a.shape[:-1]) + (n,), torch.bfloat16, a.device)
        return [a2, w, a_s, b_s, out], [m, n, k, self.BLOCK, self.BLOCK], [b["params"]["fnuz"]], {"out": out}
class PrefillAttention:
    """Prefill attention over packed variable-length sequences (layout 0: q [Tq, Hq, D], k/v [Tk, Hkv, D],
    cu_seqlens_q and cu_seqlens_k [B + 1]) or its unified paged form (layout 1: k/v caches [NB, P, Hkv, D],
    cu_seqlens_q [B + 1], seq_lens [B], block_tables [B, MB]); causal aligned to the end; GQA."""
    name = "prefill_attention"

    def bind(self, s):
        t = s.tensor_inputs()
        f3 = [(n, v) for n, v in t if is_float(v) and v.dim() == 3]
        f4 = [(n, v) for n, v in t if is_float(v) and v.dim() == 4]
        ones, tables = int_tensors(s, 1), int_tensors(s, 2)
        layouts = []
        if len(f3) == 3 and not f4 and len(ones) == 2 and not tables and len(t) == 5:
            for qn, qv in f3:
                kvs = [(n, v) for n, v in f3 if n != qn]
                for (kn, k), (vn, v) in (kvs, kvs[::-1]):
                    if k.shape == v.shape and k.shape[2] == qv.shape[2] and qv.shape[1] % k.shape[1] == 0 and ones[0][1].numel() == ones[1][1].numel():
                        for cq, ck in (ones, ones[::-1]):
                            layouts.append((0, qn, kn, vn, cq[0], ck[0], None))
        elif len(f3) == 1 and len(f4) == 2 and len(ones) == 2 and len(tables) == 1 and len(t) == 6:
            qn, qv = f3[0]
            cu = [n for n, v in ones if v.numel() == tables[0][1].shape[0] + 1]
            lens = [n for n, v in ones if v.numel() == tables[0][1].shape[0]]
            (an, a), (bn, b) = f4
            if (len(cu) == 1 and len(lens) == 1 and a.shape == b.shape and a.shape[3] == qv.shape[2] and qv.shape[1] % a.shape[2] == 0):
                for kn, vn in ((an, bn), (bn, an)):
                    layouts.append((1, qn, kn, vn, cu[0], lens[0], tables[0][0]))
        if not layouts:
            raise NoFit("does not take q [Tq, Hq, D] with k/v [Tk, Hkv, D] and cu_seqlens_q/k [B + 1] (packed), nor k/v caches "
                        "[NB, P, Hkv, D] with cu_seqlens_q [B + 1], seq_lens [B] and block tables [B, MB] (paged)")
        qv = dict(t)[layouts[0][1]]
        out_name, _ = one_output(s, like=qv, dtype=qv.dtype)
        no_other_tensors(s, [("input", n) for n, _ in t])
        d = qv.shape[2]
        source = scalar_source(s, lambda v: isinstance(v, bool), names=("causal", "is_causal"))
        causals = [(None, source)] if source else [(1, None), (0, None)]
        found = []
        for layout, qn, kn, vn, cq, kl, bt in layouts:
            for causal, causal_from in causals:
                for sc in attention_scales(s, d):
                    roles = {"q": ("input", qn), "k": ("input", kn), "v": ("input", vn), "cu_seqlens_q": ("input", cq), "kv_lens": ("input", kl)}
                    if bt:
                        roles["block_tables"] = ("input", bt)
                    found.append({"roles": roles, "params": {"scale": sc, "scale_is_rsqrt_d": abs(sc - 1.0 / math.sqrt(d)) < 1e-12, "layout": layout,
                                                             "causal": causal, "causal_from": causal_from},
                                  "outputs": {"out": out_name}, "symbolic": ["scale"] if abs(sc - 1.0 / math.sqrt(d)) < 1e-12 else []})
        return found

    def prepare(self, b, get):
        r, layout = b["roles"], b["params"]["layout"]
        q, k, v = get(r["q"]).contiguous(), get(r["k"]).contiguous(), get(r["v"]).contiguous()
        cu_q, kv_lens = get(r["cu_seqlens_q"]).to(torch.int32).contiguous(), get(r["kv_lens"]).to(torch.int32).contiguous()
        tq, hq, d = q.shape
        bsz = cu_q.numel() - 1
        # The grid covers the longest sequence's queries (one read of the lengths before the launch).
        max_q = int((cu_q[1:] - cu_q[:-1]).max()) if bsz > 0 else 0
        if layout == 0:
            tk, hkv = k.shape[0], k.shape[1]
            bt, page, mb = None, 0, 0
        else:
            nb, page, hkv = k.shape[0], k.shape[1], k.shape[2]
            bt = get(r["block_tables"]).to(torch.int32).contiguous()
            tk, mb = nb * page, bt.shape[1]
        causal = int(bool(resolve(b, "causal", get)))
        scale = 1.0 / math.sqrt(d) if b["params"].get("scale_is_rsqrt_d") else b["params"]["scale"]
        out = empty(q.shape, q.dtype, q.device)
        return [q, k, v, cu_q, kv_lens, out, bt], [bsz, hq, hkv, d, tq, tk, max_q, causal, layout, page, mb], [scale], {"out": out}


TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64", "fp8_e4m3fn": "float8_e4m3fn",
                "fp8_e4m3fnuz": "float8_e4m3fnuz", "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64",
                "bool": "bool"}


class Generated:
    """The generator's kernels (planner/generator/): the binding carries the IR's launch recipe
    (buffers, size expressions, floats, results); kwiki plan decides the fit, not bind."""
    name = "generated"

    def bind(self, s):
        raise NoFit("the generator's fit is decided by kwiki plan (plans/kernel_ir.json)")

    def prepare(self, b, get):
        r = b["recipe"]
        held = {}

        def tensor(name):  # an input "x", or a parameter "param:w"
            if name not in held:
                held[name] = get(("param", name[6:]) if name.startswith("param:") else ("input", name))
            return held[name]

        def scalar(source):
            kind, name = source.split(":", 1)
            return get((kind, name))

        def size(e):
            if "const" in e:
                return int(e["const"])
            if "scalar" in e:
                return int(scalar(e["scalar"]))
            def run(name, dims):  # the product of a run of a tensor's dims (negative: from the end)
                t = tensor(name)
                first, last = dims
                rank = t.dim()
                lo = first + rank if first < 0 else first
                hi = last + rank if (last <= 0 and first < 0) else last
                p = 1
                for d in t.shape[lo:hi]:
                    p *= int(d)
                return p

            p = run(e["tensor"], e["dims"])
            if "tensor2" in e:
                p *= run(e["tensor2"], e["dims2"])
            v = p * int(e["num"])
            if v % int(e["den"]):
                raise RuntimeError("%s gives a size the kernel cannot use (%d / %d)" % (e["tensor"], v, int(e["den"])))
            return v // int(e["den"])

        sizes = [size(e) for e in r["size_exprs"]]
        def value(f):
            if f.get("fn"):
                d = float(size(f["size"]))
                return {"sqrt": math.sqrt(d), "rsqrt": 1 / math.sqrt(d), "recip": 1 / d, "id": d}[f["fn"]]
            return float(scalar(f["source"])) if f.get("source") else f["literal"]

        floats = [value(f) for f in r["floats"]]
        device = next((tensor(x["name"]).device for x in r["buffers"] if x["role"] != "output"), None)
        tensors = []
        for buf in r["buffers"]:
            shape = [sizes[i] for i in buf["shape"]]
            if buf["role"] == "output":
                t = empty(shape, getattr(torch, TORCH_DTYPES[buf["dtype"]]), device)
            else:
                t = tensor(buf["name"])
                if list(t.shape) != shape:
                    raise RuntimeError("%s has shape %s; the generated kernel was written for %s" % (buf["name"], list(t.shape), shape))
                if buf["role"] == "updated":
                    if not t.is_contiguous():
                        raise RuntimeError("the generated kernel writes %s in place, which needs it contiguous" % buf["name"])
                else:
                    t = t.contiguous()
            tensors.append(t)
        outs = {res["name"]: tensors[res["buffer"]] for res in r["results"]}
        return tensors, sizes, floats, outs


# Every family with a V0 kernel, by its table name (the C++ table lists the same names, in this order).
FAMILIES = {f.name: f for f in (FusedAddRmsNorm(), RowNorm("rms_norm", False), RowNorm("layer_norm", True), RowMap("softmax", False),
                                RowReduce(), RowMap("gelu_and_mul", True), Fp8Quant(), MoeGating(),
                                Gemm(), PagedDecodeAttention(), KvCacheWrite(), TopkFilter(), PagedDecodeAttentionVllm(),
                                MlaDecode(), FusedMoe(), FusedMoeFp8(), Fp8BlockGemm(), PrefillAttention(), Generated())}


def launch_twin(lib, family, tensors, dims, params):
    """Runs the CPU twin (kwiki_twin.h) on host tensors in the launcher's order."""
    ptrs = (ctypes.c_void_p * len(tensors))(*[0 if t is None else t.data_ptr() for t in tensors])
    codes = (ctypes.c_int * len(tensors))(*[0 if t is None else DTYPE_CODES[t.dtype] for t in tensors])
    d = (ctypes.c_longlong * max(1, len(dims)))(*[int(x) for x in dims] or [0])
    p = (ctypes.c_double * max(1, len(params)))(*[float(x) for x in params] or [0.0])
    err = ctypes.create_string_buffer(512)
    rc = lib.kwiki_twin_launch(family.encode(), ptrs, codes, len(tensors), d, len(dims), p, len(params), err, len(err))
    if rc != 0:
        raise RuntimeError("the %s twin refused: %s" % (family, err.value.decode(errors="replace")))


def open_twin(path):
    lib = ctypes.CDLL(path)
    lib.kwiki_twin_launch.restype = ctypes.c_int
    lib.kwiki_twin_launch.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_longlong), ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_int,
                                      ctypes.c_char_p, ctypes.c_int]
    if lib.kwiki_twin_abi_version() != 1:
        raise RuntimeError("twin library speaks ABI %d, expected 1" % lib.kwiki_twin_abi_version())
    return lib


def outputs_in_form(binding, outs, form, names):
    """The kernel's outputs arranged as the reference returns them (tensor, tuple or dict)."""
    post = outs.pop("_post", None)
    if post:
        outs = post(outs)
    by_name = {binding["outputs"][role]: t for role, t in outs.items() if role in binding["outputs"]}
    if form == "tensor":
        return by_name[names[0]]
    if form == "dict":
        return {n: by_name[n] for n in names}
    return tuple(by_name[n] for n in names)


def prove(lib, structure, before, reference_outputs, updated_after, families):
    """Each family's best binding against one traced call: the twin runs on `before` (the inputs
    as the reference got them) and its outputs are compared with the reference's. Returns a list
    of {family, fits, ok, binding, errors, why}."""
    results = []
    for name in families:
        fam = FAMILIES.get(name)
        if fam is None:
            results.append({"family": name, "fits": False, "ok": False, "why": "no Python adapter"})
            continue
        try:
            candidates = fam.bind(structure)
        except NoFit as e:
            reduced = structure.without_unread()
            try:
                if reduced is None:
                    raise
                candidates = fam.bind(reduced)
            except NoFit:
                results.append({"family": name, "fits": False, "ok": False, "why": str(e)})
                continue
        best = None
        for b in candidates:
            def get(src, b=b):
                kind, name = src
                if kind == "init":
                    return structure.init_kwargs[name]
                value = (dict(before) if kind == "input" else dict(structure.params))[name]
                return value.clone() if torch.is_tensor(value) else value
            try:
                tensors, dims, params, outs = fam.prepare(b, get)
                launch_twin(lib, name, tensors, dims, params)
                post = outs.pop("_post", None)
                if post:
                    outs = post(outs)
            except Exception as e:
                trial = {"ok": False, "errors": {}, "why": "%s: %s" % (type(e).__name__, e), "worst": float("inf")}
            else:
                errors, ok, worst = {}, True, 0.0
                want = dict(reference_outputs)
                for role, out_name in b["outputs"].items():
                    target = want.get(out_name)
                    if target is None and out_name in updated_after:
                        target = updated_after[out_name]
                    good, msg, a, r = compare(out_name, outs[role], target)
                    errors[out_name] = {"ok": good, "max_abs": a, "max_rel": r, "message": msg}
                    ok = ok and good
                    worst = max(worst, a if math.isfinite(a) else 1e30)
                trial = {"ok": ok, "errors": errors, "worst": worst}
            trial["binding"] = b
            if best is None or (trial["ok"] and not best["ok"]) or (trial["ok"] == best["ok"] and trial["worst"] < best["worst"]):
                best = trial
            if trial["ok"]:
                break
        best.update(family=name, fits=True)
        results.append(best)
    return results
