// The generator's FlyDSL backend (AMD's ROCm layout DSL, flydsl 0.4): the spellings and host side
// codegen_dsl.cpp writes a kernel.py with, for gfx942 / gfx950 (wave64).
#include "codegen.hpp"
#include "codegen_dsl.hpp"

namespace kwiki::gen {
namespace {

constexpr const char* kPrelude = R"PY(
import inspect
import math
import os
import re
import shutil
import tempfile

import torch
import flydsl.compiler as flyc
import flydsl.expr as fx

WAVE = 64  # lanes of a CDNA wavefront: the reductions' first stage (no 32-lane assumption)


# ---- kw_*: the helpers the generator's op table spells its ops with (Python column) ----

def kw_cvt(x, t):
    """x (a DSL scalar or a Python number) as DSL type t: float -> int truncates toward zero,
    bool -> number is 0 or 1."""
    if isinstance(x, (bool, int, float)):
        return t(x)
    if not isinstance(x, fx.Numeric):
        x = fx.Int32(x)  # an index (thread, block, loop counter) as a 32-bit integer
    if type(x) is t:
        return x
    if isinstance(x, fx.Boolean):
        return x.select(t(1), t(0))
    return x.to(t)


def kw_round(x, t):
    """The rounding contract: x (fp32) rounded to t's grid (bf16, fp16) and computed on in fp32."""
    return x.to(t).to(fx.Float32)


def _round_fp8(x, t, largest, overflow):
    # torch's cast: NaN from `overflow` on, else nearest-even of the value clamped to the largest finite.
    clamped = kw_where(x > largest, fx.Float32(largest), kw_where(x < -largest, fx.Float32(-largest), x))
    r = clamped.to(t).to(fx.Float32)
    return kw_where(kw_abs(x) < overflow, r, fx.Float32(float("nan")))


def kw_round_e4m3fn(x):
    return _round_fp8(x, fx.Float8E4M3FN, 448.0, 464.0)


def kw_round_e4m3fnuz(x):
    return _round_fp8(x, fx.Float8E4M3FNUZ, 240.0, 248.0)


def kw_where(c, a, b):
    t = type(a) if isinstance(a, fx.Numeric) else type(b) if isinstance(b, fx.Numeric) else fx.Float32
    if isinstance(c, bool):  # decided while tracing (a comparison of Python numbers)
        return kw_cvt(a if c else b, t)
    return kw_cvt(c, fx.Boolean).select(kw_cvt(a, t), kw_cvt(b, t))


def _is_float(x):
    return isinstance(x, (fx.Float32, fx.Float64))


def kw_abs(x):
    return fx.math.absf(x) if _is_float(x) else kw_where(x < 0, -x, x)


def kw_exp(x):
    return fx.math.exp(x)


def kw_exp2(x):
    return fx.math.exp2(x)


def kw_expm1(x):
    return fx.math.expm1(x)


def kw_log(x):
    return fx.math.log(x)


def kw_log2(x):
    return fx.math.log2(x)


def kw_log1p(x):
    return fx.math.log1p(x)


def kw_sqrt(x):
    return fx.math.sqrt(x)


def kw_rsqrt(x):
    return fx.math.rsqrt(x)


def kw_sin(x):
    return fx.math.sin(x)


def kw_cos(x):
    return fx.math.cos(x)


def kw_tanh(x):
    return fx.math.tanh(x)


def kw_erf(x):
    return fx.math.erf(x)


def kw_pow(a, b):
    return fx.math.powf(kw_cvt(a, fx.Float32), kw_cvt(b, fx.Float32))


def kw_div(a, b):
    t = fx.Float64 if isinstance(a, fx.Float64) or isinstance(b, fx.Float64) else fx.Float32
    return kw_cvt(a, t) / kw_cvt(b, t)


def kw_floor(x):
    return fx.math.floor(x) if _is_float(x) else x


def kw_ceil(x):
    return fx.math.ceil(x) if _is_float(x) else x


def kw_trunc(x):
    return fx.math.trunc(x) if _is_float(x) else x


def kw_rint(x):
    return fx.math.roundeven(x) if _is_float(x) else x  # torch.round: half to even


def kw_arg_better(x, cx, a, ca, is_max):
    """torch.argmax/argmin order: NaN is the extreme, ties go to the lower index."""
    cx, ca = kw_cvt(cx, fx.Int32), kw_cvt(ca, fx.Int32)
    strictly = (x > a) if is_max else (x < a)
    lower = cx < ca
    return kw_where(a != a, kw_and(x != x, lower), kw_or(x != x, kw_or(strictly, kw_and(x == a, lower))))


# ---- chunks: W consecutive elements through a copy atom (the vector path) ----

def kw_tiles(t, w):
    """t (1-D) divided into tiles of w elements: kw_tile(tiles, i) is elements [i * w, i * w + w)."""
    return fx.logical_divide(t, fx.make_layout(w, 1))


def kw_tile(tiles, i):
    return fx.slice(tiles, (None, i))


def kw_fragment(t, w):
    """w elements of type t in registers."""
    return fx.memref_alloca(fx.MemRefType.get(t.ir_type, fx.LayoutType.get(w, 1), fx.AddressSpace.Register), fx.make_layout(w, 1))


_COPY_OPS = {8: fx.UniversalCopy8b, 16: fx.UniversalCopy16b, 32: fx.UniversalCopy32b, 64: fx.UniversalCopy64b, 128: fx.UniversalCopy128b}


def kw_copy(src, dst, t, bits):
    """One vector copy of bits (16 bytes for the widest type) between global memory and registers."""
    fx.copy_atom_call(fx.make_copy_atom(_COPY_OPS[bits](), t), src, dst)


# ---- reductions: butterfly shuffles within a wavefront, then the wavefronts' partials through LDS ----

def _block_all(x, red, tid, op):
    for k in (32, 16, 8, 4, 2, 1):
        x = op(x, x.shuffle_xor(k, WAVE))
    red[tid // WAVE] = x  # every lane of a wavefront holds (and writes) the same value
    fx.gpu.barrier()
    s = kw_cvt(red[0], type(x))
    for g in range(1, KTHREADS // WAVE):  # Python's range: unrolled when traced
        s = op(s, kw_cvt(red[g], type(x)))
    return s


def kw_block_sum(x, red, tid):
    return _block_all(x, red, tid, lambda a, b: a + b)


def kw_block_max(x, red, tid):
    return _block_all(x, red, tid, kw_max)


def kw_block_min(x, red, tid):
    return _block_all(x, red, tid, kw_min)


def kw_block_arg(v, i, red, redi, tid, is_max):
    i = kw_cvt(i, fx.Int32)

    def step(v, i, ov, oi):
        take = kw_arg_better(ov, oi, v, i, is_max)
        return kw_where(take, ov, v), kw_where(take, oi, i)

    for k in (32, 16, 8, 4, 2, 1):
        v, i = step(v, i, v.shuffle_xor(k, WAVE), i.shuffle_xor(k, WAVE))
    red[tid // WAVE] = v
    redi[tid // WAVE] = i
    fx.gpu.barrier()
    v, i = kw_cvt(red[0], type(v)), kw_cvt(redi[0], fx.Int32)
    for g in range(1, KTHREADS // WAVE):
        v, i = step(v, i, kw_cvt(red[g], type(v)), kw_cvt(redi[g], fx.Int32))
    return v, i
)PY";

constexpr const char* kHost = R"PY(

# ---- FlyDSL host side: launch through the jit function; compile_check without a device ----

def _dsl_tensor(t):
    t = t.detach().view(-1)  # parameters require grad, which DLPack refuses; the kernel only reads them
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)  # bool tensors travel as uint8 0 / 1 (see BUFFERS); torch 1.13's DLPack refuses bool
    return flyc.from_dlpack(t).mark_layout_dynamic(leading_dim=0, divisibility=1)


def _launch(tensors, sizes, floats, rows, n, vec):
    (launch_vec if vec else launch)(*[_dsl_tensor(t) for t in tensors], *sizes, *floats, rows, n, stream=torch.cuda.current_stream())


def _rocm_with_lld():
    """MLIR's ROCDL serializer links the code object with $ROCM_PATH/llvm/bin/ld.lld and takes the
    device libraries (ocml: tanh, erf, ...) from $ROCM_PATH/amdgcn/bitcode. Without ROCm (a CPU
    machine) a folder of links stands in: the system's newest ld.lld and Debian's rocm-device-libs."""
    def complete(root):
        return os.path.isfile(os.path.join(root, "llvm", "bin", "ld.lld")) and os.path.isfile(os.path.join(root, "amdgcn", "bitcode", "ocml.bc"))

    for root in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if root and complete(root):
            return root
    lld = next((shutil.which(n) for n in ("ld.lld-20", "ld.lld-19", "ld.lld-18", "ld.lld-17", "ld.lld") if shutil.which(n)), None)
    if not lld:
        raise RuntimeError("FlyDSL links gfx code with ld.lld: install ROCm or lld (Debian: lld-19)")
    libs = next((d for d in ("/usr/lib/x86_64-linux-gnu/amdgcn", "/usr/lib/aarch64-linux-gnu/amdgcn", "/opt/rocm/amdgcn")
                 if os.path.isfile(os.path.join(d, "bitcode", "ocml.bc"))), None)
    if not libs:
        raise RuntimeError("FlyDSL takes ocml from the ROCm device libraries: install ROCm or Debian's rocm-device-libs")
    root = tempfile.mkdtemp(prefix="kwiki-rocm-")
    os.makedirs(os.path.join(root, "llvm", "bin"))
    os.symlink(lld, os.path.join(root, "llvm", "bin", "ld.lld"))
    os.symlink(libs, os.path.join(root, "amdgcn"))
    return root


def compile_check(out_dir):
    """Traces and compiles the kernel for TARGET with placeholder CPU tensors (FlyDSL's COMPILE_ONLY
    mode: no device, no launch) and keeps the final ISA in out_dir. Returns what was produced;
    raises when compiling fails or the ISA is not for TARGET."""
    os.makedirs(out_dir, exist_ok=True)
    os.environ.update({"COMPILE_ONLY": "1", "ARCH": TARGET, "FLYDSL_DEBUG_DUMP_ASM": "1", "FLYDSL_DUMP_DIR": out_dir,
                       "FLYDSL_RUNTIME_ENABLE_CACHE": "0", "ROCM_PATH": _rocm_with_lld()})
    tensors = []
    for name, _, dtype, dsl_type, _ in BUFFERS:
        if dtype is None:
            raise RuntimeError("torch %s has no dtype for %s (%s): FlyDSL takes its placeholders from torch" % (torch.__version__, name, dsl_type))
        tensors.append(torch.zeros(16, dtype=dtype))
    rows = 1
    for i in OUTER_SLOTS:
        rows *= SAMPLE_SIZES[i]
    result = {"framework": "flydsl", "target": TARGET, "skeleton": SKELETON, "vector_width": VEC_W, "scratch_bytes": []}
    for name, fn in (("scalar", launch), ("vector", globals().get("launch_vec"))):
        if fn is None:
            continue
        flyc.compile(fn, *[_dsl_tensor(t) for t in tensors], *SAMPLE_SIZES, *[0.5 for _ in FLOATS], rows, SAMPLE_SIZES[INNER_SLOT])
        kernel = "kernel_%s%s_0" % ("rows" if SKELETON == "rows" else "elementwise", "_vec" if name == "vector" else "")
        isa = os.path.join(out_dir, kernel, "22_final_isa.s")
        if not os.path.isfile(isa):
            raise RuntimeError("FlyDSL compiled but left no ISA at " + isa)
        with open(isa) as f:
            text = f.read()
        if "amdgcn-amd-amdhsa--" + TARGET not in text and "amdgcn-amd-amdhsa-unknown-" + TARGET not in text:
            raise RuntimeError("the ISA is not for " + TARGET)
        result[name + "_isa"] = isa
        result[name + "_isa_bytes"] = len(text)
        # 16-byte (dwordx4) and 8-byte (dwordx2) global / buffer accesses the ISA holds.
        result[name + "_vector_accesses"] = len(re.findall(r"(?:global|buffer)_(?:load|store)_dwordx[24]", text))
        result["scratch_bytes"] += [int(line.split()[-1]) for line in text.splitlines() if ".private_segment_fixed_size:" in line]
    return result
)PY";

}  // namespace

const DslDialect& flydsl_dialect() {
  static const DslDialect d{
      "FlyDSL",
      "fx.",
      "@flyc.kernel",
      "@flyc.jit",
      "fx.Tensor",
      "fx.Int32(fx.thread_idx.x)",
      "fx.Int32(fx.block_idx.x)",
      64,
      "smem = fx.SharedAllocator()  # one allocator per kernel; each reduction's partials are an array of it",
      "smem.allocate(fx.Array[{T}, {N}]).peek()",
      ", stream: fx.Stream = fx.Stream(None)",
      "{CALL}.launch(grid=({GRID}, 1, 1), block=({BLOCK}, 1, 1), stream=stream)",
      "fx.range_constexpr",
      kPrelude,
      kHost,
  };
  return d;
}

std::string emit_flydsl_model(const Kernel& k, const std::string& returns, const std::string& target) {
  return emit_dsl_model(k, flydsl_dialect(), returns, target);
}

}  // namespace kwiki::gen
