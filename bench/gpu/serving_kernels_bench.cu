// serving_kernels_bench.cu: the serving families of issue 20 (kv_cache_write, topk_filter,
// paged_decode_attention_vllm, mla_decode, fused_moe, fp8_block_gemm, prefill_attention) at their tasks' shapes on one GPU:
//  1. correctness first: each shape's output against a CPU computation on the same inputs (the
//     cache write and the filter exactly, every element; the attentions in fp64 on the first and
//     last sequence, or on every sequence of the "ragged" rows (lengths that end inside a page,
//     an empty sequence), bf16 tolerance rtol 1.6e-2 / atol 1e-2), outputs NaN-poisoned before
//     the run;
//  2. timing: device events around the launches alone, the L2 flushed before each repetition
//     (bench_cuda.cuh), median of 30; bytes moved (what the kernel must read and write at least);
//     and that rate as a share of the device-to-device copy bandwidth measured in the same run.
// A shape that fails correctness prints FAIL and no time. The torch reference is timed by
// `kwiki baseline` on the tasks (data/tasks/vllm_reshape_and_cache, vllm_apply_top_k,
// vllm_paged_attention_v2_layout, deepseek_mla_decode), not here.
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I baseline/kernels \
//     bench/gpu/serving_kernels_bench.cu -o sbench && ./sbench [FAMILY]   (FAMILY: only the families whose name holds it)
// Tensor cores: the decode families' and fp8_block_gemm's are V0's since the session-14 H200 run (they
// passed every shape here); fused_moe's is still off in V0 (slower at two of four shapes), and the bench
// turns it on. Build with -DKWIKI_DECODE_TENSOR_CORES=0 / -DKWIKI_MOE_TENSOR_CORES=0 to time the
// CUDA-core kernels instead; fp8_block_gemm and prefill_attention run both of their kernels at each
// shape, whatever their flags say.
#ifndef KWIKI_DECODE_TENSOR_CORES
#define KWIKI_DECODE_TENSOR_CORES 1
#endif
#ifndef KWIKI_MOE_TENSOR_CORES
#define KWIKI_MOE_TENSOR_CORES 1
#endif
#ifndef KWIKI_FP8_GEMM_TENSOR_CORES
#define KWIKI_FP8_GEMM_TENSOR_CORES 1
#endif
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_cuda.cuh"
#include "kv_cache_write.cuh"
#include "mla_decode.cuh"
#include "paged_decode_attention_vllm.cuh"
#include "prefill_attention.cuh"
#include "topk_filter.cuh"
#include "fused_moe.cuh"
#include "fp8_block_gemm.cuh"

using bf16 = __nv_bfloat16;

