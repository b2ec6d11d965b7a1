# kernel.py: kwiki's gemm V0 in CuteDSL (template baseline/kernels/gemm_cutedsl.py, written by kwiki baseline).
# out[M,N] = x[M,K] @ w[N,K]^T (+ bias[N]): 16-bit inputs, fp32 accumulation, the bias added in fp32, one
# rounding at the store. Model(**init_kwargs)(**inputs) returns what reference.Model does; forward only
# allocates, reshapes and launches the kernels below (torch computes nothing; the reference's forward is
# never called, its module only holds the parameters). `python kernel.py --compile-check DIR` compiles
# them for TARGET without a device.
#
# Kernels
#   * TmaWgmmaGemm (bf16/fp16, K % 8 == 0, x and w 16-byte aligned): block tile 128 x 128 x 64, two
#     warpgroups of 64 x 128 (64 fp32 accumulators a thread). Warp 0 issues TMA tile copies of x and w
#     into a 4-stage ring of 128-byte-swizzled shared memory; full/empty mbarriers (PipelineTmaAsync)
#     pace it against the consumers; every warpgroup runs wgmma (m64n128k16, both operands from shared
#     memory) on each stage, waits for it, and releases the stage. TMA fills the parts of a tile outside
#     x or w with zeros (tail rows, columns and K), so the products need no predicates; the epilogue
#     stores each accumulator to global memory when its (m, n) lies inside out.
#   * simt_gemm (anything else: fp32, K % 8 != 0, unaligned pointers, K == 0): one thread per output
#     element, fp32 accumulation over K. Correct everywhere, slow; the TMA path covers the tasks' shapes.
import inspect
import json
import os
import re
import sys

import torch
import cuda.bindings.driver as cuda  # the stream type of the launchers
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, warpgroup

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import kwiki_families as _families  # noqa: E402  the gemm family's binding: which tensors are x, w, bias, out
import reference as _reference  # noqa: E402

BINDING = json.loads(r'''@BINDING@''')
FORM = "@FORM@"                                   # what forward returns: tensor | tuple | dict
OUTPUT_NAMES = json.loads(r'''@OUTPUT_NAMES@''')  # its outputs' names
TARGET = "@TARGET@"

TILE_M, TILE_N, TILE_K = 128, 128, 64  # TILE_K of 16-bit elements is one 128-byte swizzle row
STAGES = 4                             # 4 x 32 KiB of shared memory for x and w tiles
WARPGROUP = 128
THREADS = 2 * WARPGROUP                # two warpgroups, each 64 rows of the block tile
SIMT_THREADS = 256
_DTYPES = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16, torch.float32: cutlass.Float32}


def _smem_layout(dtype, rows):
    """rows x TILE_K x STAGES, K-major, in the 128-byte swizzle that TMA writes and wgmma's descriptors read."""
    atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, dtype)
    return cute.tile_to_shape(atom, (rows, TILE_K, STAGES), order=(0, 1, 2))


