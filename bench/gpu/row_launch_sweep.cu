// row_launch_sweep.cu: times the row templates (RMSNorm, softmax, LayerNorm, fp8 quant) under
// forced launch shapes (threads per row x 16-byte accesses per thread) at the sample tasks'
// largest shapes (on the resident grid the launchers use), beside a 16-byte copy kernel, the way the harness times (events around the
// kernel alone, a >= 2x L2 buffer read before each repetition, median of 30; the first section
// also zeroes it, the common way, for comparison).
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=sm_90a -I baseline/kernels bench/gpu/row_launch_sweep.cu -o sweep && ./sweep
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_cuda.cuh"
#include "fp8_quant.cuh"
#include "layer_norm.cuh"
#include "rms_norm.cuh"
#include "softmax.cuh"

using bf16 = __nv_bfloat16;

namespace {

kwiki_bench::FlushedTimer* timer = nullptr;  // set in main

/// Median kernel time in microseconds, the L2 flushed before each repetition.
double time_us(const std::function<void()>& launch) { return timer->median_us(launch); }

__global__ void copy16(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

template <typename K>
void report(const char* name, int block, int vpt, K kernel, double us, double bytes) {
  cudaFuncAttributes at{};
  KWIKI_CUDA_CHECK(cudaFuncGetAttributes(&at, kernel));
  int per_sm = 0;
  KWIKI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
  std::printf("%-26s block %4d vpt %d  regs %3d local %4zu  blocks/SM %2d  %9.2f us  %6.3f TB/s\n", name, block, vpt, at.numRegs,
              at.localSizeBytes, per_sm, us, bytes / us / 1e6);
}

/// The resident grid the launchers use for a block of `block` threads over T rows.
template <typename K>
dim3 grid_for(K kernel, int block, long long T) {
  kwiki::RowLaunch L;
  L.block = block;
  L.grid = T;
  return kwiki::resident_row_grid(kernel, L);
}

/// Times `kernel` (VPT 16-byte accesses of 8 bf16 a thread) over T rows of H elements on the
/// resident grid, with the fewest whole warps that cover a row; skipped past the kernel's launch bound.
template <int VPT, typename K, typename... Args>
void sweep(const char* name, K kernel, long long T, int H, double bytes, Args... args) {
  const int block = ((H / 8 + VPT - 1) / VPT + 31) / 32 * 32;
  if (block > kwiki::row_block_bound(8, VPT)) return;
  const double us = time_us([&] { kernel<<<grid_for(kernel, block, T), block>>>(args...); });
  report(name, block, VPT, kernel, us, bytes);
}

template <int VPT>
void sweep_rms(const bf16* x, const bf16* w, bf16* o, long long T, int H) {
  sweep<VPT>("rms_norm", kwiki_rms_norm::rms_norm_kernel<bf16, 8, VPT, false>, T, H, 2.0 * T * H * 2, x, w, o, T, H, 1e-6f);
}

template <int VPT>
void sweep_softmax(const bf16* x, bf16* o, long long T, int N) {
  sweep<VPT>("softmax", kwiki_softmax::softmax_kernel<bf16, 8, VPT, false>, T, N, 2.0 * T * N * 2, x, o, T, N);
}

template <int VPT>
void sweep_layer_norm(const bf16* x, const bf16* w, const bf16* b, bf16* o, long long T, int H) {
  sweep<VPT>("layer_norm", kwiki_layer_norm::layer_norm_kernel<bf16, 8, VPT, false>, T, H, 2.0 * T * H * 2, x, w, b, o, T, H,
             1e-5f);
}

template <int VPT, bool kClamp>
void sweep_fp8(const bf16* x, unsigned char* q, float* s, long long T, int H) {
  sweep<VPT>(kClamp ? "fp8_quant (clamp)" : "fp8_quant (saturating cast)", kwiki_fp8_quant::fp8_quant_kernel<bf16, 8, VPT, false, kClamp>,
             T, H, 3.0 * T * H + 4.0 * T, x, q, s, T, H, 448.f);
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop{};
  KWIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  kwiki_bench::FlushedTimer flushed_timer;
  timer = &flushed_timer;
  const size_t flush_bytes = flushed_timer.flush_bytes();
  std::printf("%s, %d SMs, L2 %d MiB, flush %zu MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, flush_bytes >> 20);
  const size_t big = 16384ull * 8192;  // elements of the largest tensor
  bf16 *x, *o, *w, *b;
  KWIKI_CUDA_CHECK(cudaMalloc(&x, big * 2));
  KWIKI_CUDA_CHECK(cudaMalloc(&o, big * 2));
  KWIKI_CUDA_CHECK(cudaMalloc(&w, 8192 * 2));
  KWIKI_CUDA_CHECK(cudaMalloc(&b, 8192 * 2));
  KWIKI_CUDA_CHECK(cudaMemset(x, 0x3f, big * 2));  // 0x3f3f: a finite bf16 (about 0.75)
  KWIKI_CUDA_CHECK(cudaMemset(w, 0x3f, 8192 * 2));
  KWIKI_CUDA_CHECK(cudaMemset(b, 0, 8192 * 2));
  unsigned char* q;
  float* s;
  KWIKI_CUDA_CHECK(cudaMalloc(&q, big));
  KWIKI_CUDA_CHECK(cudaMalloc(&s, 16384 * 4));

  const size_t n16 = big * 2 / 16;
  for (int grid : {prop.multiProcessorCount * 4, prop.multiProcessorCount * 8, prop.multiProcessorCount * 16}) {
    const double us = time_us([&] { copy16<<<grid, 256>>>(reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(o), n16); });
    std::printf("%-26s grid %5d x 256            %9.2f us  %6.3f TB/s\n", "copy16 (268 MB each way)", grid, us, 2.0 * big * 2 / us / 1e6);
  }
  if (argc > 1 && std::string(argv[1]) == "--fp8") {
    std::printf("-- fp8_quant t16384_h5120 bf16, experiments\n");
    for (int rep = 0; rep < 2; ++rep) {
      sweep_fp8<4, false>(x, q, s, 16384, 5120);
      sweep_fp8<8, false>(x, q, s, 16384, 5120);
      std::printf("%-40s %9.2f us\n", "fp8_quant launcher", time_us([&] { kwiki_fp8_quant::launch<bf16>(x, q, s, 16384, 5120, 448.0, 0); }));
      const auto k4 = kwiki_fp8_quant::fp8_quant_kernel<bf16, 8, 4, false, false>;
      for (int grid : {1024, 1056, 2048, 4096, 16384}) {
        const double us = time_us([&] { k4<<<grid, 160>>>(x, q, s, 16384, 5120, 448.f); });
        std::printf("fp8 vpt 4 grid %5d %9.2f us\n", grid, us);
      }
    }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--grid-rows") {
    // The resident grid (the launchers' own) against one row a block (grid = rows: no row prefetched, as many
    // blocks a multiprocessor as fit), at each block size, the L2 flushed by reading: which schedule keeps more
    // bytes in flight at the largest sample shapes (torch.compile's one-row programs reach the copy rate there).
    timer->set_read_flush(true);
    std::printf("-- resident grid vs grid = rows (one row a block)\n");
    auto both = [&](const char* name, int vpt, auto kernel, long long T, int H, double bytes, auto... args) {
      const int block = ((H / 8 + vpt - 1) / vpt + 31) / 32 * 32;
      if (block > kwiki::row_block_bound(8, vpt)) return;
      const double res = time_us([&] { kernel<<<grid_for(kernel, block, T), block>>>(args...); });
      const double all = time_us([&] { kernel<<<dim3(static_cast<unsigned>(T)), block>>>(args...); });
      int per_sm = 0;
      KWIKI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
      std::printf("%-12s T %5lld H %5d block %4d vpt %d blocks/SM %2d  resident %8.2f us %6.3f TB/s   grid=rows %8.2f us %6.3f TB/s\n", name, T, H,
                  block, vpt, per_sm, res, bytes / res / 1e6, all, bytes / all / 1e6);
    };
    for (int rep = 0; rep < 2; ++rep) {
      both("rms_norm", 1, kwiki_rms_norm::rms_norm_kernel<bf16, 8, 1, false>, 16384, 8192, 2.0 * 16384 * 8192 * 2, x, w, o, 16384LL, 8192, 1e-6f);
      both("rms_norm", 2, kwiki_rms_norm::rms_norm_kernel<bf16, 8, 2, false>, 16384, 8192, 2.0 * 16384 * 8192 * 2, x, w, o, 16384LL, 8192, 1e-6f);
      both("rms_norm", 4, kwiki_rms_norm::rms_norm_kernel<bf16, 8, 4, false>, 16384, 8192, 2.0 * 16384 * 8192 * 2, x, w, o, 16384LL, 8192, 1e-6f);
      both("rms_norm", 1, kwiki_rms_norm::rms_norm_kernel<bf16, 8, 1, false>, 4096, 7168, 2.0 * 4096 * 7168 * 2, x, w, o, 4096LL, 7168, 1e-6f);
      both("rms_norm", 2, kwiki_rms_norm::rms_norm_kernel<bf16, 8, 2, false>, 4096, 7168, 2.0 * 4096 * 7168 * 2, x, w, o, 4096LL, 7168, 1e-6f);
      both("layer_norm", 1, kwiki_layer_norm::layer_norm_kernel<bf16, 8, 1, false>, 4096, 8192, 2.0 * 4096 * 8192 * 2, x, w, b, o, 4096LL, 8192, 1e-5f);
      both("layer_norm", 2, kwiki_layer_norm::layer_norm_kernel<bf16, 8, 2, false>, 4096, 8192, 2.0 * 4096 * 8192 * 2, x, w, b, o, 4096LL, 8192, 1e-5f);
      both("layer_norm", 4, kwiki_layer_norm::layer_norm_kernel<bf16, 8, 4, false>, 4096, 8192, 2.0 * 4096 * 8192 * 2, x, w, b, o, 4096LL, 8192, 1e-5f);
      both("layer_norm", 1, kwiki_layer_norm::layer_norm_kernel<bf16, 8, 1, false>, 16384, 2560, 2.0 * 16384 * 2560 * 2, x, w, b, o, 16384LL, 2560, 1e-5f);
      both("layer_norm", 2, kwiki_layer_norm::layer_norm_kernel<bf16, 8, 2, false>, 16384, 2560, 2.0 * 16384 * 2560 * 2, x, w, b, o, 16384LL, 2560, 1e-5f);
      both("softmax", 2, kwiki_softmax::softmax_kernel<bf16, 8, 2, false>, 8192, 8192, 2.0 * 8192 * 8192 * 2, x, o, 8192LL, 8192);
      both("softmax", 4, kwiki_softmax::softmax_kernel<bf16, 8, 4, false>, 8192, 8192, 2.0 * 8192 * 8192 * 2, x, o, 8192LL, 8192);
    }
    return 0;
  }
  const int modes = argc > 1 && std::string(argv[1]) == "--zero-flush-only" ? 1 : 2;
  for (int mode = 0; mode < modes; ++mode) {
  timer->set_read_flush(mode == 1);
  std::printf("-- the launchers' own choice, L2 flushed by %s\n", timer->read_flush() ? "reading 2x L2 (clean)" : "zeroing 2x L2 (dirty)");
  for (int grid : {prop.multiProcessorCount * 8}) {
    const double us = time_us([&] { copy16<<<grid, 256>>>(reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(o), big * 2 / 16); });
    std::printf("%-40s %9.2f us  %6.3f TB/s\n", "copy16 268 MB each way", us, 2.0 * big * 2 / us / 1e6);
  }
  std::printf("%-40s %9.2f us\n", "rms_norm t16384_h8192", time_us([&] { kwiki_rms_norm::launch<bf16>(x, w, o, 16384, 8192, 1e-6f, 0); }));
  std::printf("%-40s %9.2f us\n", "rms_norm t4096_h7168", time_us([&] { kwiki_rms_norm::launch<bf16>(x, w, o, 4096, 7168, 1e-6f, 0); }));
  std::printf("%-40s %9.2f us\n", "softmax t8192_h8192", time_us([&] { kwiki_softmax::launch<bf16>(x, o, 8192, 8192, 0); }));
  std::printf("%-40s %9.2f us\n", "layer_norm t16384_h2560", time_us([&] { kwiki_layer_norm::launch<bf16>(x, w, b, o, 16384, 2560, 1e-5f, 0); }));
  std::printf("%-40s %9.2f us\n", "layer_norm t4096_h8192", time_us([&] { kwiki_layer_norm::launch<bf16>(x, w, b, o, 4096, 8192, 1e-5f, 0); }));
  std::printf("%-40s %9.2f us\n", "fp8_quant t16384_h5120", time_us([&] { kwiki_fp8_quant::launch<bf16>(x, q, s, 16384, 5120, 448.0, 0); }));
  }
  timer->set_read_flush(true);
  std::printf("-- rms_norm t16384_h8192 bf16\n");
  sweep_rms<1>(x, w, o, 16384, 8192);
  sweep_rms<2>(x, w, o, 16384, 8192);
  sweep_rms<4>(x, w, o, 16384, 8192);
  sweep_rms<8>(x, w, o, 16384, 8192);
  std::printf("-- rms_norm t4096_h7168 bf16\n");
  sweep_rms<1>(x, w, o, 4096, 7168);
  sweep_rms<2>(x, w, o, 4096, 7168);
  sweep_rms<4>(x, w, o, 4096, 7168);
  std::printf("-- softmax t8192_h8192 bf16\n");
  sweep_softmax<1>(x, o, 8192, 8192);
  sweep_softmax<2>(x, o, 8192, 8192);
  sweep_softmax<4>(x, o, 8192, 8192);
  sweep_softmax<8>(x, o, 8192, 8192);
  std::printf("-- layer_norm t16384_h2560 bf16\n");
  sweep_layer_norm<1>(x, w, b, o, 16384, 2560);
  sweep_layer_norm<2>(x, w, b, o, 16384, 2560);
  sweep_layer_norm<4>(x, w, b, o, 16384, 2560);
  sweep_layer_norm<8>(x, w, b, o, 16384, 2560);
  std::printf("-- layer_norm t4096_h8192 bf16\n");
  sweep_layer_norm<1>(x, w, b, o, 4096, 8192);
  sweep_layer_norm<2>(x, w, b, o, 4096, 8192);
  sweep_layer_norm<4>(x, w, b, o, 4096, 8192);
  std::printf("-- fp8_quant t16384_h5120 bf16\n");
  sweep_fp8<1, true>(x, q, s, 16384, 5120);
  sweep_fp8<2, true>(x, q, s, 16384, 5120);
  sweep_fp8<4, true>(x, q, s, 16384, 5120);
  sweep_fp8<8, true>(x, q, s, 16384, 5120);
  sweep_fp8<1, false>(x, q, s, 16384, 5120);
  sweep_fp8<2, false>(x, q, s, 16384, 5120);
  sweep_fp8<4, false>(x, q, s, 16384, 5120);
  sweep_fp8<8, false>(x, q, s, 16384, 5120);
  return 0;
}
