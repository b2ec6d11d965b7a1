// fp8_block_gemm_emulation.cpp: the fp8_block_gemm launcher's CUDA-core kernel run on the host
// emulation (compat_host.hpp; built and run by run.sh) against the CPU twin's formula
// (planner/twin/cpu_reference.cpp): the template's fp8 decoder on all 256 bytes of both formats,
// then products with partial tiles in M and N, a last K block shorter than 128, both fp8 formats,
// and the launcher's refusals. Each output within one bf16 step (plus fp32 summation slack) of the
// fp64 reference rounded to bf16. Exits 1 when a case fails.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "fp8_block_gemm.cuh"

namespace ref = kwiki::reference;

static int failures = 0, cases = 0;

/// Counts a case; prints it when it fails.
static void check(bool ok, const std::string& what) {
  ++cases;
  if (!ok) { ++failures; std::printf("FAIL %s\n", what.c_str()); }
}

/// The decoder against the twin's, every byte, both formats (NaN as NaN).
static void decode_tests() {
  for (int fnuz = 0; fnuz < 2; ++fnuz) {
    int bad = 0;
    for (unsigned b = 0; b < 256; ++b) {
      const float got = fnuz ? kwiki_fp8_block_gemm::fp8_to_float<true>(b) : kwiki_fp8_block_gemm::fp8_to_float<false>(b);
      const float want = ref::fp8_decode(static_cast<std::uint8_t>(b), fnuz != 0);
      const bool same = (std::isnan(got) && std::isnan(want)) || (got == want && std::signbit(got) == std::signbit(want));
      bad += !same;
    }
    check(bad == 0, std::string("decode ") + (fnuz ? "e4m3fnuz" : "e4m3fn") + ": " + std::to_string(bad) + " bytes differ");
  }
}

/// One product of M x N x K with random fp8 bytes and scales, against the twin's formula.
static void gemm_case(const std::string& name, int M, int N, int K, bool fnuz) {
  std::mt19937 g(static_cast<unsigned>(M * 131 + N * 7 + K + fnuz));
  const int kb = (K + 127) / 128, nb = (N + 127) / 128;
  // Bytes that are finite values of the format (no NaN encodings); 16-byte aligned rows.
  auto bytes = [&](std::size_t n) {
    std::vector<unsigned char> v(n + 16);
    for (auto& e : v) {
      unsigned b;
      do b = g() & 0xffu; while (fnuz ? b == 0x80u : (b & 0x7fu) == 0x7fu);
      e = static_cast<unsigned char>(b);
    }
    return v;
  };
  std::vector<unsigned char> a = bytes(static_cast<std::size_t>(M) * K), b = bytes(static_cast<std::size_t>(N) * K);
  std::uniform_real_distribution<float> u(0.f, 1e-2f);
  std::vector<float> as(static_cast<std::size_t>(M) * kb), bs(static_cast<std::size_t>(nb) * kb);
  for (auto& x : as) x = u(g);
  for (auto& x : bs) x = u(g);
  std::vector<float> af(static_cast<std::size_t>(M) * K), bf(static_cast<std::size_t>(N) * K);
  for (std::size_t i = 0; i < af.size(); ++i) af[i] = ref::fp8_decode(a[i], fnuz);
  for (std::size_t i = 0; i < bf.size(); ++i) bf[i] = ref::fp8_decode(b[i], fnuz);
  ref::Fp8BlockGemmShape s;
  s.m = M;
  s.n = N;
  s.k = K;
  const std::vector<double> want = ref::fp8_block_gemm(af, bf, as, bs, s);
  // The magnitude a row's fp32 sums carry: their rounding bounds the difference to the fp64 sum.
  std::vector<double> mag(static_cast<std::size_t>(M) * N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k)
        mag[static_cast<std::size_t>(m) * N + n] += std::fabs(static_cast<double>(af[static_cast<std::size_t>(m) * K + k]) * bf[static_cast<std::size_t>(n) * K + k]) *
                                                    as[static_cast<std::size_t>(m) * kb + k / 128] * bs[static_cast<std::size_t>(n / 128) * kb + k / 128];
  std::vector<kwiki_bf16> out(static_cast<std::size_t>(M) * N, kwiki_bf16{0x7fc0});  // NaN: an unwritten element fails
  const int rc = kwiki_fp8_block_gemm::launch<kwiki_bf16>(a.data(), b.data(), as.data(), bs.data(), out.data(), M, N, K, 128, 128, fnuz ? 1.0 : 0.0,
                                                          nullptr);
  int bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double got = kwiki_to_float(out[i]), w = want[i];
    const double tol = std::ldexp(std::fabs(w), -8) + 1e-6 * mag[i] + 1e-30;  // one bf16 step, and fp32 sums of K terms
    const double err = std::fabs(got - w);
    if (!(err <= tol)) ++bad;
    worst = std::max(worst, err / tol);
  }
  check(rc == 0 && bad == 0, "gemm " + name + ": rc " + std::to_string(rc) + ", " + std::to_string(bad) + " outputs off (worst " +
                                 std::to_string(worst) + " of the tolerance)");
}

/// Sizes the launcher must refuse with -1.
static void refusal_tests() {
  std::vector<unsigned char> a(64 * 64 + 32), b(64 * 64 + 32);
  std::vector<float> as(64), bs(64);
  std::vector<kwiki_bf16> out(64 * 64);
  auto run = [&](long long M, long long N, long long K, long long BN, long long BK, double fnuz, const unsigned char* ap = nullptr) {
    return kwiki_fp8_block_gemm::launch<kwiki_bf16>(ap ? ap : a.data(), b.data(), as.data(), bs.data(), out.data(), M, N, K, BN, BK, fnuz, nullptr);
  };
  check(run(8, 8, 64, 64, 128, 0) == -1, "refuses BN = 64");
  check(run(8, 8, 64, 128, 64, 0) == -1, "refuses BK = 64");
  check(run(8, 8, 40, 128, 128, 0) == -1, "refuses K = 40 (not a multiple of 16)");
  check(run(-1, 8, 64, 128, 128, 0) == -1, "refuses M < 0");
  check(run(8, 8, 64, 128, 128, 2) == -1, "refuses fnuz = 2");
  check(run(8, 8, 64, 128, 128, 0, a.data() + 1) == -1, "refuses an unaligned A");
  check(run(0, 8, 64, 128, 128, 0) == 0, "M = 0 does nothing");
}

int main() {
  decode_tests();
  refusal_tests();
  gemm_case("1x64x128 fn", 1, 64, 128, false);
  gemm_case("70x200x288 fn (partial tiles, last K block of 32)", 70, 200, 288, false);
  gemm_case("64x130x256 fnuz (N past one weight block)", 64, 130, 256, true);
  gemm_case("3x66x16 fn (K of one chunk)", 3, 66, 16, false);
  gemm_case("17x64x0 fn (K = 0: zeros)", 17, 64, 0, false);
  std::printf("%d of %d cases pass (warp %d)\n", cases - failures, cases, EMU_WARP);
  return failures ? 1 : 0;
}
