// kwiki V0 template: gemm -- out[M,N] = x[M,K] @ w[N,K]^T (+ bias[N]).
//
// Launcher ABI (ABI.md, version 1), pattern "gemm":
//   tensors: x[M,K], w[N,K], bias[N] or null, out[M,N]     dims: M, N, K     params: -
// Element type KWIKI_T (set by the including file): __nv_bfloat16 / __hip_bfloat16, half, or float.
// Numerics: products accumulated in fp32, bias added in fp32, one rounding at the store.
//
// Kernels
//   * CUDA on a cc 9.0 device, 16-bit types, M > 64 and M*N*K >= 2^28, K % 8 == 0, 16-byte aligned
//     x and w: gemm_wgmma_kernel -- TMA loads into a 4-stage 128-byte-swizzled shared-memory ring,
//     wgmma.m64n256k16 from shared memory, a producer warpgroup and two consumer warpgroups,
//     block tile 128x256x64 (H200: 4096^3 bf16 at 697 TFLOPS, cuBLAS 796; bench/gpu/gemm_sweep.cu).
//     Needs a build for sm_90a (kwiki builds Hopper kernels so).
//   * CUDA otherwise (sm_80+): tensor cores through mma.sync.m16n8k16 (bf16 or f16 in,
//     f32 accumulate) by inline PTX; ldmatrix.x4 from an XOR-swizzled shared-memory tile
//     (bank-conflict free); block tile 128x128x32, 8 warps (2 x 4) of 64x32 each; a
//     KWIKI_GEMM_STAGES-deep (default 3; 2 also works) cp.async 16-byte pipeline with
//     zero-fill for rows / columns / K outside the matrix.
//   * HIP (CDNA3 gfx942, CDNA4 gfx950): MFMA 32x32x8 (gfx950: 32x32x16) with fp32
//     accumulators, 256 threads = 4 wave64s of 64x64, block tile 128x128x32 through padded
//     LDS, global loads for tile k+1 in registers while tile k is multiplied.
//   * CUDA, 16-bit types, M <= 64 (decode GEMV / small batches): gemv_mma_kernel, tensor cores
//     fed straight from global memory (no smem staging), 16 output columns per block, K split
//     over the block's 8 warps, w streamed once with 16-byte loads, many blocks in flight.
//   * HIP and KWIKI_T = float, M <= 16: a memory-bound "skinny" kernel on CUDA cores that
//     streams w once with 16-byte loads, 4 output columns per warp, K split over 2 warps.
//   * KWIKI_T = float: a plain tiled SIMT kernel (no tensor cores, exact fp32).
//   * K % (16 / sizeof(T)) != 0 or pointers not 16-byte aligned: the same kernels with
//     element-wise (guarded) loads instead of 16-byte vectors.
// Grid of the tensor-core kernel: ceil(M/128) x ceil(N/128) blocks.
#ifndef KWIKI_GEMM_CUH
#define KWIKI_GEMM_CUH

#include "kwiki_compat.cuh"  // platform headers, KWIKI_WARP_SIZE, kwiki_shfl_xor, KWIKI_EXPORT, ...

#include <stdint.h>
#include <type_traits>
#if !KWIKI_PLATFORM_HIP
#include <stdio.h>

#include "kwiki_hopper.cuh"  // TMA, mbarriers, the wgmma descriptor and the tensor-map encoder
#endif

#ifndef KWIKI_GEMM_STAGES
#define KWIKI_GEMM_STAGES 3  // cp.async pipeline depth of the CUDA tensor-core kernel (2..3; 3 x 16 KiB = 48 KiB static smem)
#endif

namespace kwiki_gemm_detail {

typedef kwiki_bf16 bf16_t;  // __nv_bfloat16 / __hip_bfloat16

// ---------------------------------------------------------------------------------------------
// Element traits: fp32 conversion of raw 16-bit lanes, one rounding on the way back.
// ---------------------------------------------------------------------------------------------
template <typename T> struct num;
template <> struct num<bf16_t> {
  static constexpr bool kIs16 = true;
  static constexpr bool kIsBf16 = true;
  __device__ __forceinline__ static float lo(uint32_t u) { return __uint_as_float(u << 16); }
  __device__ __forceinline__ static float hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
  __device__ __forceinline__ static float to_f(bf16_t v) { return __bfloat162float(v); }
  __device__ __forceinline__ static bf16_t from_f(float f) { return __float2bfloat16(f); }
};
template <> struct num<half> {
  static constexpr bool kIs16 = true;
  static constexpr bool kIsBf16 = false;
  __device__ __forceinline__ static float lo(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)(u & 0xffffu))); }
  __device__ __forceinline__ static float hi(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)(u >> 16))); }
  __device__ __forceinline__ static float to_f(half v) { return __half2float(v); }
  __device__ __forceinline__ static half from_f(float f) { return __float2half_rn(f); }
};
template <> struct num<float> {
  static constexpr bool kIs16 = false;
  static constexpr bool kIsBf16 = false;
  __device__ __forceinline__ static float to_f(float v) { return v; }
  __device__ __forceinline__ static float from_f(float f) { return f; }
};

template <typename T>
__device__ __forceinline__ unsigned short bits16(T v) {
  return *reinterpret_cast<const unsigned short*>(&v);
}

// 16 bytes of T -> VE = 16 / sizeof(T) floats.
template <typename T>
__device__ __forceinline__ void unpack16(const uint4& u, float* f) {
  if constexpr (num<T>::kIs16) {
    f[0] = num<T>::lo(u.x); f[1] = num<T>::hi(u.x);
    f[2] = num<T>::lo(u.y); f[3] = num<T>::hi(u.y);
    f[4] = num<T>::lo(u.z); f[5] = num<T>::hi(u.z);
    f[6] = num<T>::lo(u.w); f[7] = num<T>::hi(u.w);
  } else {
    f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y);
    f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
  }
}

