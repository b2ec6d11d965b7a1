// topk_filter.cuh: kwiki V0 template, per-row top-k threshold filter over the vocabulary
// (vLLM apply_top_k_only, HF TopKLogitsWarper semantics).
//
//   kth[r]    = the k[r]-th largest value of logits[r, :] (duplicates counted; NaN ranks above
//               every number, as in torch.topk)
//   out[r, i] = logits[r, i] < kth[r] ? -inf : logits[r, i]     (ties at kth are all kept)
//   k[r] >= V (or k[r] < 1, which the CPU twin refuses) leaves the row as it is.
//
// ABI (ABI.md): tensors logits[B,V], k[B] (int64) or null, out[B,V] (out may be logits itself:
// every element is read before it is written, by the thread that writes it); dims B, V; params
// k (used when the k tensor is null).
//
// Design: one block of 512 threads per row on a grid that strides over B. Radix select on
// order-preserving 32-bit keys of the fp32 values (the sign bit flipped for positives, all bits
// for negatives; every NaN the largest key): four passes, each a histogram of one 8-bit digit of
// the keys that share the digits found so far (a histogram per warp in shared memory, so equal
// exponents do not serialize one counter), then one warp scans the 256 bins from the top to
// find the digit holding the k-th largest. After the fourth pass the prefix is the k-th
// largest key exactly; a last pass stores the filtered row. No sort. The row is read from DRAM
// once; the later passes re-read it from L2 (a 128k-entry fp32 row is 0.5 MB).
#ifndef KWIKI_TOPK_FILTER_CUH
#define KWIKI_TOPK_FILTER_CUH

#include "kwiki_compat.cuh"

