// fp8_block_gemm.cuh: kwiki V0 template, block-scaled fp8 GEMM (DeepSeek-V3 / vLLM
// w8a8_block_fp8_matmul): e4m3 activations with one scale per 1 x 128 group, e4m3 weights with one
// scale per 128 x 128 block, output in KWIKI_T (bf16).
//
//   out[m, n] = sum_kb (As[m, kb] * Bs[n / 128, kb]) * (sum_{k in block kb} A[m, k] * B[n, k])
//
// Each 128-wide K block's partial sum is formed in fp32 from the exact fp8 products, scaled by
// the fp32 product As * Bs and added to an fp32 accumulator (the "promotion" of every K block, as
// vLLM's native reference does it: C += (a @ b.T) * (As * Bs) block by block); one rounding to
// KWIKI_T at the store. A last K block shorter than 128 (K not a multiple of 128) is summed as far
// as K goes, as the reference's slices are.
//
// ABI (ABI.md): tensors A[M,K] (fp8 bytes), B[N,K] (fp8 bytes), As[M,ceil(K/128)] (fp32),
// Bs[ceil(N/128),ceil(K/128)] (fp32), out[M,N] (KWIKI_T); dims M, N, K, BN, BK (the scale block
// sizes: only 128 x 128 is served, others return -1); params fnuz (0: e4m3fn, the OCP format of
// CUDA; 1: e4m3fnuz, CDNA3's). Served: K a multiple of 16 (the rows are 16-byte loads), A and B
// 16-byte aligned, ceil(M / 64) <= 65535.
//
// Design, three kernels; launch() takes the first that applies (see the switches below the includes).
// 0. Hopper (cc 9.0, e4m3fn, only where KWIKI_FP8_GEMM_WGMMA is 1; wg::fp8_block_gemm_wgmma_kernel):
//    TMA into a 6-stage ring, wgmma.m64n128k32 e4m3 with the same per-128-K promotion, a 128 x 128
//    tile a block, K split over a cluster when the tiles do not fill the GPU. Off in V0: see the
//    switch's comment.
// 1. Tensor cores (CUDA sm_89+, e4m3fn; tc::fp8_block_gemm_tc_kernel): mma.sync m16n8k32 e4m3 x
//    e4m3 -> fp32. Each 128-K block's MMAs accumulate into a fresh fp32 fragment, which is then
//    scaled and added to the main accumulator in CUDA-core fp32 (the promotion: the tensor core's
//    fp8 accumulation keeps fewer mantissa bits than fp32, DeepSeek-V3 report section 3.3.2). On
//    CDNA3 (gfx942, e4m3fnuz) the same loop on v_mfma_f32_16x16x32_fp8_fp8
//    (mf::fp8_block_gemm_mfma_kernel). The CUDA one is V0's on CUDA (checked on the H200); the
//    MFMA one has not run on a device.
// 2. CUDA cores (fp8_block_gemm_kernel; HIP in V0, CUDA where KWIKI_FP8_GEMM_TENSOR_CORES is 0): a block of 256 threads owns a
//    64 x 64 output tile (inside one 128-column weight-scale block) and walks K in 32-wide steps:
//    the step's A and B rows are read as 16-byte chunks, decoded to fp32 once (fp8_to_float) and
//    kept in shared memory k-major, where each thread's 4 x 4 outputs read them as broadcasts.
#ifndef KWIKI_FP8_BLOCK_GEMM_CUH
#define KWIKI_FP8_BLOCK_GEMM_CUH

#include <cstring>

#include "kwiki_compat.cuh"
#if KWIKI_PLATFORM_CUDA && !defined(KWIKI_HOST_EMULATION)
#include <cstdio>

#include "kwiki_hopper.cuh"  // TMA, mbarriers, the wgmma descriptor, cluster barriers, the tensor-map encoder
#endif

// The CUDA tensor-core path (tc:: below) is V0's on CUDA: it passed every serving-bench shape on the
// H200 in session 14 (bench/results/serving_kernels_h200-session14-fp8gemm.txt), 3.4-8.4x the
// CUDA-core kernel. The gfx942 matrix-core path has not run on a device, so HIP keeps the vector-ALU
// kernel unless built with -DKWIKI_FP8_GEMM_TENSOR_CORES=1; =0 builds the CUDA-core kernel on CUDA.
#ifndef KWIKI_FP8_GEMM_TENSOR_CORES
#define KWIKI_FP8_GEMM_TENSOR_CORES KWIKI_PLATFORM_CUDA
#endif
// =1: on a cc 9.0 device the TMA + WGMMA kernel (wg:: below) goes first. Off in V0: it passes exact-value
// checks on the H200, but the tensor core's fp8 sums (wgmma) miss the vllm_w8a8_block_fp8_matmul task's
// elementwise tolerance where mma.sync meets it (docs/PERF.md, session 18).
#ifndef KWIKI_FP8_GEMM_WGMMA
#define KWIKI_FP8_GEMM_WGMMA 0
#endif

