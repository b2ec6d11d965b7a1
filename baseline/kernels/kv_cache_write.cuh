// kv_cache_write.cuh: kwiki V0 template, new K/V rows written into paged caches by slot
// (vLLM reshape_and_cache and reshape_and_cache_flash semantics).
//
//   for each token t with slot s = slot_mapping[t] != -1: page s / P, offset s % P
//     layout 0 (vLLM):  key_cache[page, h, d / X, s % P, d % X] = key[t, h, d]
//                       value_cache[page, h, d, s % P]          = value[t, h, d]
//     layout 1 (flash): key_cache[page, s % P, h, d] = key[t, h, d]; value_cache likewise
//
// ABI (ABI.md): tensors key[T,Hkv,D], value[T,Hkv,D], key_cache, value_cache (written in place),
// slot_mapping[T] (int64); dims T, Hkv, D, NB, P, X, layout; no params. The caches hold KWIKI_T
// (an fp8 cache with scales is not this family). A slot of -1 stores nothing (a padding token of
// a CUDA-graph batch); so does a slot at or past NB * P, which a kernel cannot report (the CPU
// twin refuses it). Two tokens with one slot race, as in vLLM (the scheduler never does that).
//
// Design, vLLM layout: a block takes a tile of 32 tokens x 256 bytes of their Hkv x D rows (grid
// striding over the tiles) and stages the key and value tiles in shared memory: the global reads
// are 16-byte chunks, a token's chunks on neighbouring threads. The stores then index the token
// fastest: a key chunk is one 16-byte store (X is 16 bytes of elements, so a chunk never leaves
// its X group) and a value element one store, so when consecutive tokens hold consecutive slots
// of a page (prefill) neighbouring threads write neighbouring offsets along P and fill whole
// sectors. Each token's slot decides its own addresses, so any slot mapping is served; -1 and
// slots past the cache store nothing. Flash layout: a block of 128 threads takes 4 tokens (grid
// striding over T), their rows in 16-byte chunks over the threads, a thread's chunks of the 4
// tokens loaded before it stores them; key and value rows are contiguous in their slots.
#ifndef KWIKI_KV_CACHE_WRITE_CUH
#define KWIKI_KV_CACHE_WRITE_CUH

#include "kwiki_compat.cuh"