namespace kwiki_topk_filter {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / KWIKI_WARP_SIZE;
constexpr int kBins = 256;
constexpr int kBinsPerLane = kBins / KWIKI_WARP_SIZE;
constexpr long long kMaxBlocks = 1ll << 16;

/// The order-preserving key of v: a larger value has a larger key; every NaN has the largest.
KWIKI_DEVICE unsigned int key_of(float v) {
  const unsigned int u = __float_as_uint(v);
  if (v != v) return 0xffffffffu;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// The value whose key is `key` (the NaN key gives NaN).
KWIKI_DEVICE float value_of(unsigned int key) {
  if (key == 0xffffffffu) return __uint_as_float(0x7fc00000u);
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

/// v from the lane `delta` above this one (this lane's own v past the warp's end).
KWIKI_DEVICE unsigned int shfl_down(unsigned int v, int delta) {
#if KWIKI_PLATFORM_HIP
  return __shfl_down(v, static_cast<unsigned int>(delta), KWIKI_WARP_SIZE);
#else
  return __shfl_down_sync(KWIKI_FULL_LANE_MASK, v, static_cast<unsigned int>(delta));
#endif
}

/// W elements of row from chunk c, as fp32 (16 bytes at once when W is the vector width).
template <typename T, int W>
KWIKI_DEVICE void load_chunk(const T* row, long long c, float (&v)[W]) {
  if constexpr (W == 1) {
    v[0] = kwiki_to_float(row[c]);
  } else {
    const kwiki::Vec<T> p = *reinterpret_cast<const kwiki::Vec<T>*>(row + c * W);
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = kwiki_to_float(p.v[j]);
  }
}

/// The filtered chunk: each value, or -inf where it is below the threshold.
template <typename T, int W>
KWIKI_DEVICE void store_chunk(T* row, long long c, const float (&v)[W], float threshold) {
  kwiki::Vec<T> p;
  T* e = W == 1 ? row + c : p.v;
#pragma unroll
  for (int j = 0; j < W; ++j) e[j] = kwiki_from_float<T>(v[j] < threshold ? -INFINITY : v[j]);
  if constexpr (W > 1) *reinterpret_cast<kwiki::Vec<T>*>(row + c * W) = p;
}

/// One block per row; W (1 or the 16-byte vector width) divides V. x and out may be one buffer.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
topk_filter_kernel(const T* x, const long long* __restrict__ ks, long long k_all, T* out, long long B, long long V) {
  __shared__ unsigned int hist[kWarps][kBins];
  __shared__ unsigned int total[kBins];
  __shared__ unsigned int found_prefix;
  __shared__ unsigned int found_remaining;
  const int warp = threadIdx.x / KWIKI_WARP_SIZE, lane = threadIdx.x % KWIKI_WARP_SIZE;
  const long long chunks = V / W;
  for (long long r = blockIdx.x; r < B; r += gridDim.x) {
    const T* row = x + r * V;
    T* orow = out + r * V;
    const long long k = ks ? ks[r] : k_all;
    if (k >= V || k < 1) {  // the whole row stays (the same for every thread of the block)
      if (orow != row)
        for (long long c = threadIdx.x; c < chunks; c += blockDim.x) {
          float v[W];
          load_chunk<T, W>(row, c, v);
          store_chunk<T, W>(orow, c, v, -INFINITY);
        }
      continue;
    }
    unsigned int prefix = 0, mask = 0, remaining = static_cast<unsigned int>(k);
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 24 - 8 * pass;
      for (int i = threadIdx.x; i < kWarps * kBins; i += blockDim.x) (&hist[0][0])[i] = 0u;
      __syncthreads();
      for (long long c = threadIdx.x; c < chunks; c += blockDim.x) {
        float v[W];
        load_chunk<T, W>(row, c, v);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const unsigned int key = key_of(v[j]);
          if ((key & mask) == prefix) atomicAdd(&hist[warp][(key >> shift) & 0xffu], 1u);
        }
      }
      __syncthreads();
      for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
        unsigned int s = 0;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) s += hist[w][b];
        total[b] = s;
      }
      __syncthreads();
      if (warp == 0) {
        // Lane l owns bins [l * kBinsPerLane, (l + 1) * kBinsPerLane); counts from the top bin down.
        unsigned int mine = 0;
#pragma unroll
        for (int j = 0; j < kBinsPerLane; ++j) mine += total[lane * kBinsPerLane + j];
        unsigned int at_or_above = mine;  // this lane's bins and every higher lane's
#pragma unroll
        for (int o = 1; o < KWIKI_WARP_SIZE; o <<= 1) {
          const unsigned int up = shfl_down(at_or_above, o);
          if (lane + o < KWIKI_WARP_SIZE) at_or_above += up;
        }
        const unsigned int above = at_or_above - mine;
        if (above < remaining && remaining <= at_or_above) {
          unsigned int seen = above;
          for (int j = kBinsPerLane - 1; j >= 0; --j) {
            const unsigned int b = static_cast<unsigned int>(lane * kBinsPerLane + j);
            if (seen + total[b] >= remaining) {
              found_prefix = prefix | (b << shift);
              found_remaining = remaining - seen;
              break;
            }
            seen += total[b];
          }
        }
      }
      __syncthreads();
      prefix = found_prefix;
      remaining = found_remaining;
      mask |= 0xffu << shift;
    }
    const float threshold = value_of(prefix);  // the k-th largest value
    for (long long c = threadIdx.x; c < chunks; c += blockDim.x) {
      float v[W];
      load_chunk<T, W>(row, c, v);
      store_chunk<T, W>(orow, c, v, threshold);
    }
    __syncthreads();  // the shared counters are reused by the next row
  }
}

/// Launches the filter on `stream`; 0, the launch error, or -1 for sizes it cannot serve
/// (B < 0, V < 0, V >= 2^32).
template <typename T>
inline int launch(const T* x, const long long* ks, long long k_all, T* out, long long B, long long V, kwiki_stream_t stream) {
  if (B < 0 || V < 0 || V >= (1ll << 32)) return -1;
  if (B == 0 || V == 0) return 0;
  constexpr int W = kwiki::vec_width<T>();
  const dim3 grid(static_cast<unsigned>(B < kMaxBlocks ? B : kMaxBlocks));
  if (V % W == 0 && kwiki::aligned16(x) && kwiki::aligned16(out))
    topk_filter_kernel<T, W><<<grid, kThreads, 0, stream>>>(x, ks, k_all, out, B, V);
  else
    topk_filter_kernel<T, 1><<<grid, kThreads, 0, stream>>>(x, ks, k_all, out, B, V);
  return kwiki_last_error();
}

}  // namespace kwiki_topk_filter

#ifdef KWIKI_DEFINE_LAUNCHER
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || params == nullptr || num_tensors != 3 || num_dims != 2 || num_params < 1) return -1;
  if (tensors[0] == nullptr || tensors[2] == nullptr) return -1;  // tensors[1] (k per row) may be null
  return kwiki_topk_filter::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<const long long*>(tensors[1]),
                                            static_cast<long long>(params[0]), static_cast<KWIKI_T*>(tensors[2]), dims[0], dims[1],
                                            static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_TOPK_FILTER_CUH