template <typename T>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = KWIKI_WARP_SIZE / 2; o > 0; o >>= 1) v += kwiki_shfl_xor(v, o);
  return v;
}

// =============================================================================================
// Skinny kernel (M <= 16): out[m, n] for MT rows x (CG * CPW) columns per block.
// Each warp owns CPW = 4 columns; the K range is interleaved over KSPLIT = 2 warps; a warp's
// lanes take consecutive 16-byte chunks of K (fully coalesced rows of w, read exactly once).
// =============================================================================================
constexpr int kSkinnyThreads = 256;
constexpr int kSkinnyCPW = 4;
constexpr int kSkinnyKSplit = 2;
constexpr int kSkinnyWarps = kSkinnyThreads / KWIKI_WARP_SIZE;
constexpr int kSkinnyCG = kSkinnyWarps / kSkinnyKSplit;  // column groups per block
constexpr int kSkinnyBN = kSkinnyCG * kSkinnyCPW;        // columns per block

template <typename T, int MT, bool kVec>
__global__ void __launch_bounds__(kSkinnyThreads)
gemm_skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                   T* __restrict__ out, int M, int N, int K) {
  constexpr int VE = 16 / (int)sizeof(T);
  constexpr int WS = KWIKI_WARP_SIZE;
  __shared__ float red[kSkinnyKSplit][kSkinnyCG][MT][kSkinnyCPW];

  const int tid = threadIdx.x;
  const int warp = tid / WS, lane = tid % WS;
  const int cg = warp % kSkinnyCG, ks = warp / kSkinnyCG;
  const int n_base = blockIdx.x * kSkinnyBN + cg * kSkinnyCPW;
  const int m_base = blockIdx.y * MT;

  float acc[MT][kSkinnyCPW];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < kSkinnyCPW; ++j) acc[m][j] = 0.f;

  const int nchunks = (K + VE - 1) / VE;
#pragma unroll 2
  for (int c = ks * WS + lane; c < nchunks; c += kSkinnyKSplit * WS) {
    const int k = c * VE;
    float wv[kSkinnyCPW][VE];
#pragma unroll
    for (int j = 0; j < kSkinnyCPW; ++j) {
      const int n = n_base + j;
      const T* wr = w + (size_t)(n < N ? n : 0) * (size_t)K;
      if constexpr (kVec) {
        uint4 u = make_uint4(0u, 0u, 0u, 0u);
        if (n < N) u = __ldg(reinterpret_cast<const uint4*>(wr + k));
        unpack16<T>(u, wv[j]);
      } else {
#pragma unroll
        for (int e = 0; e < VE; ++e) wv[j][e] = (n < N && k + e < K) ? num<T>::to_f(wr[k + e]) : 0.f;
      }
    }
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m_base + m < M) {  // uniform over the block
        const T* xr = x + (size_t)(m_base + m) * (size_t)K;
        float xv[VE];
        if constexpr (kVec) {
          unpack16<T>(__ldg(reinterpret_cast<const uint4*>(xr + k)), xv);
        } else {
#pragma unroll
          for (int e = 0; e < VE; ++e) xv[e] = (k + e < K) ? num<T>::to_f(xr[k + e]) : 0.f;
        }
#pragma unroll
        for (int j = 0; j < kSkinnyCPW; ++j)
#pragma unroll
          for (int e = 0; e < VE; ++e) acc[m][j] = fmaf(xv[e], wv[j][e], acc[m][j]);
      }
    }
  }

#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < kSkinnyCPW; ++j) {
      const float v = warp_sum<T>(acc[m][j]);
      if (lane == 0) red[ks][cg][m][j] = v;
    }
  __syncthreads();

  for (int i = tid; i < kSkinnyCG * MT * kSkinnyCPW; i += kSkinnyThreads) {
    const int j = i % kSkinnyCPW;
    const int m = (i / kSkinnyCPW) % MT;
    const int g = i / (kSkinnyCPW * MT);
    const int row = m_base + m;
    const int col = blockIdx.x * kSkinnyBN + g * kSkinnyCPW + j;
    if (row < M && col < N) {
      float v = 0.f;
#pragma unroll
      for (int s = 0; s < kSkinnyKSplit; ++s) v += red[s][g][m][j];
      if (bias != nullptr) v += num<T>::to_f(bias[col]);
      out[(size_t)row * (size_t)N + col] = num<T>::from_f(v);
    }
  }
}

