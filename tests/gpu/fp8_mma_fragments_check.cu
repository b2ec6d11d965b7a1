// fp8_mma_fragments_check.cu: checks on the host (no GPU) that the tensor-core path of
// fp8_block_gemm.cuh addresses its stage and mma.sync m16n8k32 e4m3 as PTX defines them: a 64 x 64
// tile's A and B rows staged through the kernel's own chunk mapping (tc::stage_chunk,
// tc::staged_offset), every warp's fragments read through tc::a_word / tc::b_word, an emulation of
// the instruction (PTX ISA, "Matrix fragments for mma.m16n8k32", 8-bit A/B: A registers 0..3 hold
// rows g, g + 8, g, g + 8 at k 4t + (0..3) for registers 0, 1 and 16 + 4t + (0..3) for 2, 3; B
// registers 0, 1 hold column g at k 4t + (0..3) and 16 + 4t + (0..3); D (g, 2t), (g, 2t + 1),
// (g + 8, 2t), (g + 8, 2t + 1)) and the results placed by tc::c_row / tc::c_col must equal the
// tile's products computed directly, every output once; and each fragment load of a warp falls in
// 32 distinct shared-memory banks. Also the CDNA3 MFMA path's addressing (namespace mf).
// Build and run (tests/check_fp8_mma_fragments.sh): nvcc -std=c++17 -I baseline/kernels THIS -o x && ./x
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#define KWIKI_FP8_GEMM_TENSOR_CORES 1
#include "fp8_block_gemm.cuh"

namespace {

namespace fg = kwiki_fp8_block_gemm;
namespace tc = kwiki_fp8_block_gemm::tc;

unsigned char byte_at(const std::vector<unsigned char>& smem, int off) { return smem[static_cast<size_t>(off)]; }

// One mma.m16n8k32 of the warp: d += A B^T with a[lane][4 regs][4 bytes], b[lane][2][4], d[lane][4].
void mma(float (&d)[32][4], const unsigned (&a)[32][4], const unsigned (&b)[32][2]) {
  double A[16][32] = {}, B[32][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < 4; ++e)
        A[g + 8 * (r & 1)][4 * t + e + 16 * (r >> 1)] = fg::fp8_to_float<false>((a[lane][r] >> (8 * e)) & 0xffu);
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < 4; ++e) B[4 * t + e + 16 * r][g] = fg::fp8_to_float<false>((b[lane][r] >> (8 * e)) & 0xffu);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r) {
      double sum = 0;
      for (int k = 0; k < 32; ++k) sum += A[g + 8 * (r >> 1)][k] * B[k][2 * t + (r & 1)];
      d[lane][r] += static_cast<float>(sum);
    }
  }
}

unsigned word_at(const std::vector<unsigned char>& smem, int off) {
  return byte_at(smem, off) | byte_at(smem, off + 1) << 8 | byte_at(smem, off + 2) << 16 | static_cast<unsigned>(byte_at(smem, off + 3)) << 24;
}

}  // namespace

