// The generator's CuteDSL backend (NVIDIA's CUTLASS Python DSL, nvidia-cutlass-dsl 4.8): the
// spellings and host side codegen_dsl.cpp writes a kernel.py with, for sm_90a.
#include "codegen.hpp"
#include "codegen_dsl.hpp"

namespace kwiki::gen {
namespace {

constexpr const char* kPrelude = R"PY(
import inspect
import math
import os
import re

import torch
import cuda.bindings.driver as cuda  # the stream type of the launcher
import cutlass
import cutlass.cute as cute

WARP = 32  # lanes of a warp: the reductions' first stage


# ---- kw_*: the helpers the generator's op table spells its ops with (Python column) ----

def kw_cvt(x, t):
    """x (a DSL scalar or a Python number) as DSL type t: float -> int truncates toward zero,
    bool -> number is 0 or 1."""
    if isinstance(x, (bool, int, float)):
        return t(x)
    if type(x) is t:
        return x
    if isinstance(x, cutlass.Boolean):
        return t(cutlass.select_(x, t(1), t(0)))
    return x.to(t)


def kw_round(x, t):
    """The rounding contract: x (fp32) rounded to t's grid (bf16, fp16) and computed on in fp32."""
    return x.to(t).to(cutlass.Float32)


def _round_fp8(x, t, largest, overflow):
    # torch's cast: NaN from `overflow` on (the rounding would leave the grid), else nearest-even
    # of the value clamped to the largest finite (clamping changes nothing below `overflow`).
    clamped = kw_where(x > largest, cutlass.Float32(largest), kw_where(x < -largest, cutlass.Float32(-largest), x))
    r = clamped.to(t).to(cutlass.Float32)
    return kw_where(kw_abs(x) < overflow, r, cutlass.Float32(float("nan")))


def kw_round_e4m3fn(x):
    return _round_fp8(x, cutlass.Float8E4M3FN, 448.0, 464.0)


def kw_round_e4m3fnuz(x):
    raise TypeError("float8_e4m3fnuz is CDNA3's fp8; CuteDSL targets NVIDIA GPUs")


def kw_where(c, a, b):
    t = type(a) if isinstance(a, cutlass.Numeric) else type(b) if isinstance(b, cutlass.Numeric) else cutlass.Float32
    if isinstance(c, bool):  # decided while tracing (a comparison of Python numbers)
        return kw_cvt(a if c else b, t)
    return t(cutlass.select_(c, kw_cvt(a, t), kw_cvt(b, t)))


def _is_float(x):
    return isinstance(x, (cutlass.Float32, cutlass.Float64))


def kw_abs(x):
    return cute.math.abs(x) if _is_float(x) else kw_where(x < 0, -x, x)


def kw_exp(x):
    return cute.math.exp(x)


def kw_exp2(x):
    return cute.math.exp2(x)


def kw_expm1(x):
    return cute.math.expm1(x)


def kw_log(x):
    return cute.math.log(x)


def kw_log2(x):
    return cute.math.log2(x)


def kw_log1p(x):
    return cute.math.log1p(x)


def kw_sqrt(x):
    return cute.math.sqrt(x)


def kw_rsqrt(x):
    return cute.math.rsqrt(x)


def kw_sin(x):
    return cute.math.sin(x)


def kw_cos(x):
    return cute.math.cos(x)


def kw_tanh(x):
    return cute.math.tanh(x)


def kw_erf(x):
    return cute.math.erf(x)


def kw_pow(a, b):
    return cute.math.pow(kw_cvt(a, cutlass.Float32), kw_cvt(b, cutlass.Float32))


def kw_div(a, b):
    t = cutlass.Float64 if isinstance(a, cutlass.Float64) or isinstance(b, cutlass.Float64) else cutlass.Float32
    return kw_cvt(a, t) / kw_cvt(b, t)


def kw_floor(x):
    return cute.math.floor(x) if _is_float(x) else x


def kw_ceil(x):
    return cute.math.ceil(x) if _is_float(x) else x


def kw_trunc(x):
    return cute.math.trunc(x) if _is_float(x) else x


def kw_rint(x):
    return cute.math.roundeven(x) if _is_float(x) else x  # torch.round: half to even


def kw_arg_better(x, cx, a, ca, is_max):
    """torch.argmax/argmin order: NaN is the extreme, ties go to the lower index."""
    strictly = (x > a) if is_max else (x < a)
    lower = cx < ca
    return kw_where(a != a, kw_and(x != x, lower), kw_or(x != x, kw_or(strictly, kw_and(x == a, lower))))


# ---- chunks: W consecutive elements through a copy atom (the vector path) ----

def kw_tiles(t, w):
    """t (1-D) viewed as tiles of w elements: kw_tile(tiles, i) is elements [i * w, i * w + w)."""
    return cute.zipped_divide(t, (w,))


def kw_tile(tiles, i):
    return tiles[(None, i)]


def kw_fragment(t, w):
    """w elements of type t in registers."""
    return cute.make_rmem_tensor((w,), t)


def kw_copy(src, dst, t, bits):
    """One vector copy of bits (16 bytes for the widest type) between global memory and registers."""
    cute.copy(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), t, num_bits_per_copy=bits), src, dst)