// =============================================================================================
// Plain fp32 SIMT kernel (KWIKI_T = float): 64x64 block tile, 16 K, 256 threads of 4x4.
// =============================================================================================
template <typename T>
__global__ void __launch_bounds__(256)
gemm_simt_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                 T* __restrict__ out, int M, int N, int K) {
  constexpr int TB = 64, TK = 16;
  __shared__ float sx[TK][TB + 1];
  __shared__ float sw[TK][TB + 1];
  const int tid = threadIdx.x;
  const int tr = tid / 16, tc = tid % 16;
  const int m0 = blockIdx.x * TB, n0 = blockIdx.y * TB;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  for (int k0 = 0; k0 < K; k0 += TK) {
    for (int i = tid; i < TB * TK; i += 256) {
      const int r = i / TK, kk = i % TK;
      const int gm = m0 + r, gn = n0 + r, gk = k0 + kk;
      sx[kk][r] = (gm < M && gk < K) ? num<T>::to_f(x[(size_t)gm * K + gk]) : 0.f;
      sw[kk][r] = (gn < N && gk < K) ? num<T>::to_f(w[(size_t)gn * K + gk]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = sx[kk][tr + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = sw[kk][tc + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int gm = m0 + tr + 16 * i, gn = n0 + tc + 16 * j;
      if (gm < M && gn < N) {
        float v = acc[i][j];
        if (bias != nullptr) v += num<T>::to_f(bias[gn]);
        out[(size_t)gm * N + gn] = num<T>::from_f(v);
      }
    }
}

// Guarded element-wise gather of 8 consecutive 16-bit elements (unaligned / ragged-K path).
template <typename T>
__device__ __forceinline__ uint4 gather8(const T* row, int k, int K, bool row_ok) {
  unsigned short h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) h[e] = (row_ok && k + e < K) ? bits16<T>(row[k + e]) : (unsigned short)0;
  return make_uint4((uint32_t)h[0] | ((uint32_t)h[1] << 16), (uint32_t)h[2] | ((uint32_t)h[3] << 16),
                    (uint32_t)h[4] | ((uint32_t)h[5] << 16), (uint32_t)h[6] | ((uint32_t)h[7] << 16));
}

constexpr int BM = 128, BN = 128, BK = 32, kThreads = 256;

#if !KWIKI_PLATFORM_HIP
// =============================================================================================
// CUDA tensor-core kernel: mma.sync.m16n8k16, ldmatrix, cp.async multi-stage pipeline.
// =============================================================================================
constexpr int kStages = KWIKI_GEMM_STAGES;
static_assert(kStages >= 2 && kStages <= 3, "KWIKI_GEMM_STAGES must be 2 or 3 (static smem <= 48 KiB)");
constexpr int kTileElems = BM * BK;  // 4096 16-bit elements = 8 KiB per operand per stage

// Tile layout: row r (0..127) holds 32 elements = 4 chunks of 16 bytes; chunk c is stored at
// chunk position c ^ ((r >> 1) & 3). Eight consecutive rows at a fixed logical chunk then hit
// eight different 16-byte bank groups, so every ldmatrix phase is conflict free.
__device__ __forceinline__ int swz(int r, int c) { return (r << 5) + ((c ^ ((r >> 1) & 3)) << 3); }

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

template <typename T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (num<T>::kIsBf16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Streaming 16-byte load that does not allocate in L1 (each weight byte is read once).
__device__ __forceinline__ uint4 ldg_stream16(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

// =============================================================================================
// Small-M kernel (M <= 64: decode GEMV and small batches) on tensor cores, no shared-memory
// staging. A block owns 16 output columns (NT = 2 n8 tiles) and 16 * MTILES rows; its 8 warps
// split K (warp w takes the 32-wide K steps w, w + 8, ...), and their partial sums meet in
// shared memory at the end. Every lane loads 16 bytes per row straight into mma fragments:
// K is permuted inside each 32-wide step (identically for x and w, so the dot products are
// unchanged) such that lane (g = lane / 4, t = lane % 4) supplies elements 8t .. 8t+7 of its
// rows: the first mma takes 8t .. 8t+3, the second 8t+4 .. 8t+7. w is read exactly once,
// 64 contiguous bytes per row per step, and many warps per SM keep HBM busy.
// =============================================================================================
constexpr int kGemvWarps = 8;
constexpr int kGemvNT = 2;              // n8 tiles per block
constexpr int kGemvBN = kGemvNT * 8;    // 16 columns per block

template <typename T, int MTILES, bool kVec>
__global__ void __launch_bounds__(kGemvWarps * 32)
gemv_mma_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                T* __restrict__ out, int M, int N, int K) {
  constexpr int U = MTILES == 1 ? 4 : (MTILES == 2 ? 2 : 1);  // K steps in flight per warp
  constexpr int ROWS = MTILES * 16;
  __shared__ float red[kGemvWarps][ROWS][kGemvBN];

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kGemvBN;
  const int m0 = blockIdx.y * ROWS;
  const int nsteps = (K + 31) / 32;

  float acc[MTILES][kGemvNT][4];
#pragma unroll
  for (int i = 0; i < MTILES; ++i)
#pragma unroll
    for (int j = 0; j < kGemvNT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

  for (int s0 = warp; s0 < nsteps; s0 += kGemvWarps * U) {
    uint4 wv[U][kGemvNT], xv[U][MTILES][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u * kGemvWarps;
      const int k = s * 32 + 8 * t;
      const bool kin = (s < nsteps) && (k < K);
#pragma unroll
      for (int nt = 0; nt < kGemvNT; ++nt) {
        const int n = n0 + nt * 8 + g;
        const bool ok = kin && n < N;
        if constexpr (kVec) {
          wv[u][nt] = ok ? ldg_stream16(w + (size_t)n * K + k) : make_uint4(0u, 0u, 0u, 0u);
        } else {
          wv[u][nt] = gather8<T>(w + (size_t)(n < N ? n : 0) * K, k, K, ok);
        }
      }
#pragma unroll
      for (int mt = 0; mt < MTILES; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m0 + mt * 16 + h * 8 + g;
          const bool ok = kin && m < M;
          if constexpr (kVec) {
            xv[u][mt][h] = ok ? __ldg(reinterpret_cast<const uint4*>(x + (size_t)m * K + k)) : make_uint4(0u, 0u, 0u, 0u);
          } else {
            xv[u][mt][h] = gather8<T>(x + (size_t)(m < M ? m : 0) * K, k, K, ok);
          }
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int mt = 0; mt < MTILES; ++mt)
#pragma unroll
        for (int nt = 0; nt < kGemvNT; ++nt) {
          const uint4 a0 = xv[u][mt][0], a1 = xv[u][mt][1], b = wv[u][nt];
          const uint32_t fa[4] = {a0.x, a1.x, a0.y, a1.y};
          const uint32_t fb[4] = {a0.z, a1.z, a0.w, a1.w};
          mma16816<T>(acc[mt][nt], fa, b.x, b.y);
          mma16816<T>(acc[mt][nt], fb, b.z, b.w);
        }
  }

  // c0,c1 -> (row g, cols 2t, 2t+1); c2,c3 -> (row g + 8, same cols).
#pragma unroll
  for (int mt = 0; mt < MTILES; ++mt)
#pragma unroll
    for (int nt = 0; nt < kGemvNT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        red[warp][mt * 16 + h * 8 + g][nt * 8 + 2 * t] = acc[mt][nt][2 * h];
        red[warp][mt * 16 + h * 8 + g][nt * 8 + 2 * t + 1] = acc[mt][nt][2 * h + 1];
      }
  __syncthreads();
  for (int i = tid; i < ROWS * kGemvBN; i += kGemvWarps * 32) {
    const int r = i / kGemvBN, c = i % kGemvBN;
    const int gm = m0 + r, gn = n0 + c;
    if (gm < M && gn < N) {
      float v = 0.f;
#pragma unroll
      for (int q = 0; q < kGemvWarps; ++q) v += red[q][r][c];
      if (bias != nullptr) v += num<T>::to_f(bias[gn]);
      out[(size_t)gm * N + gn] = num<T>::from_f(v);
    }
  }
}

// Per-thread state of the global -> shared copies: each thread moves chunk (tid & 3) of rows
// (tid >> 2) and (tid >> 2) + 64 of both operand tiles; row pointers and predicates are fixed
// for the whole K loop.
template <typename T, bool kVec>
struct TileLoader {
  const T* pa[2];
  const T* pb[2];
  bool oka[2], okb[2];
  int kc, soff, K;
  const T* x;
  const T* w;

  __device__ __forceinline__ TileLoader(const T* __restrict__ x_, const T* __restrict__ w_, int M, int N,
                                        int K_, int m0, int n0, int tid) {
    x = x_;
    w = w_;
    K = K_;
    const int r = tid >> 2, c = tid & 3;
    kc = c * 8;
    soff = swz(r, c);  // row r + 64 sits 64 * 32 elements further (same swizzle phase)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int gm = m0 + r + 64 * i, gn = n0 + r + 64 * i;
      oka[i] = gm < M;
      okb[i] = gn < N;
      pa[i] = x + (size_t)(oka[i] ? gm : 0) * K + kc;
      pb[i] = w + (size_t)(okb[i] ? gn : 0) * K + kc;
    }
  }

  __device__ __forceinline__ void load(uint16_t* sA, uint16_t* sB, int k0) const {
    const bool kin = k0 + kc < K;  // K % 8 == 0 on the vector path: a chunk is all in or all out
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      uint16_t* da = sA + soff + i * 64 * BK;
      uint16_t* db = sB + soff + i * 64 * BK;
      if constexpr (kVec) {
        const bool ina = oka[i] && kin, inb = okb[i] && kin;
        cp_async16(smem_u32(da), ina ? pa[i] + k0 : x, ina ? 16 : 0);  // src-size 0: zero-fill
        cp_async16(smem_u32(db), inb ? pb[i] + k0 : w, inb ? 16 : 0);
      } else {
        *reinterpret_cast<uint4*>(da) = gather8<T>(pa[i] - kc, k0 + kc, K, oka[i]);
        *reinterpret_cast<uint4*>(db) = gather8<T>(pb[i] - kc, k0 + kc, K, okb[i]);
      }
    }
  }
};

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads, 2)
gemm_mma_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                T* __restrict__ out, int M, int N, int K) {
  __shared__ __align__(128) uint16_t smem[kStages][2][kTileElems];

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const int warp_m = warp >> 2;  // 0..1 -> 64 rows each
  const int warp_n = warp & 3;   // 0..3 -> 32 columns each
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int KT = (K + BK - 1) / BK;

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

  const TileLoader<T, kVec> loader(x, w, M, N, K, m0, n0, tid);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < KT) loader.load(smem[s][0], smem[s][1], s * BK);
    cp_async_commit();
  }

  // ldmatrix lane addressing (row, logical chunk within a 16-wide K step).
  const int a_row = warp_m * 64 + (lane & 15);                      // + mt * 16
  const int a_chk = lane >> 4;                                      // + kk * 2
  const int b_row = warp_n * 32 + (lane & 7) + ((lane >> 4) << 3);  // + np * 16
  const int b_chk = (lane >> 3) & 1;                                // + kk * 2

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt visible to all; stage (kt - 1) % kStages free for reuse
    {
      const int nk = kt + kStages - 1;
      if (nk < KT) {
        const int st = nk % kStages;
        loader.load(smem[st][0], smem[st][1], nk * BK);
      }
      cp_async_commit();
    }
    const int st = kt % kStages;
    const uint16_t* sA = smem[st][0];
    const uint16_t* sB = smem[st][1];
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        const int r = a_row + mt * 16;
        ldmatrix_x4(smem_u32(sA + swz(r, kk * 2 + a_chk)), af[mt][0], af[mt][1], af[mt][2], af[mt][3]);
      }
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        const int r = b_row + np * 16;
        ldmatrix_x4(smem_u32(sB + swz(r, kk * 2 + b_chk)), bf[2 * np][0], bf[2 * np][1],
                    bf[2 * np + 1][0], bf[2 * np + 1][1]);
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) mma16816<T>(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
    }
  }
  cp_async_wait<0>();

  // Epilogue: c0,c1 -> (row g, cols 2t, 2t+1); c2,c3 -> (row g + 8, same cols).
  const int g = lane >> 2, t4 = lane & 3;
  const bool pair_ok = (N % 2 == 0) && ((reinterpret_cast<uintptr_t>(out) & 3) == 0);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int col = n0 + warp_n * 32 + nt * 8 + 2 * t4;
    float b0 = 0.f, b1 = 0.f;
    if (bias != nullptr) {
      if (col < N) b0 = num<T>::to_f(bias[col]);
      if (col + 1 < N) b1 = num<T>::to_f(bias[col + 1]);
    }
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + warp_m * 64 + mt * 16 + g + h * 8;
        if (row >= M) continue;
        const T v0 = num<T>::from_f(acc[mt][nt][2 * h] + b0);
        const T v1 = num<T>::from_f(acc[mt][nt][2 * h + 1] + b1);
        T* o = out + (size_t)row * N + col;
        if (pair_ok && col + 1 < N) {
          *reinterpret_cast<uint32_t*>(o) = (uint32_t)bits16<T>(v0) | ((uint32_t)bits16<T>(v1) << 16);
        } else {
          if (col < N) o[0] = v0;
          if (col + 1 < N) o[1] = v1;
        }
      }
    }
  }
}