namespace kwiki_fp8_block_gemm {

constexpr int kScaleBlock = 128;  // the K (and weight N) extent of one scale
constexpr int kTileM = 64;
constexpr int kTileN = 64;        // divides kScaleBlock: a tile's columns share one weight scale row
constexpr int kStepK = 32;        // K elements a shared-memory step holds
constexpr int kThreads = 256;     // 16 x 16 threads, 4 x 4 outputs each
constexpr int kPad = 1;           // shared rows of kTileM + 1 floats: the transposing stores hit distinct banks
static_assert(kScaleBlock % kTileN == 0 && kScaleBlock % kStepK == 0, "a tile lies in one scale block");

/// The value of an fp8 E4M3 byte, exactly (every e4m3 value is a float). kFnuz: e4m3fnuz (bias 8,
/// 0x80 the only NaN, no -0); else e4m3fn (bias 7, 0x7f and 0xff NaN). Host and device: the
/// host emulation and the twin's decoder agree with it.
template <bool kFnuz>
KWIKI_HOST_DEVICE float fp8_to_float(unsigned int byte) {
  constexpr unsigned int kBias = kFnuz ? 8u : 7u;
  const unsigned int mag = byte & 0x7fu;
  if (kFnuz ? byte == 0x80u : mag == 0x7fu) return kwiki::bit_cast<float>(0x7fc00000u);
  const unsigned int e = mag >> 3, m = mag & 7u;
  // Normal: 2^(e - bias) * (1 + m / 8), the float with that exponent and m as its top mantissa
  // bits. Subnormal (e = 0): m * 2^(-bias - 2), an integer times an exact power of two.
  const float v = e != 0 ? kwiki::bit_cast<float>(((e + 127u - kBias) << 23) | (m << 20))
                         : static_cast<float>(m) * kwiki::bit_cast<float>((127u - kBias - 2u) << 23);
  return (byte & 0x80u) ? -v : v;
}

/// Problem sizes as the kernels take them.
struct Shape {
  int M, N, K;
  int kb;  ///< scale blocks along K: ceil(K / 128), the columns of As and Bs
};

/// CUDA-core kernel: grid (ceil(N / 64), ceil(M / 64)), 256 threads.
template <typename T, bool kFnuz>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
fp8_block_gemm_kernel(const unsigned char* __restrict__ A, const unsigned char* __restrict__ B, const float* __restrict__ As,
                      const float* __restrict__ Bs, T* __restrict__ out, Shape s) {
  __shared__ float a_s[kStepK][kTileM + kPad];
  __shared__ float b_s[kStepK][kTileN + kPad];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;
  const int nb = n0 / kScaleBlock;  // the tile's weight-scale row
  // Loading: threads 0..127 fetch A's 64 rows x 32 bytes, 128..255 B's, one 16-byte chunk each.
  const bool loads_b = tid >= kThreads / 2;
  const int lr = (tid % (kThreads / 2)) / 2;       // row of the tile
  const int lk = (tid % 2) * 16;                   // first k of the chunk within the step
  const int grow = (loads_b ? n0 : m0) + lr;       // row of A or B
  const bool row_ok = grow < (loads_b ? s.N : s.M);
  const unsigned char* src = (loads_b ? B : A) + static_cast<long long>(row_ok ? grow : 0) * s.K;
  float (*dst)[kTileM + kPad] = loads_b ? b_s : a_s;

  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

  for (int kb = 0; kb < s.kb; ++kb) {
    float part[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) part[i][j] = 0.f;
    const int k_end = min(s.K, (kb + 1) * kScaleBlock);
    for (int k0 = kb * kScaleBlock; k0 < k_end; k0 += kStepK) {
      // K is a multiple of 16, so a chunk is wholly inside or wholly past K.
      const int kc = k0 + lk;
      kwiki::Vec<unsigned char> chunk;
      if (row_ok && kc < s.K) {
        chunk = kwiki::load_vec(src + kc);
      } else {
#pragma unroll
        for (int j = 0; j < 16; ++j) chunk.v[j] = 0;  // rows past M/N and k past K add nothing
      }
#pragma unroll
      for (int j = 0; j < 16; ++j) dst[lk + j][lr] = fp8_to_float<kFnuz>(chunk.v[j]);
      __syncthreads();
#pragma unroll 8
      for (int k = 0; k < kStepK; ++k) {
        float a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = a_s[k][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) b[j] = b_s[k][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) part[i][j] = fmaf(a[i], b[j], part[i][j]);
      }
      __syncthreads();
    }
    // The promotion: the block's partial times As * Bs (one fp32 product, as the reference's
    // As[:, kb] * Bs[nb, kb]), added to the accumulator.
    const float sb = Bs[static_cast<long long>(nb) * s.kb + kb];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + ty + 16 * i;
      const float sab = __fmul_rn(m < s.M ? As[static_cast<long long>(m) * s.kb + kb] : 0.f, sb);
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(part[i][j], sab));
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= s.M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx + 16 * j;
      if (n < s.N) out[static_cast<long long>(m) * s.N + n] = kwiki_from_float<T>(acc[i][j]);
    }
  }
}

template <typename T, bool kFnuz>
inline int launch_cuda_cores(const unsigned char* A, const unsigned char* B, const float* As, const float* Bs, T* out, const Shape& s,
                             kwiki_stream_t stream) {
  const dim3 grid(static_cast<unsigned>((s.N + kTileN - 1) / kTileN), static_cast<unsigned>((s.M + kTileM - 1) / kTileM));
  fp8_block_gemm_kernel<T, kFnuz><<<grid, kThreads, 0, stream>>>(A, B, As, Bs, out, s);
  return kwiki_last_error();
}