int main() {
  int failures = 0;
  std::mt19937 rng(11);
  const int K = fg::kScaleBlock;
  std::vector<unsigned char> A(64 * K), B(64 * K);
  for (auto* v : {&A, &B})
    for (auto& x : *v) {
      unsigned b;
      do b = rng() & 0xffu; while ((b & 0x7fu) == 0x7fu || (b & 0x78u) > 0x50u);  // finite, moderate magnitudes
      x = static_cast<unsigned char>(b);
    }
  // 1. Stage one K block through the kernel's chunk mapping (each chunk once, inside the stage).
  std::vector<unsigned char> smem(tc::kStageBytes, 0);
  std::set<int> seen;
  for (int c = 0; c < 8 * tc::kThreads; ++c) {
    const tc::Chunk ch = tc::stage_chunk(c);
    const int off = tc::staged_offset(ch);
    if (off % 16 != 0 || off < 0 || off + 16 > tc::kStageBytes || !seen.insert(off).second) {
      std::printf("FAIL chunk %d: offset %d misaligned, outside the stage or taken twice\n", c, off);
      ++failures;
      continue;
    }
    const std::vector<unsigned char>& src = ch.is_b ? B : A;
    for (int e = 0; e < 16; ++e) smem[static_cast<size_t>(off + e)] = src[static_cast<size_t>(ch.row * K + ch.col + e)];
  }
  // 2. Each warp's MMAs over the block, results placed by c_row / c_col.
  std::vector<double> got(64 * 64, 0.0);
  std::vector<int> writes(64 * 64, 0);
  int conflicts = 0;
  for (int w = 0; w < tc::kThreads / 32; ++w) {
    const int wm = tc::warp_m(w), wn = tc::warp_n(w);
    float part[2][4][32][4] = {};
    for (int ks = 0; ks < K; ks += 32) {
      unsigned a[2][32][4], b[4][32][2];
      for (int i = 0; i < 2; ++i)
        for (int r = 0; r < 4; ++r) {
          std::set<int> banks;
          for (int lane = 0; lane < 32; ++lane) {
            const int off = tc::a_word(wm, i, lane / 4, lane % 4, ks, r);
            a[i][lane][r] = word_at(smem, off);
            banks.insert((off / 4) % 32);
          }
          conflicts += banks.size() != 32;
        }
      for (int j = 0; j < 4; ++j)
        for (int r = 0; r < 2; ++r) {
          std::set<int> banks;
          for (int lane = 0; lane < 32; ++lane) {
            const int off = tc::b_word(wn, j, lane / 4, lane % 4, ks, r);
            b[j][lane][r] = word_at(smem, off);
            banks.insert((off / 4) % 32);
          }
          conflicts += banks.size() != 32;
        }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) mma(part[i][j], a[i], b[j]);
    }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int lane = 0; lane < 32; ++lane)
          for (int r = 0; r < 4; ++r) {
            const int m = tc::c_row(wm, i, lane / 4, r), n = tc::c_col(wn, j, lane % 4, r);
            got[static_cast<size_t>(m * 64 + n)] = part[i][j][lane][r];
            ++writes[static_cast<size_t>(m * 64 + n)];
          }
  }
  if (conflicts) {
    std::printf("FAIL %d fragment loads hit a bank twice\n", conflicts);
    ++failures;
  }
  // 3. Against the products computed directly.
  int bad = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 64; ++n) {
      double want = 0, mag = 0;  // mag: the sum of |terms|, which bounds the fp32 sums' rounding
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(fg::fp8_to_float<false>(A[m * K + k])) * fg::fp8_to_float<false>(B[n * K + k]);
        want += p;
        mag += std::fabs(p);
      }
      const double g = got[static_cast<size_t>(m * 64 + n)];
      if (writes[static_cast<size_t>(m * 64 + n)] != 1 || std::fabs(g - want) > 1e-6 * mag + 1e-30) ++bad;
    }
  if (bad) {
    std::printf("FAIL %d of 4096 tile outputs differ from the direct product or are written other than once\n", bad);
    ++failures;
  }
  // 4. The CDNA3 MFMA path's operand addressing (mf::a_bytes, b_bytes, c_row, c_col) against an
  //    emulation of v_mfma_f32_16x16x32_fp8 (lane l: row / column l % 16, K bytes 8 (l / 16) .. + 7;
  //    result r of lane l at C[4 (l / 16) + r][l % 16]), on the same tile staged at the same pitch.
  namespace mf = kwiki_fp8_block_gemm::mf;
  std::vector<unsigned char> lds(mf::kStageBytes, 0);
  for (int row = 0; row < 64; ++row)
    for (int k = 0; k < K; ++k) {
      lds[static_cast<size_t>(row * mf::kRowBytes + k)] = A[static_cast<size_t>(row * K + k)];
      lds[static_cast<size_t>(mf::kTile * mf::kRowBytes + row * mf::kRowBytes + k)] = B[static_cast<size_t>(row * K + k)];
    }
  std::vector<double> got_mf(64 * 64, 0.0);
  std::vector<int> writes_mf(64 * 64, 0);
  for (int w = 0; w < mf::kThreads / 64; ++w) {
    const int wm = mf::wave_m(w), wn = mf::wave_n(w);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        double d[64][4] = {};
        for (int ks = 0; ks < K; ks += 32) {
          double Am[16][32] = {}, Bm[32][16] = {};
          for (int l = 0; l < 64; ++l)
            for (int e = 0; e < 8; ++e) {
              Am[l % 16][8 * (l / 16) + e] = fg::fp8_to_float<false>(lds[static_cast<size_t>(mf::a_bytes(wm, i, l, ks) + e)]);
              Bm[8 * (l / 16) + e][l % 16] = fg::fp8_to_float<false>(lds[static_cast<size_t>(mf::b_bytes(wn, j, l, ks) + e)]);
            }
          for (int l = 0; l < 64; ++l)
            for (int r = 0; r < 4; ++r)
              for (int k = 0; k < 32; ++k) d[l][r] += Am[4 * (l / 16) + r][k] * Bm[k][l % 16];
        }
        for (int l = 0; l < 64; ++l)
          for (int r = 0; r < 4; ++r) {
            const int m = mf::c_row(wm, i, l, r), n = mf::c_col(wn, j, l);
            got_mf[static_cast<size_t>(m * 64 + n)] = d[l][r];
            ++writes_mf[static_cast<size_t>(m * 64 + n)];
          }
      }
  }
  int bad_mf = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 64; ++n) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += static_cast<double>(fg::fp8_to_float<false>(A[m * K + k])) * fg::fp8_to_float<false>(B[n * K + k]);
      if (writes_mf[static_cast<size_t>(m * 64 + n)] != 1 || got_mf[static_cast<size_t>(m * 64 + n)] != want) ++bad_mf;
    }
  if (bad_mf) {
    std::printf("FAIL mfma: %d of 4096 tile outputs differ from the direct product or are written other than once\n", bad_mf);
    ++failures;
  }
  // The Hopper kernel's split over K (wg::split_for): the H200's 132 SMs, the serving shapes. Few tiles
  // of long K split until a wave is full (decode: 17 tiles of 56 K blocks -> 4 blocks a tile), many
  // tiles or short K do not, and a split never exceeds 8, the K blocks, or a power of two.
  struct SplitCase {
    long long tiles;
    int kb, want;
  };
  for (const SplitCase& c : {SplitCase{17, 56, 4}, SplitCase{32, 56, 4}, SplitCase{1792, 56, 1}, SplitCase{256, 4, 1}, SplitCase{1, 1, 1},
                             SplitCase{1, 56, 8}, SplitCase{56, 16, 2}, SplitCase{1, 3, 1}}) {
    const int got = fg::wg::split_for(c.tiles, c.kb, 132);
    if (got != c.want) {
      std::printf("FAIL split_for(%lld tiles, %d K blocks, 132 SMs) = %d, want %d\n", c.tiles, c.kb, got, c.want);
      ++failures;
    }
  }
  for (long long tiles = 1; tiles <= 4096; tiles = tiles * 3 + 1)
    for (int kb = 1; kb <= 200; kb += 7) {
      const int sp = fg::wg::split_for(tiles, kb, 132);
      if (sp < 1 || sp > fg::wg::kMaxSplit || (sp & (sp - 1)) != 0 || (sp > 1 && sp > kb)) {
        std::printf("FAIL split_for(%lld, %d, 132) = %d: not a power of two in [1, min(8, K blocks)]\n", tiles, kb, sp);
        ++failures;
      }
    }
  std::printf("fp8_block_gemm tensor-core fragments: %s\n", failures ? "FAIL" : "stage, fragments, placement and banks as PTX defines them; "
                                                                                "the MFMA path's operands and results as CDNA3 lays them out");
  return failures ? 1 : 0;
}
