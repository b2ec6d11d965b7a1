// gemm_sweep.cu: checks and times the GEMM template's Hopper kernels side by side -- the TMA +
// WGMMA kernel the launcher picks on cc 9.0 and the mma.sync kernel it falls back to -- against
// cuBLAS (cublasGemmEx, bf16 in, fp32 compute), on the sample task's shapes and on ragged ones;
// then the fp16 instantiation of the WGMMA kernel for correctness.
// Correctness: sampled output rows of both kernels against an fp64 CPU product. Timing: events
// around the kernel alone, a >= 2x L2 buffer zeroed before each repetition, median of 30.
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=sm_90a -I baseline/kernels bench/gpu/gemm_sweep.cu -lcublas -o gemm_sweep && ./gemm_sweep
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_cuda.cuh"
#include "gemm.cuh"

using bf16 = __nv_bfloat16;
namespace gd = kwiki_gemm_detail;

namespace {

struct Shape {
  int M, N, K;
  bool bias;
};

float to_f(bf16 v) { return __bfloat162float(v); }
float to_f(half v) { return __half2float(v); }
template <typename T>
T from_f(float f);
template <>
bf16 from_f<bf16>(float f) { return __float2bfloat16(f); }
template <>
half from_f<half>(float f) { return __float2half(f); }

/// Largest |out - ref| / (atol + rtol |ref|) over sampled rows; <= 1 passes.
template <typename T>
double check_rows(const std::vector<T>& x, const std::vector<T>& w, const std::vector<T>& b,
                  const std::vector<T>& out, const Shape& s) {
  std::vector<int> rows = {0, s.M - 1};
  std::mt19937 rng(7);
  for (int i = 0; i < 24; ++i) rows.push_back(static_cast<int>(rng() % static_cast<unsigned>(s.M)));
  double worst = 0;
  for (int r : rows)
    for (int n = 0; n < s.N; ++n) {
      double ref = s.bias ? static_cast<double>(to_f(b[n])) : 0.0;
      for (int k = 0; k < s.K; ++k)
        ref += static_cast<double>(to_f(x[static_cast<size_t>(r) * s.K + k])) * to_f(w[static_cast<size_t>(n) * s.K + k]);
      const double got = to_f(out[static_cast<size_t>(r) * s.N + n]);
      const double err = std::fabs(got - ref) / (1e-2 + 1e-2 * std::fabs(ref));
      if (!(err <= worst)) worst = err;  // NaN propagates as a failure
    }
  return worst;
}

/// One GEMM problem: random operands in [-1, 1) on the host and the device, an output buffer.
template <typename T>
struct Problem {
  Shape s;
  std::vector<T> hx, hw, hb, hout;
  T *x = nullptr, *w = nullptr, *b = nullptr, *out = nullptr;