#if KWIKI_PLATFORM_CUDA && !defined(KWIKI_HOST_EMULATION)  // the host emulation runs the CUDA-core kernel only
// ---------------------------------------------------------------------------------------------
// Tensor cores (sm_89+, e4m3fn): mma.sync m16n8k32 e4m3 x e4m3 -> fp32, promoted per 128-K block
// ---------------------------------------------------------------------------------------------
// A block of 128 threads (4 warps, 2 x 2) owns a 64 x 64 output tile; a warp 32 x 32: two m16
// tiles by four n8 tiles, 8 MMAs a 32-wide k step. A whole 128-K scale block of A and B (64 rows x
// 128 bytes each) is staged in shared memory by cp.async (16-byte copies, zero-filled past M, N
// and K), double-buffered across K blocks; rows padded to 144 bytes so the fragment loads (a
// 32-bit word at row g, byte 4t of the step) fall in 32 distinct banks. Each K block's MMAs
// accumulate into a zeroed fragment `part`; after its four k steps, acc += part * (As * Bs) in
// fp32 on the CUDA cores: the tensor core's fp8 sums carry fewer mantissa bits than fp32, so no
// more than one scale block (128 K) is left in them.
// Fragments (PTX ISA, mma.m16n8k32 with 8-bit A/B; g = lane / 4, t = lane % 4): A registers 0..3
// hold rows g, g + 8, g, g + 8 at k bytes 4t..4t+3, 4t..4t+3, 16+4t.., 16+4t..; B registers 0, 1
// hold column g at k bytes 4t.. and 16+4t..; C holds (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
// A and B take the same k of each register, so the sum over k holds for any order of k within the step.
namespace tc {

constexpr int kThreads = 128;
constexpr int kTile = 64;                    // M and N extent of a block's tile
constexpr int kRowBytes = kScaleBlock + 16;  // a staged row: 128 bytes of K and 16 of padding
constexpr int kStageBytes = 2 * kTile * kRowBytes;  // A then B

// The addressing of the stage and the fragments, host-callable so tests/gpu/fp8_mma_fragments_check.cu
// can feed it to an emulation of the instruction.
/// Chunk c (0..1023) of a stage: A's (c < 512) or B's row `row` of the tile, K bytes col..col+15 of the block.
struct Chunk {
  bool is_b;
  int row, col;
};
KWIKI_HOST_DEVICE Chunk stage_chunk(int c) { return Chunk{c >= kTile * 8, (c % (kTile * 8)) / 8, (c % 8) * 16}; }
/// The chunk's byte offset in the stage.
KWIKI_HOST_DEVICE int staged_offset(const Chunk& ch) { return (ch.is_b ? kTile * kRowBytes : 0) + ch.row * kRowBytes + ch.col; }
/// The first tile row and column of warp w's 32 x 32 (2 x 2 warps).
KWIKI_HOST_DEVICE int warp_m(int w) { return (w / 2) * 32; }
KWIKI_HOST_DEVICE int warp_n(int w) { return (w % 2) * 32; }
/// Byte offset of A register r (0..3) of the warp's m16 tile i, lane (g, t), k step ks: rows g, g + 8, g, g + 8; k 4t.., 4t.., 16 + 4t.., 16 + 4t...
KWIKI_HOST_DEVICE int a_word(int wm, int i, int g, int t, int ks, int r) { return (wm + i * 16 + g + (r & 1) * 8) * kRowBytes + ks + 4 * t + (r >> 1) * 16; }
/// Byte offset of B register r (0..1) of the warp's n8 tile j: column g, k 4t.. and 16 + 4t...
KWIKI_HOST_DEVICE int b_word(int wn, int j, int g, int t, int ks, int r) { return kTile * kRowBytes + (wn + j * 8 + g) * kRowBytes + ks + 4 * t + r * 16; }
/// The tile row and column of accumulator register r (0..3) of tiles (i, j): (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
KWIKI_HOST_DEVICE int c_row(int wm, int i, int g, int r) { return wm + i * 16 + g + 8 * (r >> 1); }
KWIKI_HOST_DEVICE int c_col(int wn, int j, int t, int r) { return wn + j * 8 + 2 * t + (r & 1); }

KWIKI_DEVICE unsigned int shared_address(const void* p) { return static_cast<unsigned int>(__cvta_generic_to_shared(p)); }

KWIKI_DEVICE void copy16(unsigned int dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

KWIKI_DEVICE void mma_e4m3(float (&d)[4], const unsigned int (&a)[4], const unsigned int (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // launched only on sm_89 and later (launch_tc checks the device)
#endif
}

/// Stages K block kb of the tile's 64 rows of A and of B: 1024 16-byte chunks, 8 a thread.
KWIKI_DEVICE void stage_block(unsigned char* stage, const unsigned char* __restrict__ A, const unsigned char* __restrict__ B, int m0, int n0,
                              int kb, const Shape& s) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const Chunk ch = stage_chunk(threadIdx.x + i * kThreads);
    const int grow = (ch.is_b ? n0 : m0) + ch.row, k = kb * kScaleBlock + ch.col;
    const bool valid = grow < (ch.is_b ? s.N : s.M) && k < s.K;
    const unsigned char* src = ch.is_b ? B : A;
    if (valid) src += static_cast<long long>(grow) * s.K + k;
    copy16(shared_address(stage + staged_offset(ch)), src, valid);
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
fp8_block_gemm_tc_kernel(const unsigned char* __restrict__ A, const unsigned char* __restrict__ B, const float* __restrict__ As,
                         const float* __restrict__ Bs, T* __restrict__ out, Shape s) {
  __shared__ __align__(16) unsigned char smem[2 * kStageBytes];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = warp_m(warp), wn = warp_n(warp);  // the warp's 32 x 32 inside the tile
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int nb = n0 / kScaleBlock;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
  if (s.kb > 0) stage_block(smem, A, B, m0, n0, 0, s);
  for (int kb = 0; kb < s.kb; ++kb) {
    unsigned char* cur = smem + (kb % 2) * kStageBytes;
    if (kb + 1 < s.kb) {
      stage_block(smem + ((kb + 1) % 2) * kStageBytes, A, B, m0, n0, kb + 1, s);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
    float part[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) part[i][j][r] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kScaleBlock; ks += 32) {
      unsigned int a[2][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) a[i][r] = *reinterpret_cast<const unsigned int*>(cur + a_word(wm, i, g, t, ks, r));
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int r = 0; r < 2; ++r) b[j][r] = *reinterpret_cast<const unsigned int*>(cur + b_word(wn, j, g, t, ks, r));
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_e4m3(part[i][j], a[i], b[j]);
    }
    // The promotion: this K block's fragment times As * Bs, added in fp32.
    const float sb = Bs[static_cast<long long>(nb) * s.kb + kb];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + c_row(wm, i, g, 2 * h);
        const float sab = __fmul_rn(m < s.M ? As[static_cast<long long>(m) * s.kb + kb] : 0.f, sb);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) acc[i][j][2 * h + c] = __fadd_rn(acc[i][j][2 * h + c], __fmul_rn(part[i][j][2 * h + c], sab));
      }
    }
    __syncthreads();  // the next iteration's copies overwrite the stage just read
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int m = m0 + c_row(wm, i, g, r), n = n0 + c_col(wn, j, t, r);
        if (m < s.M && n < s.N) out[static_cast<long long>(m) * s.N + n] = kwiki_from_float<T>(acc[i][j][r]);
      }
}

