// fp8_block_gemm (issue 20, family 4): its fp64 CPU reference against hand-computed products, its
// twin through the C entry point kwiki plan loads (fp8 bytes in, bf16 out, the launcher's
// refusals), and its row in the family table (aliases, work counts at the fp8 rate).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "family.hpp"
#include "kwiki_twin.h"

namespace {

namespace ref = kwiki::reference;

ref::Fp8BlockGemmShape shape_of(std::size_t m, std::size_t n, std::size_t k) {
  ref::Fp8BlockGemmShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  return s;
}

// ---------------------------------------------------------------------------------------------
// The reference
// ---------------------------------------------------------------------------------------------

TEST(Fp8BlockGemm, ScalesEachKBlockByItsOwnActivationAndWeightScale) {
  // K = 256: two scale blocks. A row of ones, B rows of ones and twos.
  const auto s = shape_of(1, 2, 256);
  const std::vector<float> a(256, 1.0f);
  std::vector<float> b(2 * 256, 1.0f);
  for (std::size_t k = 0; k < 256; ++k) b[256 + k] = 2.0f;
  const std::vector<float> as = {0.5f, 0.25f};  // [M=1, 2 K blocks]
  const std::vector<float> bs = {3.0f, 5.0f};   // [1 N block, 2 K blocks]
  const auto out = ref::fp8_block_gemm(a, b, as, bs, s);
  // Column 0: 128 * (0.5 * 3) + 128 * (0.25 * 5) = 192 + 160; column 1 twice that.
  EXPECT_DOUBLE_EQ(out[0], 352.0);
  EXPECT_DOUBLE_EQ(out[1], 704.0);
}

TEST(Fp8BlockGemm, ShortLastBlocksAndWeightBlocksPastOneHundredTwentyEight) {
  // K = 160 (a last block of 32), N = 130 (columns 128 and 129 in the second weight block).
  const auto s = shape_of(2, 130, 160);
  std::vector<float> a(2 * 160), b(130 * 160, 1.0f);
  for (std::size_t k = 0; k < 160; ++k) {
    a[k] = 1.0f;
    a[160 + k] = k < 128 ? 0.0f : 4.0f;
  }
  const std::vector<float> as = {1.0f, 2.0f, 1.0f, 0.5f};  // [2, 2]
  const std::vector<float> bs = {1.0f, 1.0f, 10.0f, 100.0f};  // [2 N blocks, 2 K blocks]
  const auto out = ref::fp8_block_gemm(a, b, as, bs, s);
  EXPECT_DOUBLE_EQ(out[0], 128.0 * 1 * 1 + 32.0 * 2 * 1);         // row 0, column 0
  EXPECT_DOUBLE_EQ(out[129], 128.0 * 1 * 10 + 32.0 * 2 * 100);    // row 0, column 129
  EXPECT_DOUBLE_EQ(out[130 + 129], 32.0 * 4 * 0.5 * 100);          // row 1: only its last block
}

TEST(Fp8BlockGemm, TheScaleProductIsRoundedToFp32AsTheReferenceMultipliesIt) {
  const auto s = shape_of(1, 1, 16);
  const std::vector<float> a(16, 1.0f), b(16, 1.0f);
  const float x = 1.0f + std::ldexp(1.0f, -12), y = 1.0f + std::ldexp(1.0f, -13);
  const auto out = ref::fp8_block_gemm(a, b, {x}, {y}, s);
  EXPECT_EQ(out[0], 16.0 * static_cast<double>(x * y));  // fp32 product, then the exact partial
  EXPECT_NE(out[0], 16.0 * static_cast<double>(x) * static_cast<double>(y));
}

TEST(Fp8BlockGemm, RefusesScalesOfTheWrongSize) {
  const auto s = shape_of(2, 4, 256);
  const std::vector<float> a(2 * 256), b(4 * 256);
  EXPECT_THROW(ref::fp8_block_gemm(a, b, {1, 1}, {1, 1}, s), std::invalid_argument);  // As must be [2, 2]
  EXPECT_THROW(ref::fp8_block_gemm(a, b, {1, 1, 1, 1}, {1}, s), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// The twin through kwiki_twin_launch
// ---------------------------------------------------------------------------------------------

struct TwinCall {
  std::vector<std::uint8_t> a, b;
  std::vector<float> as, bs;
  std::vector<std::uint16_t> out;  // bf16 bits
  int fp8_dtype = KWIKI_TWIN_E4M3FN;
  std::vector<long long> dims;
  double fnuz = 0;

  int run(std::string* error = nullptr) {
    void* tensors[5] = {a.data(), b.data(), as.data(), bs.data(), out.data()};
    const int dtypes[5] = {fp8_dtype, fp8_dtype, KWIKI_TWIN_F32, KWIKI_TWIN_F32, KWIKI_TWIN_BF16};
    char err[512] = {0};
    const int rc = kwiki_twin_launch("fp8_block_gemm", tensors, dtypes, 5, dims.data(), static_cast<int>(dims.size()), &fnuz, 1, err,
                                     static_cast<int>(sizeof(err)));
    if (error) *error = err;
    return rc;
  }
};

float bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TwinCall small_call(bool fnuz) {
  TwinCall c;
  const std::size_t m = 3, n = 5, k = 144;  // a last K block of 16
  c.a.resize(m * k);
  c.b.resize(n * k);
  std::uint32_t s = 12345;
  for (auto* v : {&c.a, &c.b})
    for (auto& x : *v) {
      s = s * 1664525u + 1013904223u;
      std::uint8_t byte = static_cast<std::uint8_t>(s >> 24);
      if (fnuz ? byte == 0x80 : (byte & 0x7f) == 0x7f) byte = 0x38;  // no NaN encodings
      x = byte;
    }
  c.as = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f};
  c.bs = {0.5f, 0.25f};
  c.out.assign(m * n, 0x7fc0);
  c.fp8_dtype = fnuz ? KWIKI_TWIN_E4M3FNUZ : KWIKI_TWIN_E4M3FN;
  c.fnuz = fnuz ? 1 : 0;
  c.dims = {static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), 128, 128};
  return c;
}

TEST(Fp8BlockGemmTwin, DecodesTheBytesInTheirFormatAndRoundsToBf16) {
  for (bool fnuz : {false, true}) {
    TwinCall c = small_call(fnuz);
    std::string err;
    ASSERT_EQ(c.run(&err), 0) << err;
    std::vector<float> af(c.a.size()), bf(c.b.size());
    for (std::size_t i = 0; i < af.size(); ++i) af[i] = ref::fp8_decode(c.a[i], fnuz);
    for (std::size_t i = 0; i < bf.size(); ++i) bf[i] = ref::fp8_decode(c.b[i], fnuz);
    const auto want = ref::fp8_block_gemm(af, bf, c.as, c.bs, shape_of(3, 5, 144));
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(bf16_value(c.out[i]), ref::round_to_bf16(static_cast<float>(want[i]))) << (fnuz ? "fnuz " : "fn ") << i;
  }
}

TEST(Fp8BlockGemmTwin, RawBytesAreReadInTheFormatFnuzNames) {
  TwinCall typed = small_call(true), raw = small_call(true);
  raw.fp8_dtype = KWIKI_TWIN_U8;
  ASSERT_EQ(typed.run(), 0);
  ASSERT_EQ(raw.run(), 0);
  EXPECT_EQ(typed.out, raw.out);
}

TEST(Fp8BlockGemmTwin, RefusesWhatTheLauncherRefuses) {
  std::string err;
  TwinCall c = small_call(false);
  c.dims[3] = 64;
  EXPECT_EQ(c.run(&err), -1);
  EXPECT_NE(err.find("128 x 128"), std::string::npos) << err;
  c = small_call(false);
  c.fnuz = 1;  // e4m3fn tensors with the fnuz format named
  EXPECT_EQ(c.run(&err), -1);
  c = small_call(false);
  c.dims[2] = 136;  // not a multiple of 16
  EXPECT_EQ(c.run(&err), -1);
}

// ---------------------------------------------------------------------------------------------
// The family row
// ---------------------------------------------------------------------------------------------

TEST(Fp8BlockGemmFamily, AliasesNameTheRowAndWorkIsCountedAtTheFp8Rate) {
  using kwiki::detail::find_family;
  const auto* row = find_family("fp8_block_gemm");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(find_family("w8a8_block_fp8_matmul"), row);
  EXPECT_EQ(find_family("block_scaled_fp8_gemm"), row);
  EXPECT_EQ(find_family("fp8_gemm_blockscale"), row);
  kwiki::ShapeCase shape;
  shape.dims = {{"num_tokens", 64}, {"out_features", 2112}, {"in_features", 7168}};
  const auto w = row->work(kwiki::detail::WorkInput{shape, 1.0});
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->matrix_flops, 2.0 * 64 * 2112 * 7168);
  EXPECT_DOUBLE_EQ(w->bytes_read, 64.0 * 7168 + 2112.0 * 7168 + (64.0 * 56 + 17.0 * 56) * 4);  // fp8 bytes and fp32 scales
  EXPECT_DOUBLE_EQ(w->bytes_written, 64.0 * 2112 * 2);
}

}  // namespace
