// compat_host.hpp: kwiki_compat.cuh for a host emulation of the V0 templates (no GPU): one
// std::thread per GPU thread, the blocks of a launch in turn; __syncthreads a std::barrier,
// __shared__ a function static (one block runs at a time), warp shuffles through a per-warp
// exchange and barrier, shared atomics std::atomic_ref. run.sh copies it in as kwiki_compat.cuh
// beside copies of the templates whose <<<grid, block, 0, stream>>> launches it rewrites to
// kwiki_emu::launch. Only what kv_cache_write.cuh, topk_filter.cuh and prefill_attention.cuh use
// is here; EMU_WARP is the warp width (32 or 64).
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#ifndef EMU_WARP
#define EMU_WARP 32
#endif
#define KWIKI_PLATFORM_HIP 0
#define KWIKI_PLATFORM_CUDA 1
#define KWIKI_WARP_SIZE EMU_WARP
#define KWIKI_FULL_LANE_MASK 0xffffffffu
#define KWIKI_GLOBAL
#define KWIKI_DEVICE inline
#define KWIKI_HOST_DEVICE inline
#define KWIKI_EXPORT extern "C"
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __host__
#define __device__

/// CUDA's dim3, x used.
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
using kwiki_stream_t = void*;
inline int kwiki_last_error() { return 0; }

/// bf16 as its bits; conversions round to nearest even as the device's do.
struct kwiki_bf16 {
  uint16_t bits;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float kwiki_to_float(float v) { return v; }
inline float kwiki_to_float(kwiki_bf16 v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }
template <typename T>
inline T kwiki_from_float(float v) {
  if constexpr (std::is_same<T, float>::value) {
    return v;
  } else {
    unsigned u = __float_as_uint(v);
    if (v != v) return kwiki_bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return kwiki_bf16{static_cast<uint16_t>(u >> 16)};
  }
}
inline void __stcs(uint4* p, uint4 v) { *p = v; }

namespace kwiki_emu {
/// The running block's barriers and shuffle exchange.
struct Block {
  std::unique_ptr<std::barrier<>> all;
  std::vector<std::unique_ptr<std::barrier<>>> warp;
  std::vector<unsigned> exchange;
};
inline Block block;

/// Runs kernel(args...) on grid x blk threads, one block after another.
template <class K, class... A>
void launch(dim3 grid, dim3 blk, K kernel, A... args) {
  gridDim = grid;
  blockDim = blk;
  const unsigned n = blk.x, warps = (n + EMU_WARP - 1) / EMU_WARP;
  for (unsigned b = 0; b < grid.x * grid.y; ++b) {  // grid.y: fp8_block_gemm's row tiles
    block.all = std::make_unique<std::barrier<>>(n);
    block.warp.clear();
    for (unsigned w = 0; w < warps; ++w) block.warp.push_back(std::make_unique<std::barrier<>>(std::min<unsigned>(EMU_WARP, n - w * EMU_WARP)));
    block.exchange.assign(warps * EMU_WARP, 0u);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < n; ++t)
      threads.emplace_back([=] {
        threadIdx = dim3(t);
        blockIdx = dim3(b % grid.x, b / grid.x);
        kernel(args...);
      });
    for (auto& t : threads) t.join();
  }
}
}  // namespace kwiki_emu

inline void __syncthreads() { kwiki_emu::block.all->arrive_and_wait(); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline unsigned __shfl_down_sync(unsigned, unsigned v, unsigned delta) {
  const unsigned lane = threadIdx.x % EMU_WARP, warp = threadIdx.x / EMU_WARP;
  auto& b = kwiki_emu::block;
  b.exchange[warp * EMU_WARP + lane] = v;
  b.warp[warp]->arrive_and_wait();
  const unsigned r = lane + delta < EMU_WARP ? b.exchange[warp * EMU_WARP + lane + delta] : v;
  b.warp[warp]->arrive_and_wait();
  return r;
}

namespace kwiki {
template <typename T>
struct alignas(16) Vec {
  static constexpr int N = static_cast<int>(16 / sizeof(T));
  T v[16 / sizeof(T)];
};
template <typename T>
inline Vec<T> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T>*>(p);
}
template <typename T>
inline void store_vec(T* p, const Vec<T>& v) {
  *reinterpret_cast<Vec<T>*>(p) = v;
}
template <typename T>
constexpr int vec_width() {
  return static_cast<int>(16 / sizeof(T));
}
template <typename To, typename From>
inline To bit_cast(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of one size");
  To t;
  std::memcpy(&t, &f, sizeof(To));
  return t;
}
inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }
}  // namespace kwiki

namespace kwiki {
/// Four multiprocessors: the filter's cases of at most 4 rows take its 1024-thread blocks, the rest 512.
inline int multiprocessor_count() { return 4; }
}  // namespace kwiki

// fp8_block_gemm.cuh (issue 20, family 4): fp32 operations with one rounding each (the device's
// _rn intrinsics, which the compiler does not contract into an fma) and min.
#include <climits>
#define KWIKI_HOST_EMULATION 1  // templates leave out their inline-PTX paths (fp8_block_gemm's tensor cores)
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
using std::min;
// prefill_attention.cuh: uint4 construction and the fp32 chunk loads and stores.
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
namespace kwiki {
template <int W, typename T>
inline void load_f32(const T* p, float (&out)[W]) {
  for (int j = 0; j < W; ++j) out[j] = kwiki_to_float(p[j]);
}
template <int W, typename T>
inline void store_f32(T* p, const float (&in)[W]) {
  for (int j = 0; j < W; ++j) p[j] = kwiki_from_float<T>(in[j]);
}
}  // namespace kwiki