/// The tensor-core launch, or -1 where it does not apply (a device before sm_89).
template <typename T>
inline int launch_tc(const unsigned char* A, const unsigned char* B, const float* As, const float* Bs, T* out, const Shape& s,
                     kwiki_stream_t stream) {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return -1;
  if (major * 10 + minor < 89) return -1;
  const dim3 grid(static_cast<unsigned>((s.N + kTile - 1) / kTile), static_cast<unsigned>((s.M + kTile - 1) / kTile));
  fp8_block_gemm_tc_kernel<T><<<grid, kThreads, 0, stream>>>(A, B, As, Bs, out, s);
  return kwiki_last_error();
}

}  // namespace tc

// ---------------------------------------------------------------------------------------------
// Hopper (sm_90a, e4m3fn): TMA + wgmma.m64n128k32, promoted per 128-K block, K split in a cluster
// ---------------------------------------------------------------------------------------------
// A block of three warpgroups owns a 128 x 128 output tile. Warpgroup 0 is the producer: one thread
// issues the TMA copies of a stage, one 128-K scale block of the tile's 128 rows of A and 128 rows of
// B (16 KiB each, 128-byte swizzled; TMA zero-fills rows past M and N and K past K), into a 6-stage
// ring. Warpgroups 1 and 2 each own 64 rows and run four wgmma.m64n128k32 e4m3 x e4m3 -> fp32 per
// stage straight from shared memory into a fresh fragment (the first with scale-d 0), wait for them,
// hand the stage back, and promote: acc += part * (As * Bs) in fp32 on the CUDA cores, as the other
// kernels do (the tensor core's fp8 sums carry fewer mantissa bits than fp32, so no more than one
// 128-K block is left in them). While one consumer promotes, the other's wgmmas run.
// The tile's 128 columns are one 128-column weight-scale block (n0 is a multiple of 128), so a stage
// takes one Bs value and each thread two As values (its rows r and r + 8).
// Few tiles (decode and small-batch shapes) leave SMs idle: then `split` blocks of a cluster
// (1 x 1 x split, split 2, 4 or 8) take consecutive ranges of K blocks of the same tile, each puts its
// fp32 tile in its drained ring, and after a cluster barrier block r sums rows [r * 128 / split, ...)
// over the cluster's blocks through distributed shared memory in block order 0, 1, ... (no atomics:
// the same bits every run) and stores them. Accumulator layout of m64nNk32 (f32): for each 8-column
// group j, d[4j], d[4j+1] are (row 16w + lane/4, columns 8j + 2(lane%4) + {0,1}) of warp w, and
// d[4j+2], d[4j+3] the same columns 8 rows below.
// Needs a cc 9.0 device, a build for sm_90a (wgmma is an sm_90a feature), K a
// multiple of 16 and A, B 16-byte aligned (TMA strides and addresses).
namespace wg {

constexpr int kBM = 128, kBN = 128, kBK = kScaleBlock;  // a stage: one scale block of K
constexpr int kStages = 6;
constexpr int kConsumers = 2;                           // warpgroups of 64 rows
constexpr int kThreads = 128 * (kConsumers + 1);        // + the producer warpgroup
constexpr uint32_t kABytes = kBM * kBK;                 // 16 KiB
constexpr uint32_t kStageBytes = (kBM + kBN) * kBK;     // one TMA transaction per stage
constexpr int kRingBytes = kStages * kStageBytes;
constexpr int kSmemBytes = kRingBytes + 1024 + 2 * kStages * 8;  // + 1 KiB alignment, barriers
constexpr int kRedPitch = kBN + 4;                      // fp32 row pitch of the reduction tile
constexpr int kMaxSplit = 8;                            // blocks of a cluster (the portable maximum)
#ifndef KWIKI_FP8_WG_PROMOTE_K
#define KWIKI_FP8_WG_PROMOTE_K 128
#endif
constexpr int kPromote = KWIKI_FP8_WG_PROMOTE_K / 32;   // wgmmas summed in the tensor core before a promotion
static_assert(kPromote == 1 || kPromote == 2 || kPromote == 4, "KWIKI_FP8_WG_PROMOTE_K is 32, 64 or 128");
static_assert(kBN == kScaleBlock, "a tile's columns share one weight-scale block");
static_assert(kBM * kRedPitch * 4 <= kRingBytes, "the reduction tile fits in the drained ring");
static_assert(kBM % kMaxSplit == 0, "every split divides the tile's rows");

/// The cluster size along K (1, 2, 4 or 8) for `tiles` output tiles of `kb` K blocks on `sms` SMs
/// (one block an SM): the smallest that minimises waves x (K blocks a block + 1 for the
/// reduction when split). Host-callable, so the choice is tested without a GPU.
KWIKI_HOST_DEVICE int split_for(long long tiles, int kb, int sms) {
  int best = 1;
  long long best_cost = -1;
  for (int sp = 1; sp <= kMaxSplit && (sp == 1 || sp <= kb); sp *= 2) {
    const long long waves = (tiles * sp + sms - 1) / sms;
    const long long cost = waves * ((kb + sp - 1) / sp + (sp > 1 ? 1 : 0));
    if (best_cost < 0 || cost < best_cost) best_cost = cost, best = sp;
  }
  return best;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// d (64 fp32 a thread) = A(64 x 32, descriptor da) * B(32 x 128, descriptor db) (+ d when accumulate).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(accumulate));
}
#endif

/// out as T: the fp32 pair (v0, v1) at o[0], o[1] (o[1] only when `both`), one 32-bit store for a
/// 16-bit T when `pair_store`.
template <typename T>
KWIKI_DEVICE void store_pair(T* o, float v0, float v1, bool both, bool pair_store) {
  const T t0 = kwiki_from_float<T>(v0), t1 = kwiki_from_float<T>(v1);
  if constexpr (sizeof(T) == 2) {
    if (pair_store && both) {
      uint16_t b[2];
      memcpy(&b[0], &t0, 2);
      memcpy(&b[1], &t1, 2);
      *reinterpret_cast<uint32_t*>(o) = static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 16);
      return;
    }
  }
  o[0] = t0;
  if (both) o[1] = t1;
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
fp8_block_gemm_wgmma_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* __restrict__ As,
                            const float* __restrict__ Bs, T* __restrict__ out, Shape s) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kwiki_hopper;
  extern __shared__ uint8_t dyn_smem[];
  const uint32_t base = (smem_u32(dyn_smem) + 1023u) & ~1023u;  // 128-byte swizzle atoms: 1 KiB aligned
  const uint32_t full = base + kRingBytes;                       // kStages mbarriers: the stage's bytes landed
  const uint32_t empty = full + kStages * 8;                     // kStages mbarriers: the 8 consumer warps read the stage
  const int tid = threadIdx.x, warpgroup = tid / 128;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN, nb = n0 / kScaleBlock;
  const int split = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);  // cluster 1 x 1 x split: rank = z
  const int per = (s.kb + split - 1) / split;
  const int kb0 = min(s.kb, rank * per), n_kb = min(s.kb, kb0 + per) - kb0;
  const bool pair_store = (s.N % 2 == 0) && ((reinterpret_cast<uintptr_t>(out) & 3) == 0);

  if (tid == 0) {
    for (int st = 0; st < kStages; ++st) {
      mbar_init(full + 8 * st, 1);
      mbar_init(empty + 8 * st, kConsumers * 4);  // each consumer warp's lane 0, after its own wait
    }
    fence_mbar_init();
  }
  __syncthreads();

  // No setmaxnreg: the consumers fit in the 168 registers a thread of 384 gets (ptxas -v).
  if (warpgroup == 0) {  // producer
    if (tid == 0) {
      for (int i = 0; i < n_kb; ++i) {
        const int st = i % kStages;
        if (i >= kStages) mbar_wait(empty + 8 * st, ((i / kStages) - 1) & 1);
        const uint32_t a = base + st * kStageBytes;
        const int k = (kb0 + i) * kBK;
        mbar_expect_tx(full + 8 * st, kStageBytes);
        tma_load_2d(a, &ta, full + 8 * st, k, m0);
        tma_load_2d(a + kABytes, &tb, full + 8 * st, k, n0);
      }
    }
  } else {  // consumers: warpgroup c owns rows [64c, 64c + 64) of the tile
    const int c = warpgroup - 1, lt = tid % 128, w4 = lt / 32, lane = lt % 32;
    const int tr = c * 64 + w4 * 16 + lane / 4;  // this thread's tile rows tr and tr + 8
    const int r0 = m0 + tr;
    const bool ok0 = r0 < s.M, ok1 = r0 + 8 < s.M;
    const float* as0 = As + static_cast<long long>(ok0 ? r0 : 0) * s.kb;
    const float* as1 = As + static_cast<long long>(ok1 ? r0 + 8 : 0) * s.kb;
    const float* bs = Bs + static_cast<long long>(nb) * s.kb;
    float acc[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    for (int i = 0; i < n_kb; ++i) {
      const int st = i % kStages, kb = kb0 + i;
      // The scales first: their loads run while the stage lands and the wgmmas work.
      const float sb = __ldg(bs + kb);
      const float sa0 = ok0 ? __ldg(as0 + kb) : 0.f, sa1 = ok1 ? __ldg(as1 + kb) : 0.f;
      mbar_wait(full + 8 * st, (i / kStages) & 1);
      const uint32_t a = base + st * kStageBytes + c * 64 * kBK;
      const uint32_t b = base + st * kStageBytes + kABytes;
      const float s0 = __fmul_rn(sa0, sb), s1 = __fmul_rn(sa1, sb);
      // kPromote wgmmas (k32 each) accumulate in the tensor core before their fp32 partial is
      // scaled and promoted; the stage goes back after the last group's wait.
#pragma unroll
      for (int g0 = 0; g0 < kBK / 32; g0 += kPromote) {
        fence_acc(part);
        wgmma_fence();
#pragma unroll
        for (int kk = g0; kk < g0 + kPromote; ++kk) wgmma_m64n128k32_e4m3(part, smem_desc(a + kk * 32), smem_desc(b + kk * 32), kk - g0);
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(part);
        if (g0 + kPromote == kBK / 32 && lane == 0) mbar_arrive(empty + 8 * st);  // after this warp's wait (it syncs a warp, not the warpgroup)
        // The promotion: the fragment times As * Bs (one fp32 product), added in fp32.
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          acc[4 * j] = __fadd_rn(acc[4 * j], __fmul_rn(part[4 * j], s0));
          acc[4 * j + 1] = __fadd_rn(acc[4 * j + 1], __fmul_rn(part[4 * j + 1], s0));
          acc[4 * j + 2] = __fadd_rn(acc[4 * j + 2], __fmul_rn(part[4 * j + 2], s1));
          acc[4 * j + 3] = __fadd_rn(acc[4 * j + 3], __fmul_rn(part[4 * j + 3], s1));
        }
      }
    }
    const int tc0 = 2 * (lane % 4);
    if (split == 1) {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int col = n0 + 8 * j + tc0;
        if (col >= s.N) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = r0 + 8 * h;
          if (row < s.M) store_pair<T>(out + static_cast<long long>(row) * s.N + col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], col + 1 < s.N, pair_store);
        }
      }
    } else {  // the block's fp32 tile into its drained ring (every stage it issued was waited for)
      asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers * 128) : "memory");  // the other consumer's last wgmmas are done
      float* red = reinterpret_cast<float*>(dyn_smem + (base - smem_u32(dyn_smem)));
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(red + (tr + 8 * h) * kRedPitch + 8 * j + tc0) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
  }
  if (split > 1) {
    cluster_sync();  // every block's tile is in its shared memory
    if (warpgroup != 0) {
      const int rows = kBM / split, first = rank * rows;
      for (int e = tid - 128; e < rows * (kBN / 4); e += kConsumers * 128) {
        const int tr = first + e / (kBN / 4), tcol = (e % (kBN / 4)) * 4;
        const int row = m0 + tr, col = n0 + tcol;
        if (row >= s.M || col >= s.N) continue;
        const uint32_t local = base + static_cast<uint32_t>((tr * kRedPitch + tcol) * 4);
        float4 v = cluster_load4(cluster_map(local, 0));
        for (int q = 1; q < split; ++q) {
          const float4 w = cluster_load4(cluster_map(local, static_cast<uint32_t>(q)));
          v.x = __fadd_rn(v.x, w.x), v.y = __fadd_rn(v.y, w.y), v.z = __fadd_rn(v.z, w.z), v.w = __fadd_rn(v.w, w.w);
        }
        T* o = out + static_cast<long long>(row) * s.N + col;
        store_pair<T>(o, v.x, v.y, col + 1 < s.N, pair_store);
        if (col + 2 < s.N) store_pair<T>(o + 2, v.z, v.w, col + 3 < s.N, pair_store);
      }
    }
    cluster_sync();  // no block leaves while another still reads its shared memory
  }