# ---- reductions: butterfly shuffles within a warp, then the warps' partials through shared memory ----

def _block_all(x, red, tid, op):
    for k in (16, 8, 4, 2, 1):
        x = op(x, cute.arch.shuffle_sync_bfly(x, offset=k))
    red[tid // WARP] = x  # every lane of a warp holds (and writes) the same value
    cute.arch.sync_threads()
    s = red[0]
    for g in range(1, KTHREADS // WARP):  # Python's range: unrolled when traced
        s = op(s, red[g])
    return s


def kw_block_sum(x, red, tid):
    return _block_all(x, red, tid, lambda a, b: a + b)


def kw_block_max(x, red, tid):
    return _block_all(x, red, tid, kw_max)


def kw_block_min(x, red, tid):
    return _block_all(x, red, tid, kw_min)


def kw_block_arg(v, i, red, redi, tid, is_max):
    def step(v, i, ov, oi):
        take = kw_arg_better(ov, oi, v, i, is_max)
        return kw_where(take, ov, v), kw_where(take, oi, i)

    for k in (16, 8, 4, 2, 1):
        v, i = step(v, i, cute.arch.shuffle_sync_bfly(v, offset=k), cute.arch.shuffle_sync_bfly(i, offset=k))
    red[tid // WARP] = v
    redi[tid // WARP] = i
    cute.arch.sync_threads()
    v, i = red[0], redi[0]
    for g in range(1, KTHREADS // WARP):
        v, i = step(v, i, red[g], redi[g])
    return v, i
)PY";

constexpr const char* kHost = R"PY(

# ---- CuteDSL host side: launch through a compiled function; compile_check without a device ----

_COMPILED = {}


def _dsl_tensor(t, vec):
    from cutlass.cute.runtime import from_dlpack

    t = t.detach().view(-1)  # parameters require grad, which DLPack refuses; the kernel only reads them
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)  # bool tensors travel as uint8 0 / 1 (see BUFFERS)
    # The vector kernel's 16-byte copy atoms need the pointer's alignment declared (_vector_ok checked it).
    return from_dlpack(t, assumed_align=16 if vec else t.element_size()).mark_layout_dynamic()


def _launch(tensors, sizes, floats, rows, n, vec):
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    args = [_dsl_tensor(t, vec) for t in tensors] + [cutlass.Int32(s) for s in sizes] + [cutlass.Float32(f) for f in floats]
    args += [cutlass.Int32(rows), cutlass.Int32(n), stream]
    fn = launch_vec if vec else launch
    if fn not in _COMPILED:
        _COMPILED[fn] = cute.compile(fn, *args)
    _COMPILED[fn](*args)


def compile_check(out_dir):
    """Traces and compiles the kernel for TARGET with placeholder tensors (no device needed) and
    writes its PTX and cubin into out_dir. Returns what was produced; raises when compiling fails
    or the result is not code for TARGET. CUTE_DSL_ARCH must name TARGET before cutlass is imported."""
    from cutlass.cute.runtime import make_fake_compact_tensor
    from cutlass.runtime import make_fake_stream

    if os.environ.get("CUTE_DSL_ARCH") != TARGET:
        raise RuntimeError("set CUTE_DSL_ARCH=%s before importing kernel.py (CuteDSL reads it once)" % TARGET)
    os.makedirs(out_dir, exist_ok=True)
    args = [make_fake_compact_tensor(getattr(cutlass, b[3]), (cute.sym_int32(),), assumed_align=16) for b in BUFFERS]
    args += [cutlass.Int32(s) for s in SAMPLE_SIZES] + [cutlass.Float32(0.5) for _ in FLOATS]
    rows = 1
    for i in OUTER_SLOTS:
        rows *= SAMPLE_SIZES[i]
    args += [cutlass.Int32(rows), cutlass.Int32(SAMPLE_SIZES[INNER_SLOT]), make_fake_stream()]
    result = {"framework": "cutedsl", "target": TARGET, "skeleton": SKELETON, "vector_width": VEC_W, "kernels": []}
    for name, fn in (("scalar", launch), ("vector", globals().get("launch_vec"))):
        if fn is None:
            continue
        compiled = cute.compile(fn, *args)
        for kind, ext in (("PTX", "ptx"), ("CUBIN", "cubin")):
            art = getattr(compiled.artifacts, kind, None)
            if isinstance(art, str) and os.path.isfile(art):
                with open(art, "rb") as f:
                    art = f.read()
            if isinstance(art, str):
                art = art.encode()
            if not art:
                raise RuntimeError("CuteDSL produced no %s (set CUTE_DSL_KEEP=ptx,cubin and CUTE_DSL_DUMP_DIR)" % kind)
            path = os.path.join(out_dir, "kernel_%s.%s.%s" % (name, TARGET, ext))
            with open(path, "wb") as f:
                f.write(art)
            result["%s_%s" % (name, ext)] = path
            result["%s_%s_bytes" % (name, ext)] = len(art)
            if ext == "ptx":
                if (".target " + TARGET).encode() not in art:
                    raise RuntimeError("the PTX is not for " + TARGET)
                # 16-byte (v4 of 32-bit) and narrower vector global accesses the PTX holds.
                result["%s_vector_accesses" % name] = len(re.findall(rb"(?:ld|st)\.global(?:\.nc)?(?:\.[a-z0-9]+)*\.v[24]", art))
            elif not art.startswith(b"\x7fELF"):
                raise RuntimeError("the cubin is not an ELF file")
        result["kernels"] += list(compiled.kernel_info)
    return result
)PY";

}  // namespace

const DslDialect& cutedsl_dialect() {
  static const DslDialect d{
      "CuteDSL",
      "cutlass.",
      "@cute.kernel",
      "@cute.jit",
      "cute.Tensor",
      "cute.arch.thread_idx()[0]",
      "cute.arch.block_idx()[0]",
      32,
      "smem = cutlass.memory.SmemAllocator()",
      "smem.allocate_tensor({T}, cute.make_layout({N}))",
      ", stream: cuda.CUstream",
      "{CALL}.launch(grid=[{GRID}, 1, 1], block=[{BLOCK}, 1, 1], stream=stream)",
      "cutlass.range_constexpr",
      kPrelude,
      kHost,
  };
  return d;
}

std::string emit_cutedsl_model(const Kernel& k, const std::string& returns, const std::string& target) {
  return emit_dsl_model(k, cutedsl_dialect(), returns, target);
}

}  // namespace kwiki::gen
