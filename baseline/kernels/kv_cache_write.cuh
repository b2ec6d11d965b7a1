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
// Design: one block of 128 threads per token on a grid that strides over T; the token's Hkv x D
// row in 16-byte chunks over the threads. A key chunk is one 16-byte store (X is 16 bytes of
// elements, so a chunk never leaves its X group; the flash layout keeps the whole row
// contiguous). A value chunk of the vLLM layout scatters its elements at the page-size stride:
// the layout puts a token's value elements P apart, and tokens of one page fill the sectors in L2.
#ifndef KWIKI_KV_CACHE_WRITE_CUH
#define KWIKI_KV_CACHE_WRITE_CUH

#include "kwiki_compat.cuh"

namespace kwiki_kv_cache_write {

constexpr int kThreads = 128;
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

/// One block per token. W (1 or the 16-byte vector width) divides D and, in the vLLM layout, X.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
kv_cache_write_kernel(const T* __restrict__ key, const T* __restrict__ value, T* __restrict__ key_cache, T* __restrict__ value_cache,
                      const long long* __restrict__ slot_mapping, Shape s) {
  const int row = s.kv_heads * s.head_size;
  const int chunks = row / W;
  for (long long t = blockIdx.x; t < s.tokens; t += gridDim.x) {
    const long long slot = slot_mapping[t];
    if (slot < 0 || slot >= s.num_slots) continue;  // -1: padding; past the cache: refused by the twin
    const long long page = slot / s.page;
    const int off = static_cast<int>(slot % s.page);
    const T* k = key + t * row;
    const T* v = value + t * row;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      const int e = c * W;
      const int h = e / s.head_size, d = e % s.head_size;
      T kc[W], vc[W];
      load_chunk<T, W>(k + e, kc);
      load_chunk<T, W>(v + e, vc);
      if (s.layout == 1) {
        const long long dst = (slot * s.kv_heads + h) * s.head_size + d;  // ((page * P + off) * Hkv + h) * D + d
        store_chunk<T, W>(key_cache + dst, kc);
        store_chunk<T, W>(value_cache + dst, vc);
      } else {
        const long long head = page * s.kv_heads + h;
        store_chunk<T, W>(key_cache + ((head * (s.head_size / s.x) + d / s.x) * s.page + off) * s.x + d % s.x, kc);
        T* vd = value_cache + (head * s.head_size + d) * s.page + off;
#pragma unroll
        for (int j = 0; j < W; ++j) vd[static_cast<long long>(j) * s.page] = vc[j];
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
  const dim3 grid(static_cast<unsigned>(T_ < kMaxBlocks ? T_ : kMaxBlocks));
  const long long chunks = hkv * d / (vector ? W : 1);
  const dim3 block(static_cast<unsigned>(chunks < kThreads ? (chunks + KWIKI_WARP_SIZE - 1) / KWIKI_WARP_SIZE * KWIKI_WARP_SIZE : kThreads));
  if (vector) kv_cache_write_kernel<T, W><<<grid, block, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, s);
  else kv_cache_write_kernel<T, 1><<<grid, block, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, s);
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
