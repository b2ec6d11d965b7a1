// fp8_quant.cuh: kwiki V0 template, dynamic per-token (per-row) FP8 E4M3 quantization.
//
//   scale[t] = max(amax(|x[t, :]|), 1e-12) / fp8_max                       (fp32)
//   q[t, :]  = fp8(clamp(x[t, :] / scale[t], -fp8_max, fp8_max))           (round to nearest even)
//
// The fp8 format: e4m3fn on CUDA (max 448, NaN 0x7f/0xff, has -0); e4m3fnuz on HIP / CDNA3
// (exponent bias 8, max 240, no -0, the only NaN is 0x80). fp8_max comes from params.
// ABI (ABI.md): tensors x[T,H], q[T,H] (fp8 bytes), scale[T] (fp32); dims T, H; params fp8_max.
//
// Design: as rms_norm.cuh (one row per block, or per warp for short rows; the row read once
// into registers with 16-byte loads; amax reduced per warp then through shared memory, NaN
// propagating as in torch),
// the bytes stored W at a time (8 bytes per 16-byte input vector of bf16/fp16). Rows longer
// than 16384 elements (4096 scalar) are re-read from L2 by a looping kernel. x / scale is the
// product with the row's reciprocal plus one fma correction (divide_by_scale), which matches the
// reference's fp32 division but for rare last-ulp cases at a fp8 rounding tie.
#ifndef KWIKI_FP8_QUANT_CUH
#define KWIKI_FP8_QUANT_CUH

#include "kwiki_compat.cuh"

#if KWIKI_PLATFORM_CUDA
#include <cuda_fp8.h>
#endif

namespace kwiki_fp8_quant {

/// float -> fp8 E4M3 byte, round to nearest even, saturating to the largest finite value.
/// kFnuz: e4m3fnuz (bias 8, max 240, no negative zero: -0 and values rounding to zero give
/// 0x00; NaN gives 0x80). Else e4m3fn (bias 7, max 448; NaN gives 0x7f, signed zeros kept).
/// Portable C++ (host and device): the HIP path uses it; on CUDA it can be checked against
/// __nv_cvt_float_to_fp8.
template <bool kFnuz>
KWIKI_HOST_DEVICE unsigned char float_to_e4m3(float x) {
  constexpr int kBias = kFnuz ? 8 : 7;
  constexpr int kEmin = 1 - kBias;                    // exponent of the smallest normal
  constexpr unsigned int kMaxMag = kFnuz ? 0x7fu : 0x7eu;  // 240 = 1.875 * 2^7; 448 = 1.75 * 2^8
  constexpr float kMax = kFnuz ? 240.f : 448.f;
  const unsigned int bits = kwiki::bit_cast<unsigned int>(x);
  const unsigned int sign = (bits >> 31) << 7;
  if ((bits & 0x7fffffffu) > 0x7f800000u) return kFnuz ? 0x80u : 0x7fu;  // NaN
  const float a = kwiki::bit_cast<float>(bits & 0x7fffffffu);
  unsigned int mag;
  if (a >= kMax) {  // saturate (includes +-inf)
    mag = kMaxMag;
  } else {
    // The fp8 grid spacing around a: 2^(E - 3) in the binade [2^E, 2^(E+1)), E >= kEmin;
    // the subnormal spacing 2^(kEmin - 3) below 2^kEmin. a * 2^(3 - E) is exact (a power-of-two
    // scaling that cannot overflow or lose bits), rintf rounds it to nearest even.
    int e = static_cast<int>((bits >> 23) & 0xffu) - 127;  // floor(log2 a); -127 for zero and float subnormals
    if (e < kEmin) e = kEmin;
    const float spacing = kwiki::bit_cast<float>(static_cast<unsigned int>(e - 3 + 127) << 23);
    const float inv_spacing = kwiki::bit_cast<float>(static_cast<unsigned int>(3 - e + 127) << 23);
    const float q = rintf(a * inv_spacing);  // exact scaling, then an integer in [0, 16]
    if (q == 0.f) return kFnuz ? 0x00u : static_cast<unsigned char>(sign);
    const float v = q * spacing;  // the rounded magnitude, <= kMax since a < kMax and kMax is on the grid
    const unsigned int vb = kwiki::bit_cast<unsigned int>(v);
    const int ev = static_cast<int>((vb >> 23) & 0xffu) - 127;
    if (ev < kEmin) {
      mag = static_cast<unsigned int>(q);  // subnormal: exponent field 0, mantissa q in 1..7
    } else {
      mag = (static_cast<unsigned int>(ev + kBias) << 3) | ((vb >> 20) & 7u);  // v has <= 4 significant bits
    }
  }
  return static_cast<unsigned char>(sign | mag);
}

/// The platform's fp8 cast of a value already clamped to +-fp8_max.
KWIKI_DEVICE unsigned char to_fp8(float v) {
#if KWIKI_PLATFORM_HIP
  return float_to_e4m3<true>(v);
#else
  return static_cast<unsigned char>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
#endif
}

/// max(amax, |x|) for amax >= 0 as one integer max on the bits (non-negative floats order as
/// their bits): a NaN (|NaN| ranks above +inf) propagates, as torch's amax does, where fmaxf
/// would drop it.
KWIKI_DEVICE float abs_max(float amax, float x) {
  const unsigned int a = kwiki::bit_cast<unsigned int>(amax), b = kwiki::bit_cast<unsigned int>(fabsf(x));
  return kwiki::bit_cast<float>(a > b ? a : b);
}

/// x / scale from the row's reciprocal: the product, then one fma correction with the residual
/// x - q * scale. Equal to the true fp32 division except in rare last-ulp cases, and a
/// last-ulp difference can change the fp8 byte only at an exact rounding tie; a fraction of
/// the division's instructions, which bound this kernel.
KWIKI_DEVICE float divide_by_scale(float x, float scale, float inv) {
  const float q0 = x * inv;
  return fmaf(fmaf(-q0, scale, x), inv, q0);
}

/// x / scale clamped to +-fp8_max (kClamp), or left to the cast, which saturates on its own:
/// the same bytes when fp8_max is the format's largest value, NaN kept as NaN (as the
/// reference's clamp keeps it), and two instructions less an element.
template <bool kClamp>
KWIKI_DEVICE float scaled(float x, float scale, float inv, float fp8_max) {
  const float v = divide_by_scale(x, scale, inv);
  if constexpr (kClamp) return fminf(fmaxf(v, -fp8_max), fp8_max);
  else return v;
}

/// Quantizes W values (x / scale, clamped) and stores the W bytes at once; on CUDA two values
/// per conversion instruction.
template <int W, bool kClamp>
KWIKI_DEVICE void quant_store(unsigned char* __restrict__ q, const float (&f)[W], float scale, float inv, float fp8_max) {
  kwiki::Bytes<W> b;
  constexpr bool kPairs = KWIKI_PLATFORM_CUDA && W % 2 == 0;
  if constexpr (kPairs) {
#if KWIKI_PLATFORM_CUDA
#pragma unroll
    for (int j = 0; j < W; j += 2) {
      const float2 pair = make_float2(scaled<kClamp>(f[j], scale, inv, fp8_max), scaled<kClamp>(f[j + 1], scale, inv, fp8_max));
      const unsigned short two = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E4M3);  // .x in the low byte
      b.b[j] = static_cast<unsigned char>(two & 0xffu);
      b.b[j + 1] = static_cast<unsigned char>(two >> 8);
    }
#endif
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) b.b[j] = to_fp8(scaled<kClamp>(f[j], scale, inv, fp8_max));
  }
  *reinterpret_cast<kwiki::Bytes<W>*>(q) = b;
}