class TmaWgmmaGemm:
    """out = x @ w^T (+ bias) on Hopper: TMA into a shared-memory ring, wgmma from it."""

    def __init__(self, has_bias):
        self.has_bias = has_bias

    @cute.jit
    def __call__(self, x: cute.Tensor, w: cute.Tensor, bias, out: cute.Tensor, stream: cuda.CUstream):
        dtype = x.element_type
        self.dtype = dtype
        # Two warpgroups stacked along M, each an m64n128 wgmma per k16 step; x and w both K-major.
        tiled_mma = sm90_utils.make_trivial_tiled_mma(dtype, dtype, OperandMajorMode.K, OperandMajorMode.K, cutlass.Float32, (2, 1, 1),
                                                      tiler_mn=(64, TILE_N))
        x_smem, w_smem = _smem_layout(dtype, TILE_M), _smem_layout(dtype, TILE_N)
        # The TMA atoms copy one (rows x TILE_K) tile per call; their tensors map tile coordinates to TMA's.
        tma_x, x_tma = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), x, cute.slice_(x_smem, (None, None, 0)), (TILE_M, TILE_K))
        tma_w, w_tma = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), w, cute.slice_(w_smem, (None, None, 0)), (TILE_N, TILE_K))

        @cute.struct
        class SharedStorage:
            barriers: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]  # full[STAGES], then empty[STAGES]
            sx: cute.struct.Align[cute.struct.MemRange[dtype, cute.cosize(x_smem)], 1024]  # the swizzle repeats every 1024 bytes
            sw: cute.struct.Align[cute.struct.MemRange[dtype, cute.cosize(w_smem)], 1024]

        self.storage = SharedStorage
        grid = [(out.shape[0] + TILE_M - 1) // TILE_M, (out.shape[1] + TILE_N - 1) // TILE_N, 1]
        self.kernel(tma_x, x_tma, tma_w, w_tma, bias, out, tiled_mma, x_smem, w_smem).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, tma_x: cute.CopyAtom, mx: cute.Tensor, tma_w: cute.CopyAtom, mw: cute.Tensor, bias, mout: cute.Tensor,
               tiled_mma: cute.TiledMma, x_smem: cute.ComposedLayout, w_smem: cute.ComposedLayout):
        tid, _, _ = cute.arch.thread_idx()
        bm, bn, _ = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            cpasync.prefetch_descriptor(tma_x)
            cpasync.prefetch_descriptor(tma_w)

        # The ring: a stage is full once TMA has written its bytes (one arrival + the transaction count),
        # empty once every warp has released it (lane 0 of each of the 8 warps arrives).
        storage = cutlass.memory.SmemAllocator().allocate(self.storage)
        stage_bytes = cute.size_in_bytes(self.dtype, cute.slice_(x_smem, (None, None, 0))) + cute.size_in_bytes(
            self.dtype, cute.slice_(w_smem, (None, None, 0)))
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.barriers.data_ptr(), num_stages=STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, THREADS // 32),
            tx_count=stage_bytes, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)))
        sx = storage.sx.get_tensor(x_smem.outer, swizzle=x_smem.inner)  # (TILE_M, TILE_K, STAGES)
        sw = storage.sw.get_tensor(w_smem.outer, swizzle=w_smem.inner)  # (TILE_N, TILE_K, STAGES)

        # This block's tiles: x rows and w rows along every k tile; out's tile.
        gx = cute.local_tile(mx, (TILE_M, TILE_K), (bm, None))      # (TILE_M, TILE_K, k_tiles)
        gw = cute.local_tile(mw, (TILE_N, TILE_K), (bn, None))      # (TILE_N, TILE_K, k_tiles)
        gout = cute.local_tile(mout, (TILE_M, TILE_N), (bm, bn))    # (TILE_M, TILE_N)
        tsx, tgx = cpasync.tma_partition(tma_x, 0, cute.make_layout(1), cute.group_modes(sx, 0, 2), cute.group_modes(gx, 0, 2))
        tsw, tgw = cpasync.tma_partition(tma_w, 0, cute.make_layout(1), cute.group_modes(sw, 0, 2), cute.group_modes(gw, 0, 2))
        k_tiles = cute.size(gx, mode=[2])

        # This warpgroup's share of the MMA: wgmma descriptors over the stages. Every thread of a warpgroup
        # sees the same A and B, so the warpgroup's first thread slices them (uniform descriptors).
        thr_mma = tiled_mma.get_slice(cute.arch.make_warp_uniform(tid // WARPGROUP) * WARPGROUP)
        tcx = tiled_mma.make_fragment_A(thr_mma.partition_A(sx))
        tcw = tiled_mma.make_fragment_B(thr_mma.partition_B(sw))
        # The accumulators differ per thread: C is sliced by the thread's own index, never the warpgroup's
        # (that slice gave every thread its warpgroup's first thread's 64 (m, n): the H200's NaN MISMATCH).
        thr_out = tiled_mma.get_slice(tid)
        tcout = thr_out.partition_C(gout)
        acc = cute.make_rmem_tensor(tcout.shape, cutlass.Float32)
        acc.fill(0.0)
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)  # every wgmma adds to acc (zeroed above)

        filled = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        used = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        # Prologue: warp 0 starts up to STAGES tile copies.
        if warp == 0:
            for _ in cutlass.range(cutlass.min(STAGES, k_tiles), unroll=1):
                ring.producer_acquire(filled)  # the stage is empty; arm its full barrier with the bytes to come
                cute.copy(tma_x, tgx[(None, filled.count)], tsx[(None, filled.index)], tma_bar_ptr=ring.producer_get_barrier(filled))
                cute.copy(tma_w, tgw[(None, filled.count)], tsw[(None, filled.index)], tma_bar_ptr=ring.producer_get_barrier(filled))
                ring.producer_commit(filled)
                filled.advance()
        # Main loop: multiply a full stage, release it, and (warp 0) refill it with the tile STAGES ahead.
        for _ in cutlass.range(k_tiles, unroll=1):
            ring.consumer_wait(used)
            warpgroup.fence()
            for kb in cutlass.range_constexpr(cute.size(tcx, mode=[2])):  # TILE_K / 16 wgmmas
                cute.gemm(tiled_mma, acc, tcx[(None, None, kb, used.index)], tcw[(None, None, kb, used.index)], acc)
            warpgroup.commit_group()
            warpgroup.wait_group(0)  # the stage is read: it may be overwritten
            ring.consumer_release(used)
            used.advance()
            if warp == 0 and filled.count < k_tiles:
                ring.producer_acquire(filled)
                cute.copy(tma_x, tgx[(None, filled.count)], tsx[(None, filled.index)], tma_bar_ptr=ring.producer_get_barrier(filled))
                cute.copy(tma_w, tgw[(None, filled.count)], tsw[(None, filled.index)], tma_bar_ptr=ring.producer_get_barrier(filled))
                ring.producer_commit(filled)
                filled.advance()

        # Epilogue: (m, n) of each accumulator from an identity tensor partitioned like out; only
        # elements inside out are stored (tail tiles), each rounded once after the fp32 bias.
        tccoord = thr_out.partition_C(cute.local_tile(cute.make_identity_tensor(mout.shape), (TILE_M, TILE_N), (bm, bn)))
        for i in cutlass.range_constexpr(cute.size(acc)):
            if cute.elem_less(tccoord[i], mout.shape):
                v = acc[i]
                if cutlass.const_expr(self.has_bias):
                    v = v + bias[tccoord[i][1]].to(cutlass.Float32)
                tcout[i] = v.to(mout.element_type)


@cute.kernel
def simt_gemm_kernel(x: cute.Tensor, w: cute.Tensor, bias, out: cute.Tensor):
    tid, _, _ = cute.arch.thread_idx()
    bid, _, _ = cute.arch.block_idx()
    m_size, n_size = out.shape
    i = bid * SIMT_THREADS + tid
    if i < m_size * n_size:
        m = i // n_size
        n = i - m * n_size
        acc = cutlass.Float32(0.0)
        for k in range(x.shape[1]):
            acc = acc + x[m, k].to(cutlass.Float32) * w[n, k].to(cutlass.Float32)
        if cutlass.const_expr(bias is not None):
            acc = acc + bias[n].to(cutlass.Float32)
        out[m, n] = acc.to(out.element_type)


@cute.jit
def simt_gemm(x: cute.Tensor, w: cute.Tensor, bias, out: cute.Tensor, stream: cuda.CUstream):
    blocks = (out.shape[0] * out.shape[1] + SIMT_THREADS - 1) // SIMT_THREADS
    simt_gemm_kernel(x, w, bias, out).launch(grid=[blocks, 1, 1], block=[SIMT_THREADS, 1, 1], stream=stream)


# ---- the host side: torch only allocates, reshapes and launches ----

_COMPILED = {}


def _dsl_tensor(t, align):
    """A DSL view of a contiguous row-major tensor: dynamic sizes and strides, the innermost stride 1,
    `align` bytes of alignment declared for its pointer (16 for TMA's operands, which _tma_ok checked)."""
    from cutlass.cute.runtime import from_dlpack

    t = t.detach()  # parameters require grad, which DLPack refuses; the kernels only read them
    return from_dlpack(t, assumed_align=align).mark_layout_dynamic(leading_dim=t.dim() - 1)


def _tma_ok(x, w, k):
    """The TMA path holds: 16-bit operands, rows of whole 16-byte chunks (TMA's stride rule), aligned bases."""
    return (x.dtype in (torch.bfloat16, torch.float16) and w.dtype == x.dtype and k > 0 and k % 8 == 0
            and x.data_ptr() % 16 == 0 and w.data_ptr() % 16 == 0)


def _launcher(x, w, bias, out):
    """launch(): enqueues out = x @ w^T (+ bias) on the current stream (x[M,K], w[N,K], out[M,N])."""
    tma = _tma_ok(x, w, x.shape[1])
    if not tma and out.numel() >= 2**31:
        raise RuntimeError("the CuteDSL gemm's fallback indexes with 32-bit integers; this call has 2^31 outputs or more")
    # The declared alignments are fixed per kernel, so one compiled kernel serves every call of its key.
    operand_align = 16 if tma else x.element_size()
    args = [_dsl_tensor(x, operand_align), _dsl_tensor(w, operand_align), None if bias is None else _dsl_tensor(bias, bias.element_size()),
            _dsl_tensor(out, out.element_size())]
    key = (tma, x.dtype, None if bias is None else bias.dtype, out.dtype)
    if key not in _COMPILED:
        fn = TmaWgmmaGemm(bias is not None) if tma else simt_gemm
        _COMPILED[key] = cute.compile(fn, *args, cuda.CUstream(torch.cuda.current_stream().cuda_stream))
    compiled = _COMPILED[key]
    return lambda: compiled(*args, cuda.CUstream(torch.cuda.current_stream().cuda_stream))


class Model(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.ref = _reference.Model(*args, **kwargs)  # owns the parameters, so both compute with identical weights
        self._signature = inspect.signature(_reference.Model.forward)
        init = inspect.signature(_reference.Model.__init__).bind(None, *args, **kwargs)
        init.apply_defaults()
        self._init = dict(init.arguments)

    def prepare(self, *args, **kwargs):
        """(launch, result): launch() enqueues only the kernel (a harness times it alone, or captures it
        in a graph); result() arranges the outputs as the reference returns them."""
        bound = self._signature.bind(self.ref, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        arguments.pop(next(iter(self._signature.parameters)))  # self
        held = dict(self.ref.named_parameters())
        held.update(dict(self.ref.named_buffers()))
        sources = {"input": arguments, "param": held, "init": self._init}
        # The family's adapter picks x, w, bias, out (allocated, NaN-filled) and the sizes M, N, K.
        (x, w, bias, out), (m, n, k), _, outs = _families.FAMILIES["gemm"].prepare(BINDING, lambda src: sources[src[0]].get(src[1]))
        if x.device.type != "cuda":
            raise RuntimeError("kernel.py launches a CuteDSL kernel, which runs on the GPU; kernel_twin.py is the CPU twin's Model")
        launch = (lambda: None) if m * n == 0 else _launcher(x.view(m, k), w.contiguous(), bias, out.view(m, n))
        return launch, lambda: _families.outputs_in_form(BINDING, dict(outs), FORM, OUTPUT_NAMES)

    def forward(self, *args, **kwargs):
        launch, result = self.prepare(*args, **kwargs)
        launch()
        return result()


Model.forward.__signature__ = inspect.signature(_reference.Model.forward)  # the reference's, for whoever inspects it


# ---- compile_check: every kernel compiled for TARGET without a device ----

def compile_check(out_dir):
    """Traces and compiles each kernel for TARGET with placeholder tensors (dynamic sizes, as _dsl_tensor
    makes them) and writes its PTX and cubin into out_dir. Returns what was produced, with the counts
    of the instructions the design rests on; raises when compiling fails or the code is not for
    TARGET. CUTE_DSL_ARCH must name TARGET before cutlass is imported."""
    from cutlass.cute.runtime import make_fake_tensor
    from cutlass.runtime import make_fake_stream

    if os.environ.get("CUTE_DSL_ARCH") != TARGET:
        raise RuntimeError("set CUTE_DSL_ARCH=%s before importing kernel.py (CuteDSL reads it once)" % TARGET)
    os.makedirs(out_dir, exist_ok=True)

    def matrix(dtype, align):
        return make_fake_tensor(dtype, (cute.sym_int32(), cute.sym_int32()), (cute.sym_int64(), 1), assumed_align=align)

    bf16 = cutlass.BFloat16  # the placeholders' types are those _launcher gives a bf16 call's tensors
    x, w, out = matrix(bf16, 16), matrix(bf16, 16), matrix(bf16, 2)
    bias = make_fake_tensor(bf16, (cute.sym_int32(),), (1,), assumed_align=2)
    variants = (("tma_wgmma", TmaWgmmaGemm(False), (x, w, None, out)), ("tma_wgmma_bias", TmaWgmmaGemm(True), (x, w, bias, out)),
                ("simt_bias", simt_gemm, (matrix(bf16, 2), matrix(bf16, 2), bias, out)))
    patterns = {"wgmma.mma_async": rb"wgmma\.mma_async", "cp.async.bulk.tensor": rb"cp\.async\.bulk\.tensor", "mbarrier": rb"mbarrier\.",
                "st.global": rb"st\.global"}
    result = {"framework": "cutedsl", "target": TARGET, "skeleton": "gemm_tma_wgmma", "tile": [TILE_M, TILE_N, TILE_K], "stages": STAGES,
              "kernels": []}
    for name, fn, args in variants:
        compiled = cute.compile(fn, *args, make_fake_stream())
        for kind, ext in (("PTX", "ptx"), ("CUBIN", "cubin")):
            art = getattr(compiled.artifacts, kind, None)
            if isinstance(art, str) and os.path.isfile(art):
                with open(art, "rb") as f:
                    art = f.read()
            if isinstance(art, str):
                art = art.encode()
            if not art:
                raise RuntimeError("CuteDSL produced no %s (set CUTE_DSL_KEEP=ptx,cubin and CUTE_DSL_DUMP_DIR)" % kind)
            path = os.path.join(out_dir, "gemm_%s.%s.%s" % (name, TARGET, ext))
            with open(path, "wb") as f:
                f.write(art)
            result["%s_%s" % (name, ext)] = path
            result["%s_%s_bytes" % (name, ext)] = len(art)
            if ext == "ptx":
                if (".target " + TARGET).encode() not in art:
                    raise RuntimeError("the PTX is not for " + TARGET)
                result["%s_instructions" % name] = {k: len(re.findall(p, art)) for k, p in patterns.items()}
            elif not art.startswith(b"\x7fELF"):
                raise RuntimeError("the cubin is not an ELF file")
        result["kernels"] += list(compiled.kernel_info)
    for name in ("tma_wgmma", "tma_wgmma_bias"):
        counts = result["%s_instructions" % name]
        if not counts["wgmma.mma_async"] or not counts["cp.async.bulk.tensor"]:
            raise RuntimeError("the %s kernel's PTX lacks wgmma.mma_async or TMA (cp.async.bulk.tensor): %s" % (name, counts))
    return result


if __name__ == "__main__":
    # python kernel.py --compile-check OUT_DIR: compile for TARGET without a device; one JSON line.
    if len(sys.argv) != 3 or sys.argv[1] != "--compile-check":
        sys.exit("usage: python kernel.py --compile-check OUT_DIR")
    print("KWIKI_DSL_CHECK=" + json.dumps(compile_check(sys.argv[2]), sort_keys=True))