#else
  // Built for another target than sm_90a: the host only launches this on cc 9.0, so say why it stops.
  if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0)
    printf("kwiki fp8_block_gemm: the WGMMA kernel needs a build for sm_90a (-gencode=arch=compute_90a,code=sm_90a)\n");
  __trap();
#endif
}

/// The WGMMA launch, or -1 where it does not apply (not a cc 9.0 device, no tensor-map encoder, a
/// tensor map the driver refuses).
template <typename T>
inline int launch_wgmma(const unsigned char* A, const unsigned char* B, const float* As, const float* Bs, T* out, const Shape& s,
                        kwiki_stream_t stream) {
  static int state[64];  // per device: 0 unknown, 1 ready, 2 not
  if (!kwiki_hopper::sm90_kernel_ready(state, reinterpret_cast<const void*>(fp8_block_gemm_wgmma_kernel<T>), kSmemBytes)) return -1;
  const long long tiles_m = (s.M + kBM - 1) / kBM, tiles_n = (s.N + kBN - 1) / kBN;
  if (tiles_n > 65535) return -1;
  CUtensorMap ta, tb;
  if (!kwiki_hopper::make_tile_map_128b(&ta, CU_TENSOR_MAP_DATA_TYPE_UINT8, A, s.M, s.K, 1, kBM) ||
      !kwiki_hopper::make_tile_map_128b(&tb, CU_TENSOR_MAP_DATA_TYPE_UINT8, B, s.N, s.K, 1, kBN))
    return -1;
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0)
    return -1;
  const int split = split_for(tiles_m * tiles_n, s.kb, sms);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(tiles_m), static_cast<unsigned>(tiles_n), static_cast<unsigned>(split));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(split);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, fp8_block_gemm_wgmma_kernel<T>, ta, tb, As, Bs, out, s);
  return e == cudaSuccess ? kwiki_last_error() : static_cast<int>(e);
}

}  // namespace wg
#endif  // KWIKI_PLATFORM_CUDA && !KWIKI_HOST_EMULATION

