// moe_gating_sweep.cu: a second MoE router beside the template's, checked against it bit for bit
// and timed the way the harness times (events, L2 evicted before each repetition, median).
// The second router ranks differently from the template, so their agreement cross-checks both:
//  - a resident grid whose warps stride over the tokens, the next token's logits loaded before
//    the current token is ranked;
//  - each of the k rounds rescans the lane's experts, then two redux.sync (the largest
//    probability as an integer key, then the lowest id among the lanes holding it).
// The template (moe_gating.cuh) sorts a lane's experts once and shifts the winner's list instead
// of rescanning (CUDA, at most 4 experts a lane), or scans with a shuffle butterfly (other
// cases). On the H200, 16384 tokens x 128 experts, top 8 (bench/results/moe_gating_sweep-h200.txt):
// template 20.4 us (scan and butterfly) -> 13.5 us (sorted heads), this router 20.0-20.2 us: the
// prefetch did not help, the kernel is instruction-bound. The probabilities come from the
// template's own to_probabilities, so ids and weights must match bit for bit; the check says so
// per shape (inputs with ties; no NaN).
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=sm_90a -I baseline/kernels bench/gpu/moe_gating_sweep.cu -o moe && ./moe
#include <cuda_runtime.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bench_cuda.cuh"
#include "moe_gating.cuh"

namespace {

constexpr int kWarps = 4;  // warps per block

/// Largest-probability key of a lane's candidate: the probability word of the template's rank
/// key (the float's bits plus one; 0 = none).
__device__ unsigned int rank_key(float v) { return static_cast<unsigned int>(kwiki_moe_gating::rank_key(v, 0) >> 32); }

/// Candidate router: W = 4 consecutive experts a lane per slot, NV slots (E <= NV * 32 * 4,
/// E a multiple of 4, rows 16-byte aligned), a resident grid of warps striding over tokens.
template <int NV>
__global__ void __launch_bounds__(kWarps * 32)
moe_gating_candidate(const float* __restrict__ gating, float* __restrict__ topk_weights, int* __restrict__ topk_ids, long long T,
                     int E, int k, int renormalize) {
  constexpr int W = 4;
  const int lane = threadIdx.x % 32;
  const long long stride = static_cast<long long>(gridDim.x) * kWarps;
  long long t = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (t >= T) return;
  float4 next[NV];
  auto load = [&](long long token, float4 (&dst)[NV]) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int e0 = (lane + i * 32) * W;
      dst[i] = e0 < E ? *reinterpret_cast<const float4*>(gating + token * E + e0) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
  };
  load(t, next);
  for (; t < T; t += stride) {
    float p[NV][W];
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      p[i][0] = next[i].x;
      p[i][1] = next[i].y;
      p[i][2] = next[i].z;
      p[i][3] = next[i].w;
    }
    if (t + stride < T) load(t + stride, next);  // in flight while this token is ranked
    kwiki_moe_gating::to_probabilities<W, NV>(p, lane, E);  // the template's arithmetic, so equal bits
    float my_w = 0.f;
    int my_id = 0;
    float wsum = 0.f;
    for (int round = 0; round < k; ++round) {
      float bv = -INFINITY;
      int bi = INT_MAX;
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int c = 0; c < W; ++c)
          if (rank_key(p[i][c]) > rank_key(bv)) {  // increasing ids: strict keeps the lower id
            bv = p[i][c];
            bi = (lane + i * 32) * W + c;
          }
      const unsigned int key = rank_key(bv);
      const unsigned int best = __reduce_max_sync(0xffffffffu, key);
      const int id = static_cast<int>(__reduce_min_sync(0xffffffffu, key == best ? static_cast<unsigned int>(bi) : 0xffffffffu));
      const float v = __uint_as_float(best - 1u);
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int c = 0; c < W; ++c)
          if ((lane + i * 32) * W + c == id) p[i][c] = -INFINITY;
      if (lane == round) {
        my_w = v;
        my_id = id;
      }
      wsum += v;
    }
    if (lane < k) {
      topk_weights[t * k + lane] = renormalize ? my_w / wsum : my_w;
      topk_ids[t * k + lane] = my_id;
    }
  }
}

struct Shape {
  long long T;
  int E, k;
};

template <int NV>
void run_candidate(const float* g, float* w, int* ids, const Shape& s, dim3 grid) {
  moe_gating_candidate<NV><<<grid, kWarps * 32>>>(g, w, ids, s.T, s.E, s.k, 1);
}