// prefill_attention.cuh's tensor-core path: its mma.sync m16n8k16 (bf16, fp32 accumulators) and
// ldmatrix.x4.trans emulated per warp from the PTX ISA's fragment layouts (each lane posts its
// operands, the warp meets at a barrier, each lane computes its own results), and float shuffles.
#define KWIKI_HOST_EMULATION 1
inline float kwiki_shfl_xor(float v, int lane_mask) {
  const unsigned lane = threadIdx.x % EMU_WARP, warp = threadIdx.x / EMU_WARP;
  auto& b = kwiki_emu::block;
  b.exchange[warp * EMU_WARP + lane] = __float_as_uint(v);
  b.warp[warp]->arrive_and_wait();
  const unsigned r = b.exchange[warp * EMU_WARP + (lane ^ static_cast<unsigned>(lane_mask))];
  b.warp[warp]->arrive_and_wait();
  return __uint_as_float(r);
}
namespace kwiki_emu {
inline std::vector<unsigned> mma_posts(1024 * 6);
inline std::vector<const void*> ldsm_posts(1024);
/// Element `half` (0 low, 1 high) of a packed pair of bf16 values, as fp32.
inline float bf16_of(unsigned word, int half) { return __uint_as_float(half ? (word & 0xffff0000u) : (word << 16)); }
/// c += A(16x16, row) B(16x8, col): lane l = 4 g + t holds A rows g, g + 8 and columns 2t, 2t + 1
/// (+ 8), B column g and rows 2t, 2t + 1 (+ 8), and C rows g, g + 8, columns 2t, 2t + 1.
/// (A template, so a 64-lane emulation that never calls it still compiles.)
template <int kWarp = EMU_WARP>
void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(kWarp == 32, "mma.sync is a 32-lane operation");
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, base = warp * 32;
  unsigned* post = mma_posts.data() + threadIdx.x * 6;
  for (int i = 0; i < 4; ++i) post[i] = a[i];
  post[4] = b0;
  post[5] = b1;
  block.warp[warp]->arrive_and_wait();
  auto A = [&](int r, int k) {  // the lane and register that hold A[r][k]
    const unsigned* p = mma_posts.data() + (base + (r % 8) * 4 + (k % 8) / 2) * 6;
    return bf16_of(p[(r / 8) + 2 * (k / 8)], k % 2);
  };
  auto B = [&](int k, int n) {
    const unsigned* p = mma_posts.data() + (base + n * 4 + (k % 8) / 2) * 6;
    return bf16_of(p[4 + k / 8], k % 2);
  };
  const int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
  float d[4];
  for (int e = 0; e < 4; ++e) {
    const int r = g + 8 * (e / 2), n = 2 * t + (e % 2);
    float acc = c[e];
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
    d[e] = acc;
  }
  block.warp[warp]->arrive_and_wait();
  for (int e = 0; e < 4; ++e) c[e] = d[e];
}
/// ldmatrix.x4.trans: lanes 8q .. 8q + 7 give the addresses of rows 0..7 of matrix q (8 b16 each);
/// register q of lane l = 4 g + t holds M_q[2t][g] (low) and M_q[2t + 1][g] (high).
template <typename T>
inline void ldsm_x4_trans(const T* p, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, base = warp * 32;
  ldsm_posts[threadIdx.x] = p;
  block.warp[warp]->arrive_and_wait();
  const unsigned g = lane / 4, t = lane % 4;
  uint32_t r[4];
  for (unsigned q = 0; q < 4; ++q) {
    const auto* lo = static_cast<const uint16_t*>(ldsm_posts[base + 8 * q + 2 * t]);
    const auto* hi = static_cast<const uint16_t*>(ldsm_posts[base + 8 * q + 2 * t + 1]);
    r[q] = static_cast<uint32_t>(lo[g]) | (static_cast<uint32_t>(hi[g]) << 16);
  }
  block.warp[warp]->arrive_and_wait();
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
/// ldmatrix.x4 (not transposed): lanes 8q .. 8q + 7 give the addresses of rows 0..7 of matrix q;
/// register q of lane l = 4 g + t holds M_q[g][2t] (low) and M_q[g][2t + 1] (high).
template <typename T>
inline void ldsm_x4(const T* p, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, base = warp * 32;
  ldsm_posts[threadIdx.x] = p;
  block.warp[warp]->arrive_and_wait();
  const unsigned g = lane / 4, t = lane % 4;
  uint32_t r[4];
  for (unsigned q = 0; q < 4; ++q) {
    const auto* row = static_cast<const uint16_t*>(ldsm_posts[base + 8 * q + g]);
    r[q] = static_cast<uint32_t>(row[2 * t]) | (static_cast<uint32_t>(row[2 * t + 1]) << 16);
  }
  block.warp[warp]->arrive_and_wait();
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
}  // namespace kwiki_emu
namespace kwiki {
/// The device's kwiki::mma16816 (kwiki_compat.cuh), emulated per warp (bf16 fragments).
template <typename T>
void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) { kwiki_emu::mma16816(c, a, b0, b1); }
}  // namespace kwiki

// fused_moe_fp8.cuh (issue 20, family 3 with fp8 block scales): the fp8 byte stores and the NaN test.
namespace kwiki {
template <int N>
struct alignas(N) Bytes {
  unsigned char b[N];
};
}  // namespace kwiki
using std::isnan;

namespace kwiki_emu {
/// Ids of T tokens: k distinct experts each, drawn at random.
inline std::vector<int> random_ids(int T_, int E, int K, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<int> ids;
  for (int t = 0; t < T_; ++t) {
    std::vector<int> all(E);
    for (int e = 0; e < E; ++e) all[e] = e;
    std::shuffle(all.begin(), all.end(), g);
    ids.insert(ids.end(), all.begin(), all.begin() + K);
  }
  return ids;
}
}  // namespace kwiki_emu
