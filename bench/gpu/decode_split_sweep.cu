// decode_split_sweep.cu: times the paged decode attention template (GQA, split-KV) at the sample
// task's shapes for several KV split counts, the way the harness times (events around the
// launches alone, a >= 2x L2 buffer zeroed before each repetition, median of 20), and prints the
// KV bytes per microsecond. Block tables are a random permutation of the cache pages.
// launch() now takes the tensor-core kernel at these shapes; bench/results/decode_split_sweep-h200.txt
// was taken with the CUDA-core kernel (decode_kernel_bench.cu times both, path 1 and 2).
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=sm_90a -I baseline/kernels bench/gpu/decode_split_sweep.cu -o dsweep && ./dsweep
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "bench_cuda.cuh"
#include "paged_decode_attention.cuh"

using bf16 = __nv_bfloat16;

int main() {
  cudaDeviceProp prop{};
  KWIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  kwiki_bench::FlushedTimer timer;
  struct Shape { int B, ctx; };
  const int Hq = 32, Hkv = 8, D = 128, P = 16;
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (Shape sh : {Shape{32, 16384}, Shape{8, 8192}, Shape{1, 32768}, Shape{32, 1024}}) {
    const int MB = sh.ctx / P, NB = sh.B * MB;
    const size_t cache_elems = static_cast<size_t>(NB) * P * Hkv * D;
    bf16 *q, *kc, *vc, *out;
    int *bt, *sl;
    float *po, *pl;
    KWIKI_CUDA_CHECK(cudaMalloc(&q, sizeof(bf16) * sh.B * Hq * D));
    KWIKI_CUDA_CHECK(cudaMalloc(&kc, sizeof(bf16) * cache_elems));
    KWIKI_CUDA_CHECK(cudaMalloc(&vc, sizeof(bf16) * cache_elems));
    KWIKI_CUDA_CHECK(cudaMalloc(&out, sizeof(bf16) * sh.B * Hq * D));
    KWIKI_CUDA_CHECK(cudaMemset(q, 0x3c, sizeof(bf16) * sh.B * Hq * D));
    KWIKI_CUDA_CHECK(cudaMemset(kc, 0x3c, sizeof(bf16) * cache_elems));
    KWIKI_CUDA_CHECK(cudaMemset(vc, 0x3c, sizeof(bf16) * cache_elems));
    std::vector<int> table(NB);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    std::vector<int> lens(sh.B, sh.ctx);
    KWIKI_CUDA_CHECK(cudaMalloc(&bt, sizeof(int) * NB));
    KWIKI_CUDA_CHECK(cudaMalloc(&sl, sizeof(int) * sh.B));
    KWIKI_CUDA_CHECK(cudaMemcpy(bt, table.data(), sizeof(int) * NB, cudaMemcpyHostToDevice));
    KWIKI_CUDA_CHECK(cudaMemcpy(sl, lens.data(), sizeof(int) * sh.B, cudaMemcpyHostToDevice));
    const int max_s = 64;
    KWIKI_CUDA_CHECK(cudaMalloc(&po, sizeof(float) * sh.B * Hq * max_s * D));
    KWIKI_CUDA_CHECK(cudaMalloc(&pl, sizeof(float) * sh.B * Hq * max_s));
    const double kv_bytes = 2.0 * cache_elems * sizeof(bf16);
    std::printf("-- B %d ctx %d (KV %.0f MB)\n", sh.B, sh.ctx, kv_bytes / 1e6);
    for (int S : {1, 2, 4, 8, 16, 32, 64}) {
      if (S > (sh.ctx + 511) / 512 * 2) break;
      kwiki_pda_detail::Args a;
      a.query = q; a.key_cache = kc; a.value_cache = vc; a.block_tables = bt; a.seq_lens = sl; a.out = out;
      a.partial_out = po; a.partial_lse = pl;
      a.B = sh.B; a.Hq = Hq; a.Hkv = Hkv; a.D = D; a.P = P; a.MB = MB; a.S = S;
      a.scale = 0.0883883f;
      a.stream = 0;
      for (int i = 0; i < 3; ++i)
        if (kwiki_pda_detail::launch<bf16>(a) != 0) { std::printf("launch refused S=%d\n", S); return 1; }
      const double us = timer.median_us([&] { kwiki_pda_detail::launch<bf16>(a); }, 0, 20);
      std::printf("S %3d  blocks %6d  %9.2f us  %6.3f TB/s\n", S, S * Hkv * sh.B, us, kv_bytes / us / 1e6);
    }
    cudaFree(q); cudaFree(kc); cudaFree(vc); cudaFree(out); cudaFree(bt); cudaFree(sl); cudaFree(po); cudaFree(pl);
  }
  return 0;
}