namespace kwiki_kv_cache_write {

constexpr int kThreads = 128;      // flash layout: threads of a block
constexpr int kFlashTokens = 4;    // flash layout: tokens of a block
constexpr int kTileThreads = 256;  // vLLM layout: threads of a tile's block
constexpr int kTileTokens = 32;    // vLLM layout: tokens of a tile
constexpr int kTileBytes = 256;    // vLLM layout: bytes of each token's row in a tile (a multiple of 16)
constexpr long long kMaxBlocks = 1ll << 16;

/// The sizes a launch serves, checked by launch().
struct Shape {
  long long tokens, num_slots;  // T, NB * P
  int kv_heads, head_size, page, x, layout;
};

/// W elements from p (16 bytes at once when W is the vector width).
template <typename T, int W>
KWIKI_DEVICE void load_chunk(const T* __restrict__ p, T (&out)[W]) {
  if constexpr (W == 1) {
    out[0] = p[0];
  } else {
    const kwiki::Vec<T> v = kwiki::load_vec(p);
#pragma unroll
    for (int j = 0; j < W; ++j) out[j] = v.v[j];
  }
}

/// W elements to p (16 bytes at once when W is the vector width).
template <typename T, int W>
KWIKI_DEVICE void store_chunk(T* __restrict__ p, const T (&in)[W]) {
  if constexpr (W == 1) {
    p[0] = in[0];
  } else {
    kwiki::Vec<T> v;
#pragma unroll
    for (int j = 0; j < W; ++j) v.v[j] = in[j];
    kwiki::store_vec(p, v);
  }
}

/// Whether `slot` names a place in the cache (-1 is padding; a slot past the cache is refused by the twin).
KWIKI_DEVICE bool stores(long long slot, const Shape& s) { return slot >= 0 && slot < s.num_slots; }

/// vLLM layout, one tile of kTileTokens tokens x kTileBytes of their rows a step of a grid-stride
/// loop; launched with kTileThreads threads. W (1 or the 16-byte vector width) divides D and X.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(kTileThreads)
kv_cache_write_vllm_kernel(const T* __restrict__ key, const T* __restrict__ value, T* __restrict__ key_cache, T* __restrict__ value_cache,
                           const long long* __restrict__ slot_mapping, Shape s) {
  constexpr int kCols = kTileBytes / static_cast<int>(sizeof(T));  // row elements of a tile
  constexpr int kChunks = kCols / W;                                 // W-element chunks of a tile row
  constexpr int kPitch = kCols + W;  // a staged row, padded by one chunk so the token-fastest reads spread over the banks
  constexpr int kLoads = kTileTokens * kChunks / kTileThreads;       // chunks of key (and of value) a thread stages
  static_assert(kTileTokens * kChunks % kTileThreads == 0, "the threads share a tile's chunks evenly");
  __shared__ __align__(16) unsigned char staged[2 * kTileTokens * kPitch * sizeof(T)];
  __shared__ long long slots[kTileTokens];
  T* const ks = reinterpret_cast<T*>(staged);
  T* const vs = ks + kTileTokens * kPitch;
  const int row = s.kv_heads * s.head_size;
  const long long col_tiles = (row + kCols - 1) / kCols;
  const long long tiles = (s.tokens + kTileTokens - 1) / kTileTokens * col_tiles;
  for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const long long t0 = tile / col_tiles * kTileTokens;
    const int c0 = static_cast<int>(tile % col_tiles) * kCols;
    const int cols = row - c0 < kCols ? row - c0 : kCols;  // a multiple of W
    for (int g = threadIdx.x; g < kTileTokens; g += blockDim.x) slots[g] = t0 + g < s.tokens ? slot_mapping[t0 + g] : -1ll;
    __syncthreads();
    // Stage: a token's chunks on neighbouring threads (coalesced 16-byte reads), each thread's
    // loads all issued before its first shared store.
    T kc[kLoads][W], vc[kLoads][W];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = static_cast<int>(threadIdx.x) + u * kTileThreads;
      const int g = i / kChunks, e = i % kChunks * W;
      if (e >= cols || !stores(slots[g], s)) continue;
      const long long src = (t0 + g) * row + c0 + e;
      load_chunk<T, W>(key + src, kc[u]);
      load_chunk<T, W>(value + src, vc[u]);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = static_cast<int>(threadIdx.x) + u * kTileThreads;
      const int g = i / kChunks, e = i % kChunks * W;
      if (e >= cols || !stores(slots[g], s)) continue;
      store_chunk<T, W>(ks + g * kPitch + e, kc[u]);
      store_chunk<T, W>(vs + g * kPitch + e, vc[u]);
    }
    __syncthreads();
    // Key chunks, the token fastest: consecutive slots of a page are consecutive X groups.
    for (int i = threadIdx.x; i < kTileTokens * kChunks; i += blockDim.x) {
      const int g = i % kTileTokens, e = i / kTileTokens * W;
      const long long slot = slots[g];
      if (e >= cols || !stores(slot, s)) continue;
      const int h = (c0 + e) / s.head_size, d = (c0 + e) % s.head_size;
      const long long head = slot / s.page * s.kv_heads + h;
      T chunk[W];
      load_chunk<T, W>(ks + g * kPitch + e, chunk);
      store_chunk<T, W>(key_cache + ((head * (s.head_size / s.x) + d / s.x) * s.page + slot % s.page) * s.x + d % s.x, chunk);
    }
    // Value elements, the token fastest: consecutive slots of a page are consecutive along P.
    for (int i = threadIdx.x; i < kTileTokens * kCols; i += blockDim.x) {
      const int g = i % kTileTokens, e = i / kTileTokens;
      const long long slot = slots[g];
      if (e >= cols || !stores(slot, s)) continue;
      const int h = (c0 + e) / s.head_size, d = (c0 + e) % s.head_size;
      const long long head = slot / s.page * s.kv_heads + h;
      value_cache[(head * s.head_size + d) * s.page + slot % s.page] = vs[g * kPitch + e];
    }
    __syncthreads();  // the staged tile and the slots are reused by the next tile
  }
}

