// moe_fp8_emulation.cpp: the fused_moe_fp8 launcher run on the host emulation (compat_host.hpp; built and
// run by run_moe.sh) against the fp64 CPU twin (planner/twin/cpu_reference.cpp): the quantized hidden rows
// and their group scales bit for bit against the twin's fp8_quant, the output within the harness's bf16
// tolerance of the twin's (the fp32 sums may round a gate or up value to the other bf16 neighbour, and
// its fp8 code with it); decode, many row blocks, experts with no token, every token on one expert, ids
// outside [0, E), both fp8 formats, and the launcher's refusals. Exits 1 when a case fails.
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_reference.hpp"
#include "fused_moe_fp8.cuh"

namespace ref = kwiki::reference;

static int failures = 0, cases = 0;

/// Counts a case; prints it when it fails.
static void check(bool ok, const std::string& what) {
  ++cases;
  if (!ok) { ++failures; std::printf("FAIL %s\n", what.c_str()); }
}

static float f32(kwiki_bf16 v) { return kwiki_to_float(v); }

/// One launch on random inputs (weights over the format's range, block scales near fan_in^-0.5 / the codes' rms)
/// against the twin's formula.
static void fp8_case(const std::string& name, int T_, int H, int I, int E, int K, const std::vector<int>& ids, bool fnuz) {
  std::mt19937 g(static_cast<unsigned>(T_ * 131 + H + I * 7 + E * 3 + K + fnuz));
  std::normal_distribution<float> n01(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  auto bytes = [&](std::size_t n) {  // finite values of the format, 16-byte aligned (std::vector of 16-byte elements)
    std::vector<kwiki::Vec<unsigned char>> v((n + 15) / 16);
    unsigned char* p = &v[0].v[0];
    for (std::size_t i = 0; i < n; ++i) {
      unsigned b;
      do b = g() & 0xffu; while (fnuz ? b == 0x80u : (b & 0x7fu) == 0x7fu);
      p[i] = static_cast<unsigned char>(b);
    }
    return v;
  };
  const int hb = H / 128, ib = I / 128;
  std::vector<kwiki::Vec<kwiki_bf16>> hidden_v((static_cast<std::size_t>(T_) * H + 7) / 8);
  kwiki_bf16* hidden = &hidden_v[0].v[0];
  std::vector<float> hidden_f(static_cast<std::size_t>(T_) * H);
  for (std::size_t i = 0; i < hidden_f.size(); ++i) {
    hidden[i] = kwiki_from_float<kwiki_bf16>(n01(g));
    hidden_f[i] = f32(hidden[i]);
  }
  const auto w13 = bytes(static_cast<std::size_t>(E) * 2 * I * H), w2 = bytes(static_cast<std::size_t>(E) * H * I);
  std::vector<float> w13_s(static_cast<std::size_t>(E) * 2 * ib * hb), w2_s(static_cast<std::size_t>(E) * hb * ib);
  // Random codes are mostly small values: an rms near 64 (e4m3fn) or 32 (e4m3fnuz) makes each projection keep its input's size.
  const float rms = fnuz ? 32.f : 64.f;
  for (auto& s : w13_s) s = u(g) / (rms * std::sqrt(float(H)));
  for (auto& s : w2_s) s = u(g) / (rms * std::sqrt(float(I)));
  std::vector<float> weights(static_cast<std::size_t>(T_) * K);
  for (auto& w : weights) w = std::uniform_real_distribution<float>(0.f, 1.f)(g);
  using namespace kwiki_fused_moe;
  const int entries = T_ * K, chunks = (entries + kChunk - 1) / kChunk, capacity = entries + E * (kBlockM - 1);
  std::vector<int> counts(std::max(1, chunks * E)), offsets(E + 1), sorted(capacity), blocks((capacity + kBlockM - 1) / kBlockM);
  const auto a_q = bytes(static_cast<std::size_t>(T_) * H), act_q = bytes(static_cast<std::size_t>(std::max(1, entries)) * I);
  std::vector<float> a_s(static_cast<std::size_t>(T_) * hb), act_s(static_cast<std::size_t>(std::max(1, entries)) * ib),
      slot(static_cast<std::size_t>(std::max(1, entries)) * H);
  std::vector<kwiki_bf16> out(static_cast<std::size_t>(T_) * H);
  auto* aq = const_cast<unsigned char*>(&a_q[0].v[0]);
  const int rc = kwiki_fused_moe_fp8::launch<kwiki_bf16>(hidden, &w13[0].v[0], &w2[0].v[0], w13_s.data(), w2_s.data(), weights.data(), ids.data(),
                                                         out.data(), counts.data(), offsets.data(), sorted.data(), blocks.data(), aq, a_s.data(),
                                                         const_cast<unsigned char*>(&act_q[0].v[0]), act_s.data(), slot.data(), T_, H, I, E, K,
                                                         kBlockM, fnuz ? 1.0 : 0.0, nullptr);
  check(rc == 0, name + ": launch returned " + std::to_string(rc));
  if (rc != 0) return;
  // The quantized hidden rows: the twin's fp8_quant of each 128-group (eps 1e-10) with the GPU's scale rule
  // (torch on a GPU divides by the Python number fp8_max as a product with its fp32 reciprocal), bit for bit.
  const auto gpu = ref::ScalarDivision::kReciprocal;
  const auto q = ref::fp8_quant(hidden_f, static_cast<std::size_t>(T_) * hb, 128, fnuz, 1e-10f, gpu);
  int bad_q = 0;
  for (std::size_t i = 0; i < hidden_f.size(); ++i) bad_q += ref::fp8_encode(q.q[i], fnuz) != aq[i];
  for (std::size_t i = 0; i < a_s.size(); ++i) bad_q += q.scales[i] != a_s[i];
  check(bad_q == 0, name + ": " + std::to_string(bad_q) + " quantized hidden bytes or scales differ from the twin's");
  // The output against the twin: within the harness's bf16 rule (atol 1e-2, rtol 1.6e-2), and mostly far closer.
  auto decode = [&](const std::vector<kwiki::Vec<unsigned char>>& v, std::size_t n) {
    std::vector<float> f(n);
    for (std::size_t i = 0; i < n; ++i) f[i] = ref::fp8_decode((&v[0].v[0])[i], fnuz);
    return f;
  };
  ref::FusedMoeShape s;
  s.tokens = T_, s.hidden = H, s.intermediate = I, s.experts = E, s.topk = K;
  const auto want = ref::fused_moe_fp8(hidden_f, decode(w13, static_cast<std::size_t>(E) * 2 * I * H),
                                       decode(w2, static_cast<std::size_t>(E) * H * I), w13_s, w2_s, weights, ids, s, ref::StoreType::kBFloat16, fnuz, gpu);
  int beyond = 0, exact = 0;
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = ref::round_to_bf16(static_cast<float>(want[i])), got = f32(out[i]), d = std::fabs(got - w);
    beyond += !(d <= 1e-2 + 1.6e-2 * std::fabs(w));
    exact += got == w;
    worst = std::max(worst, d);
    largest = std::max(largest, std::fabs(w));
  }
  check(beyond == 0, name + ": " + std::to_string(beyond) + " outputs beyond tolerance (worst abs " + std::to_string(worst) + ")");
  check(largest > 0.05 || T_ * K == 0, name + ": the outputs are too small to tell anything (" + std::to_string(largest) + ")");
  std::printf("  %s: worst abs err %.3g (largest |out| %.3g), %d of %zu outputs equal to the twin's bf16\n", name.c_str(), worst, largest, exact,
              want.size());
}

