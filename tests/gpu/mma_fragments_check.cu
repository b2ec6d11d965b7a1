// mma_fragments_check.cu: checks on the host (no GPU) that the tensor-core paths of mla_decode.cuh
// and paged_decode_attention_vllm.cuh address ldmatrix and mma.sync m16n8k16 as PTX defines them:
// an emulation of the two instructions (PTX ISA, "Matrix fragments for mma.m16n8k16" and
// "ldmatrix") fed with the kernels' own lane addressing (tc::x4_row, tc::k_lane ...) gives the
// products Q K^T and P V computed directly, and the vLLM stage's ldmatrix reads are free of bank
// conflicts. Also: the split choices cover every token with at most S splits.
// Build and run (tests/check_mma_fragments.sh): nvcc -std=c++17 -I baseline/kernels THIS -o x && ./x
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "mla_decode.cuh"
#include "paged_decode_attention_vllm.cuh"

namespace {

using Reg = std::array<float, 2>;  // a 32-bit register of two 16-bit values: [0] the low half

// ldmatrix .m8n8 .xN (.trans) over a row-major smem array: lane l gives the row address (element
// offset) of matrix l / 8, row l % 8; lane t receives from matrix i: row t / 4, columns 2 (t % 4)
// + {0, 1} (without .trans), or rows 2 (t % 4) + {0, 1} of column t / 4 (with .trans).
std::vector<std::vector<Reg>> ldmatrix(const std::vector<float>& smem, const int (&addr)[32], int n, bool trans) {
  std::vector<std::vector<Reg>> r(32, std::vector<Reg>(n));
  for (int i = 0; i < n; ++i)
    for (int t = 0; t < 32; ++t)
      for (int e = 0; e < 2; ++e) {
        const int row = trans ? 2 * (t % 4) + e : t / 4, col = trans ? t / 4 : 2 * (t % 4) + e;
        r[t][i][e] = smem[addr[8 * i + row] + col];
      }
  return r;
}

// mma.m16n8k16.row.col, fp32 accumulate: per lane a[4], b[2], d[4] (g = lane / 4, c = lane % 4):
// a0 (g, 2c..), a1 (g + 8, 2c..), a2 (g, 2c + 8..), a3 (g + 8, 2c + 8..); b0 (k 2c.., n g),
// b1 (k 2c + 8.., n g); d0, d1 (g, 2c + {0, 1}), d2, d3 (g + 8, 2c + {0, 1}).
void mma(std::vector<std::array<float, 4>>& d, const std::vector<std::array<Reg, 4>>& a, const std::vector<std::array<Reg, 2>>& b) {
  float A[16][16], B[16][8];
  for (int t = 0; t < 32; ++t) {
    const int g = t / 4, c = t % 4;
    for (int e = 0; e < 2; ++e) {
      A[g][2 * c + e] = a[t][0][e];
      A[g + 8][2 * c + e] = a[t][1][e];
      A[g][2 * c + 8 + e] = a[t][2][e];
      A[g + 8][2 * c + 8 + e] = a[t][3][e];
      B[2 * c + e][g] = b[t][0][e];
      B[2 * c + 8 + e][g] = b[t][1][e];
    }
  }
  for (int t = 0; t < 32; ++t) {
    const int g = t / 4, c = t % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e / 2) * 8, col = 2 * c + e % 2;
      float s = 0.f;
      for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
      d[t][e] += s;
    }
  }
}

int failures = 0;
void expect_close(double got, double want, const char* what, int i, int j) {
  if (std::fabs(got - want) > 1e-3 * (1 + std::fabs(want))) {
    if (++failures <= 10) std::printf("FAIL %s [%d][%d]: %g, want %g\n", what, i, j, got, want);
  }
}