// ---------------------------------------------------------------------------------------------
// Matrix cores on CDNA3 (gfx942, e4m3fnuz): v_mfma_f32_16x16x32_fp8_fp8, promoted per 128-K block
// ---------------------------------------------------------------------------------------------
// A block of 256 threads (4 wavefronts of 64, 2 x 2) owns a 64 x 64 tile; a wavefront 32 x 32: 2 x 2
// MFMA tiles of 16 x 16, 4 MFMAs a 32-wide k step. A 128-K block of A and B (64 rows x 128 bytes
// each) goes through LDS (16-byte loads to registers, then LDS; rows padded to 144 bytes). Each K
// block's MFMAs accumulate into a zeroed `part`, promoted into the fp32 accumulator with As * Bs as
// on CUDA. Operand layout (CDNA3 ISA, MFMA 16x16x32 with 8-bit A/B; l = lane): lane l supplies row
// l % 16 of A and column l % 16 of B, 8 bytes at K offsets 8 * (l / 16) .. + 7 (A and B take the same
// K map); result register r of lane l is C[4 * (l / 16) + r][l % 16]. The addressing is below in
// host-callable helpers (tests/gpu/fp8_mma_fragments_check.cu emulates it); the kernel only under
// KWIKI_FP8_GEMM_TENSOR_CORES on gfx942 (not yet run on a device).
namespace mf {

constexpr int kThreads = 256;
constexpr int kTile = 64;
constexpr int kRowBytes = kScaleBlock + 16;
constexpr int kStageBytes = 2 * kTile * kRowBytes;

/// The first tile row and column of wavefront w's 32 x 32 (2 x 2 wavefronts).
KWIKI_HOST_DEVICE int wave_m(int w) { return (w / 2) * 32; }
KWIKI_HOST_DEVICE int wave_n(int w) { return (w % 2) * 32; }
/// Byte offset in the stage of the 8 A bytes lane l supplies to MFMA tile row i (0, 1), k step ks.
KWIKI_HOST_DEVICE int a_bytes(int wm, int i, int l, int ks) { return (wm + i * 16 + l % 16) * kRowBytes + ks + 8 * (l / 16); }
/// Byte offset in the stage of the 8 B bytes lane l supplies to MFMA tile column j (0, 1).
KWIKI_HOST_DEVICE int b_bytes(int wn, int j, int l, int ks) { return kTile * kRowBytes + (wn + j * 16 + l % 16) * kRowBytes + ks + 8 * (l / 16); }
/// The tile row and column of result register r (0..3) of lane l in MFMA tile (i, j).
KWIKI_HOST_DEVICE int c_row(int wm, int i, int l, int r) { return wm + i * 16 + 4 * (l / 16) + r; }
KWIKI_HOST_DEVICE int c_col(int wn, int j, int l) { return wn + j * 16 + l % 16; }

#if KWIKI_PLATFORM_HIP
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define KWIKI_FP8_GEMM_HAS_MFMA_FP8 1
#endif

typedef float floatx4 __attribute__((ext_vector_type(4)));

template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
fp8_block_gemm_mfma_kernel(const unsigned char* __restrict__ A, const unsigned char* __restrict__ B, const float* __restrict__ As,
                           const float* __restrict__ Bs, T* __restrict__ out, Shape s) {
#if defined(KWIKI_FP8_GEMM_HAS_MFMA_FP8)
  __shared__ __align__(16) unsigned char stage[kStageBytes];
  const int lane = threadIdx.x % 64, wave = threadIdx.x / 64;
  const int wm = wave_m(wave), wn = wave_n(wave);
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int nb = n0 / kScaleBlock;
  floatx4 acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) acc[i][j] = floatx4{0.f, 0.f, 0.f, 0.f};
  for (int kb = 0; kb < s.kb; ++kb) {
    // 1024 16-byte chunks (A's 64 rows x 8, then B's), 4 a thread; zeros past M, N and K.
    kwiki::Vec<unsigned char> chunk[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int c = threadIdx.x + q * kThreads;
      const bool is_b = c >= kTile * 8;
      const int row = (c % (kTile * 8)) / 8, col = (c % 8) * 16;
      const int grow = (is_b ? n0 : m0) + row, k = kb * kScaleBlock + col;
      if (grow < (is_b ? s.N : s.M) && k < s.K) {
        chunk[q] = kwiki::load_vec((is_b ? B : A) + static_cast<long long>(grow) * s.K + k);
      } else {
#pragma unroll
        for (int e = 0; e < 16; ++e) chunk[q].v[e] = 0;
      }
    }
    __syncthreads();  // the previous block's reads of the stage are done
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int c = threadIdx.x + q * kThreads;
      const bool is_b = c >= kTile * 8;
      const int row = (c % (kTile * 8)) / 8, col = (c % 8) * 16;
      *reinterpret_cast<kwiki::Vec<unsigned char>*>(stage + (is_b ? kTile * kRowBytes : 0) + row * kRowBytes + col) = chunk[q];
    }
    __syncthreads();
    floatx4 part[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) part[i][j] = floatx4{0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < kScaleBlock; ks += 32) {
      long a[2], b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) a[i] = *reinterpret_cast<const long*>(stage + a_bytes(wm, i, lane, ks));
#pragma unroll
      for (int j = 0; j < 2; ++j) b[j] = *reinterpret_cast<const long*>(stage + b_bytes(wn, j, lane, ks));
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) part[i][j] = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a[i], b[j], part[i][j], 0, 0, 0);
    }
    const float sb = Bs[static_cast<long long>(nb) * s.kb + kb];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int m = m0 + c_row(wm, i, lane, r);
        const float sab = __fmul_rn(m < s.M ? As[static_cast<long long>(m) * s.kb + kb] : 0.f, sb);
