// fused_moe (issue 20, family 3): its fp64 CPU reference against hand-computed cases (the roundings of
// the 16-bit intermediates, masked ids, the slot order), its twin through the C entry point kwiki plan
// loads, and its row in the family table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "family.hpp"
#include "kwiki/planner.hpp"
#include "kwiki_twin.h"

namespace {

namespace ref = kwiki::reference;

double silu(double g) { return g / (1.0 + std::exp(-g)); }

ref::FusedMoeShape shape_of(std::size_t t, std::size_t h, std::size_t i, std::size_t e, std::size_t k) {
  ref::FusedMoeShape s;
  s.tokens = t;
  s.hidden = h;
  s.intermediate = i;
  s.experts = e;
  s.topk = k;
  return s;
}

// One token, H = 2, I = 1, two experts, both slots used: every product written out by hand.
TEST(FusedMoe, IsTheWeightedSumOfTheRoutedExpertsMlps) {
  const std::vector<float> x = {1.0f, 2.0f};
  // w13 [E=2, 2I=2, H=2]: expert 0 gate (0.5, 0.25), up (1, -1); expert 1 gate (-1, 0.5), up (0.5, 0.5)
  const std::vector<float> w13 = {0.5f, 0.25f, 1.0f, -1.0f, -1.0f, 0.5f, 0.5f, 0.5f};
  // w2 [E=2, H=2, I=1]
  const std::vector<float> w2 = {2.0f, -3.0f, 0.5f, 4.0f};
  const std::vector<float> weights = {0.75f, 0.25f};
  const std::vector<std::int32_t> ids = {1, 0};
  const auto out = ref::fused_moe(x, w13, w2, weights, ids, shape_of(1, 2, 1, 2, 2), ref::StoreType::kFloat32);
  const double act0 = static_cast<float>(silu(1.0)) * -1.0;  // expert 0: gate 1, up -1 (silu rounded to fp32)
  const double act1 = static_cast<float>(silu(0.0)) * 1.5;   // expert 1: gate 0, up 1.5
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0], 0.75 * 0.5 * act1 + 0.25 * 2.0 * act0, 1e-7);
  EXPECT_NEAR(out[1], 0.75 * 4.0 * act1 + 0.25 * -3.0 * act0, 1e-7);
}

// The bf16 intermediates round where the references' tensors do: gate = 1 + 2^-10 is 1 in bf16.
TEST(FusedMoe, RoundsGateUpAndActivationToTheStoredType) {
  const std::vector<float> x = {1.0f};
  const std::vector<float> w13 = {1.0f + 0x1p-10f, 3.0f};  // gate, up of the single expert
  const std::vector<float> w2 = {1.0f};
  const auto bf = ref::fused_moe(x, w13, w2, {1.0f}, {0}, shape_of(1, 1, 1, 1, 1), ref::StoreType::kBFloat16);
  const double silu1 = ref::round_to_bf16(static_cast<float>(silu(1.0)));
  EXPECT_EQ(bf[0], static_cast<double>(ref::round_to_bf16(static_cast<float>(silu1 * 3.0))));
  const auto f32 = ref::fused_moe(x, w13, w2, {1.0f}, {0}, shape_of(1, 1, 1, 1, 1), ref::StoreType::kFloat32);
  EXPECT_NE(f32[0], bf[0]);
}