// =============================================================================================
// CUDA sm_90a tensor-core kernel: TMA + WGMMA, warp-specialized (the large-M path on Hopper).
// Block tile 128 x 256 x 64, three warpgroups: warpgroup 0 is the producer (one thread issues
// the TMA copies of both operand tiles into a 4-stage shared-memory ring, 128-byte swizzled),
// warpgroups 1 and 2 each own 64 rows of the tile and run wgmma.m64n256k16 straight from shared
// memory (128 fp32 accumulators per thread). Stage hand-off through mbarriers: "full" (the TMA
// bytes landed) and "empty" (each of the 8 consumer warps waited for its wgmmas that read the stage). The
// producer gives registers to the consumers (setmaxnreg). TMA zero-fills rows, columns and K
// outside the matrices; the epilogue adds the bias in fp32 and rounds once at the store.
// Needs: K % 8 == 0 and 16-byte aligned x, w (TMA strides and addresses), a cc 9.0 device, and
// a build for sm_90a (wgmma and setmaxnreg are sm_90a features; kwiki builds Hopper kernels so).
// =============================================================================================
namespace wg {
constexpr int BM = 128, BN = 256, BK = 64, kStages = 4;
constexpr int kConsumers = 2;                            // warpgroups of 64 rows each
constexpr int kThreads = 128 * (kConsumers + 1);         // + the producer warpgroup
constexpr uint32_t kABytes = BM * BK * 2;                // 16 KiB
constexpr uint32_t kBBytes = BN * BK * 2;                // 32 KiB
constexpr uint32_t kStageBytes = kABytes + kBBytes;      // one TMA transaction per stage
constexpr int kSmemBytes = kStages * kStageBytes + 1024 + 2 * kStages * 8;  // + 1 KiB alignment, barriers
}  // namespace wg

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using kwiki_hopper::fence_acc;
using kwiki_hopper::mbar_arrive;
using kwiki_hopper::mbar_expect_tx;
using kwiki_hopper::mbar_init;
using kwiki_hopper::mbar_wait;
using kwiki_hopper::smem_desc;
using kwiki_hopper::tma_load_2d;