#pragma unroll
        for (int j = 0; j < 2; ++j) acc[i][j][r] = __fadd_rn(acc[i][j][r], __fmul_rn(part[i][j][r], sab));
      }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int m = m0 + c_row(wm, i, lane, r), n = n0 + c_col(wn, j, lane);
        if (m < s.M && n < s.N) out[static_cast<long long>(m) * s.N + n] = kwiki_from_float<T>(acc[i][j][r]);
      }
#else
  (void)A; (void)B; (void)As; (void)Bs; (void)out; (void)s;
#if defined(__HIP_DEVICE_COMPILE__)
  __builtin_trap();  // launched only on gfx942 (launch_mfma checks the device)
#endif
#endif
}

/// The matrix-core launch, or -1 where it does not apply (not a gfx94x device).
template <typename T>
inline int launch_mfma(const unsigned char* A, const unsigned char* B, const float* As, const float* Bs, T* out, const Shape& s,
                       kwiki_stream_t stream) {
  int device = 0;
  hipDeviceProp_t prop;
  if (hipGetDevice(&device) != hipSuccess || hipGetDeviceProperties(&prop, device) != hipSuccess) return -1;
  if (std::strncmp(prop.gcnArchName, "gfx94", 5) != 0) return -1;
  const dim3 grid(static_cast<unsigned>((s.N + kTile - 1) / kTile), static_cast<unsigned>((s.M + kTile - 1) / kTile));
  fp8_block_gemm_mfma_kernel<T><<<grid, kThreads, 0, stream>>>(A, B, As, Bs, out, s);
  return kwiki_last_error();
}
#endif

}  // namespace mf

