// serving_emulation.cpp: the kv_cache_write and topk_filter launchers run on the host emulation
// (compat_host.hpp; build and run with run.sh) against the CPU twin's formulas, every output bit:
// cache writes for prefill-like, mid-page, random, padded and past-the-cache slot mappings in both
// layouts and on the 16-byte and element paths, X and P powers of two or not; the filter on normal rows, ties (the row passes),
// NaN and infinite and signed-zero thresholds, the gathered bin at and past its capacity, in place
// and not. Exits 1 when a case fails.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "kv_cache_write.cuh"
#include "topk_filter.cuh"

static int failures = 0, cases = 0;

/// Counts a case; prints it when it fails.
static void check(bool ok, const std::string& what) {
  ++cases;
  if (!ok) { ++failures; std::printf("FAIL %s\n", what.c_str()); }
}

/// Whether two buffers hold the same bits.
template <typename T> static bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// ---------------------------------------------------------------- kv_cache_write
/// One cache write against the twin's formula; `misalign` elements off 16-byte alignment.
template <typename T>
static void kv_case(const std::string& name, long long T_, long long Hkv, long long D, long long NB, long long P, long long X, int layout,
                    std::vector<long long> slots, int misalign = 0) {
  std::mt19937 g(7);
  const long long row = Hkv * D, cache = NB * P * row;
  auto rnd = [&](long long n) { std::vector<T> v(n + 16); for (auto& e : v) { uint32_t u = g(); std::memcpy(&e, &u, sizeof(T)); } return v; };
  auto key = rnd(T_ * row), value = rnd(T_ * row), kc = rnd(cache), vc = rnd(cache);
  auto kc_want = kc, vc_want = vc;
  const int o = misalign;
  for (long long t = 0; t < T_; ++t) {
    if (slots[t] < 0 || slots[t] >= NB * P) continue;
    const long long b = slots[t] / P, off = slots[t] % P;
    for (long long h = 0; h < Hkv; ++h)
      for (long long d = 0; d < D; ++d) {
        const long long src = t * row + h * D + d;
        if (layout == 1) {
          kc_want[o + ((b * P + off) * Hkv + h) * D + d] = key[o + src];
          vc_want[o + ((b * P + off) * Hkv + h) * D + d] = value[o + src];
        } else {
          kc_want[o + (((b * Hkv + h) * (D / X) + d / X) * P + off) * X + d % X] = key[o + src];
          vc_want[o + ((b * Hkv + h) * D + d) * P + off] = value[o + src];
        }
      }
  }
  const int rc = kwiki_kv_cache_write::launch<T>(key.data() + o, value.data() + o, kc.data() + o, vc.data() + o, slots.data(), T_, Hkv, D, NB, P, X,
                                                 layout, nullptr);
  check(rc == 0 && same_bits(kc, kc_want) && same_bits(vc, vc_want), "kv " + name);
}

/// Pages in a random order, the tokens filling them from `start_off`; `pad` -1 slots at the end and
/// `past` slots past the cache.
static std::vector<long long> prefill_slots(long long T_, long long NB, long long P, std::mt19937& g, long long start_off, int pad, long long past = 0) {
  std::vector<long long> pages(NB);
  for (long long i = 0; i < NB; ++i) pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), g);
  std::vector<long long> s(T_);
  for (long long t = 0; t < T_; ++t) { const long long i = t + start_off; s[t] = pages[(i / P) % NB] * P + i % P; }
  for (int i = 0; i < pad && i < T_; ++i) s[T_ - 1 - i] = -1;
  for (long long i = 0; i < past && i < T_; ++i) s[i * 7 % T_] = NB * P + i;  // past the cache: skipped
  return s;
}

/// Every token a distinct random slot.
static std::vector<long long> random_slots(long long T_, long long NB, long long P, std::mt19937& g) {
  std::vector<long long> s(NB * P);
  for (long long i = 0; i < NB * P; ++i) s[i] = i;
  std::shuffle(s.begin(), s.end(), g);
  s.resize(T_);
  return s;
}

