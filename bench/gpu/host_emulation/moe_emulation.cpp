// moe_emulation.cpp: the fused_moe launcher run on the host emulation (compat_host.hpp; build and run
// with run_moe.sh) against the kernels' own fp32 formulas, every output bit, and the routing scratch
// against a stable sort: decode (one token), tokens spread over many chunks, experts with no token,
// every token on one expert, ids outside [0, E), sizes that are no multiple of the tiles, bf16 and fp32.
// Exits 1 when a case fails.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "fused_moe.cuh"

static int failures = 0, cases = 0;

/// Counts a case; prints it when it fails.
static void check(bool ok, const std::string& what) {
  ++cases;
  if (!ok) { ++failures; std::printf("FAIL %s\n", what.c_str()); }
}

template <typename T> static float f32(T v) { return kwiki_to_float(v); }
template <typename T> static float rt(float v) { return kwiki_to_float(kwiki_from_float<T>(v)); }

/// One launch against the formula of moe_gate_up/down/combine (fp32 sums in index order, the same roundings).
template <typename T>
static void moe_case(const std::string& name, int T_, int H, int I, int E, int K, const std::vector<int>& ids) {
  std::mt19937 g(11);
  std::normal_distribution<float> n01(0.f, 1.f);
  auto fill = [&](size_t n, float scale) { std::vector<T> v(n); for (auto& e : v) e = kwiki_from_float<T>(n01(g) * scale); return v; };
  const auto hidden = fill(size_t(T_) * H, 0.5f), w13 = fill(size_t(E) * 2 * I * H, 1.f / std::sqrt(float(H))),
             w2 = fill(size_t(E) * H * I, 1.f / std::sqrt(float(I)));
  std::vector<float> weights(size_t(T_) * K);
  for (auto& w : weights) w = std::uniform_real_distribution<float>(0.f, 1.f)(g);
  using namespace kwiki_fused_moe;
  const int entries = T_ * K, chunks = (entries + kChunk - 1) / kChunk, capacity = entries + E * (kBlockM - 1);
  std::vector<int> counts(std::max(1, chunks * E)), offsets(E + 1), sorted(capacity), blocks((capacity + kBlockM - 1) / kBlockM);
  std::vector<T> act(size_t(std::max(1, entries)) * I), out(size_t(T_) * H);
  std::vector<float> slot(size_t(std::max(1, entries)) * H);
  const int rc = launch<T>(hidden.data(), w13.data(), w2.data(), weights.data(), ids.data(), out.data(), counts.data(), offsets.data(),
                           sorted.data(), blocks.data(), act.data(), slot.data(), T_, H, I, E, K, kBlockM, nullptr);
  check(rc == 0, name + ": launch returned " + std::to_string(rc));
  if (rc != 0) return;
  // Routing: each expert's entries in increasing order, padded with -1 to a multiple of kBlockM.
  std::vector<int> want_sorted(capacity, -1), want_offsets(E + 1, 0), want_blocks(blocks.size(), -1);
  int run = 0;
  for (int e = 0; e < E; ++e) {
    want_offsets[e] = run;
    int n = 0;
    for (int j = 0; j < entries; ++j)
      if (ids[j] == e) want_sorted[run + n++] = j;
    const int padded = (n + kBlockM - 1) / kBlockM * kBlockM;
    for (int b = run / kBlockM; b < (run + padded) / kBlockM; ++b) want_blocks[b] = e;
    run += padded;
  }
  want_offsets[E] = run;
  check(sorted == want_sorted, name + ": sorted ids");
  check(offsets == want_offsets, name + ": expert offsets");
  check(blocks == want_blocks, name + ": block experts");
  // Values, as the kernels compute them.
  std::vector<T> want(size_t(T_) * H);
  std::vector<float> a(I), y(size_t(K) * H);
  for (int t = 0; t < T_; ++t) {
    for (int s = 0; s < K; ++s) {
      const int e = ids[t * K + s];
      if (e < 0 || e >= E) continue;
      for (int n = 0; n < I; ++n) {
        float gate = 0, up = 0;
        for (int h = 0; h < H; ++h) {
          const float x = f32(hidden[size_t(t) * H + h]);
          gate += x * f32(w13[(size_t(e) * 2 * I + n) * H + h]);
          up += x * f32(w13[(size_t(e) * 2 * I + I + n) * H + h]);
        }
        const float gr = rt<T>(gate), ur = rt<T>(up);
        a[n] = rt<T>(rt<T>(gr / (1.0f + expf(-gr))) * ur);
      }
      for (int h = 0; h < H; ++h) {
        float acc = 0;
        for (int n = 0; n < I; ++n) acc += a[n] * f32(w2[(size_t(e) * H + h) * I + n]);
        y[size_t(s) * H + h] = acc;
      }
    }
    for (int h = 0; h < H; ++h) {
      float sum = 0;
      for (int s = 0; s < K; ++s) {
        const int e = ids[t * K + s];
        if (e < 0 || e >= E) continue;
        sum += weights[t * K + s] * y[size_t(s) * H + h];
      }
      want[size_t(t) * H + h] = kwiki_from_float<T>(sum);
    }
  }
  check(std::memcmp(out.data(), want.data(), want.size() * sizeof(T)) == 0, name + ": out bits");
}