namespace {

float bf2f(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// A device buffer of n elements of T, freed with it.
template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { KWIKI_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <typename H>
  void put(const std::vector<H>& h) {
    static_assert(sizeof(H) == sizeof(T), "host and device element sizes agree");
    KWIKI_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <typename H>
  std::vector<H> get() const {
    std::vector<H> h(n);
    KWIKI_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& g, float scale = 1.f) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f2bf(d(g));
  return v;
}

/// Device-to-device copy rate in bytes/s (read + write) of a 1 GiB buffer: the bandwidth bound.
double copy_bandwidth(kwiki_bench::FlushedTimer& timer) {
  const size_t bytes = 1ull << 30;
  Dev<uint8_t> a(bytes), b(bytes);
  KWIKI_CUDA_CHECK(cudaMemset(a.p, 1, bytes));
  const double us = timer.median_us([&] { KWIKI_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); });
  return 2.0 * bytes / (us * 1e-6);
}

void report(const char* family, const std::string& shape, bool ok, const std::string& why, double us, double bytes, double copy_bw) {
  if (!ok) {
    std::printf("%-28s %-34s FAIL  %s\n", family, shape.c_str(), why.c_str());
    return;
  }
  const double rate = bytes / (us * 1e-6);
  std::printf("%-28s %-34s PASS  %9.2f us  %9.3f MB  %7.3f TB/s  %5.1f%% of copy\n", family, shape.c_str(), us, bytes / 1e6, rate / 1e12,
              100.0 * rate / copy_bw);
}

int splits_for(long long work_items, long long tokens, long long longest, int sms) {
  const long long least = std::max(1ll, (tokens + longest - 1) / longest);
  const long long fill = (2ll * sms + work_items - 1) / std::max(1ll, work_items);
  return static_cast<int>(std::max(least, std::min(fill, (tokens + 63) / 64)));
}

// ---------------------------------------------------------------------------------------------
// Slots: `paged`, the pages in a random order and the tokens filling each page in turn (prefill,
// as vLLM's block tables hand them out); otherwise every token a random slot (decode-like scatter).
void bench_kv_cache_write(kwiki_bench::FlushedTimer& timer, double copy_bw, long long T, long long Hkv, long long D, long long NB, long long P,
                          int layout, int padding, bool paged) {
  std::mt19937 g(1);
  const long long X = 8, row = Hkv * D, cache = NB * P * row;
  const auto key = random_bf16(T * row, g), value = random_bf16(T * row, g), kc0 = random_bf16(cache, g), vc0 = random_bf16(cache, g);
  std::vector<long long> slots(NB * P);
  if (paged) {
    std::vector<long long> pages(NB);
    for (long long i = 0; i < NB; ++i) pages[i] = i;
    std::shuffle(pages.begin(), pages.end(), g);
    for (long long i = 0; i < NB * P; ++i) slots[i] = pages[i / P] * P + i % P;
  } else {
    for (long long i = 0; i < NB * P; ++i) slots[i] = i;
    std::shuffle(slots.begin(), slots.end(), g);
  }
  slots.resize(T);
  for (int i = 0; i < padding; ++i) slots[T - 1 - i] = -1;
  Dev<bf16> dk(T * row), dv(T * row), dkc(cache), dvc(cache);
  Dev<long long> ds(T);
  dk.put(key), dv.put(value), dkc.put(kc0), dvc.put(vc0), ds.put(slots);
  auto run = [&] {
    kwiki_kv_cache_write::launch<bf16>(dk.p, dv.p, dkc.p, dvc.p, ds.p, T, Hkv, D, NB, P, X, layout, nullptr);
  };
  run();
  KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
  auto kc = kc0, vc = vc0;
  for (long long t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;
    const long long b = slots[t] / P, o = slots[t] % P;
    for (long long h = 0; h < Hkv; ++h)
      for (long long d = 0; d < D; ++d) {
        const long long src = t * row + h * D + d;
        if (layout == 1) kc[((b * P + o) * Hkv + h) * D + d] = key[src], vc[((b * P + o) * Hkv + h) * D + d] = value[src];
        else kc[(((b * Hkv + h) * (D / X) + d / X) * P + o) * X + d % X] = key[src], vc[((b * Hkv + h) * D + d) * P + o] = value[src];
      }
  }
  const bool ok = dkc.get<uint16_t>() == kc && dvc.get<uint16_t>() == vc;
  const double us = ok ? timer.median_us(run) : 0;
  const long long written = T - padding;
  const double bytes = 2.0 * T * row * 2 + T * 8.0 + 2.0 * written * row * 2;
  report("kv_cache_write",
         "T" + std::to_string(T) + "_Hkv" + std::to_string(Hkv) + (layout ? "_flash" : "_vllm") + "_pad" + std::to_string(padding) + (paged ? "" : "_random"), ok, "a cache element differs", us, bytes, copy_bw);
}

// ---------------------------------------------------------------------------------------------
void bench_topk_filter(kwiki_bench::FlushedTimer& timer, double copy_bw, long long B, long long V, long long k) {
  std::mt19937 g(2);
  std::normal_distribution<float> d(0.f, 4.f);
  std::vector<float> x(B * V);
  for (auto& v : x) v = d(g);
  std::vector<long long> ks(B, k);
  for (long long r = 3; r < B; r += 4) ks[r] = V;  // requests without top-k (not the first row: B1 filters)
  Dev<float> dx(B * V), dout(B * V);
  Dev<long long> dk(B);
  dx.put(x), dk.put(ks);
  std::vector<float> nan(B * V, NAN);
  dout.put(nan);
  auto run = [&] { kwiki_topk_filter::launch<float>(dx.p, dk.p, 0, dout.p, B, V, nullptr); };
  run();
  KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = dout.get<float>();
  bool ok = true;
  std::vector<float> row(V);
  for (long long r = 0; r < B && ok; ++r) {
    std::copy(x.begin() + r * V, x.begin() + (r + 1) * V, row.begin());
    float thr = -INFINITY;
    if (ks[r] < V) {
      std::nth_element(row.begin(), row.begin() + (ks[r] - 1), row.end(), std::greater<float>());
      thr = row[ks[r] - 1];
    }
    for (long long i = 0; i < V; ++i) {
      const float want = x[r * V + i] < thr ? -INFINITY : x[r * V + i];
      if (!(out[r * V + i] == want)) ok = false;
    }
  }
  const double us = ok ? timer.median_us(run) : 0;
  report("topk_filter", "B" + std::to_string(B) + "_V" + std::to_string(V) + "_k" + std::to_string(k), ok, "an element differs", us,
         2.0 * B * V * 4 + B * 8.0, copy_bw);
}

// ---------------------------------------------------------------------------------------------
// fp64 attention of one (sequence, query head) over rows given by `row_of(t)` (key and value).
template <typename K, typename V>
std::vector<double> attend(const std::vector<uint16_t>& q, long long qoff, long long dqk, long long dv, long long len, double scale, K key_of,
                           V value_of) {
  std::vector<double> s(len), out(dv, 0.0);
  double m = -INFINITY, sum = 0;
  for (long long t = 0; t < len; ++t) {
    double dot = 0;
    for (long long d = 0; d < dqk; ++d) dot += static_cast<double>(bf2f(q[qoff + d])) * key_of(t, d);
    s[t] = dot * scale;
    m = std::max(m, s[t]);
  }
  for (auto& x : s) sum += (x = std::exp(x - m));
  for (long long t = 0; t < len; ++t)
    for (long long d = 0; d < dv; ++d) out[d] += s[t] / sum * value_of(t, d);
  return out;
}

bool close_bf16(float got, double want) { return std::fabs(got - want) <= 1e-2 + 1.6e-2 * std::fabs(want); }

/// Sequence lengths: all L, or (ragged) lengths that end inside a page and a tile, one of them 0.
std::vector<int> seq_lengths(long long B, long long L, bool ragged) {
  std::vector<int> lens(B, static_cast<int>(L));
  if (ragged)
    for (long long b = 0; b < B; ++b) lens[b] = b % 4 == 3 ? 0 : static_cast<int>(std::max(1ll, L - (b * 997 + 13) % L));
  return lens;
}

/// The sequences the CPU checks: the first and the last, or every one of a ragged batch.
std::vector<long long> checked_sequences(long long B, bool ragged) {
  std::vector<long long> seqs;
  for (long long b = 0; b < B; ++b)
    if (ragged || b == 0 || b == B - 1) seqs.push_back(b);
  return seqs;
}

void bench_paged_vllm(kwiki_bench::FlushedTimer& timer, double copy_bw, int sms, long long B, long long L, long long Hq, long long Hkv, long long D,
                      long long P, bool ragged = false) {
  std::mt19937 g(3);
  const long long X = 8, MB = (L + P - 1) / P, NB = B * MB, cache = NB * Hkv * D * P;
  const auto q = random_bf16(B * Hq * D, g), kc = random_bf16(cache, g), vc = random_bf16(cache, g);
  std::vector<int> tables(NB);
  for (long long i = 0; i < NB; ++i) tables[i] = static_cast<int>(i);
  std::shuffle(tables.begin(), tables.end(), g);
  const std::vector<int> lens = seq_lengths(B, L, ragged);
  long long tokens = 0;
  for (int len : lens) tokens += len;
  const long long S = splits_for(B * Hkv, MB * P, 512, sms);
  Dev<bf16> dq(B * Hq * D), dkc(cache), dvc(cache), dout(B * Hq * D);
  Dev<int> dt(NB), dl(B);
  Dev<float> po(B * Hq * S * D), pl(B * Hq * S);
  dq.put(q), dkc.put(kc), dvc.put(vc), dt.put(tables), dl.put(lens);
  dout.put(std::vector<uint16_t>(B * Hq * D, 0x7fc0));
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto run = [&] {
    kwiki_paged_decode_vllm::launch<bf16>(dq.p, dkc.p, dvc.p, dt.p, dl.p, dout.p, po.p, pl.p, B, Hq, Hkv, D, P, MB, S, X, NB,
                                          static_cast<float>(scale), nullptr);
  };
  run();
  KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = dout.get<uint16_t>();
  bool ok = true;
  for (long long b : checked_sequences(B, ragged)) {
    for (long long h = 0; h < Hq && ok; ++h) {
      const long long kvh = h / (Hq / Hkv);
      auto page = [&](long long t) { return static_cast<long long>(tables[b * MB + t / P]); };
      const auto want = attend(
          q, (b * Hq + h) * D, D, D, lens[b], scale,
          [&](long long t, long long d) { return static_cast<double>(bf2f(kc[(((page(t) * Hkv + kvh) * (D / X) + d / X) * P + t % P) * X + d % X])); },
          [&](long long t, long long d) { return static_cast<double>(bf2f(vc[((page(t) * Hkv + kvh) * D + d) * P + t % P])); });
      for (long long d = 0; d < D; ++d) ok = ok && close_bf16(bf2f(out[(b * Hq + h) * D + d]), want[d]);
    }
  }
  const double us = ok ? timer.median_us(run) : 0;
  const double bytes = B * Hq * D * 2.0 * 2 + 2.0 * tokens * Hkv * D * 2 + B * MB * 4.0 + B * 4.0;
  report("paged_decode_attention_vllm", "B" + std::to_string(B) + "_L" + std::to_string(L) + "_Hq" + std::to_string(Hq) + "_Hkv" + std::to_string(Hkv) +
         "_S" + std::to_string(S) + (ragged ? "_ragged" : ""), ok, "out differs beyond bf16 tolerance", us, bytes, copy_bw);
}

void bench_mla(kwiki_bench::FlushedTimer& timer, double copy_bw, int sms, long long B, long long L, long long H, long long P, bool ragged = false) {
  std::mt19937 g(4);
  const long long Dqk = 576, Dv = 512, MB = (L + P - 1) / P, NB = B * MB, cache = NB * P * Dqk;
  const auto q = random_bf16(B * H * Dqk, g), kv = random_bf16(cache, g);
  std::vector<int> tables(NB);
  for (long long i = 0; i < NB; ++i) tables[i] = static_cast<int>(i);
  std::shuffle(tables.begin(), tables.end(), g);
  const std::vector<int> lens = seq_lengths(B, L, ragged);
  long long tokens = 0;
  for (int len : lens) tokens += len;
  const long long S = splits_for(B * ((H + 15) / 16), MB * P, 256, sms);
  Dev<bf16> dq(B * H * Dqk), dc(cache), dout(B * H * Dv);
  Dev<int> dt(NB), dl(B);
  Dev<float> po(B * H * S * Dv), pl(B * H * S);
  dq.put(q), dc.put(kv), dt.put(tables), dl.put(lens);
  dout.put(std::vector<uint16_t>(B * H * Dv, 0x7fc0));
  const double scale = 0.1352337788608801;  // DeepSeek-V3's
  auto run = [&] {
    kwiki_mla_decode::launch<bf16>(dq.p, dc.p, dt.p, dl.p, dout.p, po.p, pl.p, B, H, Dqk, Dv, P, MB, S, NB, static_cast<float>(scale), nullptr);
  };
  run();
  KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = dout.get<uint16_t>();
  bool ok = true;
  for (long long b : checked_sequences(B, ragged)) {
    for (long long h = 0; h < H && ok; ++h) {
      auto at = [&](long long t, long long d) {
        return static_cast<double>(bf2f(kv[(static_cast<long long>(tables[b * MB + t / P]) * P + t % P) * Dqk + d]));
      };
      const auto want = attend(q, (b * H + h) * Dqk, Dqk, Dv, lens[b], scale, at, at);
      for (long long d = 0; d < Dv; ++d) ok = ok && close_bf16(bf2f(out[(b * H + h) * Dv + d]), want[d]);
    }
  }
  const double us = ok ? timer.median_us(run) : 0;
  const double bytes = B * H * Dqk * 2.0 + tokens * Dqk * 2.0 + B * H * Dv * 2.0 + B * MB * 4.0 + B * 4.0;
  report("mla_decode", "B" + std::to_string(B) + "_L" + std::to_string(L) + "_H" + std::to_string(H) + "_S" + std::to_string(S) +
         (ragged ? "_ragged" : ""), ok, "out differs beyond bf16 tolerance", us, bytes, copy_bw);
}

// ---------------------------------------------------------------------------------------------
// fused_moe: routing ids as a softmax router's top-k (k distinct experts a token, uniform), weights
// renormalised; tokens first, middle and last checked in fp64 with the kernel's roundings (gate, up,
// silu(gate), act to bf16); the rate as matrix TFLOP/s and as bytes of the routed experts' weights.
void bench_fused_moe(kwiki_bench::FlushedTimer& timer, double copy_bw, const char* name, long long T, long long H, long long I, long long E,
                     long long K) {
  std::mt19937 g(5);
  const auto hidden = random_bf16(T * H, g, 0.5f), w13 = random_bf16(E * 2 * I * H, g, 1.f / std::sqrt(static_cast<float>(H))),
             w2 = random_bf16(E * H * I, g, 1.f / std::sqrt(static_cast<float>(I)));
  std::vector<int> ids(T * K);
  std::vector<float> weights(T * K);
  std::vector<int> all(E);
  std::uniform_real_distribution<float> u01(0.05f, 1.f);
  for (long long t = 0; t < T; ++t) {
    for (long long e = 0; e < E; ++e) all[e] = static_cast<int>(e);
    std::shuffle(all.begin(), all.end(), g);
    float sum = 0;
    for (long long k = 0; k < K; ++k) sum += (weights[t * K + k] = u01(g));
    for (long long k = 0; k < K; ++k) ids[t * K + k] = all[k], weights[t * K + k] /= sum;
  }
  namespace fm = kwiki_fused_moe;
  const long long entries = T * K, capacity = entries + E * (fm::kBlockM - 1);
  Dev<bf16> dx(T * H), d13(E * 2 * I * H), d2(E * H * I), dout(T * H), dact(entries * I);
  Dev<float> dw(T * K), dslot(entries * H);
  Dev<int> dids(T * K), dcounts((entries + fm::kChunk - 1) / fm::kChunk * E), doffsets(E + 1), dsorted(capacity),
      dblocks((capacity + fm::kBlockM - 1) / fm::kBlockM);
  dx.put(hidden), d13.put(w13), d2.put(w2), dw.put(weights), dids.put(ids);
  dout.put(std::vector<uint16_t>(T * H, 0x7fc0));
  int rc = 0;
  auto run = [&] {
    rc = fm::launch<bf16>(dx.p, d13.p, d2.p, dw.p, dids.p, dout.p, dcounts.p, doffsets.p, dsorted.p, dblocks.p, dact.p, dslot.p, T, H, I, E, K,
                          fm::kBlockM, nullptr);
  };
  run();
  KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = dout.get<uint16_t>();
  bool ok = rc == 0;
  auto rbf = [](double v) { return static_cast<double>(bf2f(f2bf(static_cast<float>(v)))); };
  std::vector<double> act(I);
  for (long long t : {0ll, T / 2, T - 1}) {
    std::vector<double> want(H, 0.0);
    for (long long k = 0; k < K && ok; ++k) {
      const long long e = ids[t * K + k];
      for (long long n = 0; n < I; ++n) {
        double gate = 0, up = 0;
        for (long long h = 0; h < H; ++h) {
          const double x = bf2f(hidden[t * H + h]);
          gate += x * bf2f(w13[(e * 2 * I + n) * H + h]);
          up += x * bf2f(w13[(e * 2 * I + I + n) * H + h]);
        }
        const double gr = rbf(gate), ur = rbf(up);
        act[n] = rbf(rbf(gr / (1 + std::exp(-gr))) * ur);
      }
      for (long long h = 0; h < H; ++h) {
        double y = 0;
        for (long long n = 0; n < I; ++n) y += act[n] * bf2f(w2[(e * H + h) * I + n]);
        want[h] += weights[t * K + k] * y;
      }
    }
    for (long long h = 0; h < H && ok; ++h) ok = close_bf16(bf2f(out[t * H + h]), want[h]);
  }
  const double us = ok ? timer.median_us(run, 3, 20) : 0;
  const double touched = E * (1 - std::pow(std::max(0.0, 1 - static_cast<double>(K) / E), static_cast<double>(T)));
  const double bytes = T * H * 2.0 * 2 + touched * 3.0 * I * H * 2 + T * K * 8.0;
  const double flops = 6.0 * T * K * H * I;
  const std::string shape = std::string(name) + "_T" + std::to_string(T) + "_H" + std::to_string(H) + "_I" + std::to_string(I) + "_E" +
                            std::to_string(E) + "_k" + std::to_string(K);
  report("fused_moe", shape, ok, rc != 0 ? "launch returned " + std::to_string(rc) : "out differs beyond bf16 tolerance", us, bytes, copy_bw);
  if (ok) std::printf("%-28s %-34s       %9.2f TFLOP/s (matrix, 6*T*k*H*I)\n", "fused_moe", shape.c_str(), flops / (us * 1e-6) / 1e12);
}

// fp8_block_gemm: random finite e4m3fn bytes, scales in [0, 1e-2) (as vLLM's test), both kernels
// (the tensor-core one through launch(), on when KWIKI_FP8_GEMM_TENSOR_CORES is 1, and the CUDA-core
// one directly) checked on rows 0, M / 2 and M - 1 against an fp64 sum of the same block-scaled
// product: within one bf16 step plus fp32 summation slack (1e-6 of the sum of |terms|).
// With `exact`, the values are +-{0, 0.5, 1, 1.5, 2} and the scales powers of two: every product and
// every partial sum of a 128-K block is exact in 13 bits, so a reduced-precision tensor-core sum
// cannot explain a difference there (only a wrong operand, layout or race can).
void bench_fp8_block_gemm(kwiki_bench::FlushedTimer& timer, double copy_bw, long long M, long long N, long long K, bool exact = false) {
  namespace fg = kwiki_fp8_block_gemm;
  std::mt19937 g(5);
  const long long kb = (K + 127) / 128, nb = (N + 127) / 128;
  auto bytes = [&](long long n) {
    static const uint8_t small[] = {0x00, 0x30, 0x38, 0x3c, 0x40};  // e4m3fn 0, 0.5, 1, 1.5, 2
    std::vector<uint8_t> v(n);
    for (auto& e : v) {
      unsigned b;
      if (exact) b = small[g() % 5] | ((g() & 1u) << 7);
      else do b = g() & 0xffu; while ((b & 0x7fu) == 0x7fu);  // no NaN encodings
      e = static_cast<uint8_t>(b);
    }
    return v;
  };
  const auto a = bytes(M * K), b = bytes(N * K);
  std::uniform_real_distribution<float> u(0.f, 1e-2f);
  std::vector<float> as(M * kb), bs(nb * kb);
  for (auto& x : as) x = exact ? std::ldexp(1.f, -static_cast<int>(g() % 4)) : u(g);
  for (auto& x : bs) x = exact ? std::ldexp(1.f, -static_cast<int>(g() % 4)) : u(g);
  Dev<uint8_t> da(M * K), db(N * K);
  Dev<float> das(M * kb), dbs(nb * kb);
  Dev<bf16> dout(M * N);
  da.put(a), db.put(b), das.put(as), dbs.put(bs);
  const double bytes_moved = M * K + N * K + (M * kb + nb * kb) * 4.0 + M * N * 2.0;
  const fg::Shape shape{static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<int>(kb)};
  for (int path = 0; path < 3; ++path) {
    const char* name = path == 0 ? "fp8_block_gemm(V0: launch)" : path == 1 ? "fp8_block_gemm(mma.sync)" : "fp8_block_gemm(cuda cores)";
    auto run = [&] {
      if (path == 0) fg::launch<bf16>(da.p, db.p, das.p, dbs.p, dout.p, M, N, K, 128, 128, 0.0, nullptr);
      else if (path == 1) fg::tc::launch_tc<bf16>(da.p, db.p, das.p, dbs.p, dout.p, shape, nullptr);
      else fg::launch_cuda_cores<bf16, false>(da.p, db.p, das.p, dbs.p, dout.p, shape, nullptr);
    };
    if (path == 2 && M * N * K > (1ll << 34)) continue;  // the CUDA-core kernel takes seconds at prefill sizes
    dout.put(std::vector<uint16_t>(M * N, 0x7fc0));
    run();
    KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
    const auto out = dout.get<uint16_t>();
    bool ok = true;
    long long bad_m = -1, bad_n = -1;
    int shown = 0;
    double sum_diff = 0, sum_ref = 0, max_diff = 0;  // vLLM's test metric: mean |out - ref| / mean |ref|
    for (long long m : {0ll, M / 4, M / 2, (3 * M) / 4, M - 1}) {
      for (long long n = 0; n < N; ++n) {
        double want = 0, mag = 0;
        for (long long blk = 0; blk < kb; ++blk) {
          double part = 0, part_mag = 0;
          for (long long k = blk * 128; k < std::min(K, blk * 128 + 128); ++k) {
            const double p = static_cast<double>(fg::fp8_to_float<false>(a[m * K + k])) * fg::fp8_to_float<false>(b[n * K + k]);
            part += p;
            part_mag += std::fabs(p);
          }
          const float sc = as[m * kb + blk] * bs[(n / 128) * kb + blk];
          want += part * sc;
          mag += part_mag * sc;
        }
        const double got = bf2f(out[m * N + n]);
        sum_diff += std::fabs(got - want), sum_ref += std::fabs(want), max_diff = std::max(max_diff, std::fabs(got - want));
        if (!(std::fabs(got - want) <= std::ldexp(std::fabs(want), -8) + 1e-6 * mag + 1e-30)) {
          if (exact && shown < 8) std::printf("    out[%lld, %lld] = %.6g, want %.6g\n", m, n, got, want), ++shown;
          if (ok) ok = false, bad_m = m, bad_n = n;
        }
      }
    }
    std::printf("%-28s %-34s       mean |diff| / mean |ref| %.3g, max |diff| %.3g, mean |ref| %.3g%s\n", name,
                ("M" + std::to_string(M) + "_N" + std::to_string(N) + "_K" + std::to_string(K)).c_str(), sum_diff / std::max(sum_ref, 1e-300),
                max_diff, sum_ref / (5.0 * N), exact ? " (exact values)" : "");
    // Elementwise failures with vLLM's own test metric met (mean |diff| / mean |ref| < 1e-3, its
    // test_w8a8_block_fp8_matmul) are the tensor core's fp8 accumulation, not a wrong result: the FAIL
    // stands, and the time is printed on a line that says so.
    const bool vllm_ok = !exact && sum_diff < 1e-3 * sum_ref;
    const double us = ok || vllm_ok ? timer.median_us(run) : 0;
    const std::string shape_name = "M" + std::to_string(M) + "_N" + std::to_string(N) + "_K" + std::to_string(K);
    report(name, shape_name, ok, "out[" + std::to_string(bad_m) + ", " + std::to_string(bad_n) + "] differs beyond a bf16 step", us, bytes_moved,
           copy_bw);
    if (ok || vllm_ok)
      std::printf("%-28s %-34s       %9.2f us  %9.1f TFLOPS (fp8 dense peak of the H200: 1979)%s\n", name, shape_name.c_str(), us,
                  2.0 * M * N * K / (us * 1e-6) / 1e12, ok ? "" : "  [FAILED elementwise; vLLM's mean-relative metric met]");
  }
}

// prefill_attention: packed (P = 0) or paged sequences; query i of sequence b (lq queries, lk keys)
// sees keys j <= i + lk - lq when causal. Checked in fp64 on every 13th query row (every lq / 64th
// in long sequences) and each sequence's last row, all heads; the rate is the FLOPs of the pairs the mask keeps (4 D Hq each)
// against the time, beside the bytes' share of the copy bandwidth. Each shape runs the CUDA-core V0
// and the tensor-core kernel (launch_path; D 256 has none and runs the V0 twice).
void bench_prefill(kwiki_bench::FlushedTimer& timer, double copy_bw, const std::string& name, const std::vector<int>& qlens,
                   const std::vector<int>& klens, long long Hq, long long Hkv, long long D, bool causal, long long P, bool tensor_cores) {
  std::mt19937 g(5);
  const long long B = static_cast<long long>(qlens.size());
  std::vector<int> cu_q(B + 1, 0), kv, tables;
  for (long long b = 0; b < B; ++b) cu_q[b + 1] = cu_q[b] + qlens[b];
  const long long Tq = cu_q[B];
  long long Tk = 0, MB = 1, max_q = 0;
  for (int n : qlens) max_q = std::max<long long>(max_q, n);
  std::vector<std::vector<long long>> rows(B);  // k/v row of each key of each sequence
  if (P == 0) {
    kv.assign(B + 1, 0);
    for (long long b = 0; b < B; ++b) {
      kv[b + 1] = kv[b] + klens[b];
      for (int j = 0; j < klens[b]; ++j) rows[b].push_back(kv[b] + j);
    }
    Tk = kv[B];
  } else {
    kv = klens;
    long long pages = 0;
    for (int n : klens) MB = std::max(MB, (n + P - 1) / P), pages += (n + P - 1) / P;
    std::vector<int> order(pages);
    for (long long i = 0; i < pages; ++i) order[i] = static_cast<int>(i);
    std::shuffle(order.begin(), order.end(), g);
    tables.assign(B * MB, 0);
    long long next = 0;
    for (long long b = 0; b < B; ++b) {
      for (long long p = 0; p < (klens[b] + P - 1) / P; ++p) tables[b * MB + p] = order[next++];
      for (int j = 0; j < klens[b]; ++j) rows[b].push_back(static_cast<long long>(tables[b * MB + j / P]) * P + j % P);
    }
    Tk = pages * P;
  }
  const auto q = random_bf16(Tq * Hq * D, g, 0.5f), k = random_bf16(Tk * Hkv * D, g, 0.5f), v = random_bf16(Tk * Hkv * D, g);
  Dev<bf16> dq(Tq * Hq * D), dk(Tk * Hkv * D), dv(Tk * Hkv * D), dout(Tq * Hq * D);
  Dev<int> dcu(B + 1), dkv(kv.size()), dt(std::max<size_t>(1, tables.size()));
  dq.put(q), dk.put(k), dv.put(v), dcu.put(cu_q), dkv.put(kv);
  if (P) dt.put(tables);
  dout.put(std::vector<uint16_t>(Tq * Hq * D, 0x7fc0));
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  int rc = 0;
  auto run = [&] {
    rc = kwiki_prefill_attention::launch_path<bf16>(dq.p, dk.p, dv.p, dcu.p, dkv.p, dout.p, P ? dt.p : nullptr, B, Hq, Hkv, D, Tq, Tk, max_q,
                                                    causal ? 1 : 0, P ? 1 : 0, P ? P : 0, MB, static_cast<float>(scale), tensor_cores, nullptr);
  };
  run();
  KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = dout.get<uint16_t>();
  bool ok = rc == 0;
  double pairs = 0;
  for (long long b = 0; b < B; ++b) {
    const long long lq = qlens[b], lk = klens[b], stride = std::max(13ll, lq / 64);
    for (long long i = 0; i < lq; ++i) {
      const long long seen = causal ? std::max(0ll, std::min(lk, i + lk - lq + 1)) : lk;
      pairs += static_cast<double>(seen);
      if (!ok || (i % stride != 0 && i != lq - 1)) continue;
      for (long long h = 0; h < Hq && ok; ++h) {
        const long long kvh = h / (Hq / Hkv), qrow = cu_q[b] + i;
        std::vector<double> want(D, 0.0);
        if (seen > 0)
          want = attend(q, (qrow * Hq + h) * D, D, D, seen, scale,
                        [&](long long t, long long d) { return static_cast<double>(bf2f(k[(rows[b][t] * Hkv + kvh) * D + d])); },
                        [&](long long t, long long d) { return static_cast<double>(bf2f(v[(rows[b][t] * Hkv + kvh) * D + d])); });
        for (long long d = 0; d < D; ++d) ok = ok && close_bf16(bf2f(out[(qrow * Hq + h) * D + d]), want[d]);
      }
    }
  }
  const double us = ok ? timer.median_us(run) : 0;
  long long keys = 0;
  for (int n : klens) keys += n;
  const double bytes = 2.0 * Tq * Hq * D * 2 + 2.0 * keys * Hkv * D * 2;
  const std::string shape = name + "_Hq" + std::to_string(Hq) + "_Hkv" + std::to_string(Hkv) + "_D" + std::to_string(D) + (causal ? "_causal" : "") +
                            (P ? "_P" + std::to_string(P) : "");
  report(tensor_cores ? "prefill_attention (mma)" : "prefill_attention", shape, ok, rc ? "refused or failed to launch (rc " + std::to_string(rc) + ")" : "out differs beyond bf16 tolerance", us,
         bytes, copy_bw);
  if (ok) std::printf("%-28s %-34s       %9.2f TFLOP/s (4 D Hq x %.0f query-key pairs)\n", "", "", 4.0 * D * Hq * pairs / (us * 1e-6) / 1e12, pairs);
}

}  // namespace

int main(int argc, char** argv) {
  // argv[1], when given: only the families whose name contains it (say "topk").
  const std::string only = argc > 1 ? argv[1] : "";
  const auto want = [&](const char* family) { return only.empty() || std::string(family).find(only) != std::string::npos; };
  cudaDeviceProp prop{};
  KWIKI_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  kwiki_bench::FlushedTimer timer;
  const double copy_bw = copy_bandwidth(timer);
  std::printf("# %s, %d SMs; device-to-device copy %.3f TB/s (read + write, 1 GiB, L2 flushed)\n", prop.name, prop.multiProcessorCount, copy_bw / 1e12);
  // data/tasks/vllm_reshape_and_cache and kv_cache_write shapes
  if (want("kv_cache_write")) bench_kv_cache_write(timer, copy_bw, 256, 8, 128, 2048, 16, 0, 16, true);
  if (want("kv_cache_write")) bench_kv_cache_write(timer, copy_bw, 8192, 8, 128, 2048, 16, 0, 0, true);
  if (want("kv_cache_write")) bench_kv_cache_write(timer, copy_bw, 8192, 8, 128, 2048, 16, 0, 0, false);
  if (want("kv_cache_write")) bench_kv_cache_write(timer, copy_bw, 1024, 1, 128, 8192, 16, 0, 0, true);
  if (want("kv_cache_write")) bench_kv_cache_write(timer, copy_bw, 4096, 8, 128, 512, 16, 1, 0, true);
  if (want("kv_cache_write")) bench_kv_cache_write(timer, copy_bw, 4096, 8, 128, 512, 16, 1, 0, false);
  // data/tasks/vllm_apply_top_k and hf_topk_logits_warper shapes
  if (want("topk_filter")) bench_topk_filter(timer, copy_bw, 1, 128256, 50);
  if (want("topk_filter")) bench_topk_filter(timer, copy_bw, 64, 151936, 100);
  if (want("topk_filter")) bench_topk_filter(timer, copy_bw, 256, 128256, 100);
  if (want("topk_filter")) bench_topk_filter(timer, copy_bw, 32, 256000, 40);
  // data/tasks/vllm_paged_attention_v2_layout shapes (full lengths), and the largest batch x context
  if (want("paged_decode_attention_vllm")) bench_paged_vllm(timer, copy_bw, prop.multiProcessorCount, 1, 32768, 32, 8, 128, 16);
  if (want("paged_decode_attention_vllm")) bench_paged_vllm(timer, copy_bw, prop.multiProcessorCount, 32, 4096, 32, 8, 128, 16);
  if (want("paged_decode_attention_vllm")) bench_paged_vllm(timer, copy_bw, prop.multiProcessorCount, 64, 2048, 28, 4, 128, 16);
  if (want("paged_decode_attention_vllm")) bench_paged_vllm(timer, copy_bw, prop.multiProcessorCount, 128, 1024, 8, 1, 128, 16);
  if (want("paged_decode_attention_vllm")) bench_paged_vllm(timer, copy_bw, prop.multiProcessorCount, 32, 16384, 32, 8, 128, 16);
  // lengths that end inside a page, an empty sequence, a group of 7 heads (checked on every sequence)
  if (want("paged_decode_attention_vllm")) bench_paged_vllm(timer, copy_bw, prop.multiProcessorCount, 8, 3000, 28, 4, 128, 16, true);
  if (want("paged_decode_attention_vllm")) bench_paged_vllm(timer, copy_bw, prop.multiProcessorCount, 5, 20000, 8, 1, 64, 32, true);
  // data/tasks/deepseek_mla_decode shapes, and the largest batch x context
  if (want("mla_decode")) bench_mla(timer, copy_bw, prop.multiProcessorCount, 1, 32768, 16, 64);
  if (want("mla_decode")) bench_mla(timer, copy_bw, prop.multiProcessorCount, 64, 4096, 16, 64);
  if (want("mla_decode")) bench_mla(timer, copy_bw, prop.multiProcessorCount, 32, 2048, 128, 64);
  if (want("mla_decode")) bench_mla(timer, copy_bw, prop.multiProcessorCount, 128, 8192, 16, 64);
  // lengths that end inside a page and a tile, an empty sequence, heads not a multiple of 16
  if (want("mla_decode")) bench_mla(timer, copy_bw, prop.multiProcessorCount, 8, 3000, 16, 64, true);
  if (want("mla_decode")) bench_mla(timer, copy_bw, prop.multiProcessorCount, 5, 20000, 40, 64, true);
  if (want("mla_decode")) bench_mla(timer, copy_bw, prop.multiProcessorCount, 4, 1000, 8, 16, true);
  // fused_moe: data/tasks/hf_moe_experts_loop and vllm_fused_experts_native shapes, then the models' own sizes
  // (Mixtral-8x7B at tensor parallel 8: I = 14336 / 8; Qwen3-30B-A3B; DeepSeek-V2-Lite's routed experts)
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "hf_task", 96, 1024, 768, 8, 2);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "vllm_task", 512, 512, 176, 64, 6);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "mixtral_tp8", 1, 4096, 1792, 8, 2);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "mixtral_tp8", 64, 4096, 1792, 8, 2);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "mixtral_tp8", 1024, 4096, 1792, 8, 2);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "qwen3_30b_a3b", 1, 2048, 768, 128, 8);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "qwen3_30b_a3b", 256, 2048, 768, 128, 8);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "qwen3_30b_a3b", 4096, 2048, 768, 128, 8);
  if (want("fused_moe")) bench_fused_moe(timer, copy_bw, "deepseek_v2_lite", 512, 2048, 1408, 64, 6);
  // data/tasks/vllm_w8a8_block_fp8_matmul and deepseek_v3_fp8_block_linear shapes, and a prefill-sized one
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 256, 256, 1024, true);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 64, 2112, 7168, true);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 1, 7168, 2048);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 64, 2112, 7168);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 33, 24576, 1536);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 128, 4096, 7168);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 128, 7168, 2048);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 32, 32768, 512);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 4096, 7168, 7168);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 4096, 4096, 4096);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 8192, 8192, 8192);
  if (want("fp8_block_gemm")) bench_fp8_block_gemm(timer, copy_bw, 70, 200, 288);  // partial tiles and a last K block of 32
  // data/tasks/vllm_varlen_prefill_attention and vllm_unified_paged_attention shapes, and longer prompts;
  // each on the CUDA-core V0, then on the tensor-core kernel.
  struct PrefillShape {
    const char* name;
    std::vector<int> qlens, klens;
    long long Hq, Hkv, D;
    bool causal;
    long long P;
  };
  const std::vector<PrefillShape> prefill_shapes = {
      {"varlen_4seqs_T1280", {640, 384, 200, 56}, {640, 384, 200, 56}, 32, 8, 128, true, 0},
      {"varlen_6seqs_T1039", {512, 300, 129, 64, 33, 1}, {512, 300, 129, 64, 33, 1}, 28, 4, 128, true, 0},
      {"varlen_3seqs_T741", {384, 257, 100}, {384, 257, 100}, 8, 1, 256, true, 0},
      {"chunks_after_prefix", {256, 128, 96}, {1280, 640, 96}, 32, 8, 128, true, 0},
      {"encoder_4seqs", {512, 256, 128, 77}, {512, 256, 128, 77}, 12, 12, 64, false, 0},
      {"varlen_8x2048", std::vector<int>(8, 2048), std::vector<int>(8, 2048), 32, 8, 128, true, 0},
      {"varlen_1x8192", {8192}, {8192}, 32, 8, 128, true, 0},
      {"unified_mixed_8seqs", {1, 1, 1, 1, 128, 37, 1, 256}, {513, 1024, 77, 300, 128, 500, 2000, 1280}, 32, 8, 128, true, 16},
      {"unified_decode_heavy_16seqs", {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 200, 64},
       {1500, 900, 33, 4000, 16, 17, 640, 2048, 1, 700, 1200, 380, 95, 3000, 200, 1100}, 28, 4, 128, true, 16},
      {"unified_tp8_chunked_4seqs", {512, 1, 1, 64}, {2048, 4000, 1500, 64}, 8, 1, 128, true, 32},
      {"unified_chunks_2048_of_8192", {2048, 2048}, {8192, 4096}, 32, 8, 128, true, 16},
  };
  for (const auto& ps : prefill_shapes)
    for (bool tc : {false, true})
      if (want("prefill_attention")) bench_prefill(timer, copy_bw, ps.name, ps.qlens, ps.klens, ps.Hq, ps.Hkv, ps.D, ps.causal, ps.P, tc);
  return 0;
}
