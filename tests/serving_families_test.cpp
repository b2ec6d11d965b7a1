// The serving families of issue 20 (kv_cache_write, topk_filter, paged_decode_attention_vllm,
// mla_decode): their fp64 CPU references against hand-computed cases, their twins through the C
// entry point kwiki plan loads, and their rows in the family table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "family.hpp"
#include "kwiki_twin.h"

namespace {

namespace ref = kwiki::reference;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Deterministic values in [-1, 1) (no generator state shared between tests).
std::vector<float> ramp(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// kv_cache_write
// ---------------------------------------------------------------------------------------------

ref::KvCacheShape small_cache(ref::KvCacheLayout layout) {
  ref::KvCacheShape s;
  s.tokens = 3;
  s.kv_heads = 2;
  s.head_size = 8;
  s.num_blocks = 4;
  s.block_size = 4;
  s.x = 4;
  s.layout = layout;
  return s;
}

TEST(KvCacheWrite, VllmLayoutPutsEachElementWhereReshapeAndCacheDoes) {
  const ref::KvCacheShape s = small_cache(ref::KvCacheLayout::kVllm);
  const std::size_t row = s.kv_heads * s.head_size, cache = s.num_blocks * s.block_size * row;
  const auto key = ramp(s.tokens * row, 1), value = ramp(s.tokens * row, 2);
  std::vector<float> kc(cache, 7.f), vc(cache, 7.f);
  const std::vector<std::int64_t> slots = {13, -1, 2};  // token 1 is padding
  ref::kv_cache_write(key, value, kc, vc, slots, s);
  // Token 0 -> page 3, offset 1. key_cache [NB=4, Hkv=2, D/x=2, P=4, x=4]: element (h=1, d=5) sits
  // at [3][1][1][1][1]; value_cache [4, 2, 8, 4]: (h=1, d=5) at [3][1][5][1].
  EXPECT_EQ(kc[(((3 * 2 + 1) * 2 + 1) * 4 + 1) * 4 + 1], key[0 * row + 1 * 8 + 5]);
  EXPECT_EQ(vc[((3 * 2 + 1) * 8 + 5) * 4 + 1], value[0 * row + 1 * 8 + 5]);
  // Token 2 -> page 0, offset 2: (h=0, d=3) at key [0][0][0][2][3], value [0][0][3][2].
  EXPECT_EQ(kc[((0 * 2 + 0) * 4 + 2) * 4 + 3], key[2 * row + 3]);
  EXPECT_EQ(vc[(0 * 8 + 3) * 4 + 2], value[2 * row + 3]);
  // Exactly two tokens' rows were written; everything else (the padding token's) stays.
  std::size_t changed = 0;
  for (std::size_t i = 0; i < cache; ++i) changed += (kc[i] != 7.f) + (vc[i] != 7.f);
  EXPECT_EQ(changed, 2 * 2 * row);
}

TEST(KvCacheWrite, FlashLayoutKeepsTheRowContiguous) {
  const ref::KvCacheShape s = small_cache(ref::KvCacheLayout::kFlash);
  const std::size_t row = s.kv_heads * s.head_size, cache = s.num_blocks * s.block_size * row;
  const auto key = ramp(s.tokens * row, 3), value = ramp(s.tokens * row, 4);
  std::vector<float> kc(cache, 0.f), vc(cache, 0.f);
  ref::kv_cache_write(key, value, kc, vc, {5, 0, 15}, s);
  for (std::size_t i = 0; i < row; ++i) {
    EXPECT_EQ(kc[5 * row + i], key[i]);
    EXPECT_EQ(vc[15 * row + i], value[2 * row + i]);
  }
}

TEST(KvCacheWrite, RefusesSlotsOutsideTheCache) {
  const ref::KvCacheShape s = small_cache(ref::KvCacheLayout::kVllm);
  const std::size_t row = s.kv_heads * s.head_size, cache = s.num_blocks * s.block_size * row;
  std::vector<float> kc(cache), vc(cache);
  const auto rows = ramp(s.tokens * row, 5);
  EXPECT_THROW(ref::kv_cache_write(rows, rows, kc, vc, {0, 16, 1}, s), std::invalid_argument);  // NB * P = 16
  EXPECT_THROW(ref::kv_cache_write(rows, rows, kc, vc, {0, -2, 1}, s), std::invalid_argument);
  EXPECT_THROW(ref::kv_cache_write(rows, rows, kc, vc, {0, 1}, s), std::invalid_argument);  // one slot short
}

TEST(KvCacheWrite, VllmLayoutReadsBackAsTheFlashLayout) {
  ref::KvCacheShape v = small_cache(ref::KvCacheLayout::kVllm);
  ref::KvCacheShape f = small_cache(ref::KvCacheLayout::kFlash);
  const std::size_t row = v.kv_heads * v.head_size, cache = v.num_blocks * v.block_size * row;
  const auto key = ramp(v.tokens * row, 6), value = ramp(v.tokens * row, 7);
  std::vector<float> kv(cache, 0.f), vv(cache, 0.f), kf(cache, 0.f), vf(cache, 0.f);
  const std::vector<std::int64_t> slots = {9, 3, 14};
  ref::kv_cache_write(key, value, kv, vv, slots, v);
  ref::kv_cache_write(key, value, kf, vf, slots, f);
  EXPECT_EQ(ref::vllm_cache_to_flash(kv, v.num_blocks, v.kv_heads, v.head_size, v.block_size, v.x, true), kf);
  EXPECT_EQ(ref::vllm_cache_to_flash(vv, v.num_blocks, v.kv_heads, v.head_size, v.block_size, v.x, false), vf);
}

// ---------------------------------------------------------------------------------------------
// topk_filter
// ---------------------------------------------------------------------------------------------

TEST(TopkFilter, KeepsValuesAtOrAboveTheKthLargest) {
  const std::vector<float> x = {1, 5, 3, 5, 2, /* row 1 */ 0, -1, 4, 4, 4};
  const auto out = ref::topk_filter(x, 2, 5, {3, 2});
  // Row 0: sorted 5, 5, 3, 2, 1 -> 3rd is 3. Row 1: 4, 4, 4, ... -> 2nd is 4 and all three 4s stay.
  const std::vector<double> want = {-kInf, 5, 3, 5, -kInf, -kInf, -kInf, 4, 4, 4};
  EXPECT_EQ(out, want);
}

TEST(TopkFilter, KEqualToTheRowLeavesItAndNanRanksFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto whole = ref::topk_filter({3, -2, 7}, 1, 3, {3});
  EXPECT_EQ(whole, (std::vector<double>{3, -2, 7}));
  const auto out = ref::topk_filter({nan, 1, 2, -4}, 1, 4, {2});  // NaN, then 2: threshold 2
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], -kInf);
  EXPECT_EQ(out[2], 2);
  EXPECT_EQ(out[3], -kInf);
}

