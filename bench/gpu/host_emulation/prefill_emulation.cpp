// prefill_emulation.cpp: the prefill_attention launcher run on the host emulation (compat_host.hpp;
// build and run with run.sh) against the fp64 CPU twin (planner/twin/cpu_reference.cpp) on the same
// inputs: packed and paged layouts, causal and not, GQA and MQA, D 64/128/256, sequences of one
// query, empty ones, more queries than keys (rows that see no key: zeros), prefixes before a chunk,
// pages of 16 and of 5 tokens, bf16 and fp32, and the sizes the launcher must refuse. Built with
// -DKWIKI_PREFILL_TENSOR_CORES=1 the bf16 cases of D 64 and 128 run the tensor-core kernel (mma and
// ldmatrix emulated by compat_host.hpp). Exits 1 when a case fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "prefill_attention.cuh"

namespace ref = kwiki::reference;

static int failures = 0, cases = 0;

static void check(bool ok, const std::string& what) {
  ++cases;
  if (!ok) {
    ++failures;
    std::printf("FAIL %s\n", what.c_str());
  }
}

template <typename T>
static std::vector<T> random_tensor(std::size_t n, std::mt19937& g) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> v(n);
  for (auto& e : v) e = kwiki_from_float<T>(u(g));
  return v;
}

template <typename T>
static std::vector<float> as_float(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = kwiki_to_float(v[i]);
  return f;
}

/// One launch against the twin. Packed when page == 0 (context_lens are the keys of each
/// sequence, rows in order), else paged with pages of `page` tokens scattered over the cache.
template <typename T>
static void prefill_case(const std::string& name, const std::vector<int>& query_lens, const std::vector<int>& context_lens, int hq, int hkv, int d,
                         bool causal, int page, int extra_max_q = 0) {
  std::mt19937 g(11);
  const int B = static_cast<int>(query_lens.size());
  std::vector<int> cu_q(B + 1, 0), kv;
  for (int b = 0; b < B; ++b) cu_q[b + 1] = cu_q[b] + query_lens[b];
  const int tq = cu_q[B];
  int max_q = 0;
  for (int n : query_lens) max_q = n > max_q ? n : max_q;
  max_q += extra_max_q;
  long long tk = 0;
  int mb = 1;
  std::vector<int> tables;
  if (page == 0) {
    kv.assign(B + 1, 0);
    for (int b = 0; b < B; ++b) kv[b + 1] = kv[b] + context_lens[b];
    tk = kv[B];
  } else {
    kv = context_lens;
    int pages = 0;
    for (int n : context_lens) {
      mb = (n + page - 1) / page > mb ? (n + page - 1) / page : mb;
      pages += (n + page - 1) / page;
    }
    const int nb = pages + 3;
    std::vector<int> order(nb);
    for (int i = 0; i < nb; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), g);
    tables.assign(static_cast<std::size_t>(B) * mb, 0);
    int next = 0;
    for (int b = 0; b < B; ++b)
      for (int p = 0; p < (context_lens[b] + page - 1) / page; ++p) tables[b * mb + p] = order[next++];
    tk = static_cast<long long>(nb) * page;
  }
  const auto q = random_tensor<T>(static_cast<std::size_t>(tq) * hq * d, g);
  const auto k = random_tensor<T>(static_cast<std::size_t>(tk) * hkv * d, g);
  const auto v = random_tensor<T>(static_cast<std::size_t>(tk) * hkv * d, g);
  std::vector<T> out(static_cast<std::size_t>(tq) * hq * d, kwiki_from_float<T>(NAN));
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const int rc = kwiki_prefill_attention::launch<T>(q.data(), k.data(), v.data(), cu_q.data(), kv.data(), out.data(), page ? tables.data() : nullptr,
                                                    B, hq, hkv, d, tq, tk, max_q, causal ? 1 : 0, page ? 1 : 0, page, mb, scale, nullptr);
  ref::PrefillAttentionShape s;
  s.batch = B;
  s.q_heads = hq;
  s.kv_heads = hkv;
  s.head_size = d;
  s.q_tokens = tq;
  s.kv_tokens = tk;
  s.max_seqlen_q = max_q;
  s.causal = causal;
  s.paged = page != 0;
  s.page_size = page;
  s.max_pages = page ? mb : 0;
  const std::vector<std::int32_t> cu32(cu_q.begin(), cu_q.end()), kv32(kv.begin(), kv.end()), t32(tables.begin(), tables.end());
  const auto want = ref::prefill_attention(as_float(q), as_float(k), as_float(v), cu32, kv32, t32, s, scale);
  const bool bf16 = sizeof(T) == 2;
  const double atol = bf16 ? 1e-2 : 2e-5, rtol = bf16 ? 1.6e-2 : 1e-4;
  bool ok = rc == 0;
  double worst = 0;
  for (std::size_t i = 0; i < out.size() && ok; ++i) {
    const double got = kwiki_to_float(out[i]), err = std::fabs(got - want[i]);
    worst = err > worst ? err : worst;
    if (!(err <= atol + rtol * std::fabs(want[i]))) {
      ok = false;
      std::printf("  %s: element %zu (row %zu) got %g want %g\n", name.c_str(), i, i / (static_cast<std::size_t>(hq) * d), got, want[i]);
    }
  }
  check(ok, name + (bf16 ? " bf16" : " f32") + " (rc " + std::to_string(rc) + ", worst " + std::to_string(worst) + ")");
}