TEST(FusedMoe, IdsOutsideTheExpertsAddNothing) {
  const std::vector<float> x = {1.0f, -1.0f, 0.5f, 2.0f};  // two tokens, H = 2
  std::vector<float> w13(3 * 2 * 2 * 2), w2(3 * 2 * 2);
  for (std::size_t i = 0; i < w13.size(); ++i) w13[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = 0.2f * static_cast<float>(i % 5) - 0.4f;
  const auto s = shape_of(2, 2, 2, 3, 2);
  const auto kept = ref::fused_moe(x, w13, w2, {0.6f, 0.4f, 0.5f, 0.5f}, {2, 0, 1, 1}, s, ref::StoreType::kFloat32);
  const auto masked = ref::fused_moe(x, w13, w2, {0.6f, 0.4f, 0.5f, 0.5f}, {2, 3, -1, 7}, s, ref::StoreType::kFloat32);
  const auto only = ref::fused_moe(x, w13, w2, {0.6f, 0.0f, 0.0f, 0.0f}, {2, 0, 1, 1}, s, ref::StoreType::kFloat32);
  EXPECT_EQ(masked[0], only[0]);  // token 0 keeps its valid slot
  EXPECT_EQ(masked[1], only[1]);
  EXPECT_EQ(masked[2], 0.0);      // token 1: no valid slot, zeros
  EXPECT_EQ(masked[3], 0.0);
  EXPECT_NE(kept[2], 0.0);
}

TEST(FusedMoe, RefusesSizesThatDisagree) {
  EXPECT_THROW(ref::fused_moe({1, 2}, {1, 2, 3}, {1, 2}, {1}, {0}, shape_of(1, 2, 1, 1, 1), ref::StoreType::kFloat32), std::invalid_argument);
  EXPECT_THROW(ref::fused_moe({1}, {1, 2}, {1}, {1, 1}, {0}, shape_of(1, 1, 1, 1, 1), ref::StoreType::kFloat32), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// The twin through kwiki_twin_launch (the launcher's twelve tensors)
// ---------------------------------------------------------------------------------------------

int launch_twin(std::vector<void*> tensors, std::vector<int> dtypes, std::vector<long long> dims, std::string* why) {
  char error[512] = {0};
  const int rc = kwiki_twin_launch("fused_moe", tensors.data(), dtypes.data(), static_cast<int>(tensors.size()), dims.data(),
                                   static_cast<int>(dims.size()), nullptr, 0, error, sizeof(error));
  *why = error;
  return rc;
}

TEST(FusedMoeTwin, ComputesTheReferenceIntoOutAndLeavesTheScratch) {
  const long long T = 3, H = 4, I = 2, E = 3, K = 2;
  std::vector<float> x(T * H), w13(E * 2 * I * H), w2(E * H * I), weights = {0.7f, 0.3f, 0.5f, 0.5f, 1.0f, 0.0f};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
  for (std::size_t i = 0; i < w13.size(); ++i) w13[i] = 0.125f * static_cast<float>(i % 9) - 0.5f;
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = 0.0625f * static_cast<float>(i % 11) - 0.25f;
  std::vector<std::int32_t> ids = {2, 0, 1, 2, 0, -1};
  std::vector<float> out(T * H, NAN), act(T * K * I, -5.f), slot(T * K * H, -5.f);
  std::vector<std::int32_t> counts(E, -5), offsets(E + 1, -5), sorted(T * K + E * 15, -5), blocks(8, -5);
  const int f = KWIKI_TWIN_F32, i32 = KWIKI_TWIN_I32;
  std::string why;
  ASSERT_EQ(launch_twin({x.data(), w13.data(), w2.data(), weights.data(), ids.data(), out.data(), counts.data(), offsets.data(), sorted.data(),
                         blocks.data(), act.data(), slot.data()},
                        {f, f, f, f, i32, f, i32, i32, i32, i32, f, f}, {T, H, I, E, K, 16}, &why),
            0)
      << why;
  const auto want = ref::fused_moe(x, w13, w2, weights, ids, shape_of(T, H, I, E, K), ref::StoreType::kFloat32);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(want[i])) << i;
  EXPECT_EQ(act[0], -5.f);  // the scratch is the kernel's
  EXPECT_EQ(sorted[0], -5);
  // Eleven tensors, or a zero size, are refused with a reason.
  EXPECT_NE(launch_twin({x.data(), w13.data(), w2.data(), weights.data(), ids.data(), out.data(), counts.data(), offsets.data(), sorted.data(),
                         blocks.data(), act.data()},
                        {f, f, f, f, i32, f, i32, i32, i32, i32, f}, {T, H, I, E, K, 16}, &why),
            0);
  EXPECT_NE(why.find("expected 12 tensors"), std::string::npos) << why;
  EXPECT_NE(launch_twin({x.data(), w13.data(), w2.data(), weights.data(), ids.data(), out.data(), counts.data(), offsets.data(), sorted.data(),
                         blocks.data(), act.data(), slot.data()},
                        {f, f, f, f, i32, f, i32, i32, i32, i32, f, f}, {T, H, 0, E, K, 16}, &why),
            0);
}

// ---------------------------------------------------------------------------------------------
// The family table
// ---------------------------------------------------------------------------------------------

TEST(FusedMoeFamily, IsARowBeforeTheGeneratorWithItsAliases) {
  const kwiki::detail::FamilyRow* row = kwiki::detail::find_family("fused_moe");
  ASSERT_NE(row, nullptr);
  EXPECT_NE(row->work, nullptr);
  for (const char* alias : {"fused_experts", "fused_moe_forward", "moe_forward", "experts"})
    EXPECT_EQ(kwiki::detail::find_family(alias), row) << alias;
  EXPECT_STREQ(kwiki::detail::kFamilies[kwiki::detail::kFamilyCount - 1].name, "generated");
  EXPECT_NE(std::string(row->abi).find("w13[E,2I,H]"), std::string::npos);
}

TEST(FusedMoeFamily, CountsTheGroupedGemmsAndTheRoutedExpertsWeights) {
  kwiki::ShapeCase shape;
  shape.dims = {{"num_tokens", 1}, {"hidden_size", 4096}, {"intermediate_size", 1792}, {"num_experts", 8}, {"topk", 2}};
  const auto w = kwiki::count_work("fused_moe", shape, "bf16");
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->matrix_flops, 6.0 * 2 * 4096 * 1792);
  // One token touches exactly its 2 experts: their weights dominate the bytes.
  EXPECT_NEAR(w->bytes_read, 4096 * 2.0 + 2 * 3.0 * 1792 * 4096 * 2 + 2 * 8.0, 1e-6);
  EXPECT_DOUBLE_EQ(w->bytes_written, 4096 * 2.0);
  // Many tokens touch every expert once.
  shape.dims["num_tokens"] = 4096;
  const auto many = kwiki::count_work("fused_moe", shape, "bf16");
  ASSERT_TRUE(many.has_value());
  EXPECT_NEAR(many->bytes_read - 4096 * 4096 * 2.0 - 4096 * 2 * 8.0, 8 * 3.0 * 1792 * 4096 * 2, 1.0);
}

}  // namespace
