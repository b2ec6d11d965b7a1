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
// Design: one block per row on a grid that strides over B, of 1024 threads when B is at most the
// multiprocessor count (a row per multiprocessor: the more loads in flight, the faster) and of 512
// otherwise. Radix select on order-preserving 32-bit keys of the fp32 values (the sign bit flipped
// for positives, all bits for negatives; every NaN the largest key). Pass 1 reads the row and
// counts the top 12 bits of the keys (sign, exponent, 3 mantissa bits: 4096 bins, two copies in
// shared memory) and finds the bin holding the k-th largest and its rank there. When that bin holds
// at most 4096 values and is neither the NaN bin nor the one of +0 (whose threshold -0 would
// equal), pass 2 reads the row once more, from its end (what pass 1 left in L2 last comes first),
// and stores it filtered by bin alone (above the bin kept, below it -inf, in it kept for now)
// while it gathers the bin's keys and indices in shared memory;
// the low 20 bits are then selected among those (digits of 8, 8, 4 bits) and the bin's values below
// the k-th largest set to -inf. Otherwise the low digits are counted over the row (a histogram per
// warp, so equal digits do not serialize one counter) and a last pass stores the filtered row,
// every value against the k-th largest. Either way the threshold is the k-th largest key exactly.
// The row is read twice (three times, and more when a row is mostly ties); no sort.
#ifndef KWIKI_TOPK_FILTER_CUH
#define KWIKI_TOPK_FILTER_CUH

#include "kwiki_compat.cuh"