// The score product of mla_decode_tc_kernel for one tile: warp w, tokens 8w..8w+7, every k step.
void check_scores(int MT, int Dqk) {
  namespace tc = kwiki_mla_decode::tc;
  const int NH = 16 * MT, ld = Dqk + tc::kRowPad;
  std::mt19937 gen(MT * 1000 + Dqk);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> q(NH * ld), kv(tc::kTile * ld);
  for (auto& x : q) x = u(gen);
  for (auto& x : kv) x = u(gen);
  std::vector<float> sc(NH * tc::kScoreLd, NAN);
  for (int warp = 0; warp < 4; ++warp) {
    std::vector<std::vector<std::array<float, 4>>> acc(MT, std::vector<std::array<float, 4>>(32, {0, 0, 0, 0}));
    for (int ks = 0; ks < Dqk / 16; ++ks) {
      int ka[32];
      for (int l = 0; l < 32; ++l) ka[l] = (warp * 8 + tc::x2_row(l)) * ld + tc::x2_col(l) + ks * 16;
      const auto bk = ldmatrix(kv, ka, 2, false);
      std::vector<std::array<Reg, 2>> b(32);
      for (int l = 0; l < 32; ++l) b[l] = {bk[l][0], bk[l][1]};
      for (int mt = 0; mt < MT; ++mt) {
        int qa[32];
        for (int l = 0; l < 32; ++l) qa[l] = (mt * 16 + tc::x4_row(l)) * ld + tc::x4_col(l) + ks * 16;
        const auto aq = ldmatrix(q, qa, 4, false);
        std::vector<std::array<Reg, 4>> a(32);
        for (int l = 0; l < 32; ++l) a[l] = {aq[l][0], aq[l][1], aq[l][2], aq[l][3]};
        mma(acc[mt], a, b);
      }
    }
    for (int mt = 0; mt < MT; ++mt)
      for (int l = 0; l < 32; ++l) {
        const int g = l >> 2, c2 = (l & 3) * 2;
        for (int hf = 0; hf < 2; ++hf) {
          float* row = &sc[(mt * 16 + g + hf * 8) * tc::kScoreLd + warp * 8 + c2];
          row[0] = acc[mt][l][2 * hf];
          row[1] = acc[mt][l][2 * hf + 1];
        }
      }
  }
  for (int h = 0; h < NH; ++h)
    for (int t = 0; t < tc::kTile; ++t) {
      double want = 0;
      for (int d = 0; d < Dqk; ++d) want += static_cast<double>(q[h * ld + d]) * kv[t * ld + d];
      expect_close(sc[h * tc::kScoreLd + t], want, "scores", h, t);
    }
}

// The value product: warp w owns dims [w Dv / 4, (w + 1) Dv / 4); A = P (ldmatrix), B = the
// staged rows (ldmatrix.trans).
void check_values(int MT, int Dqk, int Dv) {
  namespace tc = kwiki_mla_decode::tc;
  const int NH = 16 * MT, ld = Dqk + tc::kRowPad;
  std::mt19937 gen(MT * 7 + Dv);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> p(NH * tc::kProbLd), kv(tc::kTile * ld);
  for (auto& x : p) x = u(gen);
  for (auto& x : kv) x = u(gen);
  const int dv_tiles = Dv / 32;
  std::vector<float> o(NH * Dv, NAN);
  for (int warp = 0; warp < 4; ++warp) {
    const int d0 = warp * (Dv / 4);
    std::vector<std::vector<std::vector<std::array<float, 4>>>> acc(
        MT, std::vector<std::vector<std::array<float, 4>>>(tc::kMaxDvTiles, std::vector<std::array<float, 4>>(32, {0, 0, 0, 0})));
    for (int ks = 0; ks < tc::kTile / 16; ++ks) {
      std::vector<std::vector<std::array<Reg, 4>>> a(MT, std::vector<std::array<Reg, 4>>(32));
      for (int mt = 0; mt < MT; ++mt) {
        int pa[32];
        for (int l = 0; l < 32; ++l) pa[l] = (mt * 16 + tc::x4_row(l)) * tc::kProbLd + ks * 16 + tc::x4_col(l);
        const auto r = ldmatrix(p, pa, 4, false);
        for (int l = 0; l < 32; ++l) a[mt][l] = {r[l][0], r[l][1], r[l][2], r[l][3]};
      }
      for (int np = 0; 2 * np < dv_tiles; ++np) {
        int va[32];
        for (int l = 0; l < 32; ++l) va[l] = (ks * 16 + tc::x4_row(l)) * ld + d0 + tc::x4_col(l) + np * 16;
        const auto v = ldmatrix(kv, va, 4, true);
        std::vector<std::array<Reg, 2>> b0(32), b1(32);
        for (int l = 0; l < 32; ++l) {
          b0[l] = {v[l][0], v[l][1]};
          b1[l] = {v[l][2], v[l][3]};
        }
        for (int mt = 0; mt < MT; ++mt) {
          mma(acc[mt][2 * np], a[mt], b0);
          mma(acc[mt][2 * np + 1], a[mt], b1);
        }
      }
    }
    for (int mt = 0; mt < MT; ++mt)
      for (int l = 0; l < 32; ++l) {
        const int g = l >> 2, c2 = (l & 3) * 2;
        for (int hf = 0; hf < 2; ++hf)
          for (int n = 0; n < dv_tiles; ++n)
            for (int e = 0; e < 2; ++e) o[(mt * 16 + g + hf * 8) * Dv + d0 + n * 8 + c2 + e] = acc[mt][n][l][2 * hf + e];
      }
  }
  for (int h = 0; h < NH; ++h)
    for (int d = 0; d < Dv; ++d) {
      double want = 0;
      for (int t = 0; t < tc::kTile; ++t) want += static_cast<double>(p[h * tc::kProbLd + t]) * kv[t * ld + d];
      expect_close(o[h * Dv + d], want, "values", h, d);
    }
}


