// kwiki_compat.cuh: the portability layer of the kwiki V0 kernel templates (CUDA and HIP).
//
// Everything that differs between NVIDIA (CUDA, 32-lane warps) and AMD CDNA (HIP, 64-lane
// wavefronts) lives here: headers, the warp width, cross-lane shuffles, the 16-bit float types,
// the stream type and the error getter. The templates include this header and nothing else
// platform specific. Nothing here assumes 32 lanes: every loop over lanes starts at
// KWIKI_WARP_SIZE / 2.
//
// Also here: the small row machinery the row templates share (element loads and stores
// converted to fp32, one row per block or per warp, and the launch plan chosen from the row
// length).
#ifndef KWIKI_COMPAT_CUH
#define KWIKI_COMPAT_CUH

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <climits>
#include <cmath>
#include <type_traits>

// ---------------------------------------------------------------------------------------------
// Platform detection
// ---------------------------------------------------------------------------------------------
#if defined(__HIP_PLATFORM_AMD__) || (defined(__HIPCC__) && !defined(__HIP_PLATFORM_NVIDIA__))
#define KWIKI_PLATFORM_HIP 1
#define KWIKI_PLATFORM_CUDA 0
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
#define KWIKI_HIP_NATIVE_BF16 1
#else
// ROCm before 5.7 (Debian 12 ships HIP 5.2) has no __hip_bfloat16: bf16 is carried as its 16
// storage bits, converted here with round-to-nearest-even (NaN stays NaN).
#define KWIKI_HIP_NATIVE_BF16 0
struct alignas(2) kwiki_bf16_bits {
  unsigned short bits;
};
#endif
#else
#define KWIKI_PLATFORM_HIP 0
#define KWIKI_PLATFORM_CUDA 1
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

// ---------------------------------------------------------------------------------------------
// Warp / wavefront width and the full-lane mask
// ---------------------------------------------------------------------------------------------
#if KWIKI_PLATFORM_HIP
// CDNA runs 64-lane wavefronts. The device pass may define __AMDGCN_WAVEFRONT_SIZE; the host
// pass does not, and the launchers (host code) must agree with the kernels, so 64 there.
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define KWIKI_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define KWIKI_WARP_SIZE 64
#endif
typedef unsigned long long kwiki_lane_mask_t;
#define KWIKI_FULL_LANE_MASK (~0ull)
#else
#define KWIKI_WARP_SIZE 32
typedef unsigned int kwiki_lane_mask_t;
#define KWIKI_FULL_LANE_MASK 0xffffffffu
#endif

/// The most warps a block of 1024 threads holds (32 on CUDA, 16 on CDNA).
#define KWIKI_MAX_WARPS (1024 / KWIKI_WARP_SIZE)

// ---------------------------------------------------------------------------------------------
// Function qualifiers, export, stream and error
// ---------------------------------------------------------------------------------------------
#define KWIKI_GLOBAL __global__
#define KWIKI_DEVICE __device__ __forceinline__
#define KWIKI_HOST_DEVICE __host__ __device__ __forceinline__
#define KWIKI_EXPORT extern "C" __attribute__((visibility("default")))

