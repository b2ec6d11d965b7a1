// fused_moe_fp8 (issue 20, family 3 with fp8 block scales): its fp64 CPU reference against a case
// written out by hand (the two group quantizations, the 16-bit GEMM outputs, the block scales), its
// twin through the C entry point kwiki plan loads (fp8 bytes in, bf16 out, the launcher's refusals),
// and its row in the family table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "family.hpp"
#include "kwiki/baseline.hpp"
#include "kwiki/planner.hpp"
#include "kwiki_twin.h"

namespace {

namespace ref = kwiki::reference;

constexpr std::size_t kG = 128;  // the quantization group and weight block

ref::FusedMoeShape shape_of(std::size_t t, std::size_t h, std::size_t i, std::size_t e, std::size_t k) {
  ref::FusedMoeShape s;
  s.tokens = t;
  s.hidden = h;
  s.intermediate = i;
  s.experts = e;
  s.topk = k;
  return s;
}

// w13 [E, 2I, H] whose gate and up rows are the identity (I = H), w2 [E, H, I] the identity.
void identity_experts(std::size_t e_n, std::size_t h, std::vector<float>* w13, std::vector<float>* w2) {
  w13->assign(e_n * 2 * h * h, 0.0f);
  w2->assign(e_n * h * h, 0.0f);
  for (std::size_t e = 0; e < e_n; ++e)
    for (std::size_t n = 0; n < h; ++n) {
      (*w13)[e * 2 * h * h + n * h + n] = 1.0f;          // gate row n
      (*w13)[e * 2 * h * h + (h + n) * h + n] = 1.0f;    // up row n
      (*w2)[e * h * h + n * h + n] = 1.0f;
    }
}

// The per-token-group quantization of one 128-group as the reference writes it: scale = fp32(amax / 448),
// q = fp8(fp32(x / scale)); returns q * scale (what the next GEMM sees).
std::vector<double> quantized_group(const std::vector<float>& x) {
  double amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  const float scale = static_cast<float>(std::max(amax, 1e-10) / 448.0);
  std::vector<double> out;
  for (float v : x) out.push_back(static_cast<double>(ref::fp8_round(static_cast<float>(v / static_cast<double>(scale)), false)) * scale);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The reference
// ---------------------------------------------------------------------------------------------

// One token, H = I = 128, identity experts with unit scales: the output is the quantized hidden row
// through SiLU x up (rounded to bf16), quantized again, rounded to bf16 and weighted, element by element.
TEST(FusedMoeFp8, QuantizesTheHiddenRowAndTheIntermediatePerGroupAsTheReference) {
  std::vector<float> x(kG);
  for (std::size_t n = 0; n < kG; ++n) x[n] = ref::round_to_bf16(0.37f * std::sin(0.7f * static_cast<float>(n)) + 0.01f * static_cast<float>(n % 5));
  std::vector<float> w13, w2;
  identity_experts(1, kG, &w13, &w2);
  const std::vector<float> w13_s = {1.0f, 1.0f}, w2_s = {1.0f};  // [1, 2I/128 = 2, H/128 = 1] and [1, 1, 1]
  const auto out = ref::fused_moe_fp8(x, w13, w2, w13_s, w2_s, {0.75f}, {0}, shape_of(1, kG, kG, 1, 1), ref::StoreType::kBFloat16, false);
  const auto a = quantized_group(x);
  std::vector<float> act(kG);
  for (std::size_t n = 0; n < kG; ++n) {
    const double g = ref::round_to_bf16(static_cast<float>(a[n]));  // the GEMM's bf16 output (gate = up = the dequantized x)
    act[n] = ref::round_to_bf16(static_cast<float>(static_cast<double>(ref::round_to_bf16(static_cast<float>(g / (1.0 + std::exp(-g))))) * g));
  }
  const auto y = quantized_group(act);
  bool quantization_shows = false;
  for (std::size_t n = 0; n < kG; ++n) {
    EXPECT_EQ(out[n], 0.75 * ref::round_to_bf16(static_cast<float>(y[n]))) << n;
    quantization_shows = quantization_shows || ref::round_to_bf16(static_cast<float>(y[n])) != act[n];
  }
  EXPECT_TRUE(quantization_shows) << "the case must tell the quantized intermediate from the unquantized one";
}

// The group scale by the rule of the device the reference runs on: torch divides by the Python number fp8_max on
// the CPU, and on a GPU multiplies by its fp32 reciprocal. A group with amax 2.84375 has scale 13/2048 exactly by
// division, so 0.2412109375 / scale = 38, a tie between the codes 36 and 40 that goes to 40; the reciprocal's
// scale is one ulp larger, the quotient 37.999996, the code 36. The kernel follows the GPU (kReciprocal).
TEST(FusedMoeFp8, GroupScaleFollowsTheDeviceTheReferenceRunsOn) {
  std::vector<float> x(kG, 0.0f);
  x[0] = 2.84375f;
  x[1] = 0.2412109375f;
  const auto cpu = ref::fp8_quant(x, 1, kG, false, 1e-10f, ref::ScalarDivision::kQuotient);
  const auto gpu = ref::fp8_quant(x, 1, kG, false, 1e-10f, ref::ScalarDivision::kReciprocal);
  EXPECT_EQ(cpu.scales[0], 13.0f / 2048.0f);
  EXPECT_EQ(gpu.scales[0], 2.84375f * (1.0f / 448.0f));
  EXPECT_NE(cpu.scales[0], gpu.scales[0]);
  EXPECT_EQ(cpu.q[1], 40.0f);
  EXPECT_EQ(gpu.q[1], 36.0f);
  EXPECT_EQ(ref::fp8_quant(x, 1, kG, false, 1e-10f).scales[0], cpu.scales[0]);  // the default is the CPU's
}

// Two 128-K blocks with their own activation and weight scales: the promotion multiplies each block by its own pair.
TEST(FusedMoeFp8, ScalesEachKBlockOfEachGemmByItsOwnScales) {
  const std::size_t h = 2 * kG, i = kG;
  // Hidden: 448 in every element of block 0 (activation scale 1), 224 in block 1 (scale 0.5); both quantize exactly.
  std::vector<float> x(h, 448.0f);
  for (std::size_t k = kG; k < h; ++k) x[k] = 224.0f;
  // Gate row n: 1/256 over the whole row; up row n: 1/512 over block 0 only (both e4m3 subnormals). Weight scales per [2I/128 = 2, H/128 = 2] block.
  std::vector<float> w13(2 * i * h, 0.0f), w2(h * i, 0.0f);
  for (std::size_t n = 0; n < i; ++n)
    for (std::size_t k = 0; k < h; ++k) {
      w13[n * h + k] = 1.0f / 256;
      w13[(i + n) * h + k] = k < kG ? 1.0f / 512 : 0.0f;
    }
  const std::vector<float> w13_s = {0.5f, 0.25f, 2.0f, 8.0f};  // gate blocks (0.5, 0.25), up blocks (2, 8)
  for (std::size_t hh = 0; hh < h; ++hh) w2[hh * i + hh % i] = 1.0f;
  const std::vector<float> w2_s = {1.0f, 3.0f};  // [H/128 = 2, I/128 = 1]: output columns 128.. scaled by 3
  const auto out = ref::fused_moe_fp8(x, w13, w2, w13_s, w2_s, {1.0f}, {0}, shape_of(1, h, i, 1, 1), ref::StoreType::kBFloat16, false);
  // gate = 128 * 448 / 256 * (1 * 0.5) + 128 * 448 / 256 * (0.5 * 0.25) = 112 + 28 = 140 (q = 448, a_s = 1 and 0.5);
  // up = 128 * 448 / 512 * (1 * 2) = 224. Both are bf16 values, and so is their product 31360.
  const double gate = 140.0, up = 224.0;
  const double act = ref::round_to_bf16(static_cast<float>(static_cast<double>(ref::round_to_bf16(static_cast<float>(gate / (1 + std::exp(-gate))))) * up));
  // Every act element is equal: the group's amax is itself, scale act / 448, q = 448: y = act exactly.
  EXPECT_EQ(out[0], ref::round_to_bf16(static_cast<float>(act)));
  EXPECT_EQ(out[kG], ref::round_to_bf16(static_cast<float>(3.0 * act)));
}

TEST(FusedMoeFp8, IdsOutsideTheExpertsAddNothing) {
  std::vector<float> x(2 * kG);
  for (std::size_t n = 0; n < x.size(); ++n) x[n] = ref::round_to_bf16(0.5f * std::cos(0.3f * static_cast<float>(n)));
  std::vector<float> w13, w2;
  identity_experts(3, kG, &w13, &w2);
  const std::vector<float> w13_s(3 * 2, 1.0f), w2_s(3, 1.0f);
  const auto s = shape_of(2, kG, kG, 3, 2);
  const auto masked = ref::fused_moe_fp8(x, w13, w2, w13_s, w2_s, {0.6f, 0.4f, 0.5f, 0.5f}, {2, 3, -1, 7}, s, ref::StoreType::kBFloat16, false);
  const auto only = ref::fused_moe_fp8(x, w13, w2, w13_s, w2_s, {0.6f, 0.0f, 0.0f, 0.0f}, {2, 0, 1, 1}, s, ref::StoreType::kBFloat16, false);
  for (std::size_t n = 0; n < kG; ++n) {
    EXPECT_EQ(masked[n], only[n]) << n;  // token 0 keeps its valid slot
    EXPECT_EQ(masked[kG + n], 0.0) << n;  // token 1: no valid slot, zeros
  }
  EXPECT_NE(only[1], 0.0);
}

TEST(FusedMoeFp8, RefusesSizesThatDisagreeOrAreNotWholeGroups) {
  std::vector<float> w13, w2;
  identity_experts(1, kG, &w13, &w2);
  const std::vector<float> x(kG, 1.0f);
  EXPECT_THROW(ref::fused_moe_fp8(x, w13, w2, {1.0f}, {1.0f}, {1.0f}, {0}, shape_of(1, kG, kG, 1, 1), ref::StoreType::kBFloat16, false),
               std::invalid_argument);  // w13_scale needs 2 blocks
  EXPECT_THROW(ref::fused_moe_fp8(std::vector<float>(64, 1.0f), std::vector<float>(2 * 64 * 64), std::vector<float>(64 * 64), {1.0f}, {1.0f}, {1.0f},
                                  {0}, shape_of(1, 64, 64, 1, 1), ref::StoreType::kBFloat16, false),
               std::invalid_argument);  // H = 64 is not a whole group
}

// ---------------------------------------------------------------------------------------------
// The twin through kwiki_twin_launch (the launcher's seventeen tensors)
// ---------------------------------------------------------------------------------------------

int launch_twin(std::vector<void*> tensors, std::vector<int> dtypes, std::vector<long long> dims, double fnuz, std::string* why) {
  char error[512] = {0};
  const double params[1] = {fnuz};
  const int rc = kwiki_twin_launch("fused_moe_fp8", tensors.data(), dtypes.data(), static_cast<int>(tensors.size()), dims.data(),
                                   static_cast<int>(dims.size()), params, 1, error, sizeof(error));
  *why = error;
  return rc;
}

std::uint16_t bf16_bits(float v) {
  const float r = ref::round_to_bf16(v);
  std::uint32_t u;
  std::memcpy(&u, &r, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_value(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(FusedMoeFp8Twin, ComputesTheReferenceFromFp8BytesIntoBf16OutAndLeavesTheScratch) {
  const long long T = 5, H = 256, I = 128, E = 3, K = 2;
  std::vector<std::uint16_t> x(T * H);
  std::vector<float> xf(T * H);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = bf16_bits(std::sin(0.013f * static_cast<float>(i * 7 % 101)) - 0.2f);
    xf[i] = bf16_value(x[i]);
  }
  // fp8 bytes over most of the e4m3fn range (no NaN encodings: 0x7f and 0xff skipped).
  std::vector<std::uint8_t> w13(E * 2 * I * H), w2(E * H * I);
  std::vector<float> w13f(w13.size()), w2f(w2.size());
  for (std::size_t i = 0; i < w13.size(); ++i) {
    w13[i] = static_cast<std::uint8_t>((i * 37 + 11) % 0x7e | (i % 3 == 0 ? 0x80 : 0));
    w13f[i] = ref::fp8_decode(w13[i], false);
  }
  for (std::size_t i = 0; i < w2.size(); ++i) {
    w2[i] = static_cast<std::uint8_t>((i * 53 + 5) % 0x7e | (i % 4 == 1 ? 0x80 : 0));
    w2f[i] = ref::fp8_decode(w2[i], false);
  }
  std::vector<float> w13_s(E * 2 * (I / 128) * (H / 128)), w2_s(E * (H / 128) * (I / 128));
  for (std::size_t i = 0; i < w13_s.size(); ++i) w13_s[i] = 1e-4f * static_cast<float>(1 + i % 4);
  for (std::size_t i = 0; i < w2_s.size(); ++i) w2_s[i] = 2e-3f * static_cast<float>(1 + i % 3);
  std::vector<float> weights = {0.7f, 0.3f, 0.5f, 0.5f, 1.0f, 0.0f, 0.25f, 0.75f, 0.9f, 0.1f};
  std::vector<std::int32_t> ids = {2, 0, 1, 2, -1, 3, 1, 1, 0, 2};  // token 2: both ids outside [0, E)
  std::vector<std::uint16_t> out(T * H, 0xffff);
  std::vector<std::int32_t> counts(E, -5), offsets(E + 1, -5), sorted(T * K + E * 15, -5), blocks(8, -5);
  std::vector<std::uint8_t> a_q(T * H, 0xee), act_q(T * K * I, 0xee);
  std::vector<float> a_s(T * H / 128, -5.f), act_s(T * K * I / 128, -5.f), slot(T * K * H, -5.f);
  const int bf = KWIKI_TWIN_BF16, f = KWIKI_TWIN_F32, i32 = KWIKI_TWIN_I32, u8 = KWIKI_TWIN_U8, fp8 = KWIKI_TWIN_E4M3FN;
  std::vector<void*> tensors = {x.data(),      w13.data(),    w2.data(),     w13_s.data(),  w2_s.data(), weights.data(),
                                ids.data(),    out.data(),    counts.data(), offsets.data(), sorted.data(), blocks.data(),
                                a_q.data(),    a_s.data(),    act_q.data(),  act_s.data(),   slot.data()};
  const std::vector<int> dtypes = {bf, fp8, u8, f, f, f, i32, bf, i32, i32, i32, i32, u8, f, u8, f, f};
  std::string why;
  ASSERT_EQ(launch_twin(tensors, dtypes, {T, H, I, E, K, 16}, 0.0, &why), 0) << why;
  const auto want = ref::fused_moe_fp8(xf, w13f, w2f, w13_s, w2_s, weights, ids, shape_of(T, H, I, E, K), ref::StoreType::kBFloat16, false);
  double largest = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(bf16_value(out[i]), ref::round_to_bf16(static_cast<float>(want[i]))) << i;
    largest = std::max(largest, std::fabs(want[i]));
  }
  EXPECT_GT(largest, 1e-3);  // the case is not all zeros
  for (std::size_t i = 2 * H; i < 3 * H; ++i) EXPECT_EQ(bf16_value(out[i]), 0.0f) << "token 2 has no valid slot";
  EXPECT_EQ(a_q[0], 0xee);  // the scratch is the kernel's
  EXPECT_EQ(sorted[0], -5);
  EXPECT_EQ(slot[0], -5.f);
  // Sixteen tensors, H not a whole group, fp8 of the other format, or a bad fnuz are refused with a reason.
  std::vector<void*> fewer(tensors.begin(), tensors.end() - 1);
  EXPECT_NE(launch_twin(fewer, std::vector<int>(dtypes.begin(), dtypes.end() - 1), {T, H, I, E, K, 16}, 0.0, &why), 0);
  EXPECT_NE(why.find("expected 17 tensors"), std::string::npos) << why;
  EXPECT_NE(launch_twin(tensors, dtypes, {T, 192, I, E, K, 16}, 0.0, &why), 0);
  EXPECT_NE(why.find("multiples of 128"), std::string::npos) << why;
  EXPECT_NE(launch_twin(tensors, dtypes, {T, H, I, E, K, 16}, 1.0, &why), 0);  // w13 is e4m3fn, fnuz says e4m3fnuz
  EXPECT_NE(why.find("fp8 of the format fnuz names"), std::string::npos) << why;
  EXPECT_NE(launch_twin(tensors, dtypes, {T, H, I, E, K, 16}, 0.5, &why), 0);
}

// ---------------------------------------------------------------------------------------------
// The family table
// ---------------------------------------------------------------------------------------------

TEST(FusedMoeFp8Family, IsARowBeforeTheGeneratorWithItsAliases) {
  const kwiki::detail::FamilyRow* row = kwiki::detail::find_family("fused_moe_fp8");
  ASSERT_NE(row, nullptr);
  EXPECT_NE(row, kwiki::detail::find_family("fused_moe"));
  EXPECT_NE(row->work, nullptr);
  EXPECT_TRUE(row->updates_part_of_input);
  for (const char* alias : {"fused_experts_fp8", "w8a8_block_fp8_moe", "moe_fp8"}) EXPECT_EQ(kwiki::detail::find_family(alias), row) << alias;
  EXPECT_STREQ(kwiki::detail::kFamilies[kwiki::detail::kFamilyCount - 1].name, "generated");
  EXPECT_NE(std::string(row->abi).find("w13_scale[E,2I/128,H/128]"), std::string::npos);
}

TEST(FusedMoeFp8Family, CountsTheGemmsAtOneByteAWeightAndTheRoutedExpertsOnly) {
  kwiki::ShapeCase shape;
  shape.dims = {{"num_tokens", 1}, {"hidden_size", 7168}, {"intermediate_size", 256}, {"num_experts", 256}, {"topk", 8}};
  const auto w = kwiki::count_work("fused_moe_fp8", shape, "fp8_e4m3");
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->matrix_flops, 6.0 * 8 * 7168 * 256);
  // One token touches exactly its 8 experts: fp8 weights (1 byte) and their 56 x 2 + 56 x 2 fp32 block scales each.
  EXPECT_NEAR(w->bytes_read, 7168 * 2.0 + 8 * (3.0 * 256 * 7168 + (2 * 2 * 56 + 56 * 2) * 4.0) + 8 * 8.0, 1e-6);
  EXPECT_DOUBLE_EQ(w->bytes_written, 7168 * 2.0);
}

// ---------------------------------------------------------------------------------------------
// The template as kwiki baseline writes it
// ---------------------------------------------------------------------------------------------

// The kwiki headers a source still includes by a quoted #include (none, once inlined).
std::vector<std::string> quoted_includes(const std::string& source) {
  std::vector<std::string> found;
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);)
    if (line.find("#include \"") != std::string::npos) found.push_back(line);
  return found;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FusedMoeFp8Template, IsOneSourceWithEachTemplateItBuildsOnInlinedOnce) {
  for (const char* vendor : {"nvidia", "amd"}) {
    const std::string src = kwiki::template_source("fused_moe_fp8", "fp8_e4m3", vendor);
    ASSERT_FALSE(src.empty());
    EXPECT_EQ(quoted_includes(src), std::vector<std::string>()) << vendor;
    for (const char* header : {"kwiki_compat.cuh", "fused_moe.cuh", "fp8_block_gemm.cuh", "fp8_quant.cuh"})
      EXPECT_EQ(count_of(src, std::string("// ---- ") + header + " (inlined) ----"), 1u) << header << " (" << vendor << ")";
    EXPECT_EQ(count_of(src, "KWIKI_EXPORT int kwiki_launch("), 4u) << "fused_moe_fp8's launcher and the three guarded off in the headers";
    EXPECT_NE(src.find(std::string("#define KWIKI_T ") + (std::string(vendor) == "amd" ? "kwiki_bf16" : "__nv_bfloat16")), std::string::npos);
  }
  // Every other template is one file too (the compat header inlined as before).
  for (const std::string& pattern : kwiki::template_patterns())
    EXPECT_EQ(quoted_includes(kwiki::template_source(pattern, "bf16", "nvidia")), std::vector<std::string>()) << pattern;
}

}  // namespace