// The vLLM-layout chunk of paged_vllm_tc_kernel: K and V of 16 tokens placed by k_piece / v_piece,
// read back by k_lane / v_lane; A = rows 0..7 (the GQA group's heads), rows 8..15 zero.
void check_vllm(int D) {
  namespace tc = kwiki_paged_decode_vllm::tc;
  constexpr int kTok = tc::kChunk;
  std::mt19937 gen(D);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> k(kTok * D), v(kTok * D), q(8 * D), p(8 * kTok);
  for (auto* vec : {&k, &v, &q, &p})
    for (auto& x : *vec) x = u(gen);
  std::vector<float> stage(2 * D * kTok, NAN);  // elements; byte offsets / 2
  for (int c = 0; c < D / 8; ++c)
    for (int r = 0; r < kTok; ++r)
      for (int x = 0; x < 8; ++x) stage[tc::k_piece(c, r) / 2 + x] = k[r * D + 8 * c + x];
  for (int d = 0; d < D; ++d)
    for (int h = 0; h < 2; ++h)
      for (int x = 0; x < 8; ++x) stage[tc::v_piece(D, d, h) / 2 + x] = v[(8 * h + x) * D + d];
  auto conflict_free = [&](const int (&addr)[32], const char* what) {
    for (int m = 0; m < 4; ++m) {
      unsigned banks = 0;  // 16-byte bank groups of the 8 rows of matrix m
      for (int r = 0; r < 8; ++r) banks |= 1u << ((addr[8 * m + r] * 2 / 16) % 8);
      if (banks != 0xffu && ++failures <= 10) std::printf("FAIL %s: bank conflict in matrix %d\n", what, m);
    }
  };
  auto a_frag = [&](const std::vector<float>& a, int cols, int k0) {  // rows 0..7 of a [8][cols], rows 8..15 zero
    std::vector<std::array<Reg, 4>> f(32);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, c = l % 4;
      f[l][0] = {a[g * cols + k0 + 2 * c], a[g * cols + k0 + 2 * c + 1]};
      f[l][1] = {0.f, 0.f};
      f[l][2] = {a[g * cols + k0 + 8 + 2 * c], a[g * cols + k0 + 9 + 2 * c]};
      f[l][3] = {0.f, 0.f};
    }
    return f;
  };
  // Scores.
  std::vector<std::array<float, 4>> s0(32, {0, 0, 0, 0}), s1(32, {0, 0, 0, 0});
  for (int kk = 0; kk < D / 16; ++kk) {
    int addr[32];
    for (int l = 0; l < 32; ++l) addr[l] = tc::k_lane(l, kk) / 2;
    conflict_free(addr, "K ldmatrix");
    const auto r = ldmatrix(stage, addr, 4, false);
    std::vector<std::array<Reg, 2>> b01(32), b23(32);
    for (int l = 0; l < 32; ++l) {
      b01[l] = {r[l][0], r[l][1]};
      b23[l] = {r[l][2], r[l][3]};
    }
    const auto a = a_frag(q, D, 16 * kk);
    mma(s0, a, b01);
    mma(s1, a, b23);
  }
  for (int l = 0; l < 32; ++l)
    for (int j = 0; j < 4; ++j) {
      const int g = l / 4, t = (j >> 1) * 8 + 2 * (l % 4) + (j & 1);
      double want = 0;
      for (int d = 0; d < D; ++d) want += static_cast<double>(q[g * D + d]) * k[t * D + d];
      expect_close((j >> 1 ? s1 : s0)[l][j & 1], want, "vllm scores", g, t);
    }
  // Values.
  const auto a = a_frag(p, kTok, 0);
  for (int c = 0; c < D / 16; ++c) {
    int addr[32];
    for (int l = 0; l < 32; ++l) addr[l] = tc::v_lane(D, l, c) / 2;
    conflict_free(addr, "V ldmatrix");
    const auto r = ldmatrix(stage, addr, 4, false);
    std::vector<std::array<Reg, 2>> b01(32), b23(32);
    for (int l = 0; l < 32; ++l) {
      b01[l] = {r[l][0], r[l][1]};
      b23[l] = {r[l][2], r[l][3]};
    }
    std::vector<std::array<float, 4>> o0(32, {0, 0, 0, 0}), o1(32, {0, 0, 0, 0});
    mma(o0, a, b01);
    mma(o1, a, b23);
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < 4; ++j) {
        const int g = l / 4, d = 16 * c + (j >> 1) * 8 + 2 * (l % 4) + (j & 1);
        double want = 0;
        for (int t = 0; t < kTok; ++t) want += static_cast<double>(p[g * kTok + t]) * v[t * D + d];
        expect_close((j >> 1 ? o1 : o0)[l][j & 1], want, "vllm values", g, d);
      }
  }
}

