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
// fastest: a key chunk is one 16-byte store (X a multiple of 16 bytes, so a chunk never leaves its
// X group) and a value element one store, so when consecutive tokens hold consecutive slots
// of a page (prefill) neighbouring threads write neighbouring offsets along P and fill whole
// sectors. Each token's slot decides its own addresses, so any slot mapping is served; -1 and
// slots past the cache store nothing. A token's page and offset are divided out once a tile, into
// the cache addresses of its row's column 0: column c is then at key_at + (c / X) * P * X + c % X
// (a shift when X is a power of two) and at value_at + c * P. A thread stores one token of the tile
// (its staged row read token-fastest without bank conflicts: the value rows are an odd number of
// words apart), so its value stores step one pointer by a constant and divide nothing.
// Flash layout: a block of 128 threads takes 4 tokens (grid striding over T), their rows in
// 16-byte chunks over the threads, a thread's chunks of the 4 tokens loaded before it stores
// them; key and value rows are contiguous in their slots.
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
  int x_shift;  // log2(X) when X is a power of two, else -1
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

/// W (the vector width) elements as one 16-byte vector.
template <typename T, int W>
KWIKI_DEVICE kwiki::Vec<T> pack(const T (&in)[W]) {
  kwiki::Vec<T> v;
#pragma unroll
  for (int j = 0; j < W; ++j) v.v[j] = in[j];
  return v;
}

/// W elements to p (16 bytes at once when W is the vector width).
template <typename T, int W>
KWIKI_DEVICE void store_chunk(T* __restrict__ p, const T (&in)[W]) {
  if constexpr (W == 1) p[0] = in[0];
  else kwiki::store_vec(p, pack<T, W>(in));
}

/// W elements from src to dst (16 bytes at once when W is the vector width).
template <typename T, int W>
KWIKI_DEVICE void copy_chunk(T* __restrict__ dst, const T* __restrict__ src) {
  if constexpr (W == 1) dst[0] = src[0];
  else kwiki::store_vec(dst, kwiki::load_vec(src));
}

