// decode_split_sweep.cu: times the paged decode attention template (GQA, split-KV) at the sample
// task's shapes for several KV split counts, the way the harness times (events around the
// launches alone, a >= 2x L2 buffer zeroed before each repetition, median of 20), and prints the
// KV bytes per microsecond. Block tables are a random permutation of the cache pages.
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=sm_90a -I baseline/kernels bench/gpu/decode_split_sweep.cu -o dsweep && ./dsweep
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "paged_decode_attention.cuh"

#define CHECK(call)                                                                            \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

using bf16 = __nv_bfloat16;

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t flush_bytes = std::max<size_t>(2 * static_cast<size_t>(prop.l2CacheSize), 128u << 20);
  void* flush = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  struct Shape { int B, ctx; };
  const int Hq = 32, Hkv = 8, D = 128, P = 16;
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (Shape sh : {Shape{32, 16384}, Shape{8, 8192}, Shape{1, 32768}, Shape{32, 1024}}) {
    const int MB = sh.ctx / P, NB = sh.B * MB;
    const size_t cache_elems = static_cast<size_t>(NB) * P * Hkv * D;
    bf16 *q, *kc, *vc, *out;
    int *bt, *sl;
    float *po, *pl;
    CHECK(cudaMalloc(&q, sizeof(bf16) * sh.B * Hq * D));
    CHECK(cudaMalloc(&kc, sizeof(bf16) * cache_elems));
    CHECK(cudaMalloc(&vc, sizeof(bf16) * cache_elems));
    CHECK(cudaMalloc(&out, sizeof(bf16) * sh.B * Hq * D));
    CHECK(cudaMemset(q, 0x3c, sizeof(bf16) * sh.B * Hq * D));
    CHECK(cudaMemset(kc, 0x3c, sizeof(bf16) * cache_elems));
    CHECK(cudaMemset(vc, 0x3c, sizeof(bf16) * cache_elems));
    std::vector<int> table(NB);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    std::vector<int> lens(sh.B, sh.ctx);
    CHECK(cudaMalloc(&bt, sizeof(int) * NB));
    CHECK(cudaMalloc(&sl, sizeof(int) * sh.B));
    CHECK(cudaMemcpy(bt, table.data(), sizeof(int) * NB, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(sl, lens.data(), sizeof(int) * sh.B, cudaMemcpyHostToDevice));
    const int max_s = 64;
    CHECK(cudaMalloc(&po, sizeof(float) * sh.B * Hq * max_s * D));
    CHECK(cudaMalloc(&pl, sizeof(float) * sh.B * Hq * max_s));
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
      cudaEvent_t e0, e1;
      CHECK(cudaEventCreate(&e0));
      CHECK(cudaEventCreate(&e1));
      for (int i = 0; i < 3; ++i)
        if (kwiki_pda_detail::launch<bf16>(a) != 0) { std::printf("launch refused S=%d\n", S); return 1; }
      std::vector<float> t;
      for (int i = 0; i < 20; ++i) {
        CHECK(cudaMemsetAsync(flush, 0, flush_bytes));
        CHECK(cudaEventRecord(e0));
        kwiki_pda_detail::launch<bf16>(a);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.f);
      }
      CHECK(cudaGetLastError());
      std::sort(t.begin(), t.end());
      const double us = t[t.size() / 2];
      std::printf("S %3d  blocks %6d  %9.2f us  %6.3f TB/s\n", S, S * Hkv * sh.B, us, kv_bytes / us / 1e6);
      CHECK(cudaEventDestroy(e0));
      CHECK(cudaEventDestroy(e1));
    }
    cudaFree(q); cudaFree(kc); cudaFree(vc); cudaFree(out); cudaFree(bt); cudaFree(sl); cudaFree(po); cudaFree(pl);
  }
  return 0;
}