void check_splits() {
  namespace m = kwiki_mla_decode;
  for (long long items : {1ll, 7ll, 64ll, 128ll, 256ll, 100000ll})
    for (long long tokens : {1ll, 31ll, 2048ll, 32768ll, 1ll << 20})
      for (long long S : {1ll, 3ll, 8ll, 264ll, 5000ll})
        for (long long resident : {132ll, 264ll}) {
          const long long used = m::choose_tc_splits(items, tokens, S, resident);
          const long long part = (tokens + used - 1) / used;
          if (used < 1 || used > S || used > m::tc::kMaxSplits || part * used < tokens) {
            if (++failures <= 10) std::printf("FAIL mla splits items %lld tokens %lld S %lld: %lld\n", items, tokens, S, used);
          }
          namespace v = kwiki_paged_decode_vllm;
          const long long vused = v::choose_tc_splits(items, tokens, S, resident);
          const long long vpart = ((tokens + vused - 1) / vused + v::tc::kChunk - 1) / v::tc::kChunk * v::tc::kChunk;
          if (vused < 1 || vused > S || vused > 65535 || vpart * vused < tokens) {
            if (++failures <= 10) std::printf("FAIL vllm splits items %lld tokens %lld S %lld: %lld\n", items, tokens, S, vused);
          }
        }
}

}  // namespace

int main() {
  for (int MT : {1, 2}) {
    check_scores(MT, 576);
    check_scores(MT, 64);
    check_values(MT, 576, 512);
    check_values(MT, 128, 64);
  }
  check_vllm(128);
  check_vllm(64);
  check_splits();
  std::printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