int main() {
  moe_case<kwiki_bf16>("decode t1 e8 k2", 1, 64, 96, 8, 2, kwiki_emu::random_ids(1, 8, 2, 1));
  moe_case<kwiki_bf16>("t150 e16 k4 (3 chunks) h72 i40", 150, 72, 40, 16, 4, kwiki_emu::random_ids(150, 16, 4, 2));
  moe_case<float>("fp32 t37 e6 k2 h130 i70 (element loads)", 37, 130, 70, 6, 2, kwiki_emu::random_ids(37, 6, 2, 3));
  moe_case<float>("fp32 t20 e4 k2 h36 i28 (16-byte loads)", 20, 36, 28, 4, 2, kwiki_emu::random_ids(20, 4, 2, 6));
  moe_case<kwiki_bf16>("bf16 t21 e5 k3 h50 i30 (element loads)", 21, 50, 30, 5, 3, kwiki_emu::random_ids(21, 5, 3, 5));
  std::vector<int> one(40 * 2);
  for (int j = 0; j < 80; ++j) one[j] = j % 2 ? 3 : 5;  // every token on experts 5 and 3; the rest idle
  moe_case<kwiki_bf16>("two experts hold every token", 40, 48, 32, 8, 2, one);
  auto masked = kwiki_emu::random_ids(30, 8, 3, 4);
  masked[0] = -1, masked[7] = 8, masked[20] = 1000, masked[29] = -7;  // remote or masked experts add nothing
  for (int k = 0; k < 3; ++k) masked[3 * 10 + k] = -1;                // token 10: no valid slot, zeros
  moe_case<kwiki_bf16>("ids outside [0, E)", 30, 40, 24, 8, 3, masked);
  // Refusals: BM other than 16, non-positive sizes.
  {
    float f = 0;
    int i = 0;
    check(kwiki_fused_moe::launch<float>(&f, &f, &f, &f, &i, &f, &i, &i, &i, &i, &f, &f, 1, 8, 8, 2, 1, 32, nullptr) == -1, "BM 32 refused");
    check(kwiki_fused_moe::launch<float>(&f, &f, &f, &f, &i, &f, &i, &i, &i, &i, &f, &f, 1, 0, 8, 2, 1, 16, nullptr) == -1, "H 0 refused");
    check(kwiki_fused_moe::launch<float>(nullptr, &f, &f, &f, &i, &f, &i, &i, &i, &i, &f, &f, 1, 8, 8, 2, 1, 16, nullptr) == -1, "null hidden refused");
    check(kwiki_fused_moe::launch<float>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 8,
                                         8, 2, 1, 16, nullptr) == 0, "T 0 is a no-op");
  }
  std::printf("fused_moe emulation (warp %d): %d cases, %d failed\n", EMU_WARP, cases, failures);
  return failures ? 1 : 0;
}