// One wgmma.m64n256k16: d[128] (fp32) += A(64x16, smem descriptor da) * B(16x256, descriptor db),
// both operands K-major. Expanded inside a function whose accumulator array is named d.
#define KWIKI_WGMMA_M64N256K16(TYPE)                                                     \
  asm volatile(                                                                       \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                     \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"               \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"          \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95," \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111," \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"                                             \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
      : "l"(da), "l"(db), "r"(1))
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db) {
  if constexpr (num<T>::kIsBf16) KWIKI_WGMMA_M64N256K16("bf16");
  else KWIKI_WGMMA_M64N256K16("f16");
}
#undef KWIKI_WGMMA_M64N256K16
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <typename T>
__global__ void __launch_bounds__(wg::kThreads, 1)
gemm_wgmma_kernel(const __grid_constant__ CUtensorMap tmx, const __grid_constant__ CUtensorMap tmw,
                  const T* __restrict__ bias, T* __restrict__ out, int M, int N, int K) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = wg::BM, BN = wg::BN, BK = wg::BK, kStages = wg::kStages;
  constexpr uint32_t kABytes = wg::kABytes, kStageBytes = wg::kStageBytes;
  extern __shared__ uint8_t dyn_smem[];
  const uint32_t base = (smem_u32(dyn_smem) + 1023u) & ~1023u;  // 128-byte swizzle atoms: 1 KiB aligned
  const uint32_t full = base + kStages * kStageBytes;            // kStages mbarriers: the stage's bytes landed
  const uint32_t empty = full + kStages * 8;                     // kStages mbarriers: the stage was consumed
  const int tid = threadIdx.x;
  const int warpgroup = tid / 128;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int KT = (K + BK - 1) / BK;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, wg::kConsumers * 4);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % kStages;
        if (kt >= kStages) mbar_wait(empty + 8 * s, ((kt / kStages) - 1) & 1);
        const uint32_t a = base + s * kStageBytes;
        mbar_expect_tx(full + 8 * s, kStageBytes);
        tma_load_2d(a, &tmx, full + 8 * s, kt * BK, m0);
        tma_load_2d(a + kABytes, &tmw, full + 8 * s, kt * BK, n0);
      }
    }
    return;
  }

  // Consumers: warpgroup c owns rows [c * 64, c * 64 + 64) of the tile.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int c = warpgroup - 1;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % kStages;
    mbar_wait(full + 8 * s, (kt / kStages) & 1);
    const uint32_t a = base + s * kStageBytes + c * 64 * BK * 2;
    const uint32_t b = base + s * kStageBytes + kABytes;
    fence_acc(d);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_m64n256k16<T>(d, smem_desc(a + kk * 32), smem_desc(b + kk * 32));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    // Keep this stage's wgmmas in flight; the previous stage's are done, so hand it back.
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    fence_acc(d);
    // Each warp releases after its own wait (the wait synchronizes a warp, not the warpgroup; DeepGEMM counts a warp each).
    if (kt > 0 && tid % 32 == 0) mbar_arrive(empty + 8 * ((kt - 1) % kStages));
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  fence_acc(d);

  // Epilogue. Accumulator layout of m64nNk16: for each 8-column group j, d[4j], d[4j+1] are
  // (row w*16 + lane/4, cols 8j + 2*(lane%4) + {0,1}) and d[4j+2], d[4j+3] the same 8 rows below.
  const int lt = tid % 128, w4 = lt / 32, lane = lt % 32;
  const int row0 = m0 + c * 64 + w4 * 16 + lane / 4;
  const bool pair_ok = (N % 2 == 0) && ((reinterpret_cast<uintptr_t>(out) & 3) == 0);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = n0 + 8 * j + 2 * (lane % 4);
    if (col >= N) continue;
    float b0 = 0.f, b1 = 0.f;
    if (bias != nullptr) {
      b0 = num<T>::to_f(bias[col]);
      if (col + 1 < N) b1 = num<T>::to_f(bias[col + 1]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h;
      if (row >= M) continue;
      const T v0 = num<T>::from_f(d[4 * j + 2 * h] + b0);
      const T v1 = num<T>::from_f(d[4 * j + 2 * h + 1] + b1);
      T* o = out + (size_t)row * N + col;
      if (pair_ok && col + 1 < N) {
        *reinterpret_cast<uint32_t*>(o) = (uint32_t)bits16<T>(v0) | ((uint32_t)bits16<T>(v1) << 16);
      } else {
        o[0] = v0;
        if (col + 1 < N) o[1] = v1;
      }
    }
  }