  Problem(const Shape& shape, unsigned seed)
      : s(shape), hx(static_cast<size_t>(s.M) * s.K), hw(static_cast<size_t>(s.N) * s.K), hb(s.N),
        hout(static_cast<size_t>(s.M) * s.N) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto* v : {&hx, &hw, &hb})
      for (auto& e : *v) e = from_f<T>(u(rng));
    upload(&x, hx);
    upload(&w, hw);
    upload(&b, hb);
    KWIKI_CUDA_CHECK(cudaMalloc(&out, hout.size() * sizeof(T)));
  }
  ~Problem() {
    cudaFree(x);
    cudaFree(w);
    cudaFree(b);
    cudaFree(out);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  const T* bias() const { return s.bias ? b : nullptr; }

  /// Runs `run` on a NaN-poisoned output and returns check_rows' verdict on it.
  double check(const std::function<void()>& run) {
    KWIKI_CUDA_CHECK(cudaMemset(out, 0xff, hout.size() * sizeof(T)));
    run();
    KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
    KWIKI_CUDA_CHECK(cudaMemcpy(hout.data(), out, hout.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return check_rows(hx, hw, hb, hout, s);
  }

 private:
  static void upload(T** dst, const std::vector<T>& src) {
    KWIKI_CUDA_CHECK(cudaMalloc(dst, src.size() * sizeof(T)));
    KWIKI_CUDA_CHECK(cudaMemcpy(*dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
};

}  // namespace

int main() {
  kwiki_bench::FlushedTimer timer;
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  cudaDeviceProp prop{};
  KWIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; WGMMA path available: %s\n", prop.name, prop.multiProcessorCount,
              gd::wgmma_available<bf16>() ? "yes" : "no");

  const std::vector<Shape> shapes = {{4096, 4096, 4096, false}, {4096, 4608, 3584, true}, {8192, 8192, 8192, false},
                                     {200, 300, 72, true},      {129, 257, 64, false},      {65, 512, 136, true},
                                     {1000, 1000, 1000, true},  {300, 4100, 520, false}};
  bool all_ok = true;
  std::printf("%-18s %10s %10s %10s %9s %9s %9s %9s %9s\n", "M x N x K (bias)", "wgmma us", "mma us", "cublas us",
              "wgmma TF", "mma TF", "cublas TF", "wgmma err", "mma err");
  for (const Shape& s : shapes) {
    Problem<bf16> p(s, 1234);
    bf16 *x = p.x, *w = p.w, *out = p.out;
    const bf16* bias = p.bias();

    auto run_wgmma = [&] {
      if (!gd::launch_wgmma<bf16>(x, w, bias, out, s.M, s.N, s.K, nullptr)) {
        std::fprintf(stderr, "launch_wgmma refused %dx%dx%d\n", s.M, s.N, s.K);
        std::exit(1);
      }
    };
    auto run_mma = [&] {
      const dim3 grid((s.M + gd::BM - 1) / gd::BM, (s.N + gd::BN - 1) / gd::BN);
      gd::gemm_mma_kernel<bf16, true><<<grid, gd::kThreads>>>(x, w, bias, out, s.M, s.N, s.K);
    };
    const float alpha = 1.f, beta = 0.f;
    auto run_cublas = [&] {
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.N, s.M, s.K, &alpha, w, CUDA_R_16BF, s.K, x, CUDA_R_16BF, s.K,
                   &beta, out, CUDA_R_16BF, s.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    const double err_wgmma = p.check(run_wgmma), err_mma = p.check(run_mma);
    const bool ok = err_wgmma <= 1.0 && err_mma <= 1.0;
    all_ok = all_ok && ok;
    const double t_wgmma = timer.median_us(run_wgmma), t_mma = timer.median_us(run_mma),
                 t_cublas = timer.median_us(run_cublas);
    const double flop = 2.0 * s.M * s.N * s.K;
    char label[64];
    std::snprintf(label, sizeof label, "%dx%dx%d%s", s.M, s.N, s.K, s.bias ? " b" : "");
    std::printf("%-18s %10.1f %10.1f %10.1f %9.1f %9.1f %9.1f %9.3f %9.3f %s\n", label, t_wgmma, t_mma, t_cublas,
                flop / t_wgmma * 1e-6, flop / t_mma * 1e-6, flop / t_cublas * 1e-6, err_wgmma, err_mma,
                ok ? "ok" : "FAIL");
  }
  // fp16: the WGMMA kernel's f16 instantiation against fp64 (correctness only).
  for (const Shape& s : {Shape{1000, 1000, 1000, true}, Shape{4096, 4096, 4096, false}}) {
    Problem<half> p(s, 99);
    bool launched = false;
    const double err = p.check([&] { launched = gd::launch_wgmma<half>(p.x, p.w, p.bias(), p.out, s.M, s.N, s.K, nullptr); });
    const bool ok = launched && err <= 1.0;
    all_ok = all_ok && ok;
    std::printf("fp16 %dx%dx%d%s  wgmma err %.3f %s\n", s.M, s.N, s.K, s.bias ? " b" : "", err, ok ? "ok" : "FAIL");
  }
  cublasDestroy(handle);
  std::printf("%s\n", all_ok ? "all shapes correct" : "SOME SHAPES FAILED");
  return all_ok ? 0 : 1;
}
