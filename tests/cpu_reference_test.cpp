// Tests of the fp64 CPU references of the V0 kernel patterns (planner/twin) against
// hand-computed cases, the exact fp8 E4M3 roundings, and the emulated wave reductions.
#include "cpu_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace kwiki::reference {
namespace {

constexpr bool kFn = false;   // e4m3fn (NVIDIA)
constexpr bool kFnuz = true;  // e4m3fnuz (AMD CDNA3)

// ---------------------------------------------------------------------------------------------
// Norms
// ---------------------------------------------------------------------------------------------

TEST(RmsNorm, ThreeFourDividesByRootMeanSquare) {
  // mean(3^2, 4^2) = 12.5
  const auto out = rms_norm({3.0f, 4.0f}, {1.0f, 1.0f}, 1, 2, 0.0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_DOUBLE_EQ(out[0], 3.0 / std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(out[1], 4.0 / std::sqrt(12.5));
}

TEST(RmsNorm, AppliesWeightAndEpsPerRow) {
  // Row 0: [1, 1, 1, 1] -> rms 1; row 1: [2, 2, 2, 2] -> rms 2. eps = 0.5 enters under the root.
  const std::vector<float> x = {1, 1, 1, 1, 2, 2, 2, 2};
  const std::vector<float> w = {1, 2, 3, 4};
  const auto out = rms_norm(x, w, 2, 4, 0.5);
  for (int j = 0; j < 4; ++j) {
    EXPECT_DOUBLE_EQ(out[j], 1.0 / std::sqrt(1.5) * w[j]);
    EXPECT_DOUBLE_EQ(out[4 + j], 2.0 / std::sqrt(4.5) * w[j]);
  }
}

TEST(RmsNorm, RejectsMismatchedSizes) {
  EXPECT_THROW(rms_norm({1.0f, 2.0f, 3.0f}, {1.0f, 1.0f}, 1, 2, 1e-6), std::invalid_argument);
  EXPECT_THROW(rms_norm({1.0f, 2.0f}, {1.0f}, 1, 2, 1e-6), std::invalid_argument);
}

TEST(FusedAddRmsNorm, ReturnsUpdatedResidualAndNormOfIt) {
  const auto r = fused_add_rms_norm({1.0f, 2.0f}, {2.0f, 2.0f}, {1.0f, 1.0f}, 1, 2, 0.0);
  ASSERT_EQ(r.residual.size(), 2u);
  EXPECT_EQ(r.residual[0], 3.0f);
  EXPECT_EQ(r.residual[1], 4.0f);
  EXPECT_DOUBLE_EQ(r.out[0], 3.0 / std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(r.out[1], 4.0 / std::sqrt(12.5));
}

TEST(FusedAddRmsNorm, NormReadsTheRoundedBf16Residual) {
  // 1 + 2^-9 is not a bf16 (8 mantissa bits): the stored residual rounds to 1 (tie to even at
  // 1 + 2^-8 would be the next), and the norm must use that stored value.
  const float tiny = std::ldexp(1.0f, -9);
  const auto r = fused_add_rms_norm({1.0f}, {tiny}, {1.0f}, 1, 1, 0.0, StoreType::kBFloat16);
  EXPECT_EQ(r.residual[0], 1.0f);
  EXPECT_DOUBLE_EQ(r.out[0], 1.0);
  const auto r32 = fused_add_rms_norm({1.0f}, {tiny}, {1.0f}, 1, 1, 0.0, StoreType::kFloat32);
  EXPECT_EQ(r32.residual[0], 1.0f + tiny);
}

TEST(LayerNorm, NormalizesToZeroMeanUnitVariance) {
  // [1, 2, 3, 4]: mean 2.5, population variance 1.25.
  const auto out = layer_norm({1, 2, 3, 4}, {1, 1, 1, 1}, {0, 0, 0, 0}, 1, 4, 0.0);
  const double s = std::sqrt(1.25);
  EXPECT_DOUBLE_EQ(out[0], -1.5 / s);
  EXPECT_DOUBLE_EQ(out[1], -0.5 / s);
  EXPECT_DOUBLE_EQ(out[2], 0.5 / s);
  EXPECT_DOUBLE_EQ(out[3], 1.5 / s);
  const auto affine = layer_norm({1, 2, 3, 4}, {2, 2, 2, 2}, {1, 1, 1, 1}, 1, 4, 0.0);
  EXPECT_DOUBLE_EQ(affine[3], 2 * 1.5 / s + 1);
}

TEST(LayerNorm, ConstantRowGivesBias) {
  const auto out = layer_norm({7, 7, 7}, {3, 3, 3}, {0.5f, -1, 2}, 1, 3, 1e-5);
  EXPECT_DOUBLE_EQ(out[0], 0.5);
  EXPECT_DOUBLE_EQ(out[1], -1.0);
  EXPECT_DOUBLE_EQ(out[2], 2.0);
}

// ---------------------------------------------------------------------------------------------
// Softmax and gated activations
// ---------------------------------------------------------------------------------------------

TEST(Softmax, EqualValuesAreUniform) {
  const auto out = softmax({5, 5, 5, -3, -3, -3}, 2, 3);
  for (int j = 0; j < 3; ++j) EXPECT_DOUBLE_EQ(out[j], 1.0 / 3.0);
  for (int j = 3; j < 6; ++j) EXPECT_DOUBLE_EQ(out[j], 1.0 / 3.0);
}

TEST(Softmax, LargeLogitsAreStableAndSumToOne) {
  const auto out = softmax({1000.0f, 1001.0f}, 1, 2);
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + e), 1e-15);
  EXPECT_NEAR(out[1], e / (1.0 + e), 1e-15);
  EXPECT_FALSE(std::isnan(out[0]));
  EXPECT_NEAR(out[0] + out[1], 1.0, 1e-15);
}

TEST(RowReduce, SumMeanAndMaxPerRow) {
  const std::vector<float> x = {1, 2, 3, 4, -1, -5, 0.5f, -2};
  EXPECT_EQ(row_reduce(x, 2, 4, RowReduceOp::kSum), (std::vector<double>{10, -7.5}));
  EXPECT_EQ(row_reduce(x, 2, 4, RowReduceOp::kMean), (std::vector<double>{2.5, -1.875}));
  EXPECT_EQ(row_reduce(x, 2, 4, RowReduceOp::kMax), (std::vector<double>{4, 0.5}));
  EXPECT_EQ(row_reduce({-3, -7}, 1, 2, RowReduceOp::kMax), (std::vector<double>{-3}));  // not clamped at 0
}

TEST(RowReduce, NanInARowMakesItsResultNanWherever) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN first, in the middle and last: a plain fmax would drop it at least once.
  const std::vector<float> x = {nan, 1, 2, 1, nan, 2, 1, 2, nan, 1, 2, 3};
  for (auto op : {RowReduceOp::kSum, RowReduceOp::kMean, RowReduceOp::kMax}) {
    const auto out = row_reduce(x, 4, 3, op);
    for (int t = 0; t < 3; ++t) EXPECT_TRUE(std::isnan(out[t])) << "op " << static_cast<int>(op) << " row " << t;
    EXPECT_FALSE(std::isnan(out[3]));
  }
  EXPECT_EQ(row_reduce({-std::numeric_limits<float>::infinity(), 1}, 1, 2, RowReduceOp::kMax)[0], 1.0);
}

TEST(RowReduce, RaggedRowsMatchTheKernelsFp32BlockReduction) {
  // H = 1000 (not a multiple of the 8-wide bf16 vector: the scalar path), 64 threads of 32-lane
  // warps: thread r sums elements r, r + 64, ... in fp32, then the two-level block reduction;
  // the bf16 store of that is within half a bf16 ulp (plus fp32 error) of the fp64 sum.
  const std::size_t H = 1000;
  std::vector<float> x(H);
  for (std::size_t j = 0; j < H; ++j) x[j] = std::sin(0.37f * static_cast<float>(j)) * 3.0f;
  const int threads = 64;
  std::vector<float> partial(threads, 0.0f);
  for (std::size_t j = 0; j < H; ++j) partial[j % threads] += x[j];
  const float kernel_sum = round_to_bf16(block_reduce_emulated(partial, 32));
  const double sum = row_reduce(x, 1, H, RowReduceOp::kSum)[0];
  EXPECT_NEAR(kernel_sum, sum, std::abs(sum) * 0x1p-8 + 1e-3);
  const double mean = row_reduce(x, 1, H, RowReduceOp::kMean)[0];
  EXPECT_NEAR(round_to_bf16(block_reduce_emulated(partial, 32) / static_cast<float>(H)), mean, std::abs(mean) * 0x1p-8 + 1e-6);
}

TEST(RowReduce, EmptyRowsAsTorch) {
  EXPECT_EQ(row_reduce({}, 2, 0, RowReduceOp::kSum), (std::vector<double>{0, 0}));
  EXPECT_TRUE(std::isnan(row_reduce({}, 1, 0, RowReduceOp::kMean)[0]));
  EXPECT_THROW(row_reduce({}, 1, 0, RowReduceOp::kMax), std::invalid_argument);
  EXPECT_THROW(row_reduce({1, 2, 3}, 2, 2, RowReduceOp::kSum), std::invalid_argument);
}

TEST(GatedActivations, SiluAndGeluKnownValues) {
  // x = [gate | up] = [0, 1 | 3, 2]
  const std::vector<float> x = {0, 1, 3, 2};
  const auto s = silu_and_mul(x, 1, 2);
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_DOUBLE_EQ(s[1], 2.0 / (1.0 + std::exp(-1.0)));
  const auto g = gelu_and_mul(x, 1, 2);
  EXPECT_DOUBLE_EQ(g[0], 0.0);
  EXPECT_NEAR(g[1], 2.0 * 0.8411919906082768, 1e-12);  // gelu_tanh(1) = 0.84119199...
  EXPECT_THROW(silu_and_mul({1, 2, 3}, 1, 2), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Storage roundings
// ---------------------------------------------------------------------------------------------

TEST(StoreRounding, Bf16AndFp16TiesToEven) {
  // bf16 spacing at 1 is 2^-7: 1 + 2^-8 is a tie -> 1 (even); 1 + 3 * 2^-8 -> 1 + 2^-6.
  EXPECT_EQ(round_to_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  // fp16 spacing at 1 is 2^-10.
  EXPECT_EQ(round_to_fp16(1.0f + std::ldexp(1.0f, -11)), 1.0f);
  EXPECT_EQ(round_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(round_to_fp16(65504.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to_fp16(65520.0f)));
  EXPECT_EQ(round_to_fp16(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(round_to(StoreType::kFloat32, 0.1f), 0.1f);
}

// ---------------------------------------------------------------------------------------------
// FP8 E4M3
// ---------------------------------------------------------------------------------------------

TEST(Fp8Round, E4m3fnSaturatesAt448) {
  EXPECT_EQ(fp8_max_value(kFn), 448.0f);
  EXPECT_EQ(fp8_round(448.0f, kFn), 448.0f);
  EXPECT_EQ(fp8_round(449.0f, kFn), 448.0f);
  EXPECT_EQ(fp8_round(464.0f, kFn), 448.0f);  // would overflow to NaN without saturation
  EXPECT_EQ(fp8_round(1e6f, kFn), 448.0f);
  EXPECT_EQ(fp8_round(-1e6f, kFn), -448.0f);
  EXPECT_EQ(fp8_round(std::numeric_limits<float>::infinity(), kFn), 448.0f);
  EXPECT_EQ(fp8_encode(448.0f, kFn), 0x7e);
  EXPECT_EQ(fp8_encode(-448.0f, kFn), 0xfe);
  EXPECT_EQ(fp8_round(420.0f, kFn), 416.0f);  // spacing 32 in [256, 512)
}

TEST(Fp8Round, E4m3fnuzSaturatesAt240) {
  EXPECT_EQ(fp8_max_value(kFnuz), 240.0f);
  EXPECT_EQ(fp8_round(240.0f, kFnuz), 240.0f);
  EXPECT_EQ(fp8_round(250.0f, kFnuz), 240.0f);
  EXPECT_EQ(fp8_round(448.0f, kFnuz), 240.0f);
  EXPECT_EQ(fp8_round(-1000.0f, kFnuz), -240.0f);
  EXPECT_EQ(fp8_encode(240.0f, kFnuz), 0x7f);
  EXPECT_EQ(fp8_encode(-240.0f, kFnuz), 0xff);
  EXPECT_EQ(fp8_round(232.0f, kFnuz), 224.0f);  // tie between 224 (even) and 240
}

TEST(Fp8Round, RoundsToNearestEven) {
  // Spacing 2 in [16, 32): 17 ties to 16 (mantissa 000), 19 ties to 20 (mantissa 010).
  EXPECT_EQ(fp8_round(17.0f, kFn), 16.0f);
  EXPECT_EQ(fp8_round(19.0f, kFn), 20.0f);
  EXPECT_EQ(fp8_round(17.01f, kFn), 18.0f);
  EXPECT_EQ(fp8_round(-19.0f, kFnuz), -20.0f);
  EXPECT_EQ(fp8_round(1.0625f, kFn), 1.0f);  // tie between 1 and 1.125
  EXPECT_EQ(fp8_round(1.1875f, kFn), 1.25f); // tie between 1.125 and 1.25
}

TEST(Fp8Round, TinyValuesAndSubnormals) {
  const float sub_fn = std::ldexp(1.0f, -9);     // smallest e4m3fn subnormal
  const float sub_fnuz = std::ldexp(1.0f, -10);  // smallest e4m3fnuz subnormal
  EXPECT_EQ(fp8_round(sub_fn, kFn), sub_fn);
  EXPECT_EQ(fp8_encode(sub_fn, kFn), 0x01);
  EXPECT_EQ(fp8_round(sub_fnuz, kFnuz), sub_fnuz);
  EXPECT_EQ(fp8_encode(sub_fnuz, kFnuz), 0x01);
  EXPECT_EQ(fp8_round(sub_fnuz, kFn), 0.0f);                 // half the fn subnormal: tie to 0
  EXPECT_EQ(fp8_round(0.75f * sub_fn, kFn), sub_fn);         // above the midpoint
  EXPECT_EQ(fp8_round(1.5f * sub_fn, kFn), 2 * sub_fn);      // tie between 1 and 2 subnormals -> 2
  EXPECT_EQ(fp8_round(std::ldexp(1.0f, -6), kFn), std::ldexp(1.0f, -6));  // smallest fn normal
  EXPECT_EQ(fp8_encode(std::ldexp(1.0f, -6), kFn), 0x08);
  EXPECT_EQ(fp8_encode(std::ldexp(1.0f, -7), kFnuz), 0x08);  // smallest fnuz normal
  // Negative values that round to zero: -0 in e4m3fn, +0 in e4m3fnuz (it has no -0).
  EXPECT_TRUE(std::signbit(fp8_round(-1e-9f, kFn)));
  EXPECT_EQ(fp8_encode(-1e-9f, kFn), 0x80);
  EXPECT_FALSE(std::signbit(fp8_round(-1e-9f, kFnuz)));
  EXPECT_EQ(fp8_encode(-1e-9f, kFnuz), 0x00);
  EXPECT_EQ(fp8_encode(-0.0f, kFnuz), 0x00);
}

TEST(Fp8Round, NanPolicy) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(fp8_round(nan, kFn)));
  EXPECT_TRUE(std::isnan(fp8_round(nan, kFnuz)));
  EXPECT_EQ(fp8_encode(nan, kFn), 0x7f);
  EXPECT_EQ(fp8_encode(nan, kFnuz), 0x80);
  EXPECT_TRUE(std::isnan(fp8_decode(0x7f, kFn)));
  EXPECT_TRUE(std::isnan(fp8_decode(0xff, kFn)));
  EXPECT_TRUE(std::isnan(fp8_decode(0x80, kFnuz)));
  EXPECT_EQ(fp8_decode(0x80, kFn), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_decode(0x80, kFn)));
  EXPECT_EQ(fp8_decode(0x7f, kFnuz), 240.0f);
  EXPECT_EQ(fp8_decode(0xff, kFnuz), -240.0f);
}

TEST(Fp8Round, EveryByteRoundTrips) {
  for (bool fnuz : {kFn, kFnuz}) {
    for (int b = 0; b < 256; ++b) {
      const auto byte = static_cast<std::uint8_t>(b);
      const float v = fp8_decode(byte, fnuz);
      if (std::isnan(v)) continue;
      EXPECT_EQ(fp8_round(v, fnuz), v) << "byte " << b << " fnuz " << fnuz;
      EXPECT_EQ(fp8_encode(v, fnuz), byte) << "byte " << b << " fnuz " << fnuz;
    }
  }
}

TEST(Fp8Quant, ScalesAndDequantizes) {
  // Row 0: amax 4 -> scale 4/448, x/scale = [112, -224, 448] all on the grid.
  // Row 1: zeros -> scale 1e-12/448, q = 0.
  const auto r = fp8_quant({1, -2, 4, 0, 0, 0}, 2, 3, kFn);
  ASSERT_EQ(r.scales.size(), 2u);
  EXPECT_EQ(r.scales[0], static_cast<float>(4.0 / 448.0));
  EXPECT_EQ(r.scales[1], static_cast<float>(static_cast<double>(1e-12f) / 448.0));
  EXPECT_EQ(r.q[2], 448.0f);
  EXPECT_NEAR(r.dequant[0], 1.0, 1e-6);
  EXPECT_NEAR(r.dequant[1], -2.0, 1e-6);
  EXPECT_NEAR(r.dequant[2], 4.0, 1e-6);
  for (int j = 3; j < 6; ++j) EXPECT_EQ(r.q[j], 0.0f);
  const auto z = fp8_quant({1, -2, 4}, 1, 3, kFnuz);
  EXPECT_EQ(z.q[2], 240.0f);
  EXPECT_EQ(z.scales[0], static_cast<float>(4.0 / 240.0));
}

TEST(Fp8Quant, ANanPoisonsItsRowOnlyAsInTorch) {
  // torch: amax of a row with a NaN is NaN, so is the scale, so is every quotient; the kernels
  // take amax as an integer max on the bits of |x|, which keeps the NaN too.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto r = fp8_quant({1, nan, 4, 1, -2, 4}, 2, 3, kFn);
  EXPECT_TRUE(std::isnan(r.scales[0]));
  for (int j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(r.q[j])) << j;
  EXPECT_EQ(r.scales[1], static_cast<float>(4.0 / 448.0));
  EXPECT_EQ(r.q[5], 448.0f);
}

// ---------------------------------------------------------------------------------------------
// MoE gating
// ---------------------------------------------------------------------------------------------

TEST(MoeGating, TiesGoToTheLowerExpertId) {
  const auto r = moe_gating({1, 1, 1, 1}, 1, 4, 2, false);
  ASSERT_EQ(r.ids.size(), 2u);
  EXPECT_EQ(r.ids[0], 0);
  EXPECT_EQ(r.ids[1], 1);
  EXPECT_DOUBLE_EQ(r.weights[0], 0.25);
  EXPECT_DOUBLE_EQ(r.weights[1], 0.25);
  const auto rn = moe_gating({1, 1, 1, 1}, 1, 4, 2, true);
  EXPECT_DOUBLE_EQ(rn.weights[0], 0.5);
  EXPECT_DOUBLE_EQ(rn.weights[1], 0.5);
  // A tie below a strict winner: [0, 2, 0, 2, 1] -> 1, 3 (tie, lower first), then 4.
  const auto t = moe_gating({0, 2, 0, 2, 1}, 1, 5, 3, false);
  EXPECT_EQ(t.ids[0], 1);
  EXPECT_EQ(t.ids[1], 3);
  EXPECT_EQ(t.ids[2], 4);
}

TEST(MoeGating, DescendingSoftmaxWeightsPerToken) {
  // Token 0 logits [0, ln 2, ln 5]: probs [1/8, 2/8, 5/8]. Token 1 reversed.
  const float l2 = std::log(2.0f), l5 = std::log(5.0f);
  const auto r = moe_gating({0, l2, l5, l5, l2, 0}, 2, 3, 2, false);
  EXPECT_EQ(r.ids[0], 2);
  EXPECT_EQ(r.ids[1], 1);
  EXPECT_NEAR(r.weights[0], 5.0 / 8.0, 1e-7);
  EXPECT_NEAR(r.weights[1], 2.0 / 8.0, 1e-7);
  EXPECT_EQ(r.ids[2], 0);
  EXPECT_EQ(r.ids[3], 1);
  const auto rn = moe_gating({0, l2, l5}, 1, 3, 2, true);
  EXPECT_NEAR(rn.weights[0], 5.0 / 7.0, 1e-7);
  EXPECT_NEAR(rn.weights[1], 2.0 / 7.0, 1e-7);
  EXPECT_THROW(moe_gating({0, 1}, 1, 2, 3, false), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// GEMM and paged decode attention
// ---------------------------------------------------------------------------------------------

TEST(Gemm, IdentityWeightsReturnTheInputPlusBias) {
  // x [2, 3], w = I3 [3, 3]: out = x w^T = x.
  const std::vector<float> x = {1, 2, 3, -4, 5, -6};
  const std::vector<float> eye = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const auto out = gemm(x, eye, {}, 2, 3, 3);
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(out[i], x[i]);
  const auto biased = gemm(x, eye, {10, 20, 30}, 2, 3, 3);
  EXPECT_DOUBLE_EQ(biased[0], 11.0);
  EXPECT_DOUBLE_EQ(biased[5], 24.0);
}

TEST(Gemm, UsesTransposedWeights) {
  // w [N=2, K=2] = [[1, 2], [3, 4]]; x [1, 2] = [1, 1]: out = [1 + 2, 3 + 4].
  const auto out = gemm({1, 1}, {1, 2, 3, 4}, {}, 1, 2, 2);
  EXPECT_DOUBLE_EQ(out[0], 3.0);
  EXPECT_DOUBLE_EQ(out[1], 7.0);
}

TEST(PagedDecodeAttention, GqaAndBlockTables) {
  // B = 1, Hq = 2, Hkv = 1 (both query heads read KV head 0), D = 2, P = 2, MB = 2, 3 tokens.
  // Pages are stored out of order: block table [1, 0] puts tokens 0, 1 in block 1, token 2 in
  // block 0 slot 0.
  PagedAttentionShape s;
  s.batch = 1;
  s.q_heads = 2;
  s.kv_heads = 1;
  s.head_size = 2;
  s.page_size = 2;
  s.max_pages = 2;
  // [NB=2, P=2, Hkv=1, D=2]; all keys zero -> uniform weights over the 3 tokens.
  const std::vector<float> keys(8, 0.0f);
  std::vector<float> values(8, 0.0f);
  values[(1 * 2 + 0) * 2 + 0] = 3;  // token 0: block 1 slot 0 -> v = [3, 0]
  values[(1 * 2 + 1) * 2 + 1] = 6;  // token 1: block 1 slot 1 -> v = [0, 6]
  values[(0 * 2 + 0) * 2 + 0] = 9;  // token 2: block 0 slot 0 -> v = [9, 0]
  values[(0 * 2 + 1) * 2 + 0] = 1000;  // block 0 slot 1: beyond seq_len, ignored
  const auto out = paged_decode_attention({1, 2, 3, 4}, keys, values, {1, 0}, {3}, s, 1.0);
  ASSERT_EQ(out.size(), 4u);
  for (int h = 0; h < 2; ++h) {
    EXPECT_DOUBLE_EQ(out[h * 2 + 0], (3.0 + 9.0) / 3.0);
    EXPECT_DOUBLE_EQ(out[h * 2 + 1], 6.0 / 3.0);
  }
  // One token: the output is its value whatever the scores.
  const auto one = paged_decode_attention({1, 2, 3, 4}, keys, values, {1, 0}, {1}, s, 0.7);
  EXPECT_DOUBLE_EQ(one[0], 3.0);
  EXPECT_DOUBLE_EQ(one[1], 0.0);
  // Empty sequence: zeros.
  const auto none = paged_decode_attention({1, 2, 3, 4}, keys, values, {1, 0}, {0}, s, 1.0);
  for (double v : none) EXPECT_EQ(v, 0.0);
}

TEST(PagedDecodeAttention, ScoresUseScaleAndTheRightKvHead) {
  // B = 1, Hq = 2, Hkv = 2 (head h reads KV head h), D = 1, P = 1, MB = 2, 2 tokens.
  PagedAttentionShape s{1, 2, 2, 1, 1, 2};
  // keys [NB=2, P=1, Hkv=2, D=1]: token 0 keys (head0, head1) = (0, 0); token 1 = (ln 3, 0).
  const float l3 = std::log(3.0f);
  const std::vector<float> keys = {0, 0, l3, 0};
  const std::vector<float> values = {0, 0, 1, 1};  // token 1 values 1 for both heads
  const auto out = paged_decode_attention({2, 2}, keys, values, {0, 1}, {2}, s, 0.5);
  // Head 0 scores: 0 and 0.5 * 2 * ln 3 = ln 3 -> weights 1/4, 3/4 -> 0.75.
  EXPECT_NEAR(out[0], 0.75, 1e-7);
  // Head 1: equal scores -> 0.5.
  EXPECT_DOUBLE_EQ(out[1], 0.5);
}

// ---------------------------------------------------------------------------------------------
// Emulated wave reductions
// ---------------------------------------------------------------------------------------------

TEST(WaveReduce, Emulated32And64LaneButterfliesEqualThePlainSum) {
  for (int ws : {32, 64}) {
    std::vector<float> lanes(static_cast<std::size_t>(ws));
    double plain = 0.0;
    for (int i = 0; i < ws; ++i) {
      lanes[static_cast<std::size_t>(i)] = static_cast<float>((i * 37) % 101 - 50);  // integers: exact in fp32
      plain += lanes[static_cast<std::size_t>(i)];
    }
    EXPECT_EQ(wave_reduce_emulated(lanes, ws), static_cast<float>(plain)) << "warp size " << ws;
    // Every lane ends with the total (the butterfly is symmetric).
    for (float v : wave_butterfly_emulated(lanes, ws)) EXPECT_EQ(v, static_cast<float>(plain));
    // And the max variant finds the max in every lane.
    lanes[static_cast<std::size_t>(ws - 1)] = 1000.0f;
    for (float v : wave_butterfly_emulated(lanes, ws, true)) EXPECT_EQ(v, 1000.0f);
  }
}

TEST(WaveReduce, A32LaneButterflyMissesHalfOfAWave64) {
  // The bug the compat header avoids: starting the butterfly at offset 16 on 64 lanes reduces
  // each half-wave separately. Emulate it with two 32-lane butterflies.
  std::vector<float> lanes(64, 1.0f);
  const std::vector<float> low(lanes.begin(), lanes.begin() + 32);
  EXPECT_EQ(wave_reduce_emulated(low, 32), 32.0f);
  EXPECT_EQ(wave_reduce_emulated(lanes, 64), 64.0f);
  EXPECT_THROW(wave_reduce_emulated(lanes, 32), std::invalid_argument);  // lanes must fill the warp
  EXPECT_THROW(wave_reduce_emulated(std::vector<float>(48, 1.0f), 48), std::invalid_argument);
}

TEST(BlockReduce, EmulatedTwoLevelReductionEqualsThePlainSum) {
  for (int ws : {32, 64}) {
    for (int threads : {ws, 256, 1024}) {
      std::vector<float> v(static_cast<std::size_t>(threads));
      double plain = 0.0;
      for (int i = 0; i < threads; ++i) {
        v[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
        plain += v[static_cast<std::size_t>(i)];
      }
      EXPECT_EQ(block_reduce_emulated(v, ws), static_cast<float>(plain)) << "warp " << ws << " threads " << threads;
    }
  }
  EXPECT_THROW(block_reduce_emulated(std::vector<float>(100, 1.0f), 64), std::invalid_argument);
}

}  // namespace
}  // namespace kwiki::reference