/// Registers a thread of the register-row kernel may use on CUDA, by 16-byte accesses a thread
/// (this row's and the next row's, 4 registers each): 48 at four (eight blocks of 160 threads a
/// multiprocessor instead of six at 58 registers: 16384 x 5120 bf16 on the H200 75.3 -> 72.2 us,
/// bench/gpu/row_launch_sweep.cu), 128 at eight (fp32 rows; at most 512 threads, as planned),
/// 32 at one or two (what ptxas chose for them under a 1024-thread launch bound: 28-32).
constexpr int max_registers(int VPT) { return VPT >= 8 ? 128 : VPT == 4 ? 48 : 32; }

/// Row kept in registers: VPT accesses of W elements per thread (H a multiple of W). Launched one
/// block a row; past kMaxGrid rows a block strides and loads its next row's slice while this one
/// is reduced and written.
template <typename T, int W, int VPT, bool kWarpRow, bool kClamp>
#if KWIKI_PLATFORM_CUDA && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
KWIKI_GLOBAL void __maxnreg__(max_registers(VPT))  // __maxnreg__: CUDA 12.4 and later
#else
KWIKI_GLOBAL void __launch_bounds__(kwiki::row_block_bound(W, VPT))
#endif
fp8_quant_kernel(const T* __restrict__ x, unsigned char* __restrict__ q, float* __restrict__ scale, long long rows, int H,
                 float fp8_max) {
  using G = kwiki::RowGroup<kWarpRow>;
  using Slice = kwiki::RowSlice<T, W, VPT>;
  const int r = G::rank();
  const int gs = G::size();
  const int nacc = H / W;
  kwiki::for_each_row_prefetched<G, Slice>(
      rows, [&](long long row, Slice& sl) { sl.load(x + row * H, r, gs, nacc); },
      [&](long long row, const Slice& sl) {
        unsigned char* qr = q + row * H;
        float amax = 0.f;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          if (r + i * gs < nacc) {
#pragma unroll
            for (int j = 0; j < W; ++j) amax = abs_max(amax, sl.v[i].get(j));
          }
        }
        amax = G::max(amax);
        const float s = (isnan(amax) ? amax : fmaxf(amax, 1e-12f)) / fp8_max;  // NaN stays NaN, as in torch's clamp
        const float inv = 1.f / s;
        if (r == 0) scale[row] = s;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          const int a = r + i * gs;
          if (a < nacc) {
            float f[W];
#pragma unroll
            for (int j = 0; j < W; ++j) f[j] = sl.v[i].get(j);
            quant_store<W, kClamp>(qr + static_cast<long long>(a) * W, f, s, inv, fp8_max);
          }
        }
      });
}