#else
  // Built for another target than sm_90a: the host only launches this on cc 9.0, so say why it stops.
  if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0)
    printf("kwiki gemm: the WGMMA kernel needs a build for sm_90a (-gencode=arch=compute_90a,code=sm_90a)\n");
  __trap();
#endif
}

// Row-major [rows, K] 16-bit matrix, boxes of box_rows x 64 elements (128 bytes), 128-byte swizzle.
template <typename T>
inline bool make_tile_map(CUtensorMap* map, const T* ptr, int rows, int K, int box_rows) {
  return kwiki_hopper::make_tile_map_128b(map, num<T>::kIsBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, ptr,
                                          rows, K, 2, box_rows);
}

// Whether this process can run the WGMMA kernel on the current device (cc 9.0, encoder found,
// the shared-memory opt-in granted); decided once per device.
template <typename T>
inline bool wgmma_available() {
  static int state[64];  // 0 unknown, 1 yes, 2 no; per device ordinal
  return kwiki_hopper::sm90_kernel_ready(state, reinterpret_cast<const void*>(gemm_wgmma_kernel<T>), wg::kSmemBytes);
}

// Launches the WGMMA kernel; false when its preconditions do not hold (the caller falls back).
template <typename T>
inline bool launch_wgmma(const T* x, const T* w, const T* bias, T* out, int M, int N, int K, cudaStream_t stream) {
  if (K % 8 != 0 || (reinterpret_cast<uintptr_t>(x) & 15) != 0 || (reinterpret_cast<uintptr_t>(w) & 15) != 0)
    return false;
  if (!wgmma_available<T>()) return false;
  const unsigned gx = (unsigned)((M + wg::BM - 1) / wg::BM), gy = (unsigned)((N + wg::BN - 1) / wg::BN);
  if (gy > 65535u) return false;
  CUtensorMap tmx, tmw;
  if (!make_tile_map<T>(&tmx, x, M, K, wg::BM) || !make_tile_map<T>(&tmw, w, N, K, wg::BN)) return false;
  gemm_wgmma_kernel<T><<<dim3(gx, gy), wg::kThreads, wg::kSmemBytes, stream>>>(tmx, tmw, bias, out, M, N, K);
  return true;
}

#else  // KWIKI_PLATFORM_HIP
// =============================================================================================
// HIP MFMA kernel (CDNA3 gfx942 / CDNA4 gfx950), wave64.
// Wave w (0..3) owns the 64x64 sub-tile (w >> 1, w & 1) = 2 x 2 MFMA 32x32 tiles.
// MFMA 32x32xKB operand layout: lane l supplies row (l % 32) of A (resp. row n = l % 32 of w,
// i.e. column n of B) at K offsets (l / 32) * KB/2 .. + KB/2 - 1; A and B use the same K map.
// Result: acc[r] of lane l is C[8 * (r / 4) + 4 * (l / 32) + (r % 4)][l % 32].
// =============================================================================================
#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#define KWIKI_GEMM_HAS_MFMA 1
#endif
#if defined(__gfx950__) && defined(__has_builtin)
#if __has_builtin(__builtin_amdgcn_mfma_f32_32x32x16_bf16) && __has_builtin(__builtin_amdgcn_mfma_f32_32x32x16_f16)
#define KWIKI_GEMM_MFMA_K16 1
#endif
#endif

typedef float floatx16 __attribute__((ext_vector_type(16)));
typedef short shortx4 __attribute__((ext_vector_type(4)));
typedef _Float16 halfx4 __attribute__((ext_vector_type(4)));
#if defined(KWIKI_GEMM_MFMA_K16)
typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));
typedef _Float16 halfx8 __attribute__((ext_vector_type(8)));
constexpr int kMfmaK = 16;
#else
constexpr int kMfmaK = 8;
#endif
constexpr int kLdsPitch = BK + 8;  // 40 elements = 80 bytes per row: 16-byte aligned, staggers banks

