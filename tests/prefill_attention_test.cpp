// prefill_attention (issue 20, family 1): its fp64 CPU reference against the definition, the
// packed and paged layouts against each other, the causal mask aligned to the end, the twin
// through the C entry point kwiki plan loads (and what it refuses), and the family's table row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "family.hpp"
#include "kwiki/planner.hpp"
#include "kwiki_twin.h"

namespace {

namespace ref = kwiki::reference;

// Deterministic values in [-1, 1).
std::vector<float> ramp(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

ref::PrefillAttentionShape packed(std::size_t batch, std::size_t hq, std::size_t hkv, std::size_t d, std::size_t tq, std::size_t tk, bool causal) {
  ref::PrefillAttentionShape s;
  s.batch = batch;
  s.q_heads = hq;
  s.kv_heads = hkv;
  s.head_size = d;
  s.q_tokens = tq;
  s.kv_tokens = tk;
  s.max_seqlen_q = tq;
  s.causal = causal;
  return s;
}

// The definition for one query row: softmax over keys [k0, k0 + seen) of K/V rows, KV head kvh.
std::vector<double> attend(const std::vector<float>& q, std::size_t qrow, const std::vector<float>& k, const std::vector<float>& v,
                           std::size_t k0, std::size_t seen, std::size_t hkv, std::size_t kvh, std::size_t d, double scale) {
  std::vector<double> w(seen), o(d, 0.0);
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  for (std::size_t j = 0; j < seen; ++j) {
    double dot = 0;
    for (std::size_t x = 0; x < d; ++x) dot += static_cast<double>(q[qrow + x]) * k[((k0 + j) * hkv + kvh) * d + x];
    w[j] = dot * scale;
    m = std::max(m, w[j]);
  }
  for (auto& x : w) sum += (x = std::exp(x - m));
  for (std::size_t j = 0; j < seen; ++j)
    for (std::size_t x = 0; x < d; ++x) o[x] += w[j] / sum * v[((k0 + j) * hkv + kvh) * d + x];
  return o;
}

TEST(PrefillAttentionReference, PackedCausalGqaIsSoftmaxOverEachSequencesOwnPrefix) {
  // Two sequences of 3 and 2 tokens, 4 query heads on 2 KV heads.
  const std::size_t hq = 4, hkv = 2, d = 8;
  const auto s = packed(2, hq, hkv, d, 5, 5, true);
  const auto q = ramp(5 * hq * d, 1), k = ramp(5 * hkv * d, 2), v = ramp(5 * hkv * d, 3);
  const std::vector<std::int32_t> cu = {0, 3, 5};
  const double scale = 0.35;
  const auto out = ref::prefill_attention(q, k, v, cu, cu, {}, s, scale);
  for (std::size_t i = 0; i < 5; ++i) {
    const std::size_t b = i < 3 ? 0 : 1, start = cu[b], pos = i - start;
    for (std::size_t h = 0; h < hq; ++h) {
      const auto want = attend(q, (i * hq + h) * d, k, v, start, pos + 1, hkv, h / 2, d, scale);
      for (std::size_t x = 0; x < d; ++x) EXPECT_NEAR(out[(i * hq + h) * d + x], want[x], 1e-12) << "row " << i << " head " << h;
    }
  }
  // The first token of each sequence sees only itself: its output is its value row.
  for (std::size_t x = 0; x < d; ++x) EXPECT_NEAR(out[(3 * hq + 3) * d + x], v[(3 * hkv + 1) * d + x], 1e-12);
}

TEST(PrefillAttentionReference, CausalMaskIsAlignedToTheEndOfTheKeys) {
  // One sequence: 2 queries over 5 keys (a chunk after a 3-token prefix). Query 0 sees keys 0..3,
  // query 1 all 5; a single query (decode) sees every key, causal or not.
  const std::size_t d = 4;
  const auto q = ramp(2 * d, 4), k = ramp(5 * d, 5), v = ramp(5 * d, 6);
  const auto out = ref::prefill_attention(q, k, v, {0, 2}, {0, 5}, {}, packed(1, 1, 1, d, 2, 5, true), 0.5);
  const auto r0 = attend(q, 0, k, v, 0, 4, 1, 0, d, 0.5), r1 = attend(q, d, k, v, 0, 5, 1, 0, d, 0.5);
  for (std::size_t x = 0; x < d; ++x) {
    EXPECT_NEAR(out[x], r0[x], 1e-12);
    EXPECT_NEAR(out[d + x], r1[x], 1e-12);
  }
  const std::vector<float> q1(q.begin(), q.begin() + d);
  EXPECT_EQ(ref::prefill_attention(q1, k, v, {0, 1}, {0, 5}, {}, packed(1, 1, 1, d, 1, 5, true), 0.5),
            ref::prefill_attention(q1, k, v, {0, 1}, {0, 5}, {}, packed(1, 1, 1, d, 1, 5, false), 0.5));
}

TEST(PrefillAttentionReference, QueriesThatSeeNoKeyGetZeros) {
  // 3 queries over 1 key, causal: query 2 sees key 0, queries 0 and 1 see none; a second
  // sequence with queries and no keys.
  const std::size_t d = 4;
  const auto q = ramp(5 * d, 7), k = ramp(1 * d, 8), v = ramp(1 * d, 9);
  const auto out = ref::prefill_attention(q, k, v, {0, 3, 5}, {0, 1, 1}, {}, packed(2, 1, 1, d, 5, 1, true), 1.0);
  for (std::size_t x = 0; x < d; ++x) {
    EXPECT_EQ(out[x], 0.0);
    EXPECT_EQ(out[d + x], 0.0);
    EXPECT_NEAR(out[2 * d + x], v[x], 1e-12);
    EXPECT_EQ(out[3 * d + x], 0.0);
    EXPECT_EQ(out[4 * d + x], 0.0);
  }
}

TEST(PrefillAttentionReference, PagedCachesGiveWhatThePackedRowsGive) {
  // Two sequences, contexts of 7 and 3 tokens, 2 and 3 queries; pages of 2 tokens scattered.
  const std::size_t hq = 2, hkv = 1, d = 4, P = 2, NB = 8, MB = 4;
  const std::vector<int> lens = {7, 3}, qlens = {2, 3};
  const std::vector<std::int32_t> tables = {5, 0, 6, 2, 3, 7, 0, 0};
  const auto kc = ramp(NB * P * hkv * d, 10), vc = ramp(NB * P * hkv * d, 11), q = ramp(5 * hq * d, 12);
  std::vector<float> k, v;  // the same rows packed
  for (std::size_t b = 0; b < 2; ++b)
    for (int t = 0; t < lens[b]; ++t) {
      const std::size_t row = static_cast<std::size_t>(tables[b * MB + t / P]) * P + t % P;
      k.insert(k.end(), kc.begin() + row * d, kc.begin() + (row + 1) * d);
      v.insert(v.end(), vc.begin() + row * d, vc.begin() + (row + 1) * d);
    }
  for (bool causal : {true, false}) {
    auto s = packed(2, hq, hkv, d, 5, NB * P, causal);
    s.paged = true;
    s.page_size = P;
    s.max_pages = MB;
    const auto paged = ref::prefill_attention(q, kc, vc, {0, 2, 5}, {7, 3}, tables, s, 0.4);
    const auto flat = ref::prefill_attention(q, k, v, {0, 2, 5}, {0, 7, 10}, {}, packed(2, hq, hkv, d, 5, 10, causal), 0.4);
    ASSERT_EQ(paged.size(), flat.size());
    for (std::size_t i = 0; i < paged.size(); ++i) EXPECT_NEAR(paged[i], flat[i], 1e-12) << i << (causal ? " causal" : "");
  }
}

TEST(PrefillAttentionReference, RefusesInputsItCannotRead) {
  const std::size_t d = 4;
  const auto q = ramp(3 * d, 1), k = ramp(3 * d, 2), v = ramp(3 * d, 3);
  const auto s = packed(1, 1, 1, d, 3, 3, true);
  EXPECT_THROW(ref::prefill_attention(q, k, v, {0, 2}, {0, 3}, {}, s, 1.0), std::invalid_argument);   // rows 2.. uncovered
  EXPECT_THROW(ref::prefill_attention(q, k, v, {0, 3}, {0, 4}, {}, s, 1.0), std::invalid_argument);   // keys past k/v
  auto short_max = s;
  short_max.max_seqlen_q = 2;
  EXPECT_THROW(ref::prefill_attention(q, k, v, {0, 3}, {0, 3}, {}, short_max, 1.0), std::invalid_argument);
  auto paged = s;
  paged.paged = true;
  paged.page_size = 1;
  paged.max_pages = 3;
  EXPECT_THROW(ref::prefill_attention(q, k, v, {0, 3}, {3}, {0, 1, 3}, paged, 1.0), std::invalid_argument);  // page 3 of 3
  EXPECT_NO_THROW(ref::prefill_attention(q, k, v, {0, 3}, {3}, {2, 1, 0}, paged, 1.0));
}

// ---------------------------------------------------------------------------------------------
// The twin through kwiki_twin_launch (ABI order)
// ---------------------------------------------------------------------------------------------

int twin(std::vector<void*> tensors, std::vector<int> dtypes, std::vector<long long> dims, double scale, std::string* error = nullptr) {
  char err[512] = {0};
  const double params[1] = {scale};
  const int rc = kwiki_twin_launch("prefill_attention", tensors.data(), dtypes.data(), static_cast<int>(tensors.size()), dims.data(),
                                   static_cast<int>(dims.size()), params, 1, err, sizeof(err));
  if (error) *error = err;
  return rc;
}

TEST(PrefillAttentionTwin, RunsTheReferenceInLauncherOrderAndRoundsAtTheStore) {
  const long long B = 2, Hq = 4, Hkv = 2, D = 8, Tq = 5, Tk = 5;
  auto q = ramp(static_cast<std::size_t>(Tq * Hq * D), 1), k = ramp(static_cast<std::size_t>(Tk * Hkv * D), 2),
       v = ramp(static_cast<std::size_t>(Tk * Hkv * D), 3);
  std::vector<std::int32_t> cu = {0, 3, 5};
  std::vector<float> out(static_cast<std::size_t>(Tq * Hq * D), NAN);
  const std::vector<int> types = {KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_I32, KWIKI_TWIN_I32, KWIKI_TWIN_F32, KWIKI_TWIN_I32};
  std::string error;
  ASSERT_EQ(twin({q.data(), k.data(), v.data(), cu.data(), cu.data(), out.data(), nullptr}, types, {B, Hq, Hkv, D, Tq, Tk, 3, 1, 0, 0, 0}, 0.35, &error), 0)
      << error;
  const auto want = ref::prefill_attention(q, k, v, cu, cu, {}, packed(2, 4, 2, 8, 5, 5, true), 0.35);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(want[i])) << i;
  // Refused: Hq not a multiple of Hkv, causal 2, a sequence longer than max_seqlen_q.
  EXPECT_NE(twin({q.data(), k.data(), v.data(), cu.data(), cu.data(), out.data(), nullptr}, types, {B, 3, Hkv, D, Tq, Tk, 3, 1, 0, 0, 0}, 0.35), 0);
  EXPECT_NE(twin({q.data(), k.data(), v.data(), cu.data(), cu.data(), out.data(), nullptr}, types, {B, Hq, Hkv, D, Tq, Tk, 3, 2, 0, 0, 0}, 0.35), 0);
  EXPECT_NE(twin({q.data(), k.data(), v.data(), cu.data(), cu.data(), out.data(), nullptr}, types, {B, Hq, Hkv, D, Tq, Tk, 2, 1, 0, 0, 0}, 0.35), 0);
  EXPECT_NE(twin({q.data(), k.data(), v.data(), cu.data(), cu.data(), out.data(), nullptr}, types, {B, Hq, Hkv, D, Tq, Tk, 3, 1, 0, 0}, 0.35), 0);
}

TEST(PrefillAttentionTwin, PagedLayoutReadsTheBlockTable) {
  // One sequence of 3 queries over a 6-token context in pages of 4: tokens 0-3 in page 2, 4-5 in page 0.
  const long long B = 1, Hq = 2, Hkv = 1, D = 4, Tq = 3, P = 4, NB = 3, MB = 2;
  auto q = ramp(static_cast<std::size_t>(Tq * Hq * D), 4), kc = ramp(static_cast<std::size_t>(NB * P * D), 5), vc = ramp(static_cast<std::size_t>(NB * P * D), 6);
  std::vector<std::int32_t> cu = {0, 3}, lens = {6}, tables = {2, 0};
  std::vector<float> out(static_cast<std::size_t>(Tq * Hq * D), NAN);
  const std::vector<int> types = {KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_I32, KWIKI_TWIN_I32, KWIKI_TWIN_F32, KWIKI_TWIN_I32};
  std::string error;
  ASSERT_EQ(twin({q.data(), kc.data(), vc.data(), cu.data(), lens.data(), out.data(), tables.data()}, types, {B, Hq, Hkv, D, Tq, NB * P, 3, 1, 1, P, MB}, 0.5,
                 &error),
            0)
      << error;
  std::vector<float> k, v;
  for (int t = 0; t < 6; ++t) {
    const std::size_t row = static_cast<std::size_t>((t < 4 ? 2 : 0) * P + t % 4);
    k.insert(k.end(), kc.begin() + static_cast<long>(row * D), kc.begin() + static_cast<long>((row + 1) * D));
    v.insert(v.end(), vc.begin() + static_cast<long>(row * D), vc.begin() + static_cast<long>((row + 1) * D));
  }
  for (std::size_t i = 0; i < 3; ++i)  // query i is token i + 3: it sees keys 0 .. i + 3
    for (std::size_t h = 0; h < 2; ++h) {
      const auto want = attend(q, (i * 2 + h) * 4, k, v, 0, i + 4, 1, 0, 4, 0.5);
      for (std::size_t x = 0; x < 4; ++x) EXPECT_NEAR(out[(i * 2 + h) * 4 + x], want[x], 1e-6);
    }
  tables = {2, 3};  // page 3 is past the cache: refused, not read
  EXPECT_NE(twin({q.data(), kc.data(), vc.data(), cu.data(), lens.data(), out.data(), tables.data()}, types, {B, Hq, Hkv, D, Tq, NB * P, 3, 1, 1, P, MB}, 0.5), 0);
}

// ---------------------------------------------------------------------------------------------
// The family row
// ---------------------------------------------------------------------------------------------

TEST(PrefillAttentionFamily, IsARowWithAliasesBeforeTheGenerator) {
  const kwiki::detail::FamilyRow* row = kwiki::detail::find_family("prefill_attention");
  ASSERT_NE(row, nullptr);
  for (const char* alias : {"varlen_attention", "flash_attn_varlen_func", "unified_attention", "context_attention"})
    EXPECT_EQ(kwiki::detail::find_family(alias), row) << alias;
  EXPECT_STREQ(kwiki::detail::kFamilies[kwiki::detail::kFamilyCount - 1].name, "generated");
  EXPECT_NE(std::string(row->abi).find("cu_seqlens_q"), std::string::npos);
}

TEST(PrefillAttentionFamily, CountsTheWorkOfThePairsTheMaskKeeps) {
  kwiki::ShapeCase shape;
  shape.input_kwargs = {{"query_lens", {3, 1}}, {"context_lens", {3, 4}}, {"num_q_heads", 4}, {"num_kv_heads", 2}, {"head_size", 8}};
  shape.dims = {{"num_q_heads", 4}, {"num_kv_heads", 2}, {"head_size", 8}};
  // Causal, aligned to the end: 1 + 2 + 3 pairs for the first sequence, 4 for the decode token.
  auto w = kwiki::count_work("prefill_attention", shape, "bf16");
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->matrix_flops, 4.0 * 10 * 4 * 8);
  EXPECT_DOUBLE_EQ(w->bytes_written, 4.0 * 4 * 8 * 2);
  EXPECT_DOUBLE_EQ(w->bytes_read, 4.0 * 4 * 8 * 2 + 2.0 * 7 * 2 * 8 * 2 + 8 * 2);
  shape.init_kwargs = {{"causal", false}};
  w = kwiki::count_work("prefill_attention", shape, "bf16");
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->matrix_flops, 4.0 * (3 * 3 + 1 * 4) * 4 * 8);
  shape.input_kwargs.erase("query_lens");  // no lengths: no count
  EXPECT_FALSE(kwiki::count_work("prefill_attention", shape, "bf16").has_value());
}

}  // namespace