#if KWIKI_PLATFORM_HIP
typedef hipStream_t kwiki_stream_t;
#if KWIKI_HIP_NATIVE_BF16
typedef __hip_bfloat16 kwiki_bf16;
#else
typedef kwiki_bf16_bits kwiki_bf16;
__device__ __forceinline__ float __bfloat162float(kwiki_bf16 v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }
__device__ __forceinline__ kwiki_bf16 __float2bfloat16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return kwiki_bf16{static_cast<unsigned short>((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return kwiki_bf16{static_cast<unsigned short>(u >> 16)};
}
#endif
typedef __half kwiki_half;
/// The last launch error (0 when none), as an int, as the ABI returns it.
static inline int kwiki_last_error() { return static_cast<int>(hipGetLastError()); }
#else
typedef cudaStream_t kwiki_stream_t;
typedef __nv_bfloat16 kwiki_bf16;
typedef __half kwiki_half;
/// The last launch error (0 when none), as an int, as the ABI returns it.
static inline int kwiki_last_error() { return static_cast<int>(cudaGetLastError()); }
#endif

// ---------------------------------------------------------------------------------------------
// Cross-lane shuffle
// ---------------------------------------------------------------------------------------------
/// v from the lane whose index is this lane's index XOR lane_mask (butterfly step).
template <typename V>
KWIKI_DEVICE V kwiki_shfl_xor(V v, int lane_mask) {
#if KWIKI_PLATFORM_HIP
  return __shfl_xor(v, lane_mask, KWIKI_WARP_SIZE);
#else
  return __shfl_xor_sync(KWIKI_FULL_LANE_MASK, v, lane_mask);
#endif
}

// ---------------------------------------------------------------------------------------------
// 16-bit float conversions (fp32 inside, one rounding at the store: round to nearest even)
// ---------------------------------------------------------------------------------------------
KWIKI_DEVICE float kwiki_to_float(float v) { return v; }
KWIKI_DEVICE float kwiki_to_float(kwiki_half v) { return __half2float(v); }
KWIKI_DEVICE float kwiki_to_float(kwiki_bf16 v) { return __bfloat162float(v); }

template <typename T>
KWIKI_DEVICE T kwiki_from_float(float v) {
  if constexpr (std::is_same<T, float>::value) {
    return v;
  } else if constexpr (std::is_same<T, kwiki_half>::value) {
    return __float2half_rn(v);
  } else {
    static_assert(std::is_same<T, kwiki_bf16>::value, "KWIKI_T must be float, half or bf16");
    return __float2bfloat16(v);  // round to nearest even on both platforms
  }
}

namespace kwiki {

// ---------------------------------------------------------------------------------------------
// Vectors
// ---------------------------------------------------------------------------------------------
/// 16 bytes of T, for one 128-bit load or store.
template <typename T>
struct alignas(16) Vec {
  static constexpr int N = static_cast<int>(16 / sizeof(T));
  T v[16 / sizeof(T)];
};

/// N bytes, for the fp8 stores (N = 1, 2, 4, 8 or 16).
template <int N>
struct alignas(N) Bytes {
  unsigned char b[N];
};

/// One 16-byte load; p must be 16-byte aligned.
template <typename T>
KWIKI_DEVICE Vec<T> load_vec(const T* __restrict__ p) {
  return *reinterpret_cast<const Vec<T>*>(p);
}

/// One 16-byte store; p must be 16-byte aligned.
template <typename T>
KWIKI_DEVICE void store_vec(T* __restrict__ p, const Vec<T>& v) {
  *reinterpret_cast<Vec<T>*>(p) = v;
}

/// Elements of T in one 16-byte vector.
template <typename T>
__host__ __device__ constexpr int vec_width() {
  return static_cast<int>(16 / sizeof(T));
}

/// Bit copy between same-size types (device and host; compiles to register moves).
template <typename To, typename From>
KWIKI_HOST_DEVICE To bit_cast(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of one size");
  To t;
  memcpy(&t, &f, sizeof(To));
  return t;
}

/// W consecutive elements of T held packed in 32-bit registers (two 16-bit values a register),
/// the way row kernels keep a row slice: half the registers of fp32 for 16-bit types. W is 1
/// or the 16-byte vector width. get(j) converts element j to fp32 (exactly); j must be a
/// compile-time constant after unrolling so the words stay in registers.
template <typename T, int W>
struct Packed {
  static constexpr int kWords = (W * static_cast<int>(sizeof(T)) + 3) / 4;
  static constexpr bool k16 = sizeof(T) == 2;
  unsigned int w[kWords];

  /// Loads W elements from p (16 bytes at once when W is the vector width).
  KWIKI_DEVICE void load(const T* __restrict__ p) {
    if constexpr (W == 1) {
      if constexpr (k16) w[0] = bit_cast<unsigned short>(p[0]);
      else w[0] = bit_cast<unsigned int>(p[0]);
    } else {
      static_assert(W == vec_width<T>(), "W is 1 or the 16-byte vector width");
      const uint4 u = *reinterpret_cast<const uint4*>(p);
      w[0] = u.x;
      w[1] = u.y;
      w[2] = u.z;
      w[3] = u.w;
    }
  }
  /// Stores the W elements to p.
  KWIKI_DEVICE void store(T* __restrict__ p) const {
    if constexpr (W == 1) {
      if constexpr (k16) p[0] = bit_cast<T>(static_cast<unsigned short>(w[0]));
      else p[0] = bit_cast<T>(w[0]);
    } else {
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
  /// Element j as fp32.
  KWIKI_DEVICE float get(int j) const {
    if constexpr (!k16) {
      return __uint_as_float(w[j]);
    } else if constexpr (std::is_same<T, kwiki_bf16>::value) {
      const unsigned int word = w[j / 2];
      if constexpr (W == 1) return __uint_as_float(word << 16);
      return __uint_as_float((j & 1) ? (word & 0xffff0000u) : (word << 16));
    } else {
      const unsigned int word = w[j / 2];
      const unsigned short half_bits = static_cast<unsigned short>((j & 1) && W > 1 ? (word >> 16) : (word & 0xffffu));
      return __half2float(bit_cast<kwiki_half>(half_bits));
    }
  }
  /// Rounds W fp32 values to T (nearest even) and packs them.
  KWIKI_DEVICE void pack(const float (&f)[W]) {
    if constexpr (!k16) {
#pragma unroll
      for (int j = 0; j < W; ++j) w[j] = __float_as_uint(f[j]);
    } else {
#pragma unroll
      for (int k = 0; k < kWords; ++k) {
        const unsigned int lo = bit_cast<unsigned short>(kwiki_from_float<T>(f[2 * k]));
        const unsigned int hi = (2 * k + 1 < W) ? bit_cast<unsigned short>(kwiki_from_float<T>(f[(2 * k + 1) % W])) : 0u;
        w[k] = lo | (hi << 16);
      }
    }
  }
};

/// Loads W consecutive elements as fp32: one 16-byte load when W is the vector width, else scalar.
template <int W, typename T>
KWIKI_DEVICE void load_f32(const T* __restrict__ p, float (&out)[W]) {
  if constexpr (W == 1) {
    out[0] = kwiki_to_float(p[0]);
  } else {
    static_assert(W == vec_width<T>(), "W is 1 or the 16-byte vector width");
    const Vec<T> v = load_vec(p);
#pragma unroll
    for (int j = 0; j < W; ++j) out[j] = kwiki_to_float(v.v[j]);
  }
}

/// Stores W fp32 values as T (one rounding each): one 16-byte store when W is the vector width.
template <int W, typename T>
KWIKI_DEVICE void store_f32(T* __restrict__ p, const float (&in)[W]) {
  if constexpr (W == 1) {
    p[0] = kwiki_from_float<T>(in[0]);
  } else {
    static_assert(W == vec_width<T>(), "W is 1 or the 16-byte vector width");
    Vec<T> v;
#pragma unroll
    for (int j = 0; j < W; ++j) v.v[j] = kwiki_from_float<T>(in[j]);
    store_vec(p, v);
  }
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------
/// Butterfly sum over the whole warp; every lane ends with the total.
template <typename V>
KWIKI_DEVICE V warp_reduce_sum(V v) {
#pragma unroll
  for (int offset = KWIKI_WARP_SIZE / 2; offset > 0; offset >>= 1) v += kwiki_shfl_xor(v, offset);
  return v;
}

/// Butterfly max over the whole warp; every lane ends with the maximum.
template <typename V>
KWIKI_DEVICE V warp_reduce_max(V v) {
#pragma unroll
  for (int offset = KWIKI_WARP_SIZE / 2; offset > 0; offset >>= 1) {
    const V o = kwiki_shfl_xor(v, offset);
    v = o > v ? o : v;
  }
  return v;
}

/// Warp max of fp32 values. On CUDA sm_80+ one redux.sync over order-preserving integer keys
/// (the bits, the magnitude bits flipped for negative values) instead of five shuffle steps:
/// softmax 8192 x 8192 bf16 on the H200 79.1 -> 76.9 us (bench/gpu/row_launch_sweep.cu).
/// Unlike the shuffle form a positive NaN wins (it ranks above +inf), as torch's max and amax
/// propagate NaN; a negative NaN ranks below -inf. Elsewhere the shuffle butterfly.
KWIKI_DEVICE float warp_max_f32(float v) {
#if KWIKI_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int bits = __float_as_int(v);
  const int key = __reduce_max_sync(0xffffffffu, bits >= 0 ? bits : bits ^ 0x7fffffff);
  return __int_as_float(key >= 0 ? key : key ^ 0x7fffffff);
#else
  return warp_reduce_max(v);
#endif
}

/// Warp max: warp_max_f32 for fp32, the shuffle butterfly for other types.
template <typename V>
KWIKI_DEVICE V warp_max(V v) {
  if constexpr (std::is_same<V, float>::value) return warp_max_f32(v);
  else return warp_reduce_max(v);
}

/// Block-wide sum; every thread gets the total. blockDim.x must be a multiple of the warp size
/// (at most 1024) and every thread of the block must call it. Two barriers; safe to call again
/// right away (the next call writes its partials only after every thread has passed this
/// call's second barrier, and reads the result slot before the next first barrier).
template <typename V>
KWIKI_DEVICE V block_reduce_sum(V v) {
  __shared__ V partial[KWIKI_MAX_WARPS];
  __shared__ V result;
  const int lane = threadIdx.x % KWIKI_WARP_SIZE;
  const int warp = threadIdx.x / KWIKI_WARP_SIZE;
  v = warp_reduce_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int num_warps = (blockDim.x + KWIKI_WARP_SIZE - 1) / KWIKI_WARP_SIZE;
    V t = lane < num_warps ? partial[lane] : V(0);
    t = warp_reduce_sum(t);
    if (lane == 0) result = t;
  }
  __syncthreads();
  return result;
}

/// Block-wide max; same contract as block_reduce_sum. Empty lanes contribute `lowest`.
template <typename V>
KWIKI_DEVICE V block_reduce_max(V v, V lowest) {
  __shared__ V partial[KWIKI_MAX_WARPS];
  __shared__ V result;
  const int lane = threadIdx.x % KWIKI_WARP_SIZE;
  const int warp = threadIdx.x / KWIKI_WARP_SIZE;
  v = warp_max(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int num_warps = (blockDim.x + KWIKI_WARP_SIZE - 1) / KWIKI_WARP_SIZE;
    V t = lane < num_warps ? partial[lane] : lowest;
    t = warp_max(t);
    if (lane == 0) result = t;
  }
  __syncthreads();
  return result;
}

/// fp32 block max (empty lanes contribute -inf).
KWIKI_DEVICE float block_reduce_max(float v) { return block_reduce_max<float>(v, -INFINITY); }

// ---------------------------------------------------------------------------------------------
// Rows: one row per block, or one row per warp for short rows
// ---------------------------------------------------------------------------------------------
/// The threads that share one row. kWarpRow: a warp per row (rows shorter than a warp of
/// vectors; several rows per block, no barriers). Else the whole block serves one row.
template <bool kWarpRow>
struct RowGroup {
  /// This thread's index within its row group.
  KWIKI_DEVICE static int rank() { return kWarpRow ? static_cast<int>(threadIdx.x % KWIKI_WARP_SIZE) : static_cast<int>(threadIdx.x); }
  /// Threads per row group.
  KWIKI_DEVICE static int size() { return kWarpRow ? KWIKI_WARP_SIZE : static_cast<int>(blockDim.x); }
  /// The first row this group serves.
  KWIKI_DEVICE static long long first_row() {
    return kWarpRow ? static_cast<long long>(blockIdx.x) * (blockDim.x / KWIKI_WARP_SIZE) + threadIdx.x / KWIKI_WARP_SIZE
                    : static_cast<long long>(blockIdx.x);
  }
  /// Rows between two rows the same group serves (grid-stride over rows).
  KWIKI_DEVICE static long long row_stride() {
    return kWarpRow ? static_cast<long long>(gridDim.x) * (blockDim.x / KWIKI_WARP_SIZE) : static_cast<long long>(gridDim.x);
  }
  KWIKI_DEVICE static float sum(float v) {
    if constexpr (kWarpRow) return warp_reduce_sum(v);
    else return block_reduce_sum(v);
  }
  KWIKI_DEVICE static float max(float v) {
    if constexpr (kWarpRow) return warp_max_f32(v);
    else return block_reduce_max(v);
  }
};

/// This thread's slice of one row in registers: VPT accesses of W elements, access a = rank +
/// i * group size for those below nacc (rows are whole accesses: H a multiple of W).
template <typename T, int W, int VPT>
struct RowSlice {
  Packed<T, W> v[VPT];

  KWIKI_DEVICE void load(const T* __restrict__ row, int rank, int gs, int nacc) {
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int a = rank + i * gs;
      if (a < nacc) v[i].load(row + static_cast<long long>(a) * W);
    }
  }
};

/// Calls body(row, slice) for each row of this row group, the next row's slice loaded (by
/// load(row, slice)) before the current one is reduced and written: the loads stay in flight
/// across the reduction's barriers and the stores, which a one-row-at-a-time loop leaves idle
/// (RMSNorm at 16384 x 8192 bf16 on the H200: 2.87 TB/s one row at a time, 3.78 TB/s
/// prefetched; bench/gpu/row_launch_sweep.cu). Launch it on a resident grid (resident_blocks).
template <typename G, typename Slice, typename Load, typename Body>
KWIKI_DEVICE void for_each_row_prefetched(long long rows, Load&& load, Body&& body) {
  long long row = G::first_row();
  if (row >= rows) return;
  Slice cur;
  Slice next;
  load(row, cur);
  for (;;) {
    const long long after = row + G::row_stride();
    const bool more = after < rows;
    if (more) load(after, next);
    body(row, cur);
    if (!more) return;
    cur = next;
    row = after;
  }
}

/// Register capacity of the row kernels: elements per thread a launcher picks on its own
/// (16 x 1024 = 16384 a row).
constexpr int kRowRegElems = 16;
/// Largest block.
constexpr int kMaxBlock = 1024;
/// Most blocks launched; the kernels loop over rows beyond it (keeps grid x block < 2^32 on HIP).
constexpr long long kMaxGrid = 1ll << 20;

/// Most W-element accesses a thread keeps in registers: twice kRowRegElems elements on the
/// vector path, for templates that ask for more accesses a thread (kMinVpt; fewer threads a
/// row, more rows a multiprocessor), at half the block (row_block_bound); the scalar fallback
/// (rows that do not start 16-byte aligned) keeps 4 (2048 a row) and leaves longer rows to the
/// looping kernel, whose re-read hits L2: at 8 or 16 scalars a thread ptxas trades a few bytes
/// of spills for 32 registers.
template <int W>
__host__ __device__ constexpr int max_vpt() {
  return W == 1 ? 4 : 2 * kRowRegElems / W;
}
/// The launch bound of a row kernel that keeps VPT accesses of W elements a thread (this row
/// and the next): 1024 threads up to kRowRegElems elements, else 512, which leaves ptxas 128
/// registers a thread (at 1024 it had 64 and spilled 100-150 bytes at 32 elements). The scalar
/// fallback (W = 1) takes 512 too: at 1024 ptxas held a generated layer norm (x, weight and bias
/// as inputs, VPT 4) to 32 registers and spilled 20 bytes; at 512 it used 40 and spilled none.
/// VPT 0 is the looping kernel, launched with kMaxBlock threads.
__host__ __device__ constexpr int row_block_bound(int W, int VPT) {
  return VPT > 0 && (VPT * W > kRowRegElems || W == 1) ? kMaxBlock / 2 : kMaxBlock;
}

/// How a row kernel is launched. vpt: accesses (of W elements) per thread in registers;
/// 0 means the row does not fit in registers and the loop kernel re-reads it (from L2).
struct RowLaunch {
  bool warp_row = false;
  int vpt = 0;
  int block = 0;
  long long grid = 0;
};

inline long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

/// The launch plan for `rows` rows of `nacc` W-element accesses each.
/// - nacc <= warp size: one warp per row, 256 threads per block (several rows per block);
/// - nacc <= vpt * row_block_bound(W, vpt) for some vpt <= max_vpt<W>(): one row per block,
///   kept in registers; vpt the smallest power of two that fits and is at least kMinVpt
///   (capped at max_vpt<W>()), the block the fewest whole warps that cover the row;
/// - longer: one row per block of 1024 threads, the row re-read from L2 (vpt = 0).
template <int W, int kMinVpt = 1>
inline RowLaunch plan_row_launch(long long nacc, long long rows) {
  RowLaunch L;
  if (nacc <= KWIKI_WARP_SIZE) {
    L.warp_row = true;
    L.vpt = 1;
    L.block = 256;
    L.grid = ceil_div(rows, L.block / KWIKI_WARP_SIZE);
  } else {
    const auto covers = [](int v) { return static_cast<long long>(v) * row_block_bound(W, v); };
    int vpt = 1;
    while (vpt < max_vpt<W>() && (vpt < kMinVpt || nacc > covers(vpt))) vpt *= 2;
    if (nacc > covers(vpt)) {
      L.vpt = 0;
      L.block = kMaxBlock;
    } else {
      L.vpt = vpt;
      L.block = static_cast<int>(ceil_div(ceil_div(nacc, vpt), KWIKI_WARP_SIZE) * KWIKI_WARP_SIZE);
    }
    L.grid = rows;
  }
  if (L.grid > kMaxGrid) L.grid = kMaxGrid;
  if (L.grid < 1) L.grid = 1;
  return L;
}

template <int V>
using int_c = std::integral_constant<int, V>;

/// Calls f(int_c<VPT>{}, std::bool_constant<kWarpRow>{}) for the plan: VPT in 1, 2, 4, 8, 16
/// (only those up to max_vpt<W>() are instantiated), VPT = 0 for the loop kernel.
template <int W, typename F>
inline void dispatch_row(const RowLaunch& L, F&& f) {
  if (L.warp_row) {
    f(int_c<1>{}, std::true_type{});
    return;
  }
  switch (L.vpt) {
    case 1: f(int_c<1>{}, std::false_type{}); break;
    case 2: if constexpr (2 <= max_vpt<W>()) f(int_c<2>{}, std::false_type{}); break;
    case 4: if constexpr (4 <= max_vpt<W>()) f(int_c<4>{}, std::false_type{}); break;
    case 8: if constexpr (8 <= max_vpt<W>()) f(int_c<8>{}, std::false_type{}); break;
    case 16: if constexpr (16 <= max_vpt<W>()) f(int_c<16>{}, std::false_type{}); break;
    default: f(int_c<0>{}, std::false_type{}); break;
  }
}

/// True when p is 16-byte aligned (null counts as aligned).
inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

/// Streaming multiprocessors / compute units of the current device (cached per device;
/// a fallback when the query fails). No synchronization, no allocation.
inline int multiprocessor_count() {
  static int cached[64] = {0};
  int dev = 0;
#if KWIKI_PLATFORM_HIP
  if (hipGetDevice(&dev) != hipSuccess || dev < 0) return 304;
  if (dev < 64 && cached[dev] > 0) return cached[dev];
  int n = 0;
  if (hipDeviceGetAttribute(&n, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess || n <= 0) n = 304;
#else
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 132;
  if (dev < 64 && cached[dev] > 0) return cached[dev];
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
#endif
  if (dev < 64) cached[dev] = n;
  return n;
}

/// Blocks of `kernel` (at `block` threads, no dynamic shared memory) resident on the whole
/// device at once: occupancy per multiprocessor x multiprocessors, at least one per
/// multiprocessor. The grid of the prefetching row kernels, which stride over the rows.
template <typename Kernel>
inline long long resident_blocks(Kernel kernel, int block) {
  int per_sm = 0;
#if KWIKI_PLATFORM_HIP
  if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0) != hipSuccess) per_sm = 1;
#else
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0) != cudaSuccess) per_sm = 1;
#endif
  return static_cast<long long>(per_sm < 1 ? 1 : per_sm) * multiprocessor_count();
}

/// The row-group grid for `kernel`: one block per row group up to the resident blocks.
template <typename Kernel>
inline dim3 resident_row_grid(Kernel kernel, const RowLaunch& L) {
  const long long cap = resident_blocks(kernel, L.block);
  return dim3(static_cast<unsigned>(L.grid < cap ? L.grid : cap));
}

/// Many long rows: one row a block of `block` threads (grid = rows, as many blocks a multiprocessor as fit)
/// instead of the resident grid, for at least `min_rows` rows of at least `min_nacc` 16-byte accesses,
/// when at least `min_blocks_per_sm` such blocks fit on a multiprocessor. Measured on the H200
/// (bench/results/row_launch_grid_rows_h200-session17.txt): rms_norm 16384 x 8192 bf16 137 -> 131 us,
/// softmax 8192 x 8192 79 -> 74 us; layer_norm (two such blocks a multiprocessor) and 4096-row shapes lose,
/// and stay on the resident grid. CUDA only: not measured on a CDNA GPU.
struct ManyRowsRule {
  long long min_rows;
  long long min_nacc;
  int block;
  int min_blocks_per_sm;
};
inline constexpr ManyRowsRule kManyRows{8192, 1024, 256, 4};

/// The many-rows plan for rows of nacc W-element accesses (vpt 0: the rule does not apply): the
/// smallest power-of-two vpt at which kManyRows.block threads cover the row.
template <int W>
inline RowLaunch plan_many_rows(long long nacc, long long rows) {
  RowLaunch M;
  if (!KWIKI_PLATFORM_CUDA || W == 1 || rows < kManyRows.min_rows || nacc < kManyRows.min_nacc) return M;
  int vpt = 1;
  while (vpt < max_vpt<W>() && static_cast<long long>(vpt) * kManyRows.block < nacc) vpt *= 2;
  if (static_cast<long long>(vpt) * kManyRows.block < nacc) return M;
  M.vpt = vpt;
  M.block = static_cast<int>(ceil_div(ceil_div(nacc, vpt), KWIKI_WARP_SIZE) * KWIKI_WARP_SIZE);
  M.grid = rows < kMaxGrid ? rows : kMaxGrid;
  return M;
}

/// Launches a row template: the plan for rows of nacc W-element accesses, then either the
/// looping kernel loop_kernel() on one block per row, or row_kernel(int_c<VPT>, bool_constant<
/// kWarpRow>) on the resident grid; args... go to the kernel. Returns the launch error (0).
/// kMinVpt: see plan_row_launch. kResidentGrid false: one block per row group (up to kMaxGrid),
/// the hardware starting the next row in a finished block's place, instead of the resident
/// grid whose blocks stride over the rows.
template <int W, int kMinVpt = 1, bool kResidentGrid = true, typename LoopKernel, typename RowKernel, typename... Args>
inline int launch_rows(long long nacc, long long rows, kwiki_stream_t stream, LoopKernel loop_kernel, RowKernel row_kernel,
                       Args... args) {
  if (const RowLaunch M = plan_many_rows<W>(nacc, rows); M.vpt > 0) {  // kManyRows, where enough blocks fit
    bool launched = false;
    dispatch_row<W>(M, [&](auto vpt_c, auto warp_c) {
      if constexpr (decltype(vpt_c)::value > 0) {
        const auto kernel = row_kernel(vpt_c, warp_c);
        if (resident_blocks(kernel, M.block) >= static_cast<long long>(kManyRows.min_blocks_per_sm) * multiprocessor_count()) {
          kernel<<<dim3(static_cast<unsigned>(M.grid)), dim3(static_cast<unsigned>(M.block)), 0, stream>>>(args...);
          launched = true;
        }
      }
    });
    if (launched) return kwiki_last_error();
  }
  const RowLaunch L = plan_row_launch<W, kMinVpt>(nacc, rows);
  const dim3 block(static_cast<unsigned>(L.block));
  dispatch_row<W>(L, [&](auto vpt_c, auto warp_c) {
    if constexpr (decltype(vpt_c)::value == 0) {
      const auto kernel = loop_kernel();
      kernel<<<dim3(static_cast<unsigned>(L.grid)), block, 0, stream>>>(args...);
    } else {
      const auto kernel = row_kernel(vpt_c, warp_c);
      const dim3 grid = kResidentGrid ? resident_row_grid(kernel, L) : dim3(static_cast<unsigned>(L.grid));
      kernel<<<grid, block, 0, stream>>>(args...);
    }
  });
  return kwiki_last_error();
}

/// Gated activation, out[t, i] = Act::apply(x[t, i]) * x[t, I + i] over x[T, 2I] (gate half
/// first): a grid-stride loop over T x (I / W) vectors of W outputs, two 16-byte loads and one
/// 16-byte store per step, fp32 math and one rounding at the store. IdxT: unsigned 32/64-bit.
template <typename Act, typename T, int W, typename IdxT>
KWIKI_GLOBAL void __launch_bounds__(256)
gated_mul_kernel(const T* __restrict__ x, T* __restrict__ out, IdxT rows, IdxT I) {
  const IdxT cols = I / W;  // vectors per output row (W divides I)
  const IdxT total = rows * cols;
  const IdxT stride = static_cast<IdxT>(gridDim.x) * blockDim.x;
  for (IdxT v = static_cast<IdxT>(blockIdx.x) * blockDim.x + threadIdx.x; v < total; v += stride) {
    const IdxT t = v / cols;
    const IdxT c = v - t * cols;
    const T* gate = x + t * (2 * I) + c * W;
    Packed<T, W> g;
    Packed<T, W> u;
    g.load(gate);
    u.load(gate + I);
    float o[W];
#pragma unroll
    for (int j = 0; j < W; ++j) o[j] = Act::apply(g.get(j)) * u.get(j);
    store_f32<W>(out + t * I + c * W, o);
  }
}

template <typename Act, typename T, int W>
inline int launch_gated_mul_w(const T* x, T* out, long long rows, long long I, kwiki_stream_t stream) {
  const long long total = rows * (I / W);
  const int block = 256;
  long long grid = ceil_div(total, block);
  const long long cap = 8ll * multiprocessor_count();
  if (grid > cap) grid = cap;
  if (grid < 1) grid = 1;
  // 32-bit indices when the largest index (2*T*I) and the loop counter's overshoot fit.
  const bool fits32 = 2 * rows * I + grid * block < (1ll << 32);
  if (fits32) {
    gated_mul_kernel<Act, T, W, unsigned int><<<dim3(static_cast<unsigned>(grid)), dim3(block), 0, stream>>>(
        x, out, static_cast<unsigned int>(rows), static_cast<unsigned int>(I));
  } else {
    gated_mul_kernel<Act, T, W, unsigned long long><<<dim3(static_cast<unsigned>(grid)), dim3(block), 0, stream>>>(
        x, out, static_cast<unsigned long long>(rows), static_cast<unsigned long long>(I));
  }
  return kwiki_last_error();
}

/// Launches the gated activation on `stream`; 0, the launch error, or -1 for sizes it cannot
/// serve. The vector path needs I a multiple of the vector width and aligned pointers.
template <typename Act, typename T>
inline int launch_gated_mul(const T* x, T* out, long long rows, long long I, kwiki_stream_t stream) {
  if (rows < 0 || I <= 0) return -1;
  if (rows == 0) return 0;
  if (rows > (1ll << 40) / I) return -1;  // keeps 2*T*I far from overflow
  constexpr int V = vec_width<T>();
  const bool vec_ok = aligned16(x) && aligned16(out) && I % V == 0;
  if (vec_ok) return launch_gated_mul_w<Act, T, V>(x, out, rows, I, stream);
  return launch_gated_mul_w<Act, T, 1>(x, out, rows, I, stream);
}

#if KWIKI_PLATFORM_CUDA
/// c += A (16 x 16, row-major) B (16 x 8, column-major) on the tensor cores: mma.sync m16n8k16 (sm_80+),
/// fp32 accumulators, T bf16 or half; the fragments as the PTX ISA lays them out (lane 4g + q holds A
/// rows g and g + 8 at k 2q, 2q + 1 and 8 + 2q, 9 + 2q; B column g at the same k; C rows g, g + 8 at
/// columns 2q, 2q + 1). The host emulation's kwiki_compat.cuh has the same function.
template <typename T>
KWIKI_DEVICE void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<T, kwiki_bf16>::value) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
#endif

}  // namespace kwiki

#endif  // KWIKI_COMPAT_CUH