namespace kwiki_topk_filter {

constexpr int kThreads = 512;        // a row's block while rows outnumber the multiprocessors
constexpr int kWideThreads = 1024;   // a row's block when each row has a multiprocessor to itself
constexpr int kMaxWarps = kWideThreads / KWIKI_WARP_SIZE;
constexpr int kBins = 256;  // bins of an 8-bit digit
constexpr int kBinsPerLane = kBins / KWIKI_WARP_SIZE;
constexpr int kTopBits = 12;                        // the first digit: the keys' top bits
constexpr int kTopShift = 32 - kTopBits;
constexpr int kTopBins = 1 << kTopBits;
constexpr int kTopPerBin = kTopBins / kBins;        // first-digit bins a scanned bin stands for
constexpr int kTopCopies = 2;                       // copies of the first histogram (warps alternate)
constexpr int kPool = kTopCopies * kTopBins;        // words of shared memory the passes share
constexpr int kCandidates = kPool / 2;              // keys (and indices) of the gathered bin, at most
constexpr unsigned int kNanBin = kTopBins - 1;      // holds only the NaN key
constexpr unsigned int kPlusZeroBin = 0x80000000u >> kTopShift;  // +0, whose equal -0 is in the bin below
constexpr int kLowDigits = 3;
constexpr long long kMaxBlocks = 1ll << 16;
static_assert(kMaxWarps * kBins <= kPool, "the per-warp histograms fit the pool");

/// Width in bits of low digit d (the digits below the first: bits 19-12, 11-4, 3-0).
KWIKI_HOST_DEVICE constexpr int low_bits(int d) { return d < 2 ? 8 : 4; }

/// Lowest key bit of low digit d.
KWIKI_HOST_DEVICE constexpr int low_shift(int d) { return d == 0 ? 12 : d == 1 ? 4 : 0; }

static_assert(kTopShift == low_shift(0) + low_bits(0) && low_shift(0) == low_shift(1) + low_bits(1) &&
                  low_shift(1) == low_shift(2) + low_bits(2) && low_shift(2) == 0 && kLowDigits == 3,
              "the digits cover the key");

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

/// Chunk c of row as stored: its W elements in p.v[0, W) (16 bytes at once when W is the vector width).
template <typename T, int W>
KWIKI_DEVICE void load_chunk(const T* row, long long c, kwiki::Vec<T>& p) {
  if constexpr (W == 1) p.v[0] = row[c];
  else p = *reinterpret_cast<const kwiki::Vec<T>*>(row + c * W);
}

/// f(c, v) for each of this thread's chunks c of the row (values v as fp32), kUnroll chunks
/// loaded before the first of them is used (8, or 3 of 8 bf16 or half values: 64 registers at
/// most, two blocks a multiprocessor). f may store chunk c: it has been read. kReverse: the row
/// from its end (a second read meets first what the first read left in L2 last).
template <typename T, int W, bool kReverse = false, typename F>
KWIKI_DEVICE void for_each_chunk(const T* row, long long chunks, F&& f) {
  constexpr int kUnroll = W >= 8 ? 3 : 8;
  const long long stride = blockDim.x;
  const auto at = [chunks](long long i) { return kReverse ? chunks - 1 - i : i; };
  long long c = threadIdx.x;
  for (; c + (kUnroll - 1) * stride < chunks; c += kUnroll * stride) {
    kwiki::Vec<T> p[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_chunk<T, W>(row, at(c + u * stride), p[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float v[W];
#pragma unroll
      for (int j = 0; j < W; ++j) v[j] = kwiki_to_float(p[u].v[j]);
      f(at(c + u * stride), v);
    }
  }
  for (; c < chunks; c += stride) {
    kwiki::Vec<T> p;
    float v[W];
    load_chunk<T, W>(row, at(c), p);
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = kwiki_to_float(p.v[j]);
    f(at(c), v);
  }
}


/// The chunk with each value, or -inf where drop[j]. A 16-byte store is marked evict-first on
/// CUDA: the output is not read again here, and the input rows keep L2 for their second read.
template <typename T, int W>
KWIKI_DEVICE void store_chunk(T* row, long long c, const float (&v)[W], const bool (&drop)[W]) {
  kwiki::Vec<T> p;
  T* e = W == 1 ? row + c : p.v;
#pragma unroll
  for (int j = 0; j < W; ++j) e[j] = kwiki_from_float<T>(drop[j] ? -INFINITY : v[j]);
  if constexpr (W > 1) {
#if KWIKI_PLATFORM_CUDA
    __stcs(reinterpret_cast<uint4*>(row + c * W), kwiki::bit_cast<uint4>(p));
#else
    *reinterpret_cast<kwiki::Vec<T>*>(row + c * W) = p;
#endif
  }
}

/// Warp 0: the bin of counts[kBins] holding the remaining-th largest (bins counted from the top
/// down; 1 <= remaining <= the sum) to *bin, and the rank within that bin to *rank.
KWIKI_DEVICE void find_bin(const unsigned int* counts, unsigned int remaining, unsigned int* bin, unsigned int* rank) {
  const int lane = threadIdx.x % KWIKI_WARP_SIZE;
  // Lane l owns bins [l * kBinsPerLane, (l + 1) * kBinsPerLane).
  unsigned int mine = 0;
#pragma unroll
  for (int j = 0; j < kBinsPerLane; ++j) mine += counts[lane * kBinsPerLane + j];
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
      if (seen + counts[b] >= remaining) {
        *bin = b;
        *rank = remaining - seen;
        break;
      }
      seen += counts[b];
    }
  }
}

/// One block of kBlock threads per row; W (1 or the 16-byte vector width) divides V. x and out
/// may be one buffer.
template <typename T, int W, int kBlock>
KWIKI_GLOBAL void __launch_bounds__(kBlock)
topk_filter_kernel(const T* x, const long long* __restrict__ ks, long long k_all, T* out, long long B, long long V) {
  constexpr int kWarps = kBlock / KWIKI_WARP_SIZE;
  __shared__ unsigned int pool[kPool];  // the first histogram; then the gathered keys and indices, or the per-warp histograms
  __shared__ unsigned int total[kBins];
  __shared__ unsigned int found_bin, found_rank, found_count, gathered;
  const int warp = threadIdx.x / KWIKI_WARP_SIZE;
  const long long chunks = V / W;
  for (long long r = blockIdx.x; r < B; r += gridDim.x) {
    const T* row = x + r * V;
    T* orow = out + r * V;
    const long long k = ks ? ks[r] : k_all;
    if (k >= V || k < 1) {  // the whole row stays (the same for every thread of the block)
      if (orow != row)
        for_each_chunk<T, W>(row, chunks, [&](long long c, const float (&v)[W]) {
          const bool keep_all[W] = {};
          store_chunk<T, W>(orow, c, v, keep_all);
        });
      continue;
    }
    // Pass 1: the first digit over the row.
    for (int i = threadIdx.x; i < kPool; i += blockDim.x) pool[i] = 0u;
    __syncthreads();
    unsigned int* const top_hist = pool + (warp % kTopCopies) * kTopBins;
    for_each_chunk<T, W>(row, chunks, [&](long long, const float (&v)[W]) {
#pragma unroll
      for (int j = 0; j < W; ++j) atomicAdd(&top_hist[key_of(v[j]) >> kTopShift], 1u);
    });
    __syncthreads();
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
      unsigned int sum = 0;
      for (int i = b * kTopPerBin; i < (b + 1) * kTopPerBin; ++i)
#pragma unroll
        for (int copy = 0; copy < kTopCopies; ++copy) sum += pool[copy * kTopBins + i];
      total[b] = sum;
    }
    __syncthreads();
    if (warp == 0) find_bin(total, static_cast<unsigned int>(k), &found_bin, &found_rank);
    __syncthreads();
    if (threadIdx.x == 0) {  // the first-digit bin within the group of kTopPerBin that warp 0 found
      unsigned int seen = 0;
      for (int j = kTopPerBin - 1; j >= 0; --j) {
        const unsigned int b = found_bin * kTopPerBin + static_cast<unsigned int>(j);
        unsigned int count = 0;
#pragma unroll
        for (int copy = 0; copy < kTopCopies; ++copy) count += pool[copy * kTopBins + b];
        if (seen + count >= found_rank) {
          found_bin = b;
          found_rank -= seen;
          found_count = count;
          break;
        }
        seen += count;
      }
      gathered = 0u;
    }
    __syncthreads();
    const unsigned int top = found_bin;
    unsigned int remaining = found_rank;
    unsigned int prefix = top << kTopShift, mask = ~0u << kTopShift;
    const bool gather = found_count <= static_cast<unsigned int>(kCandidates) && top != kNanBin && top != kPlusZeroBin;
    unsigned int n = 0;  // keys gathered
    if (gather) {
      // Pass 2: the row filtered by its first digit; the values of bin `top` kept and gathered. It reads the row
      // from its end, where pass 1 ended: on the H200, B256 x V128256 93.6 -> 92.3 us, B32 x V256000 55.7 -> 53.4.
      for_each_chunk<T, W, true>(row, chunks, [&](long long c, const float (&v)[W]) {
        bool drop[W];
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const unsigned int key = key_of(v[j]);
          drop[j] = (key >> kTopShift) < top;
          if ((key >> kTopShift) == top) {
            const unsigned int at = atomicAdd(&gathered, 1u);
            if (at < static_cast<unsigned int>(kCandidates)) {  // always: the bin holds found_count of them
              pool[at] = key;
              pool[kCandidates + at] = static_cast<unsigned int>(c * W + j);
            }
          }
        }
        store_chunk<T, W>(orow, c, v, drop);
      });
      __syncthreads();
      n = gathered < static_cast<unsigned int>(kCandidates) ? gathered : static_cast<unsigned int>(kCandidates);
    }
    // The low digits: among the gathered keys, or over the row.
    for (int d = 0; d < kLowDigits; ++d) {
      const int shift = low_shift(d);
      const unsigned int digit = (1u << low_bits(d)) - 1u;
      if (gather) {
        for (int b = threadIdx.x; b < kBins; b += blockDim.x) total[b] = 0u;
        __syncthreads();
        for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) {
          const unsigned int key = pool[i];
          if ((key & mask) == prefix) atomicAdd(&total[(key >> shift) & digit], 1u);
        }
        __syncthreads();
      } else {
        for (int i = threadIdx.x; i < kWarps * kBins; i += blockDim.x) pool[i] = 0u;
        __syncthreads();
        for_each_chunk<T, W>(row, chunks, [&](long long, const float (&v)[W]) {
#pragma unroll
          for (int j = 0; j < W; ++j) {
            const unsigned int key = key_of(v[j]);
            if ((key & mask) == prefix) atomicAdd(&pool[warp * kBins + ((key >> shift) & digit)], 1u);
          }
        });
        __syncthreads();
        for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
          unsigned int sum = 0;
#pragma unroll
          for (int w = 0; w < kWarps; ++w) sum += pool[w * kBins + b];
          total[b] = sum;
        }
        __syncthreads();
      }
      if (warp == 0) find_bin(total, remaining, &found_bin, &found_rank);
      __syncthreads();
      prefix |= found_bin << shift;
      remaining = found_rank;
      mask |= digit << shift;
    }
    const float threshold = value_of(prefix);  // the k-th largest value
    if (gather) {
      // The gathered values below the k-th largest (stored kept by pass 2) become -inf.
      for (unsigned int i = threadIdx.x; i < n; i += blockDim.x)
        if (value_of(pool[i]) < threshold) orow[pool[kCandidates + i]] = kwiki_from_float<T>(-INFINITY);
    } else {
      for_each_chunk<T, W>(row, chunks, [&](long long c, const float (&v)[W]) {
        bool drop[W];
#pragma unroll
        for (int j = 0; j < W; ++j) drop[j] = v[j] < threshold;
        store_chunk<T, W>(orow, c, v, drop);
      });
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
  const bool vector = V % W == 0 && kwiki::aligned16(x) && kwiki::aligned16(out);
  if (B <= kwiki::multiprocessor_count()) {  // a block per multiprocessor at most: twice the threads, twice the loads in flight
    if (vector) topk_filter_kernel<T, W, kWideThreads><<<grid, kWideThreads, 0, stream>>>(x, ks, k_all, out, B, V);
    else topk_filter_kernel<T, 1, kWideThreads><<<grid, kWideThreads, 0, stream>>>(x, ks, k_all, out, B, V);
  } else {
    if (vector) topk_filter_kernel<T, W, kThreads><<<grid, kThreads, 0, stream>>>(x, ks, k_all, out, B, V);
    else topk_filter_kernel<T, 1, kThreads><<<grid, kThreads, 0, stream>>>(x, ks, k_all, out, B, V);
  }
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