void candidate(const float* g, float* w, int* ids, const Shape& s, dim3 grid) {
  if (s.E <= 128) run_candidate<1>(g, w, ids, s, grid);
  else if (s.E <= 256) run_candidate<2>(g, w, ids, s, grid);
  else run_candidate<4>(g, w, ids, s, grid);
}

template <int NV>
int resident_warp_blocks() {
  int per_sm = 0, sms = 0;
  KWIKI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_gating_candidate<NV>, kWarps * 32, 0));
  KWIKI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  return per_sm * sms;
}

}  // namespace

int main() {
  kwiki_bench::FlushedTimer timer;
  const Shape shapes[] = {{16384, 128, 8}, {8192, 256, 2}, {2048, 64, 2}, {64, 256, 8}, {1, 128, 8}, {4099, 128, 8}};
  int failures = 0;
  for (const Shape& s : shapes) {
    const size_t n = static_cast<size_t>(s.T) * s.E, nk = static_cast<size_t>(s.T) * s.k;
    std::vector<float> host(n);
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (float& v : host) v = normal(rng);
    for (size_t i = 0; i < n; i += 97) host[i] = host[i / 2];  // ties, so the lower-id rule is exercised
    float *g, *w0, *w1;
    int *i0, *i1;
    KWIKI_CUDA_CHECK(cudaMalloc(&g, n * 4));
    KWIKI_CUDA_CHECK(cudaMalloc(&w0, nk * 4));
    KWIKI_CUDA_CHECK(cudaMalloc(&w1, nk * 4));
    KWIKI_CUDA_CHECK(cudaMalloc(&i0, nk * 4));
    KWIKI_CUDA_CHECK(cudaMalloc(&i1, nk * 4));
    KWIKI_CUDA_CHECK(cudaMemcpy(g, host.data(), n * 4, cudaMemcpyHostToDevice));
    const int nv = s.E <= 128 ? 1 : s.E <= 256 ? 2 : 4;
    const long long cap = nv == 1 ? resident_warp_blocks<1>() : nv == 2 ? resident_warp_blocks<2>() : resident_warp_blocks<4>();
    const long long want = (s.T + kWarps - 1) / kWarps;
    const dim3 grid(static_cast<unsigned>(want < cap ? want : cap));
    if (kwiki_moe_gating::launch(g, w0, i0, s.T, s.E, s.k, true, 0) != 0) {
      std::printf("template refused T=%lld E=%d k=%d\n", s.T, s.E, s.k);
      return 1;
    }
    candidate(g, w1, i1, s, grid);
    KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> hw0(nk), hw1(nk);
    std::vector<int> hi0(nk), hi1(nk);
    KWIKI_CUDA_CHECK(cudaMemcpy(hw0.data(), w0, nk * 4, cudaMemcpyDeviceToHost));
    KWIKI_CUDA_CHECK(cudaMemcpy(hw1.data(), w1, nk * 4, cudaMemcpyDeviceToHost));
    KWIKI_CUDA_CHECK(cudaMemcpy(hi0.data(), i0, nk * 4, cudaMemcpyDeviceToHost));
    KWIKI_CUDA_CHECK(cudaMemcpy(hi1.data(), i1, nk * 4, cudaMemcpyDeviceToHost));
    const bool same = hi0 == hi1 && std::memcmp(hw0.data(), hw1.data(), nk * 4) == 0;
    failures += same ? 0 : 1;
    const double t_template = timer.median_us([&] { kwiki_moe_gating::launch(g, w0, i0, s.T, s.E, s.k, true, 0); });
    const double t_candidate = timer.median_us([&] { candidate(g, w1, i1, s, grid); });
    const double bytes = n * 4.0 + nk * 8.0;
    std::printf("T %6lld E %4d k %d  grid %5u  %s  template %8.2f us  candidate %8.2f us  (%.3f TB/s)\n", s.T, s.E, s.k, grid.x,
                same ? "same ids and weights" : "DIFFERENT from the template", t_template, t_candidate, bytes / t_candidate / 1e6);
    cudaFree(g);
    cudaFree(w0);
    cudaFree(w1);
    cudaFree(i0);
    cudaFree(i1);
  }
  std::printf("%s\n", failures ? "FAIL: the candidate differs from the template" : "ok: the candidate matches the template on every shape");
  return failures ? 1 : 0;
}