TEST(TopkFilter, RefusesKOutsideOneToTheRowLength) {
  EXPECT_THROW(ref::topk_filter({1, 2}, 1, 2, {0}), std::invalid_argument);
  EXPECT_THROW(ref::topk_filter({1, 2}, 1, 2, {3}), std::invalid_argument);
  EXPECT_THROW(ref::topk_filter({1, 2}, 1, 2, {}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// The twins through kwiki_twin_launch (float tensors, the launcher's order)
// ---------------------------------------------------------------------------------------------

// Runs a twin; fails the test with its reason when it refuses.
void launch(const char* family, std::vector<void*> tensors, std::vector<int> dtypes, std::vector<long long> dims, std::vector<double> params,
            bool expect_ok = true) {
  char error[512] = {0};
  const int rc = kwiki_twin_launch(family, tensors.data(), dtypes.data(), static_cast<int>(tensors.size()), dims.data(),
                                   static_cast<int>(dims.size()), params.data(), static_cast<int>(params.size()), error, sizeof(error));
  if (expect_ok) EXPECT_EQ(rc, 0) << error;
  else EXPECT_NE(rc, 0) << family << " accepted what it should refuse";
}

TEST(ServingTwins, TopkFilterTakesKPerRowOrOneK) {
  std::vector<float> x = {1, 5, 3, 5, 2, 0, -1, 4, 4, 4}, out(10, 0.f);
  std::vector<std::int64_t> k = {1, 5};
  launch("topk_filter", {x.data(), k.data(), out.data()}, {KWIKI_TWIN_F32, KWIKI_TWIN_I64, KWIKI_TWIN_F32}, {2, 5}, {0});
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(out, (std::vector<float>{-inf, 5, -inf, 5, -inf, 0, -1, 4, 4, 4}));
  launch("topk_filter", {x.data(), nullptr, out.data()}, {KWIKI_TWIN_F32, KWIKI_TWIN_I64, KWIKI_TWIN_F32}, {2, 5}, {4});
  EXPECT_EQ(out, (std::vector<float>{-inf, 5, 3, 5, 2, 0, -inf, 4, 4, 4}));
  // In place, as vLLM's masked_fill_: the output is the input buffer.
  launch("topk_filter", {x.data(), nullptr, x.data()}, {KWIKI_TWIN_F32, KWIKI_TWIN_I64, KWIKI_TWIN_F32}, {2, 5}, {1});
  EXPECT_EQ(x, (std::vector<float>{-inf, 5, -inf, 5, -inf, -inf, -inf, 4, 4, 4}));
  launch("topk_filter", {x.data(), nullptr, out.data()}, {KWIKI_TWIN_F32, KWIKI_TWIN_I64, KWIKI_TWIN_F32}, {2, 5}, {0}, false);
}

TEST(ServingTwins, KvCacheWriteRefusesACacheOfAnotherType) {
  std::vector<float> rows(16);
  std::vector<std::uint16_t> cache(64);
  std::vector<std::int64_t> slots = {0};
  launch("kv_cache_write", {rows.data(), rows.data(), cache.data(), cache.data(), slots.data()},
         {KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_BF16, KWIKI_TWIN_BF16, KWIKI_TWIN_I64}, {1, 2, 8, 1, 4, 4, 0}, {}, false);
}

// The twin copies the rows' bytes into the addressed slots and nothing else (vLLM layout, bf16).
TEST(ServingTwins, KvCacheWriteCopiesBytesIntoTheSlotsOnly) {
  const ref::KvCacheShape s = small_cache(ref::KvCacheLayout::kVllm);
  const std::size_t row = s.kv_heads * s.head_size, cache = s.num_blocks * s.block_size * row;
  std::vector<std::uint16_t> key(s.tokens * row), value(s.tokens * row), kc(cache, 0xabcd), vc(cache, 0xabcd);
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint16_t>(i + 1), value[i] = static_cast<std::uint16_t>(0x8000 + i);
  std::vector<std::int64_t> slots = {13, -1, 2};
  launch("kv_cache_write", {key.data(), value.data(), kc.data(), vc.data(), slots.data()},
         {KWIKI_TWIN_BF16, KWIKI_TWIN_BF16, KWIKI_TWIN_BF16, KWIKI_TWIN_BF16, KWIKI_TWIN_I64},
         {static_cast<long long>(s.tokens), static_cast<long long>(s.kv_heads), static_cast<long long>(s.head_size),
          static_cast<long long>(s.num_blocks), static_cast<long long>(s.block_size), static_cast<long long>(s.x), 0},
         {});
  std::vector<std::uint16_t> want_k(cache, 0xabcd), want_v(cache, 0xabcd);
  for (const auto& m : ref::kv_cache_moves(slots, s)) want_k[m.key] = key[m.row], want_v[m.value] = value[m.row];
  EXPECT_EQ(kc, want_k);
  EXPECT_EQ(vc, want_v);
  EXPECT_EQ(kc[(((3 * 2 + 1) * 2 + 1) * 4 + 1) * 4 + 1], key[1 * 8 + 5]);  // token 0, head 1, dim 5 (page 3, offset 1)
  slots = {13, 64, 2};  // past NB x P = 16
  launch("kv_cache_write", {key.data(), value.data(), kc.data(), vc.data(), slots.data()},
         {KWIKI_TWIN_BF16, KWIKI_TWIN_BF16, KWIKI_TWIN_BF16, KWIKI_TWIN_BF16, KWIKI_TWIN_I64}, {3, 2, 8, 4, 4, 4, 0}, {}, false);
}

// Paged attention in vLLM's layout equals the flash-layout twin on the same cache contents.
TEST(ServingTwins, VllmLayoutAttentionEqualsTheFlashLayoutOne) {
  const long long B = 2, Hq = 4, Hkv = 2, D = 8, P = 4, MB = 3, X = 4, NB = 6;
  const std::size_t cache = static_cast<std::size_t>(NB * P * Hkv * D);
  auto q = ramp(static_cast<std::size_t>(B * Hq * D), 11), kv = ramp(cache, 12), vv = ramp(cache, 13);
  std::vector<std::int32_t> tables = {5, 0, 3, 1, 4, 2}, lens = {11, 5};
  std::vector<float> out_v(static_cast<std::size_t>(B * Hq * D)), out_f(out_v.size()), po(out_v.size()), pl(static_cast<std::size_t>(B * Hq));
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  launch("paged_decode_attention_vllm",
         {q.data(), kv.data(), vv.data(), tables.data(), lens.data(), out_v.data(), po.data(), pl.data()},
         {KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_I32, KWIKI_TWIN_I32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32},
         {B, Hq, Hkv, D, P, MB, 1, X, NB}, {scale});
  auto kf = ref::vllm_cache_to_flash(kv, NB, Hkv, D, P, X, true), vf = ref::vllm_cache_to_flash(vv, NB, Hkv, D, P, X, false);
  launch("paged_decode_attention", {q.data(), kf.data(), vf.data(), tables.data(), lens.data(), out_f.data(), po.data(), pl.data()},
         {KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_I32, KWIKI_TWIN_I32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32},
         {B, Hq, Hkv, D, P, MB, 1}, {scale});
  EXPECT_EQ(out_v, out_f);
  // A layout that is not the flash one: the two caches differ, so this check can fail.
  EXPECT_NE(kf, kv);
}

// MLA decode by its definition: one sequence, two heads, every token of one page.
TEST(ServingTwins, MlaDecodeIsSoftmaxOverLatentRowsWithTheirFirstDimsAsValue) {
  const long long B = 1, H = 2, Dqk = 6, Dv = 4, P = 4, MB = 2, NB = 2;
  auto q = ramp(static_cast<std::size_t>(B * H * Dqk), 21), cache = ramp(static_cast<std::size_t>(NB * P * Dqk), 22);
  std::vector<std::int32_t> tables = {1, 0}, lens = {6};
  std::vector<float> out(static_cast<std::size_t>(B * H * Dv)), po(out.size()), pl(2);
  const double scale = 0.3;
  launch("mla_decode", {q.data(), cache.data(), tables.data(), lens.data(), out.data(), po.data(), pl.data()},
         {KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_I32, KWIKI_TWIN_I32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32}, {B, H, Dqk, Dv, P, MB, 1, NB},
         {scale});
  for (int h = 0; h < H; ++h) {
    std::vector<double> w(6);
    double m = -kInf, sum = 0;
    for (int t = 0; t < 6; ++t) {
      const float* row = cache.data() + ((t < 4 ? 1 : 0) * P + t % 4) * Dqk;  // tokens 0-3 in page 1, 4-5 in page 0
      double dot = 0;
      for (int d = 0; d < Dqk; ++d) dot += static_cast<double>(q[static_cast<std::size_t>(h * Dqk + d)]) * row[d];
      w[static_cast<std::size_t>(t)] = dot * scale;
      m = std::max(m, w[static_cast<std::size_t>(t)]);
    }
    for (auto& x : w) sum += (x = std::exp(x - m));
    for (int d = 0; d < Dv; ++d) {
      double o = 0;
      for (int t = 0; t < 6; ++t) o += w[static_cast<std::size_t>(t)] / sum * cache[static_cast<std::size_t>(((t < 4 ? 1 : 0) * P + t % 4) * Dqk + d)];
      EXPECT_NEAR(out[static_cast<std::size_t>(h * Dv + d)], o, 1e-6) << "head " << h << " dim " << d;
    }
  }
  tables = {1, 7};  // page 7 is past the cache: refused, not read
  launch("mla_decode", {q.data(), cache.data(), tables.data(), lens.data(), out.data(), po.data(), pl.data()},
         {KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_I32, KWIKI_TWIN_I32, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_F32}, {B, H, Dqk, Dv, P, MB, 1, NB},
         {scale}, false);
}

// ---------------------------------------------------------------------------------------------
// The family table
// ---------------------------------------------------------------------------------------------

TEST(ServingFamilies, AreRowsBeforeTheGeneratorWithWorkCounters) {
  using kwiki::detail::kFamilies;
  using kwiki::detail::kFamilyCount;
  ASSERT_GT(kFamilyCount, 4u);
  EXPECT_STREQ(kFamilies[kFamilyCount - 1].name, "generated");
  for (const char* name : {"kv_cache_write", "topk_filter", "paged_decode_attention_vllm", "mla_decode"}) {
    const kwiki::detail::FamilyRow* row = kwiki::detail::find_family(name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_NE(row->work, nullptr) << name;
    EXPECT_NE(std::string(row->abi), "") << name;
  }
  EXPECT_EQ(kwiki::detail::find_family("reshape_and_cache"), kwiki::detail::find_family("kv_cache_write"));
}

TEST(ServingFamilies, CacheWriteBytesAreTheRowsNotTheWholeCache) {
  kwiki::ShapeCase shape;
  shape.input_kwargs = {{"num_tokens", 256}, {"num_kv_heads", 8}, {"head_size", 128}};
  shape.dims = {{"num_tokens", 256}, {"num_kv_heads", 8}, {"head_size", 128}};
  kwiki::TensorSpec cache{"key_cache", {4096, 8, 16, 16, 8}, "bf16", true, ""};
  shape.inputs = {cache};
  const auto w = kwiki::count_work("kv_cache_write", shape, "bf16");
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->bytes_written, 2.0 * 256 * 8 * 128 * 2);  // key and value rows, not 2 x 128 MiB of cache
  EXPECT_DOUBLE_EQ(w->bytes_read, 2.0 * 256 * 8 * 128 * 2 + 256 * 8);
}

}  // namespace