/// The cache-write cases, both layouts.
static void kv_tests() {
  std::mt19937 g(3);
  for (int layout : {0, 1}) {
    const std::string L = layout ? "flash" : "vllm";
    kv_case<kwiki_bf16>(L + " prefill aligned", 96, 2, 64, 16, 16, 8, layout, prefill_slots(96, 16, 16, g, 0, 0));
    kv_case<kwiki_bf16>(L + " prefill mid-page pad", 75, 3, 80, 12, 16, 8, layout, prefill_slots(75, 12, 16, g, 5, 6));
    kv_case<kwiki_bf16>(L + " random slots", 50, 1, 128, 8, 16, 8, layout, random_slots(50, 8, 16, g));
    kv_case<kwiki_bf16>(L + " P=5 past cache", 41, 2, 24, 20, 5, 8, layout, prefill_slots(41, 20, 5, g, 3, 2, 4));
    kv_case<kwiki_bf16>(L + " P=1", 33, 2, 16, 40, 1, 8, layout, prefill_slots(33, 40, 1, g, 0, 1));
    kv_case<kwiki_bf16>(L + " T=1", 1, 4, 64, 4, 16, 8, layout, {37});
    kv_case<kwiki_bf16>(L + " X=4 (scalar)", 40, 2, 32, 8, 16, 4, layout, prefill_slots(40, 8, 16, g, 2, 3));
    kv_case<kwiki_bf16>(L + " misaligned (scalar)", 45, 3, 40, 8, 16, 8, layout, prefill_slots(45, 8, 16, g, 9, 2), 1);
    kv_case<kwiki_bf16>(L + " D=12 (scalar)", 38, 2, 12, 8, 16, 4, layout, random_slots(38, 8, 16, g));
    kv_case<kwiki_bf16>(L + " X=24 P=7 (X not a power of two)", 70, 2, 48, 12, 7, 24, layout, prefill_slots(70, 12, 7, g, 4, 3, 2));
    kv_case<kwiki_bf16>(L + " X=6 random (scalar, X not a power of two)", 45, 3, 36, 8, 9, 6, layout, random_slots(45, 8, 9, g));
    kv_case<float>(L + " float X=12 random", 39, 2, 36, 10, 6, 12, layout, random_slots(39, 10, 6, g));
    kv_case<float>(L + " float", 70, 2, 96, 8, 16, 4, layout, prefill_slots(70, 8, 16, g, 0, 4));
    kv_case<float>(L + " float misaligned", 37, 3, 20, 8, 8, 4, layout, prefill_slots(37, 8, 8, g, 1, 0, 2), 2);
    kv_case<kwiki_bf16>(L + " all padding", 35, 2, 64, 4, 16, 8, layout, std::vector<long long>(35, -1));
    kv_case<kwiki_bf16>(L + " T=0", 0, 2, 64, 4, 16, 8, layout, {});
  }
}

// ---------------------------------------------------------------- topk_filter
/// An element as fp32.
template <typename T> static float tf(T v) { return kwiki_to_float(v); }

/// One filter launch against the twin (ks empty: k_all for every row); `misalign` elements off 16-byte alignment.
template <typename T>
static void topk_case(const std::string& name, long long B, long long V, const std::vector<float>& x_f, std::vector<long long> ks, long long k_all,
                      bool in_place, int misalign = 0) {
  std::vector<T> x(B * V + 16), out(B * V + 16);
  const int o = misalign;
  for (long long i = 0; i < B * V; ++i) x[o + i] = kwiki_from_float<T>(x_f[i]);
  for (auto& e : out) e = kwiki_from_float<T>(NAN);
  std::vector<T> want = x;
  // The CPU twin: the k-th largest with NaN above every number; values below it become -inf.
  const auto above = [](double a, double b) { return (std::isnan(a) && !std::isnan(b)) || a > b; };
  for (long long r = 0; r < B; ++r) {
    const long long k = ks.empty() ? k_all : ks[r];
    if (k >= V || k < 1) continue;
    std::vector<double> sorted(V);
    for (long long i = 0; i < V; ++i) sorted[i] = tf(x[o + r * V + i]);
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), above);
    const double thr = sorted[k - 1];
    for (long long i = 0; i < V; ++i)
      if (tf(x[o + r * V + i]) < thr) want[o + r * V + i] = kwiki_from_float<T>(-INFINITY);
  }
  T* dst = in_place ? x.data() + o : out.data() + o;
  const int rc = kwiki_topk_filter::launch<T>(x.data() + o, ks.empty() ? nullptr : ks.data(), k_all, dst, B, V, nullptr);
  std::vector<T> got(in_place ? x : out);
  bool ok = rc == 0;
  for (long long i = 0; i < B * V && ok; ++i)
    if (std::memcmp(&got[o + i], &want[o + i], sizeof(T)) != 0) {
      ok = false;
      std::printf("  %s: element %lld (row %lld) got %g want %g (x %g)\n", name.c_str(), i, i / V, tf(got[o + i]), tf(want[o + i]), x_f[i]);
    }
  check(ok, "topk " + name + (in_place ? " in place" : ""));
}

