// decode_kernel_bench.cu: the paged decode attention template's two kernels, the generic one
// (CUDA cores, path 1) and the tensor-core one (mma.sync + cp.async ring, path 2):
//  1. correctness of both against an fp64 CPU reference on small shapes with the edge cases
//     (context not a multiple of 16, seq_lens 0 and 1, B = 1, G = 1..16, D 64/128/256, P 8..64,
//     S = 1, S > 1, empty splits, fp16 and bf16; the generic-only shapes check the fallback),
//     outputs NaN-poisoned before each run; and the two kernels against each other (and a few
//     rows against the CPU) at the largest task shape;
//  2. timing at the sample task's shapes (Hq 32, Hkv 8, D 128, bf16, page 16, pages a random
//     permutation of the pool) for several split counts and ring depths: events around the
//     launches alone, a >= 2x L2 buffer zeroed before each repetition, median of 20; "before"
//     is the generic kernel at the split count the shim chose for it, "after" the template's
//     default path at the shim's split count now (timed first and last).
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I baseline/kernels \
//     bench/gpu/decode_kernel_bench.cu -o dbench && ./dbench
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "bench_cuda.cuh"
#include "paged_decode_attention.cuh"

using bf16 = __nv_bfloat16;
namespace pda = kwiki_pda_detail;