/// W elements to p in 4-byte words (p 4-byte aligned: a staged value row is an odd number of words).
template <typename T, int W>
KWIKI_DEVICE void store_words(T* __restrict__ p, const T (&in)[W]) {
  if constexpr (W == 1) {
    p[0] = in[0];
  } else {
    const kwiki::Vec<unsigned int> words = kwiki::bit_cast<kwiki::Vec<unsigned int>>(pack<T, W>(in));
#pragma unroll
    for (int j = 0; j < W * static_cast<int>(sizeof(T)) / 4; ++j) reinterpret_cast<unsigned int*>(p)[j] = words.v[j];
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
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16- and 32-bit elements");
  constexpr int kCols = kTileBytes / static_cast<int>(sizeof(T));  // row elements of a tile
  constexpr int kChunks = kCols / W;                                 // W-element chunks of a tile row
  constexpr int kWordElems = 4 / static_cast<int>(sizeof(T));        // elements of a 4-byte shared-memory word
  constexpr int kKeyPitch = kCols + W;             // a staged key row, one chunk of padding: 8 tokens' 16-byte reads on 8 bank groups
  constexpr int kValuePitch = kCols + kWordElems;  // a staged value row, an odd number of words: 32 tokens' element reads on 32 banks
  constexpr int kLoads = kTileTokens * kChunks / kTileThreads;       // chunks of key (and of value) a thread stages
  constexpr int kColStep = kTileThreads / kTileTokens;               // a thread stores one token's columns c, c + kColStep, ...
  static_assert(kTileTokens * kChunks % kTileThreads == 0 && kTileThreads % kTileTokens == 0, "the threads share a tile evenly");
  __shared__ __align__(16) unsigned char staged[kTileTokens * (kKeyPitch + kValuePitch) * sizeof(T)];
  __shared__ long long key_at[kTileTokens], value_at[kTileTokens];  // a token's cache elements of row column 0; -1: it stores nothing
  T* const ks = reinterpret_cast<T*>(staged);
  T* const vs = ks + kTileTokens * kKeyPitch;
  const int row = s.kv_heads * s.head_size;
  const long long group_stride = static_cast<long long>(s.page) * s.x;  // key_cache elements from one X group of a head to the next
  const long long col_tiles = (row + kCols - 1) / kCols;
  const long long tiles = (s.tokens + kTileTokens - 1) / kTileTokens * col_tiles;
  const int mine = static_cast<int>(threadIdx.x) % kTileTokens;  // the token this thread stores
  const int col0 = static_cast<int>(threadIdx.x) / kTileTokens;  // its first column (of chunks for the key, of elements for the value)
  for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const long long t0 = tile / col_tiles * kTileTokens;
    const int c0 = static_cast<int>(tile % col_tiles) * kCols;
    const int cols = row - c0 < kCols ? row - c0 : kCols;  // a multiple of W
    // A token's page and offset once a tile: slot = page * P + off puts row column c at
    // key_at + (c / X) * P * X + c % X and value_at + c * P, the only divisions of the tile.
    if (const int g = static_cast<int>(threadIdx.x); g < kTileTokens) {
      const long long slot = t0 + g < s.tokens ? slot_mapping[t0 + g] : -1ll;
      const long long off = stores(slot, s) ? slot % s.page : 0, page_at = (slot - off) * row;  // page_at: page * P * Hkv * D
      key_at[g] = stores(slot, s) ? page_at + off * s.x : -1ll;
      value_at[g] = stores(slot, s) ? page_at + off : -1ll;
    }
    __syncthreads();
    // Stage: a token's chunks on neighbouring threads (coalesced 16-byte reads), each thread's
    // loads all issued before its first shared store.
    T kc[kLoads][W], vc[kLoads][W];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = static_cast<int>(threadIdx.x) + u * kTileThreads;
      const int g = i / kChunks, e = i % kChunks * W;
      if (e >= cols || value_at[g] < 0) continue;
      const long long src = (t0 + g) * row + c0 + e;
      load_chunk<T, W>(key + src, kc[u]);
      load_chunk<T, W>(value + src, vc[u]);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = static_cast<int>(threadIdx.x) + u * kTileThreads;
      const int g = i / kChunks, e = i % kChunks * W;
      if (e >= cols || value_at[g] < 0) continue;
      store_chunk<T, W>(ks + g * kKeyPitch + e, kc[u]);
      store_words<T, W>(vs + g * kValuePitch + e, vc[u]);
    }
    __syncthreads();
    // Key chunks, the token fastest: consecutive slots of a page are consecutive X groups.
    if (const long long at = key_at[mine]; at >= 0) {
#pragma unroll
      for (int c = col0; c < kChunks; c += kColStep) {
        const int e = c * W, col = c0 + e;
        if (e >= cols) break;
        const int group = s.x_shift >= 0 ? col >> s.x_shift : col / s.x;  // X never splits a chunk
        // col % X, written in chunks so that the compiler sees a multiple of W and keeps the 16-byte store
        const int within = (col / W - group * (s.x / W)) * W;
        copy_chunk<T, W>(key_cache + at + group * group_stride + within, ks + mine * kKeyPitch + e);
      }
    }
    // Value elements, the token fastest: consecutive slots of a page are consecutive along P.
    if (const long long at = value_at[mine]; at >= 0) {
      T* dst = value_cache + at + static_cast<long long>(c0 + col0) * s.page;
      const long long step = static_cast<long long>(kColStep) * s.page;
      for (int e = col0; e < cols; e += kColStep, dst += step) *dst = vs[mine * kValuePitch + e];
    }
    __syncthreads();  // the staged tile and the token addresses are reused by the next tile
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
  const int x_used = static_cast<int>(layout == 0 ? x : 1);
  int x_shift = 0;
  while ((1 << x_shift) < x_used) ++x_shift;
  const Shape s{T_, nb * page, static_cast<int>(hkv), static_cast<int>(d), static_cast<int>(page), x_used, static_cast<int>(layout),
                (1 << x_shift) == x_used ? x_shift : -1};
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