/// Arguments the launcher must refuse with -1.
static void refusals() {
  std::vector<kwiki_bf16> t(4096);
  std::vector<int> cu{0, 4}, tables{0};
  auto run = [&](long long hq, long long hkv, long long d, long long layout, const int* bt, long long p, long long tk) {
    return kwiki_prefill_attention::launch<kwiki_bf16>(t.data(), t.data(), t.data(), cu.data(), cu.data(), t.data(), bt, 1, hq, hkv, d, 4, tk, 4, 1,
                                                       layout, p, 1, 0.1f, nullptr);
  };
  check(run(4, 3, 64, 0, nullptr, 0, 4) == -1, "refuse Hq not a multiple of Hkv");
  check(run(4, 1, 96, 0, nullptr, 0, 4) == -1, "refuse D = 96");
  check(run(4, 1, 64, 2, nullptr, 0, 4) == -1, "refuse layout 2");
  check(run(4, 1, 64, 1, nullptr, 16, 16) == -1, "refuse paged without block tables");
  check(run(4, 1, 64, 1, tables.data(), 16, 17) == -1, "refuse paged Tk not whole pages");
  check(kwiki_prefill_attention::launch<kwiki_bf16>(t.data() + 1, t.data(), t.data(), cu.data(), cu.data(), t.data(), nullptr, 1, 4, 1, 64, 4, 4, 4, 1,
                                                    0, 0, 0, 0.1f, nullptr) == -1,
        "refuse a misaligned q");
}

int main() {
  refusals();
  for (bool causal : {true, false}) {
    const std::string c = causal ? "causal" : "full";
    prefill_case<kwiki_bf16>("packed GQA D128 " + c, {70, 33, 1, 0, 5}, {70, 33, 1, 0, 5}, 4, 2, 128, causal, 0);
    prefill_case<kwiki_bf16>("packed MQA D256 " + c, {40, 9}, {40, 9}, 3, 1, 256, causal, 0);
    prefill_case<kwiki_bf16>("packed D64 prefix " + c, {20, 33}, {90, 40}, 2, 2, 64, causal, 0);
    prefill_case<kwiki_bf16>("packed more queries than keys " + c, {40, 6}, {10, 0}, 2, 1, 64, causal, 0);
    prefill_case<kwiki_bf16>("paged P16 mixed " + c, {1, 37, 1, 64}, {50, 100, 16, 64}, 4, 1, 128, causal, 16);
    prefill_case<kwiki_bf16>("paged P5 D64 " + c, {3, 1, 12}, {23, 7, 12}, 2, 2, 64, causal, 5, 40);
    prefill_case<kwiki_bf16>("packed D64 two query tiles " + c, {150, 65}, {200, 65}, 2, 1, 64, causal, 0);
    prefill_case<float>("packed f32 D128 " + c, {35, 3}, {35, 8}, 2, 1, 128, causal, 0);
    prefill_case<float>("paged f32 D256 " + c, {9, 1}, {30, 17}, 2, 1, 256, causal, 16);
  }
  std::printf("%d of %d prefill cases pass (warp %d, tensor cores %d)\n", cases - failures, cases, EMU_WARP, KWIKI_PREFILL_TENSOR_CORES);
  return failures ? 1 : 0;
}