int main() {
  fp8_case("decode t1 e8 k2 h512 i256", 1, 512, 256, 8, 2, kwiki_emu::random_ids(1, 8, 2, 1), false);
  fp8_case("t37 e4 k3 h384 i256 (many row blocks)", 37, 384, 256, 4, 3, kwiki_emu::random_ids(37, 4, 3, 2), false);
  fp8_case("e4m3fnuz t19 e6 k2 h256 i384", 19, 256, 384, 6, 2, kwiki_emu::random_ids(19, 6, 2, 3), true);
  std::vector<int> one(20, 2);  // every token on expert 2; the rest idle
  fp8_case("every token on one expert", 20, 256, 128, 4, 1, one, false);
  auto masked = kwiki_emu::random_ids(12, 5, 2, 4);
  masked[0] = -1, masked[5] = 5, masked[9] = 1000;   // remote or masked experts add nothing
  masked[2 * 6] = -3, masked[2 * 6 + 1] = 7;         // token 6: no valid slot, zeros
  fp8_case("ids outside [0, E)", 12, 256, 128, 5, 2, masked, false);
  // Refusals: H or I not a whole group, a bad fnuz, BM other than 16, an fp8 tensor off a 16-byte boundary.
  {
    alignas(16) unsigned char b[64] = {};
    alignas(16) kwiki_bf16 x[64] = {};
    float f = 0;
    int i = 0;
    auto call = [&](long long H, long long I, long long BM, double fnuz, const unsigned char* w13) {
      return kwiki_fused_moe_fp8::launch<kwiki_bf16>(x, w13, b, &f, &f, &f, &i, x, &i, &i, &i, &i, b, &f, b, &f, &f, 1, H, I, 1, 1, BM, fnuz, nullptr);
    };
    check(call(192, 128, 16, 0.0, b) == -1, "H 192 refused");
    check(call(128, 64, 16, 0.0, b) == -1, "I 64 refused");
    check(call(128, 128, 32, 0.0, b) == -1, "BM 32 refused");
    check(call(128, 128, 16, 0.5, b) == -1, "fnuz 0.5 refused");
    check(call(128, 128, 16, 0.0, b + 1) == -1, "unaligned w13 refused");
  }
  std::printf("fused_moe_fp8 emulation (warp %d): %d cases, %d failed\n", EMU_WARP, cases, failures);
  return failures ? 1 : 0;
}