/// Launches the block-scaled fp8 GEMM on `stream`; 0, the launch error, or -1 for what it cannot serve.
template <typename T>
inline int launch(const unsigned char* A, const unsigned char* B, const float* As, const float* Bs, T* out, long long M, long long N,
                  long long K, long long BN, long long BK, double fnuz, kwiki_stream_t stream) {
  if (BN != kScaleBlock || BK != kScaleBlock) return -1;  // the scale blocks are 128 x 128 (DeepSeek-V3, vLLM's [128, 128])
  if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX || K % 16 != 0) return -1;
  if (!(fnuz == 0.0 || fnuz == 1.0)) return -1;
  if ((M + kTileM - 1) / kTileM > 65535) return -1;
  if (M == 0 || N == 0) return 0;
  if (!kwiki::aligned16(A) || !kwiki::aligned16(B)) return -1;
  const Shape s{static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<int>((K + kScaleBlock - 1) / kScaleBlock)};
#if KWIKI_PLATFORM_CUDA && !defined(KWIKI_HOST_EMULATION)
  if constexpr (KWIKI_FP8_GEMM_TENSOR_CORES != 0 && KWIKI_FP8_GEMM_WGMMA != 0) {
    if (fnuz == 0.0) {  // wgmma reads e4m3fn (OCP) bytes
      const int r = wg::launch_wgmma<T>(A, B, As, Bs, out, s, stream);
      if (r != -1) return r;
    }
  }
  if constexpr (KWIKI_FP8_GEMM_TENSOR_CORES != 0) {
    if (fnuz == 0.0) {  // the tensor cores read e4m3fn (OCP) bytes
      const int r = tc::launch_tc<T>(A, B, As, Bs, out, s, stream);
      if (r != -1) return r;
    }
  }
#endif
#if KWIKI_PLATFORM_HIP
  if constexpr (KWIKI_FP8_GEMM_TENSOR_CORES != 0) {
    if (fnuz != 0.0) {  // gfx942's matrix cores read e4m3fnuz bytes
      const int r = mf::launch_mfma<T>(A, B, As, Bs, out, s, stream);
      if (r != -1) return r;
    }
  }
#endif
  if (fnuz != 0.0) return launch_cuda_cores<T, true>(A, B, As, Bs, out, s, stream);
  return launch_cuda_cores<T, false>(A, B, As, Bs, out, s, stream);
}

}  // namespace kwiki_fp8_block_gemm

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the output element type) before including fp8_block_gemm.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || params == nullptr || num_tensors != 5 || num_dims != 5 || num_params < 1) return -1;
  for (int i = 0; i < 5; ++i)
    if (tensors[i] == nullptr) return -1;
  return kwiki_fp8_block_gemm::launch<KWIKI_T>(static_cast<const unsigned char*>(tensors[0]), static_cast<const unsigned char*>(tensors[1]),
                                               static_cast<const float*>(tensors[2]), static_cast<const float*>(tensors[3]),
                                               static_cast<KWIKI_T*>(tensors[4]), dims[0], dims[1], dims[2], dims[3], dims[4], params[0],
                                               static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_FP8_BLOCK_GEMM_CUH