template <typename T>
__device__ __forceinline__ void mfma_step(floatx16& c, const uint16_t* pa, const uint16_t* pb) {
#if defined(KWIKI_GEMM_HAS_MFMA)
#if defined(KWIKI_GEMM_MFMA_K16)
  if constexpr (num<T>::kIsBf16) {
    const bf16x8 a = *reinterpret_cast<const bf16x8*>(pa);
    const bf16x8 b = *reinterpret_cast<const bf16x8*>(pb);
    c = __builtin_amdgcn_mfma_f32_32x32x16_bf16(a, b, c, 0, 0, 0);
  } else {
    const halfx8 a = *reinterpret_cast<const halfx8*>(pa);
    const halfx8 b = *reinterpret_cast<const halfx8*>(pb);
    c = __builtin_amdgcn_mfma_f32_32x32x16_f16(a, b, c, 0, 0, 0);
  }
#else
  if constexpr (num<T>::kIsBf16) {
    const shortx4 a = *reinterpret_cast<const shortx4*>(pa);
    const shortx4 b = *reinterpret_cast<const shortx4*>(pb);
    c = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
  } else {
    const halfx4 a = *reinterpret_cast<const halfx4*>(pa);
    const halfx4 b = *reinterpret_cast<const halfx4*>(pb);
    c = __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, 0, 0, 0);
  }
#endif
#else
  (void)c; (void)pa; (void)pb;
#if defined(__HIP_DEVICE_COMPILE__)
  __builtin_trap();  // this template's HIP GEMM needs MFMA (gfx90a / gfx94x / gfx950)
#endif
#endif
}

template <typename T, bool kVec>
__device__ __forceinline__ void load_regs(uint4* ra, uint4* rb, const T* __restrict__ x,
                                          const T* __restrict__ w, int M, int N, int K, int m0,
                                          int n0, int k0, int tid) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int id = tid + i * kThreads;
    const int r = id >> 2, c = id & 3;
    const int gk = k0 + c * 8;
    const int gm = m0 + r, gn = n0 + r;
    const bool okA = gm < M, okB = gn < N;
    if constexpr (kVec) {
      ra[i] = (okA && gk < K) ? *reinterpret_cast<const uint4*>(x + (size_t)gm * K + gk) : make_uint4(0u, 0u, 0u, 0u);
      rb[i] = (okB && gk < K) ? *reinterpret_cast<const uint4*>(w + (size_t)gn * K + gk) : make_uint4(0u, 0u, 0u, 0u);
    } else {
      ra[i] = gather8<T>(x + (size_t)(okA ? gm : 0) * K, gk, K, okA);
      rb[i] = gather8<T>(w + (size_t)(okB ? gn : 0) * K, gk, K, okB);
    }
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads)
gemm_mfma_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                 T* __restrict__ out, int M, int N, int K) {
  __shared__ __align__(16) uint16_t sA[BM * kLdsPitch];
  __shared__ __align__(16) uint16_t sB[BN * kLdsPitch];

  const int tid = threadIdx.x;
  const int wave = tid / 64, lane = tid % 64;
  const int wm = wave >> 1, wn = wave & 1;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int KT = (K + BK - 1) / BK;

  floatx16 acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int r = 0; r < 16; ++r) acc[i][j][r] = 0.f;

  uint4 ra[2], rb[2];
  if (KT > 0) load_regs<T, kVec>(ra, rb, x, w, M, N, K, m0, n0, 0, tid);

  const int frag_row = lane & 31;
  const int frag_k = (lane >> 5) * (kMfmaK / 2);
  for (int kt = 0; kt < KT; ++kt) {
    __syncthreads();  // everyone is done reading the previous tile
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int id = tid + i * kThreads;
      const int r = id >> 2, c = id & 3;
      *reinterpret_cast<uint4*>(&sA[r * kLdsPitch + c * 8]) = ra[i];
      *reinterpret_cast<uint4*>(&sB[r * kLdsPitch + c * 8]) = rb[i];
    }
    __syncthreads();
    if (kt + 1 < KT) load_regs<T, kVec>(ra, rb, x, w, M, N, K, m0, n0, (kt + 1) * BK, tid);
#pragma unroll
    for (int kk = 0; kk < BK; kk += kMfmaK) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          mfma_step<T>(acc[i][j], &sA[(wm * 64 + i * 32 + frag_row) * kLdsPitch + kk + frag_k],
                       &sB[(wn * 64 + j * 32 + frag_row) * kLdsPitch + kk + frag_k]);
    }
  }

#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int col = n0 + wn * 64 + j * 32 + (lane & 31);
    if (col >= N) continue;
    const float bv = bias != nullptr ? num<T>::to_f(bias[col]) : 0.f;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        const int row = m0 + wm * 64 + i * 32 + 8 * (r >> 2) + 4 * (lane >> 5) + (r & 3);
        if (row < M) out[(size_t)row * N + col] = num<T>::from_f(acc[i][j][r] + bv);
      }
  }
}
#endif  // KWIKI_PLATFORM_HIP

typedef kwiki_stream_t stream_t;
inline int last_error() { return kwiki_last_error(); }

template <typename T, int MT>
__host__ inline void launch_skinny(bool vec, const T* x, const T* w, const T* bias, T* out, int M,
                                   int N, int K, stream_t stream) {
  dim3 grid((unsigned)((N + kSkinnyBN - 1) / kSkinnyBN), (unsigned)((M + MT - 1) / MT));
  if (vec)
    gemm_skinny_kernel<T, MT, true><<<grid, kSkinnyThreads, 0, stream>>>(x, w, bias, out, M, N, K);
  else
    gemm_skinny_kernel<T, MT, false><<<grid, kSkinnyThreads, 0, stream>>>(x, w, bias, out, M, N, K);
}

