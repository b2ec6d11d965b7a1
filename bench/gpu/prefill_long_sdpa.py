# prefill_long_sdpa.py: the prefill_attention V0 beside SDPA-flash at long sequences, in one process
# (issue 20's target: >= 50% of SDPA-flash's rate at long sequences). The V0 is the template built as
# a launcher library (the ABI of baseline/kernels/ABI.md, called through ctypes); SDPA runs on the
# same tensors as one padded batch (library_paths.prefill_attention). Both are checked against each
# other first, then timed with generated_bench's timer (CUDA-graph replays, L2 flushed, median).
# Usage: python3 bench/gpu/prefill_long_sdpa.py LAUNCHER.so   (build: see bench/gpu/generated_h200.sh or
#   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -shared -Xcompiler -fPIC -DKWIKI_T=__nv_bfloat16
#        -DKWIKI_DEFINE_LAUNCHER=1 -I baseline/kernels -x cu baseline/kernels/prefill_attention.cuh -o prefill.so)
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generated_bench  # noqa: E402  (timed, the flush buffer size)
import library_paths  # noqa: E402

# (name, sequence lengths, Hq, Hkv, D): Llama-3-8B heads, causal self-attention prefill.
SHAPES = [("8x2048", [2048] * 8, 32, 8, 128), ("1x8192", [8192], 32, 8, 128), ("4x4096", [4096] * 4, 32, 8, 128),
          ("4x4096_d64", [4096] * 4, 32, 32, 64)]


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.kwiki_launch.restype = ctypes.c_int
    dev = torch.device("cuda")
    flush = torch.empty(int(1.2e9) // 4, dtype=torch.float32, device=dev)  # > 2x the H200's L2
    print("# %s; one process: the V0 launcher and SDPA-flash on the same tensors" % torch.cuda.get_device_name())
    for name, lens, hq, hkv, d in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        t = sum(lens)
        q = torch.randn(t, hq, d, generator=g, device=dev, dtype=torch.bfloat16)
        k = torch.randn(t, hkv, d, generator=g, device=dev, dtype=torch.bfloat16)
        v = torch.randn(t, hkv, d, generator=g, device=dev, dtype=torch.bfloat16)
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=dev)
        out = torch.empty_like(q)
        scale = d ** -0.5
        ptrs = (ctypes.c_void_p * 7)(q.data_ptr(), k.data_ptr(), v.data_ptr(), cu.data_ptr(), cu.data_ptr(), out.data_ptr(), None)
        dims = (ctypes.c_longlong * 11)(len(lens), hq, hkv, d, t, t, max(lens), 1, 0, 1, 1)
        params = (ctypes.c_double * 1)(scale)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        v0 = lambda: lib.kwiki_launch(ptrs, 7, dims, 11, params, 1, stream)
        path = library_paths.prefill_attention([q, k, v, cu, cu, out, None], list(dims), [scale])
        if v0() != 0:
            print("%-12s V0 launch refused" % name)
            continue
        ref = path.call()  # [B, Hq, S, D], left-aligned sequences
        worst = 0.0
        for b, n in enumerate(lens):
            got = out[int(cu[b]):int(cu[b + 1])].transpose(0, 1).float()
            worst = max(worst, (got - ref[b, :, :n].float()).abs().max().item())
        ok = worst <= 2e-2
        if not ok:
            print("%-12s FAIL: max |V0 - SDPA| %.3g" % (name, worst))
            continue
        tv, tl = generated_bench.timed(v0, flush)["median"], generated_bench.timed(path.call, flush)["median"]
        rv, rl = path.v0_flops / (tv * 1e-6) / 1e12, path.flops / (tl * 1e-6) / 1e12
        print("%-12s Hq%d Hkv%d D%d causal: V0 %9.2f us %6.1f TFLOP/s | SDPA-flash %9.2f us %6.1f TFLOP/s | V0 rate / SDPA rate %3.0f%% "
              "(max |V0 - SDPA| %.3g)" % (name, hq, hkv, d, tv, rv, tl, rl, 100 * rv / rl, worst))


if __name__ == "__main__":
    main()