/// The filter cases for element type T, out of place and in place.
template <typename T> static void topk_tests(const std::string& tname) {
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.f, 4.f);
  auto normal = [&](long long n) { std::vector<float> v(n); for (auto& e : v) e = nd(g); return v; };
  for (bool ip : {false, true}) {
    const std::string p = tname + " ";
    topk_case<T>(p + "normal k50 V128256", 1, 128256, normal(128256), {}, 50, ip);
    topk_case<T>(p + "normal rows mixed k", 6, 4000, normal(24000), {1, 4000, 17, 3999, 0, 250}, 0, ip);
    topk_case<T>(p + "normal V odd (scalar)", 3, 1001, normal(3003), {}, 10, ip);
    topk_case<T>(p + "misaligned (scalar)", 2, 1024, normal(2048), {5, 100}, 0, ip, 1);
    topk_case<T>(p + "tiny V", 4, 3, normal(12), {1, 2, 3, 1}, 0, ip);
    topk_case<T>(p + "V=1", 2, 1, normal(2), {}, 1, ip);
    // Ties: all equal; a few levels (the bin overflows: the row passes).
    topk_case<T>(p + "all equal", 2, 10000, std::vector<float>(20000, 1.5f), {}, 7, ip);
    { std::vector<float> v(50000); for (auto& e : v) e = static_cast<float>(g() % 4); topk_case<T>(p + "four levels", 1, 50000, v, {}, 20000, ip); }
    { std::vector<float> v(30000); for (auto& e : v) e = 8.f + (g() % 100000) / 100000.f; topk_case<T>(p + "one wide bin", 1, 30000, v, {}, 100, ip); }
    // NaN ranks first: threshold NaN keeps everything; past the NaNs a number.
    { auto v = normal(5000); for (int i = 0; i < 30; ++i) v[(i * 97) % 5000] = (i % 2) ? NAN : -NAN;
      topk_case<T>(p + "NaN threshold", 1, 5000, v, {}, 20, ip);
      topk_case<T>(p + "past NaNs", 1, 5000, v, {}, 45, ip); }
    // Infinities.
    { auto v = normal(4096); for (int i = 0; i < 4000; ++i) v[i] = -INFINITY; for (int i = 4000; i < 4010; ++i) v[i] = INFINITY;
      topk_case<T>(p + "-inf threshold", 1, 4096, v, {}, 4090, ip);
      topk_case<T>(p + "+inf threshold", 1, 4096, v, {}, 5, ip); }
    // Zeros of both signs around the threshold.
    { std::vector<float> v(6000); for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 3 == 0) ? 0.f : (i % 3 == 1) ? -0.f : (i % 2 ? 1e-30f : -1e-30f);
      for (long long k : {1ll, 1000ll, 2000ll, 3000ll, 4000ll, 5000ll, 5999ll}) topk_case<T>(p + "zeros k" + std::to_string(k), 1, 6000, v, {}, k, ip); }
    { std::vector<float> v(3000); for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 2) ? -0.f : -1.f - (i % 7); v[5] = 0.f;
      topk_case<T>(p + "-0 threshold", 1, 3000, v, {}, 700, ip);
      topk_case<T>(p + "+0 threshold, -0 below", 1, 3000, v, {}, 1, ip); }
    // The gathered bin at its capacity and one past it.
    for (int n : {4095, 4096, 4097}) {
      std::vector<float> v(20000);
      for (int i = 0; i < 20000; ++i) v[i] = i < n ? 1.f + (i % 1000) / 8000.f : -static_cast<float>(i % 50);
      std::shuffle(v.begin(), v.end(), g);
      topk_case<T>(p + "bin of " + std::to_string(n), 1, 20000, v, {}, 77, ip);
    }
    // Negative logits only, k spanning.
    { auto v = normal(9000); for (auto& e : v) e = -std::fabs(e) - 1.f; topk_case<T>(p + "negatives", 3, 3000, v, {1, 1500, 2999}, 0, ip); }
    // The floor of pass 1 from each thread's first chunks: rows rising and falling (the sample holds
    // the row's least and its largest values), and k at and past the sampling threads (1024 here).
    { std::vector<float> v(2 * 40000); for (int i = 0; i < 40000; ++i) v[i] = i * 0.25f - 3000.f, v[40000 + i] = 3000.f - i * 0.25f;
      topk_case<T>(p + "rising and falling", 2, 40000, v, {100, 100}, 0, ip);
      topk_case<T>(p + "rising and falling k1", 2, 40000, v, {1, 1}, 0, ip);
      topk_case<T>(p + "rising k=threads+1, falling k=threads", 2, 40000, v, {1025, 1024}, 0, ip); }
    { auto v = normal(3 * 50000); topk_case<T>(p + "normal k=1024 and 1025", 3, 50000, v, {1024, 1025, 7}, 0, ip); }
  }
}

int main() {
  kv_tests();
  topk_tests<float>("f32");
  topk_tests<kwiki_bf16>("bf16");
  std::printf("%d of %d cases pass (warp %d)\n", cases - failures, cases, EMU_WARP);
  return failures ? 1 : 0;
}