namespace {

uint16_t f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float bf2f(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f2h(float f) {
  const __half h = __float2half_rn(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
float h2f(uint16_t u) {
  __half h;
  std::memcpy(&h, &u, 2);
  return __half2float(h);
}

struct Case {
  const char* name;
  bool half;
  int Hq, Hkv, D, P, S;
  std::vector<int> lens;
  float qamp;  // query amplitude (larger: peakier softmax)
};

// out[b, h, :] in fp64 over the 16-bit inputs (as floats).
std::vector<double> reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, const std::vector<int>& bt, int MB, float scale,
                              const std::vector<int>& only_b = {}) {
  const int B = static_cast<int>(c.lens.size()), D = c.D, G = c.Hq / c.Hkv;
  std::vector<double> out(static_cast<size_t>(B) * c.Hq * D, 0.0);
  for (int b = 0; b < B; ++b) {
    if (!only_b.empty() && std::find(only_b.begin(), only_b.end(), b) == only_b.end()) continue;
    const int L = std::min(std::max(c.lens[b], 0), MB * c.P);
    for (int h = 0; h < c.Hq; ++h) {
      const int kvh = h / G;
      std::vector<double> s(L);
      double mx = -INFINITY;
      for (int t = 0; t < L; ++t) {
        const size_t row = ((static_cast<size_t>(bt[b * MB + t / c.P]) * c.P + t % c.P) * c.Hkv + kvh) * D;
        double acc = 0;
        for (int d = 0; d < D; ++d) acc += static_cast<double>(q[(static_cast<size_t>(b) * c.Hq + h) * D + d]) * k[row + d];
        s[t] = acc * scale;
        mx = std::max(mx, s[t]);
      }
      double den = 0;
      std::vector<double> o(D, 0.0);
      for (int t = 0; t < L; ++t) {
        const double p = std::exp(s[t] - mx);
        den += p;
        const size_t row = ((static_cast<size_t>(bt[b * MB + t / c.P]) * c.P + t % c.P) * c.Hkv + kvh) * D;
        for (int d = 0; d < D; ++d) o[d] += p * v[row + d];
      }
      for (int d = 0; d < D; ++d) out[(static_cast<size_t>(b) * c.Hq + h) * D + d] = L > 0 ? o[d] / den : 0.0;
    }
  }
  return out;
}

struct DevBufs {
  void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  int *bt = nullptr, *sl = nullptr;
  float *po = nullptr, *pl = nullptr;
  void free_all() {
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(out); cudaFree(bt); cudaFree(sl); cudaFree(po); cudaFree(pl);
  }
};

int run_path(const Case& c, DevBufs& m, int MB, float scale, int path) {
  pda::Args a;
  a.query = m.q; a.key_cache = m.k; a.value_cache = m.v; a.block_tables = m.bt; a.seq_lens = m.sl; a.out = m.out;
  a.partial_out = m.po; a.partial_lse = m.pl;
  a.B = static_cast<int>(c.lens.size()); a.Hq = c.Hq; a.Hkv = c.Hkv; a.D = c.D; a.P = c.P; a.MB = MB; a.S = c.S;
  a.scale = scale; a.stream = 0; a.path = path;
  return c.half ? pda::launch<__half>(a) : pda::launch<bf16>(a);
}

// Checks one small case; returns the number of failures.
int check_case(const Case& c, std::mt19937& rng) {
  const int B = static_cast<int>(c.lens.size()), D = c.D;
  int maxlen = 1;
  for (int L : c.lens) maxlen = std::max(maxlen, L);
  const int MB = (maxlen + c.P - 1) / c.P, NB = B * MB + 3;
  const size_t qn = static_cast<size_t>(B) * c.Hq * D, cn = static_cast<size_t>(NB) * c.P * c.Hkv * D;
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  auto rnd16 = [&](size_t n, float amp, std::vector<float>& f, std::vector<uint16_t>& bits) {
    f.resize(n);
    bits.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const float x = amp * U(rng);
      bits[i] = c.half ? f2h(x) : f2bf(x);
      f[i] = c.half ? h2f(bits[i]) : bf2f(bits[i]);
    }
  };
  std::vector<float> qf, kf, vf;
  std::vector<uint16_t> qb, kb, vb;
  rnd16(qn, c.qamp, qf, qb);
  rnd16(cn, 1.f, kf, kb);
  rnd16(cn, 1.f, vf, vb);
  std::vector<int> perm(NB);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int> bt(perm.begin(), perm.begin() + B * MB);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const std::vector<double> ref = reference(c, qf, kf, vf, bt, MB, scale);

  DevBufs m;
  KWIKI_CUDA_CHECK(cudaMalloc(&m.q, qn * 2));
  KWIKI_CUDA_CHECK(cudaMalloc(&m.k, cn * 2));
  KWIKI_CUDA_CHECK(cudaMalloc(&m.v, cn * 2));
  KWIKI_CUDA_CHECK(cudaMalloc(&m.out, qn * 2));
  KWIKI_CUDA_CHECK(cudaMalloc(&m.bt, sizeof(int) * std::max<size_t>(1, bt.size())));
  KWIKI_CUDA_CHECK(cudaMalloc(&m.sl, sizeof(int) * B));
  KWIKI_CUDA_CHECK(cudaMalloc(&m.po, sizeof(float) * qn * c.S));
  KWIKI_CUDA_CHECK(cudaMalloc(&m.pl, sizeof(float) * B * c.Hq * c.S));
  KWIKI_CUDA_CHECK(cudaMemcpy(m.q, qb.data(), qn * 2, cudaMemcpyHostToDevice));
  KWIKI_CUDA_CHECK(cudaMemcpy(m.k, kb.data(), cn * 2, cudaMemcpyHostToDevice));
  KWIKI_CUDA_CHECK(cudaMemcpy(m.v, vb.data(), cn * 2, cudaMemcpyHostToDevice));
  KWIKI_CUDA_CHECK(cudaMemcpy(m.bt, bt.data(), sizeof(int) * bt.size(), cudaMemcpyHostToDevice));
  KWIKI_CUDA_CHECK(cudaMemcpy(m.sl, c.lens.data(), sizeof(int) * B, cudaMemcpyHostToDevice));

  int fails = 0;
  std::printf("%-34s", c.name);
  std::vector<uint16_t> got[3];
  for (int path : {1, 2}) {
    KWIKI_CUDA_CHECK(cudaMemset(m.out, 0xff, qn * 2));  // NaN in both 16-bit formats
    KWIKI_CUDA_CHECK(cudaMemset(m.po, 0xff, sizeof(float) * qn * c.S));
    const int rc = run_path(c, m, MB, scale, path);
    KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
    if (rc == -1 && path == 2) {
      std::printf("  | mma: n/a (generic fallback)             ");
      continue;
    }
    if (rc != 0) {
      std::printf("  | path %d: launch returned %d", path, rc);
      ++fails;
      continue;
    }
    got[path].resize(qn);
    KWIKI_CUDA_CHECK(cudaMemcpy(got[path].data(), m.out, qn * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0, maxabs = 0;
    size_t nans = 0;
    for (size_t i = 0; i < qn; ++i) {
      const float o = c.half ? h2f(got[path][i]) : bf2f(got[path][i]);
      if (!std::isfinite(o)) { ++nans; continue; }
      const double e = o - ref[i];
      num += e * e;
      den += ref[i] * ref[i];
      maxabs = std::max(maxabs, std::fabs(e));
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    // One rounding of |out| <= 1 to the 16-bit type: half an ulp at 1 is 2^-9 (bf16), 2^-12 (fp16).
    const double tol_abs = c.half ? 1.0e-3 : 4.5e-3, tol_rel = c.half ? 1.0e-3 : 6e-3;
    const bool ok = nans == 0 && maxabs <= tol_abs && rel <= tol_rel;
    std::printf("  | %s: rel %.2e max %.2e%s %s", path == 1 ? "generic" : "mma", rel, maxabs,
                nans ? " NaN/unwritten!" : "", ok ? "ok  " : "FAIL");
    fails += !ok;
  }
  if (!got[1].empty() && !got[2].empty()) {
    size_t diff = 0;
    for (size_t i = 0; i < qn; ++i) diff += got[1][i] != got[2][i];
    std::printf("  | %zu/%zu outputs differ", diff, qn);
  }
  std::printf("\n");
  m.free_all();
  return fails;
}

// Fills n 16-bit values (bf16 bits) with a hash of the index, uniform in about [-amp, amp].
__global__ void fill_bf16(uint16_t* p, size_t n, uint32_t seed, float amp) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85ebca6bu;
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    const float f = amp * (static_cast<float>(x >> 8) * (2.f / 16777216.f) - 1.f);
    p[i] = __bfloat16_as_ushort(__float2bfloat16(f));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool skip_check = argc > 1 && std::strcmp(argv[1], "--time-only") == 0;
  cudaDeviceProp prop{};
  KWIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MB, smem opt-in %zu KB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              prop.sharedMemPerBlockOptin >> 10);
  int fails = 0;
  if (!skip_check) {
    std::mt19937 rng(20261130);
    const std::vector<Case> cases = {
        {"bf16 G4 D128 P16 S1 lens 1000,1,0,16", false, 32, 8, 128, 16, 1, {1000, 1, 0, 16}, 3.f},
        {"bf16 G4 D128 P16 S4 same", false, 32, 8, 128, 16, 4, {1000, 1, 0, 16}, 3.f},
        {"bf16 G4 D128 P16 S64 (empty splits)", false, 32, 8, 128, 16, 64, {1000, 1, 0, 16}, 3.f},
        {"bf16 G1 D128 P16 S3 B1 len 5000", false, 8, 8, 128, 16, 3, {5000}, 6.f},
        {"bf16 G8 D128 P32 S2 lens 777,2049", false, 64, 8, 128, 32, 2, {777, 2049}, 3.f},
        {"bf16 G3 D128 P16 S2 lens 1234,31", false, 24, 8, 128, 16, 2, {1234, 31}, 3.f},
        {"bf16 G3 Hkv2 D128 P16 S1 lens 50,0", false, 6, 2, 128, 16, 1, {50, 0}, 3.f},
        {"bf16 G2 D64 P16 S5 lens 333,4096", false, 16, 8, 64, 16, 5, {333, 4096}, 3.f},
        {"bf16 G4 D128 P16 S8 peaky q", false, 32, 8, 128, 16, 8, {3000, 2999}, 12.f},
        {"fp16 G4 D128 P16 S2 lens 3001,17,15", true, 32, 8, 128, 16, 2, {3001, 17, 15}, 3.f},
        {"fp16 G4 D64 P64 S1 lens 2500,64", true, 32, 8, 64, 64, 1, {2500, 64}, 3.f},
        {"bf16 G16 D128 P16 S2 (generic)", false, 128, 8, 128, 16, 2, {700, 5}, 3.f},
        {"bf16 G4 D256 P16 S2 (generic)", false, 32, 8, 256, 16, 2, {900, 33}, 3.f},
        {"bf16 G4 D128 P8 S2 (generic)", false, 32, 8, 128, 8, 2, {900, 33}, 3.f},
    };
    for (const Case& c : cases) fails += check_case(c, rng);
  }

  kwiki_bench::FlushedTimer timer;
  const int Hq = 32, Hkv = 8, D = 128, P = 16;
  struct Shape { int B, ctx; std::vector<int> splits; };
  const std::vector<Shape> shapes = {
      {32, 16384, {1, 2, 3, 4, 5, 6, 8, 9, 12, 16}},
      {8, 8192, {2, 4, 6, 8, 9, 12, 16, 24, 33}},
      {1, 32768, {16, 32, 48, 64, 66, 96, 128}},
      {32, 1024, {1, 2, 3, 4}},
  };
  std::vector<std::string> summary;
  for (const Shape& sh : shapes) {
    const int MB = sh.ctx / P, NB = sh.B * MB;
    const size_t cache_elems = static_cast<size_t>(NB) * P * Hkv * D, qn = static_cast<size_t>(sh.B) * Hq * D;
    const int sms = prop.multiProcessorCount;
    // Split counts as baseline/harness/kernel_shim.py chooses them: now (tensor-core kernel: about
    // one block per SM) and before (generic kernel: about 16 blocks per SM).
    const int shim_s = std::max(1, std::min((sh.ctx + 511) / 512, sms / (sh.B * Hkv)));
    const int old_s = std::max(1, std::min((sh.ctx + 511) / 512, (16 * sms + sh.B * Hkv - 1) / (sh.B * Hkv)));
    DevBufs m;
    KWIKI_CUDA_CHECK(cudaMalloc(&m.q, qn * 2));
    KWIKI_CUDA_CHECK(cudaMalloc(&m.k, cache_elems * 2));
    KWIKI_CUDA_CHECK(cudaMalloc(&m.v, cache_elems * 2));
    KWIKI_CUDA_CHECK(cudaMalloc(&m.out, qn * 2));
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(m.q), qn, 1u, 3.f);
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(m.k), cache_elems, 2u, 1.f);
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(m.v), cache_elems, 3u, 1.f);
    KWIKI_CUDA_CHECK(cudaGetLastError());
    std::vector<int> table(NB);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    std::vector<int> lens(sh.B, sh.ctx);
    KWIKI_CUDA_CHECK(cudaMalloc(&m.bt, sizeof(int) * NB));
    KWIKI_CUDA_CHECK(cudaMalloc(&m.sl, sizeof(int) * sh.B));
    KWIKI_CUDA_CHECK(cudaMemcpy(m.bt, table.data(), sizeof(int) * NB, cudaMemcpyHostToDevice));
    KWIKI_CUDA_CHECK(cudaMemcpy(m.sl, lens.data(), sizeof(int) * sh.B, cudaMemcpyHostToDevice));
    const int max_s = 128;
    KWIKI_CUDA_CHECK(cudaMalloc(&m.po, sizeof(float) * qn * max_s));
    KWIKI_CUDA_CHECK(cudaMalloc(&m.pl, sizeof(float) * sh.B * Hq * max_s));
    const double kv_bytes = 2.0 * cache_elems * 2;
    std::printf("-- B %d ctx %d (KV %.0f MB), shim splits %d (before: %d)\n", sh.B, sh.ctx, kv_bytes / 1e6, shim_s, old_s);

    auto args = [&](int S, int path) {
      pda::Args a;
      a.query = m.q; a.key_cache = m.k; a.value_cache = m.v; a.block_tables = m.bt; a.seq_lens = m.sl; a.out = m.out;
      a.partial_out = m.po; a.partial_lse = m.pl;
      a.B = sh.B; a.Hq = Hq; a.Hkv = Hkv; a.D = D; a.P = P; a.MB = MB; a.S = S;
      a.scale = 0.0883883f; a.stream = 0; a.path = path;
      return a;
    };
    auto time_it = [&](const char* what, const std::function<int()>& launch, int S) {
      for (int i = 0; i < 3; ++i)
        if (launch() != 0) { std::printf("%s S=%d: launch refused\n", what, S); std::exit(1); }
      KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
      const double us = timer.median_us([&] { launch(); }, 0, 20);
      std::printf("%-12s S %3d  blocks %6d  %9.2f us  %6.3f TB/s  %5.1f%% of 4.273\n", what, S, S * Hkv * sh.B, us,
                  kv_bytes / us / 1e6, 100.0 * kv_bytes / us / 1e6 / 4.273);
      return us;
    };

    // Correctness at this shape: the two kernels against each other, and two sequences' rows
    // (b = 0 and b = B - 1) against the fp64 CPU reference.
    if (!skip_check) {
      std::vector<uint16_t> o1(qn), o2(qn);
      pda::Args a1 = args(shim_s, 1), a2 = args(shim_s, 2);
      KWIKI_CUDA_CHECK(cudaMemset(m.out, 0xff, qn * 2));
      if (pda::launch<bf16>(a1) != 0) { std::printf("generic refused\n"); return 1; }
      KWIKI_CUDA_CHECK(cudaMemcpy(o1.data(), m.out, qn * 2, cudaMemcpyDeviceToHost));
      KWIKI_CUDA_CHECK(cudaMemset(m.out, 0xff, qn * 2));
      if (pda::launch<bf16>(a2) != 0) { std::printf("mma refused\n"); return 1; }
      KWIKI_CUDA_CHECK(cudaMemcpy(o2.data(), m.out, qn * 2, cudaMemcpyDeviceToHost));
      Case c{"task shape", false, Hq, Hkv, D, P, shim_s, lens, 3.f};
      std::vector<uint16_t> qb(qn), kb(cache_elems), vb(cache_elems);
      KWIKI_CUDA_CHECK(cudaMemcpy(qb.data(), m.q, qn * 2, cudaMemcpyDeviceToHost));
      KWIKI_CUDA_CHECK(cudaMemcpy(kb.data(), m.k, cache_elems * 2, cudaMemcpyDeviceToHost));
      KWIKI_CUDA_CHECK(cudaMemcpy(vb.data(), m.v, cache_elems * 2, cudaMemcpyDeviceToHost));
      std::vector<float> qf(qn), kf(cache_elems), vf(cache_elems);
      for (size_t i = 0; i < qn; ++i) qf[i] = bf2f(qb[i]);
      for (size_t i = 0; i < cache_elems; ++i) { kf[i] = bf2f(kb[i]); vf[i] = bf2f(vb[i]); }
      const std::vector<int> rows = {0, sh.B - 1};
      const std::vector<double> ref = reference(c, qf, kf, vf, table, MB, 0.0883883f, rows);
      double e1 = 0, e2 = 0, d12 = 0;
      size_t nan = 0, diff = 0;
      for (size_t i = 0; i < qn; ++i) {
        const float f1 = bf2f(o1[i]), f2 = bf2f(o2[i]);
        if (!std::isfinite(f1) || !std::isfinite(f2)) ++nan;
        d12 = std::max(d12, static_cast<double>(std::fabs(f1 - f2)));
        diff += o1[i] != o2[i];
        const int b = static_cast<int>(i / (static_cast<size_t>(Hq) * D));
        if (b == 0 || b == sh.B - 1) {
          e1 = std::max(e1, std::fabs(f1 - ref[i]));
          e2 = std::max(e2, std::fabs(f2 - ref[i]));
        }
      }
      const bool ok = nan == 0 && e2 <= 4.5e-3 && d12 <= 8e-3;
      std::printf("check S %d: generic vs mma max |diff| %.2e (%zu/%zu differ), NaN %zu; vs fp64 (b 0, %d): generic %.2e mma %.2e %s\n",
                  shim_s, d12, diff, qn, nan, sh.B - 1, e1, e2, ok ? "ok" : "FAIL");
      fails += !ok;
    }

    double best_new = 1e30;
    int best_new_s = 0, best_nst = 0;
    const double new_first = time_it("default", [&] { return pda::launch<bf16>(args(shim_s, 0)); }, shim_s);
    const double old_shim = time_it("generic", [&] { return pda::launch<bf16>(args(old_s, 1)); }, old_s);
    for (int S : {1, 4, 16}) {
      if (S == old_s || S > (sh.ctx + 511) / 512) continue;
      time_it("generic", [&] { return pda::launch<bf16>(args(S, 1)); }, S);
    }
    for (int S : sh.splits) {
      const double u2 = time_it("mma nst2", [&] { return pda::launch_mma<bf16, 128, 2>(args(S, 2)); }, S);
      const double u3 = time_it("mma nst3", [&] { return pda::launch_mma<bf16, 128, 3>(args(S, 2)); }, S);
      const double u = std::min(u2, u3);
      if (u < best_new) { best_new = u; best_new_s = S; best_nst = u == u2 ? 2 : 3; }
    }
    const double new_shim = time_it("default", [&] { return pda::launch<bf16>(args(shim_s, 0)); }, shim_s);
    char line[512];
    std::snprintf(line, sizeof line,
                  "B%-2d ctx%-5d | before: generic S%-3d %7.1f us %.3f TB/s %5.1f%% | after: default S%-3d %7.1f us (again %7.1f) %.3f TB/s %5.1f%% | best mma S%-3d nst%d %7.1f us %5.1f%%",
                  sh.B, sh.ctx, old_s, old_shim, kv_bytes / old_shim / 1e6, 100.0 * kv_bytes / old_shim / 1e6 / 4.273, shim_s,
                  new_shim, new_first, kv_bytes / new_shim / 1e6, 100.0 * kv_bytes / new_shim / 1e6 / 4.273, best_new_s, best_nst,
                  best_new, 100.0 * kv_bytes / best_new / 1e6 / 4.273);
    summary.push_back(line);
    m.free_all();
  }
  std::printf("\nsummary (us, KV TB/s, %% of 4.273 TB/s measured copy)\n");
  for (const auto& s : summary) std::printf("%s\n", s.c_str());
  std::printf("correctness failures: %d\n", fails);
  return fails == 0 ? 0 : 1;
}