/// Rows longer than the register capacity (H a multiple of W): amax pass, then a second read (from L2) to quantize.
template <typename T, int W, bool kClamp>
KWIKI_GLOBAL void __launch_bounds__(1024)
fp8_quant_loop_kernel(const T* __restrict__ x, unsigned char* __restrict__ q, float* __restrict__ scale, long long rows, int H,
                      float fp8_max) {
  const int r = threadIdx.x;
  const int gs = blockDim.x;
  const int nacc = H / W;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * H;
    unsigned char* qr = q + row * H;
    float amax = 0.f;
    for (int a = r; a < nacc; a += gs) {
      float f[W];
      kwiki::load_f32<W>(xr + static_cast<long long>(a) * W, f);
#pragma unroll
      for (int j = 0; j < W; ++j) amax = abs_max(amax, f[j]);
    }
    amax = kwiki::block_reduce_max(amax);
    const float s = (isnan(amax) ? amax : fmaxf(amax, 1e-12f)) / fp8_max;
    const float inv = 1.f / s;
    if (r == 0) scale[row] = s;
    for (int a = r; a < nacc; a += gs) {
      const long long off = static_cast<long long>(a) * W;
      float f[W];
      kwiki::load_f32<W>(xr + off, f);
      quant_store<W, kClamp>(qr + off, f, s, inv, fp8_max);
    }
  }
}

template <typename T, int W, bool kClamp>
inline int launch_c(const T* x, unsigned char* q, float* scale, long long rows, int H, float fp8_max, kwiki_stream_t stream) {
  // Four 16-byte accesses a thread (fewer threads a row, more rows a multiprocessor), one block
  // per row: 16384 x 5120 bf16 on the H200 with the saturating cast, 83.0 us at one access a
  // thread, 75.3 at four, 72.5 at four and 48 registers on the resident grid that prefetches the
  // next row, 64.3 at one block a row (bench/gpu/row_launch_sweep.cu --fp8).
  return kwiki::launch_rows<W, W == 1 ? 1 : 4, false>(
      H / W, rows, stream, [] { return fp8_quant_loop_kernel<T, W, kClamp>; },
      [](auto vpt, auto warp) { return fp8_quant_kernel<T, W, decltype(vpt)::value, decltype(warp)::value, kClamp>; }, x, q, scale,
      rows, H, fp8_max);
}

/// The clamp to +-fp8_max only when fp8_max is below the format's largest value (the cast
/// saturates at that value by itself).
template <typename T, int W>
inline int launch_w(const T* x, unsigned char* q, float* scale, long long rows, int H, float fp8_max, float format_max,
                    kwiki_stream_t stream) {
  if (fp8_max < format_max) return launch_c<T, W, true>(x, q, scale, rows, H, fp8_max, stream);
  return launch_c<T, W, false>(x, q, scale, rows, H, fp8_max, stream);
}

/// Launches the per-token fp8 quantization on `stream`; 0, the launch error, or -1.
template <typename T>
inline int launch(const T* x, unsigned char* q, float* scale, long long rows, long long H, double fp8_max, kwiki_stream_t stream) {
  if (rows < 0 || H <= 0 || H > INT_MAX) return -1;
  // The largest finite value of the platform's format (e4m3fn 448, e4m3fnuz 240) bounds fp8_max.
  constexpr double kFormatMax = KWIKI_PLATFORM_HIP ? 240.0 : 448.0;
  if (!(fp8_max > 0.0) || fp8_max > kFormatMax) return -1;  // also rejects NaN
  if (rows == 0) return 0;
  constexpr int V = kwiki::vec_width<T>();
  // q rows start W-byte aligned when H is a multiple of W (and q 16-byte aligned).
  const bool vec_ok = kwiki::aligned16(x) && kwiki::aligned16(q) && H % V == 0;
  const float fmax = static_cast<float>(fp8_max), format_max = static_cast<float>(kFormatMax);
  if (vec_ok) return launch_w<T, V>(x, q, scale, rows, static_cast<int>(H), fmax, format_max, stream);
  return launch_w<T, 1>(x, q, scale, rows, static_cast<int>(H), fmax, format_max, stream);
}

}  // namespace kwiki_fp8_quant

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the element type) before including fp8_quant.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || num_tensors != 3 || num_dims != 2 || num_params < 1 || params == nullptr) return -1;
  if (tensors[0] == nullptr || tensors[1] == nullptr || tensors[2] == nullptr) return -1;
  return kwiki_fp8_quant::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<unsigned char*>(tensors[1]),
                                          static_cast<float*>(tensors[2]), dims[0], dims[1], params[0],
                                          static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_FP8_QUANT_CUH