template <typename T>
__host__ inline int launch(const T* x, const T* w, const T* bias, T* out, int M, int N, int K,
                           stream_t stream) {
  if (M == 0 || N == 0) return 0;
  constexpr int VE = 16 / (int)sizeof(T);
  const bool vec = (K % VE == 0) && ((reinterpret_cast<uintptr_t>(x) & 15) == 0) &&
                   ((reinterpret_cast<uintptr_t>(w) & 15) == 0);
#if !KWIKI_PLATFORM_HIP
  if constexpr (num<T>::kIs16) {
    if (M <= 64) {
      const int mt = M <= 16 ? 1 : (M <= 32 ? 2 : 4);
      dim3 grid((unsigned)((N + kGemvBN - 1) / kGemvBN), (unsigned)((M + 16 * mt - 1) / (16 * mt)));
      if (mt == 1) {
        if (vec) gemv_mma_kernel<T, 1, true><<<grid, kGemvWarps * 32, 0, stream>>>(x, w, bias, out, M, N, K);
        else gemv_mma_kernel<T, 1, false><<<grid, kGemvWarps * 32, 0, stream>>>(x, w, bias, out, M, N, K);
      } else if (mt == 2) {
        if (vec) gemv_mma_kernel<T, 2, true><<<grid, kGemvWarps * 32, 0, stream>>>(x, w, bias, out, M, N, K);
        else gemv_mma_kernel<T, 2, false><<<grid, kGemvWarps * 32, 0, stream>>>(x, w, bias, out, M, N, K);
      } else {
        if (vec) gemv_mma_kernel<T, 4, true><<<grid, kGemvWarps * 32, 0, stream>>>(x, w, bias, out, M, N, K);
        else gemv_mma_kernel<T, 4, false><<<grid, kGemvWarps * 32, 0, stream>>>(x, w, bias, out, M, N, K);
      }
      return last_error();
    }
  }
#endif
#if KWIKI_PLATFORM_HIP
  constexpr bool kSkinny = true;
#else
  constexpr bool kSkinny = !num<T>::kIs16;  // CUDA 16-bit types use gemv_mma_kernel above
#endif
  if constexpr (kSkinny) {
    if (M <= 16) {
      if (M <= 1) launch_skinny<T, 1>(vec, x, w, bias, out, M, N, K, stream);
      else if (M <= 2) launch_skinny<T, 2>(vec, x, w, bias, out, M, N, K, stream);
      else if (M <= 4) launch_skinny<T, 4>(vec, x, w, bias, out, M, N, K, stream);
      else if (M <= 8) launch_skinny<T, 8>(vec, x, w, bias, out, M, N, K, stream);
      else launch_skinny<T, 16>(vec, x, w, bias, out, M, N, K, stream);
      return last_error();
    }
  }
  if constexpr (!num<T>::kIs16) {
    dim3 grid((unsigned)((M + 63) / 64), (unsigned)((N + 63) / 64));
    if (grid.y > 65535u) return -1;
    gemm_simt_kernel<T><<<grid, 256, 0, stream>>>(x, w, bias, out, M, N, K);
  } else {
    dim3 grid((unsigned)((M + BM - 1) / BM), (unsigned)((N + BN - 1) / BN));
    if (grid.y > 65535u) return -1;
#if KWIKI_PLATFORM_HIP
    if (vec) gemm_mfma_kernel<T, true><<<grid, kThreads, 0, stream>>>(x, w, bias, out, M, N, K);
    else gemm_mfma_kernel<T, false><<<grid, kThreads, 0, stream>>>(x, w, bias, out, M, N, K);
#else
    // WGMMA from 2^28 multiply-adds up: below, a handful of tiles, and the mma.sync kernel was
    // faster on the H200 (bench/gpu/gemm_sweep.cu: 129x257x64 12.0 us vs 19.6 us; 1000^3 25.8 vs 22.5 us).
    const bool large = static_cast<double>(M) * N * K >= 268435456.0;
    if (vec && large && launch_wgmma<T>(x, w, bias, out, M, N, K, stream)) return last_error();
    if (vec) gemm_mma_kernel<T, true><<<grid, kThreads, 0, stream>>>(x, w, bias, out, M, N, K);
    else gemm_mma_kernel<T, false><<<grid, kThreads, 0, stream>>>(x, w, bias, out, M, N, K);
#endif
  }
  return last_error();
}

}  // namespace kwiki_gemm_detail

#if defined(KWIKI_DEFINE_LAUNCHER)
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims,
                              const double* params, int num_params, void* stream) {
  (void)params;
  (void)num_params;
  if (tensors == nullptr || dims == nullptr || num_tensors != 4 || num_dims != 3) return -1;
  const long long M = dims[0], N = dims[1], K = dims[2];
  if (M < 0 || N < 0 || K < 0 || M > 0x7fffffffLL || N > 0x7fffffffLL || K > 0x7fffffffLL) return -1;
  if (M > 0 && N > 0 && (tensors[0] == nullptr && K > 0)) return -1;
  if (M > 0 && N > 0 && ((tensors[1] == nullptr && K > 0) || tensors[3] == nullptr)) return -1;
  typedef KWIKI_T T;
  return kwiki_gemm_detail::launch<T>(static_cast<const T*>(tensors[0]), static_cast<const T*>(tensors[1]),
                                      static_cast<const T*>(tensors[2]), static_cast<T*>(tensors[3]),
                                      (int)M, (int)N, (int)K,
                                      static_cast<kwiki_gemm_detail::stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_GEMM_CUH