/// Flash layout, kFlashTokens tokens a block (their loads in flight together). W (1 or the
/// 16-byte vector width) divides D.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
kv_cache_write_flash_kernel(const T* __restrict__ key, const T* __restrict__ value, T* __restrict__ key_cache, T* __restrict__ value_cache,
                            const long long* __restrict__ slot_mapping, Shape s) {
  const int row = s.kv_heads * s.head_size;
  const int chunks = row / W;
  for (long long t0 = static_cast<long long>(blockIdx.x) * kFlashTokens; t0 < s.tokens; t0 += static_cast<long long>(gridDim.x) * kFlashTokens) {
    long long slot[kFlashTokens];
#pragma unroll
    for (int g = 0; g < kFlashTokens; ++g) slot[g] = t0 + g < s.tokens ? slot_mapping[t0 + g] : -1ll;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      T kc[kFlashTokens][W], vc[kFlashTokens][W];
#pragma unroll
      for (int g = 0; g < kFlashTokens; ++g) {
        if (!stores(slot[g], s)) continue;
        const long long src = (t0 + g) * row + static_cast<long long>(c) * W;
        load_chunk<T, W>(key + src, kc[g]);
        load_chunk<T, W>(value + src, vc[g]);
      }
#pragma unroll
      for (int g = 0; g < kFlashTokens; ++g) {
        if (!stores(slot[g], s)) continue;
        const long long dst = slot[g] * row + static_cast<long long>(c) * W;  // ((page * P + off) * Hkv + h) * D + d
        store_chunk<T, W>(key_cache + dst, kc[g]);
        store_chunk<T, W>(value_cache + dst, vc[g]);
      }
    }
  }
}

/// Launches the write on `stream`; 0, the launch error, or -1 for sizes it cannot serve.
template <typename T>
inline int launch(const T* key, const T* value, T* key_cache, T* value_cache, const long long* slot_mapping, long long T_, long long hkv,
                  long long d, long long nb, long long page, long long x, long long layout, kwiki_stream_t stream) {
  if (T_ < 0 || hkv < 1 || d < 1 || nb < 0 || page < 1 || (layout != 0 && layout != 1)) return -1;
  if (layout == 0 && (x < 1 || d % x != 0)) return -1;
  if (hkv * d > (1ll << 30) || page > (1 << 30)) return -1;
  if (T_ == 0) return 0;
  const Shape s{T_, nb * page, static_cast<int>(hkv), static_cast<int>(d), static_cast<int>(page), static_cast<int>(layout == 0 ? x : 1),
                static_cast<int>(layout)};
  constexpr int W = kwiki::vec_width<T>();
  const bool aligned = kwiki::aligned16(key) && kwiki::aligned16(value) && kwiki::aligned16(key_cache) && kwiki::aligned16(value_cache);
  const bool vector = aligned && d % W == 0 && (layout == 1 || x % W == 0);
  if (layout == 0) {
    constexpr int kCols = kTileBytes / static_cast<int>(sizeof(T));
    const long long tiles = (T_ + kTileTokens - 1) / kTileTokens * ((hkv * d + kCols - 1) / kCols);
    const dim3 grid(static_cast<unsigned>(tiles < kMaxBlocks ? tiles : kMaxBlocks));
    if (vector) kv_cache_write_vllm_kernel<T, W><<<grid, kTileThreads, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, s);
    else kv_cache_write_vllm_kernel<T, 1><<<grid, kTileThreads, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, s);
    return kwiki_last_error();
  }
  const long long groups = (T_ + kFlashTokens - 1) / kFlashTokens;
  const dim3 grid(static_cast<unsigned>(groups < kMaxBlocks ? groups : kMaxBlocks));
  const long long chunks = hkv * d / (vector ? W : 1);
  const dim3 block(static_cast<unsigned>(chunks < kThreads ? (chunks + KWIKI_WARP_SIZE - 1) / KWIKI_WARP_SIZE * KWIKI_WARP_SIZE : kThreads));
  if (vector) kv_cache_write_flash_kernel<T, W><<<grid, block, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, s);
  else kv_cache_write_flash_kernel<T, 1><<<grid, block, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, s);
  return kwiki_last_error();
}

}  // namespace kwiki_kv_cache_write

#ifdef KWIKI_DEFINE_LAUNCHER
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  (void)params;
  (void)num_params;
  if (tensors == nullptr || dims == nullptr || num_tensors != 5 || num_dims != 7) return -1;
  for (int i = 0; i < 5; ++i)
    if (tensors[i] == nullptr) return -1;
  return kwiki_kv_cache_write::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<const KWIKI_T*>(tensors[1]),
                                               static_cast<KWIKI_T*>(tensors[2]), static_cast<KWIKI_T*>(tensors[3]),
                                               static_cast<const long long*>(tensors[4]), dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                                               dims[6], static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_KV_CACHE_WRITE_CUH
