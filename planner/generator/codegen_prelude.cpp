// The fixed part of every generated source (CPU twin, CUDA, HIP).
#include "codegen_prelude.hpp"

namespace kwiki::gen {

// Conversions follow torch: bf16 and fp16 round to nearest even; float8 e4m3fn/e4m3fnuz round to
// nearest even, and a magnitude past the format's last rounding boundary (464 for e4m3fn, 248 for
// e4m3fnuz) becomes NaN, as c10's casts do (references clamp before they cast). Float to integer
// truncates toward zero.
const std::string& cpu_prelude() {
  static const std::string text = R"CPP(// ---- kwiki generator prelude (CPU) ----
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

struct kw_bf16 { std::uint16_t bits; };
struct kw_f16 { std::uint16_t bits; };
struct kw_e4m3fn { std::uint8_t b; };
struct kw_e4m3fnuz { std::uint8_t b; };

inline float kw_nan() { return std::numeric_limits<float>::quiet_NaN(); }
inline float kw_bits_f(std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline std::uint32_t kw_f_bits(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float kw_bf16_f(std::uint16_t b) { return kw_bits_f(static_cast<std::uint32_t>(b) << 16); }
inline std::uint16_t kw_f_bf16(float f) {
  std::uint32_t u = kw_f_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float kw_f16_f(std::uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) v = mant ? kw_nan() : INFINITY;
  else v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return sign ? -v : v;
}
inline std::uint16_t kw_f_f16(float f) {
  std::uint32_t x = kw_f_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (ax < 0x38800000u) {  // below 2^-14: a multiple of 2^-24, rounded to nearest even
    const float m = std::nearbyint(kw_bits_f(ax) * 16777216.0f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(m));
  }
  ax += 0xc8000fffu + ((ax >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (ax >> 13));
}
template <bool kFnuz>
inline float kw_e4m3_f(std::uint8_t b) {
  if (kFnuz && b == 0x80u) return kw_nan();
  if (!kFnuz && (b & 0x7fu) == 0x7fu) return kw_nan();
  const int exp = (b >> 3) & 0xf, mant = b & 7, bias = kFnuz ? 8 : 7;
  const float v = exp == 0 ? std::ldexp(static_cast<float>(mant), 1 - bias - 3) : std::ldexp(1.0f + mant / 8.0f, exp - bias);
  return (b & 0x80u) ? -v : v;
}
template <bool kFnuz>
inline std::uint8_t kw_f_e4m3(float x) {
  constexpr int kBias = kFnuz ? 8 : 7, kEmin = 1 - kBias;
  constexpr float kMax = kFnuz ? 240.f : 448.f, kOverflow = kFnuz ? 248.f : 464.f;
  const std::uint32_t bits = kw_f_bits(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 31) << 7);
  const std::uint8_t nan = kFnuz ? 0x80u : static_cast<std::uint8_t>(sign | 0x7fu);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return nan;
  const float a = std::fabs(x);
  if (a > kOverflow || (kFnuz && a >= kOverflow)) return nan;
  if (a >= kMax) return static_cast<std::uint8_t>(sign | (kFnuz ? 0x7fu : 0x7eu));
  int e = static_cast<int>((bits >> 23) & 0xffu) - 127;
  if (e < kEmin) e = kEmin;
  const float q = std::nearbyint(std::ldexp(a, 3 - e));
  if (q == 0.f) return kFnuz ? 0 : sign;
  const float v = std::ldexp(q, e - 3);
  int ev;
  const float fr = std::frexp(v, &ev);
  ev -= 1;
  if (ev < kEmin) return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(q));
  const int mant = static_cast<int>((fr * 2.0f - 1.0f) * 8.0f);
  return static_cast<std::uint8_t>(sign | ((ev + kBias) << 3) | mant);
}

inline float kw_round_bf16(float x) { return kw_bf16_f(kw_f_bf16(x)); }
inline float kw_round_f16(float x) { return kw_f16_f(kw_f_f16(x)); }
inline float kw_round_e4m3fn(float x) { return kw_e4m3_f<false>(kw_f_e4m3<false>(x)); }
inline float kw_round_e4m3fnuz(float x) { return kw_e4m3_f<true>(kw_f_e4m3<true>(x)); }

inline float kw_to_c(float v) { return v; }
inline float kw_to_c(kw_bf16 v) { return kw_bf16_f(v.bits); }
inline float kw_to_c(kw_f16 v) { return kw_f16_f(v.bits); }
inline float kw_to_c(kw_e4m3fn v) { return kw_e4m3_f<false>(v.b); }
inline float kw_to_c(kw_e4m3fnuz v) { return kw_e4m3_f<true>(v.b); }
inline bool kw_to_c(bool v) { return v; }
inline long long kw_to_c(signed char v) { return v; }
inline long long kw_to_c(unsigned char v) { return v; }
inline long long kw_to_c(short v) { return v; }
inline long long kw_to_c(int v) { return v; }
inline long long kw_to_c(long long v) { return v; }

template <class T> struct kw_store;
template <> struct kw_store<float> { template <class V> static float of(V x) { return static_cast<float>(x); } };
template <> struct kw_store<kw_bf16> { template <class V> static kw_bf16 of(V x) { return kw_bf16{kw_f_bf16(static_cast<float>(x))}; } };
template <> struct kw_store<kw_f16> { template <class V> static kw_f16 of(V x) { return kw_f16{kw_f_f16(static_cast<float>(x))}; } };
template <> struct kw_store<kw_e4m3fn> { template <class V> static kw_e4m3fn of(V x) { return kw_e4m3fn{kw_f_e4m3<false>(static_cast<float>(x))}; } };
template <> struct kw_store<kw_e4m3fnuz> { template <class V> static kw_e4m3fnuz of(V x) { return kw_e4m3fnuz{kw_f_e4m3<true>(static_cast<float>(x))}; } };
template <> struct kw_store<bool> { template <class V> static bool of(V x) { return x != 0; } };
template <class T> struct kw_store { template <class V> static T of(V x) { return static_cast<T>(static_cast<long long>(x)); } };
template <class T, class V> inline T kw_from_c(V x) { return kw_store<T>::of(x); }

template <class A, class B> inline float kw_div(A a, B b) { return static_cast<float>(a) / static_cast<float>(b); }  // true division, as torch's
inline float kw_abs(float x) { return std::fabs(x); }
inline long long kw_abs(long long x) { return x < 0 ? -x : x; }
inline bool kw_abs(bool x) { return x; }
template <class V> inline V kw_sign(V x) { return x != x ? x : static_cast<V>((x > 0) - (x < 0)); }
inline bool kw_not(bool x) { return !x; }
inline long long kw_not(long long x) { return ~x; }
template <class A, class B> inline auto kw_max(A a, B b) -> decltype(a + b) { return (a != a || a > b) ? a : b; }
template <class A, class B> inline auto kw_min(A a, B b) -> decltype(a + b) { return (a != a || a < b) ? a : b; }
template <class V> inline V kw_lowest() { return std::numeric_limits<V>::lowest(); }
template <class V> inline V kw_highest() { return std::numeric_limits<V>::max(); }
template <class V> inline bool kw_arg_better(V x, long long xi, V best, long long bi, bool is_max) {
  if (x != x) return !(best != best) || xi < bi;
  if (best != best) return false;
  if (is_max ? x > best : x < best) return true;
  return x == best && xi < bi;
}

}  // namespace
// ---- end of prelude ----
)CPP";
  return text;
}

const std::string& gpu_prelude() {
  static const std::string text = R"CPP(// ---- kwiki generator prelude (CUDA / HIP) ----
#include "kwiki_compat.cuh"
#if KWIKI_PLATFORM_CUDA
#include <cooperative_groups.h>
#include <cuda_fp8.h>
#endif

namespace kwgen {

struct kw_e4m3fn { unsigned char b; };
struct kw_e4m3fnuz { unsigned char b; };

KWIKI_DEVICE float kw_nan() { return __int_as_float(0x7fc00000); }

/// fp8 byte -> float by its bits: a normal value's exponent rebiased, a subnormal as mant * 2^(1 - bias - 3).
template <bool kFnuz>
KWIKI_DEVICE float kw_e4m3_f(unsigned int b) {
  if (kFnuz && b == 0x80u) return kw_nan();
  if (!kFnuz && (b & 0x7fu) == 0x7fu) return kw_nan();
  constexpr int kBias = kFnuz ? 8 : 7;
  const unsigned int exp = (b >> 3) & 0xfu, mant = b & 7u, sign = (b & 0x80u) << 24;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * __uint_as_float(static_cast<unsigned int>(127 + 1 - kBias - 3) << 23);
    return sign ? -v : v;
  }
  return __uint_as_float(sign | ((exp + 127 - kBias) << 23) | (mant << 20));
}
template <bool kFnuz>
KWIKI_DEVICE unsigned char kw_f_e4m3(float x) {
  constexpr int kBias = kFnuz ? 8 : 7, kEmin = 1 - kBias;
  constexpr float kMax = kFnuz ? 240.f : 448.f, kOverflow = kFnuz ? 248.f : 464.f;
  const unsigned int bits = __float_as_uint(x);
  const unsigned int sign = (bits >> 31) << 7;
  const unsigned char nan = kFnuz ? 0x80u : static_cast<unsigned char>(sign | 0x7fu);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return nan;
  const float a = fabsf(x);
  if (a > kOverflow || (kFnuz && a >= kOverflow)) return nan;
#if KWIKI_PLATFORM_CUDA
  if (!kFnuz) return static_cast<unsigned char>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
#endif
  if (a >= kMax) return static_cast<unsigned char>(sign | (kFnuz ? 0x7fu : 0x7eu));
  int e = static_cast<int>((bits >> 23) & 0xffu) - 127;
  if (e < kEmin) e = kEmin;
  const float q = rintf(ldexpf(a, 3 - e));
  if (q == 0.f) return kFnuz ? 0 : static_cast<unsigned char>(sign);
  const float v = ldexpf(q, e - 3);
  const unsigned int vb = __float_as_uint(v);
  const int ev = static_cast<int>((vb >> 23) & 0xffu) - 127;
  if (ev < kEmin) return static_cast<unsigned char>(sign | static_cast<unsigned int>(q));
  return static_cast<unsigned char>(sign | (static_cast<unsigned int>(ev + kBias) << 3) | ((vb >> 20) & 7u));
}

KWIKI_DEVICE float kw_round_bf16(float x) { return kwiki_to_float(kwiki_from_float<kwiki_bf16>(x)); }
KWIKI_DEVICE float kw_round_f16(float x) { return kwiki_to_float(kwiki_from_float<kwiki_half>(x)); }
KWIKI_DEVICE float kw_round_e4m3fn(float x) { return kw_e4m3_f<false>(kw_f_e4m3<false>(x)); }
KWIKI_DEVICE float kw_round_e4m3fnuz(float x) { return kw_e4m3_f<true>(kw_f_e4m3<true>(x)); }

KWIKI_DEVICE float kw_to_c(float v) { return v; }
KWIKI_DEVICE float kw_to_c(kwiki_bf16 v) { return kwiki_to_float(v); }
KWIKI_DEVICE float kw_to_c(kwiki_half v) { return kwiki_to_float(v); }
KWIKI_DEVICE float kw_to_c(kw_e4m3fn v) { return kw_e4m3_f<false>(v.b); }
KWIKI_DEVICE float kw_to_c(kw_e4m3fnuz v) { return kw_e4m3_f<true>(v.b); }
KWIKI_DEVICE bool kw_to_c(bool v) { return v; }
KWIKI_DEVICE long long kw_to_c(signed char v) { return v; }
KWIKI_DEVICE long long kw_to_c(unsigned char v) { return v; }
KWIKI_DEVICE long long kw_to_c(short v) { return v; }
KWIKI_DEVICE long long kw_to_c(int v) { return v; }
KWIKI_DEVICE long long kw_to_c(long long v) { return v; }

template <class T, class V>
KWIKI_DEVICE T kw_from_c(V x) {
  if constexpr (std::is_same<T, float>::value) return static_cast<float>(x);
  else if constexpr (std::is_same<T, kwiki_bf16>::value || std::is_same<T, kwiki_half>::value) return kwiki_from_float<T>(static_cast<float>(x));
  else if constexpr (std::is_same<T, kw_e4m3fn>::value) return kw_e4m3fn{kw_f_e4m3<false>(static_cast<float>(x))};
  else if constexpr (std::is_same<T, kw_e4m3fnuz>::value) return kw_e4m3fnuz{kw_f_e4m3<true>(static_cast<float>(x))};
  else if constexpr (std::is_same<T, bool>::value) return x != 0;
  else return static_cast<T>(static_cast<long long>(x));
}

// Exponential, tanh and division: the accurate forms, or with KWGEN_FAST_MATH (set when every
// result is stored as bf16 or fp16, whose rounding is 2^-8 or 2^-11 relative) the hardware's
// approximations (ex2.approx, tanh.approx, rcp-based division: about 2^-22 relative).
#ifndef KWGEN_FAST_MATH
#define KWGEN_FAST_MATH 0
#endif
KWIKI_DEVICE float kw_exp(float x) {
#if KWGEN_FAST_MATH
  return __expf(x);
#else
  return expf(x);
#endif
}
KWIKI_DEVICE float kw_tanh(float x) {
#if KWGEN_FAST_MATH && KWIKI_PLATFORM_CUDA
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return tanhf(x);
#endif
}
template <class A, class B>
KWIKI_DEVICE float kw_div(A a, B b) {
#if KWGEN_FAST_MATH
  return __fdividef(static_cast<float>(a), static_cast<float>(b));
#else
  return static_cast<float>(a) / static_cast<float>(b);
#endif
}

/// 1 / b correctly rounded: a row's divisor, taken once a row by kw_div_by.
KWIKI_DEVICE float kw_recip(float b) {
#if KWIKI_PLATFORM_CUDA
  return __frcp_rn(b);
#else
  return 1.0f / b;  // IEEE division (HIP divides correctly rounded by default)
#endif
}
/// x / b given y = kw_recip(b) (b the same for a whole row), instead of a division an element (its
/// MUFU.RCP, range check and slow path bound the fp8 quantization). With KWGEN_FAST_MATH the product
/// (within 1.5 ulp: kw_div's class). Else the product and two fma corrections with the exact residual
/// x - b q: after the first q is within one ulp of x / b, so the second gives x / b correctly rounded
/// (Markstein's theorem: y within half an ulp of 1 / b, no underflow or overflow), the division's
/// bits. Operands outside [2^-60, 2^60] in magnitude (zeros, subnormals, inf, NaN, where an
/// intermediate could underflow, overflow or lose the sign of a zero) take the division itself.
KWIKI_DEVICE float kw_div_by(float x, float b, float y) {
#if KWGEN_FAST_MATH
  (void)b;
  return x * y;
#else
  const float ax = fabsf(x), ab = fabsf(b);
  if ((ax >= 0x1p-60f) & (ax <= 0x1p60f) & (ab >= 0x1p-60f) & (ab <= 0x1p60f)) {
    const float q0 = x * y;
    const float q1 = fmaf(fmaf(-b, q0, x), y, q0);
    return fmaf(fmaf(-b, q1, x), y, q1);
  }
  return x / b;
#endif
}

KWIKI_DEVICE float kw_abs(float x) { return fabsf(x); }
KWIKI_DEVICE long long kw_abs(long long x) { return x < 0 ? -x : x; }
KWIKI_DEVICE bool kw_abs(bool x) { return x; }
template <class V> KWIKI_DEVICE V kw_sign(V x) { return x != x ? x : static_cast<V>((x > 0) - (x < 0)); }
KWIKI_DEVICE bool kw_not(bool x) { return !x; }
KWIKI_DEVICE long long kw_not(long long x) { return ~x; }
template <class A, class B> KWIKI_DEVICE auto kw_max(A a, B b) -> decltype(a + b) { return (a != a || a > b) ? a : b; }
template <class A, class B> KWIKI_DEVICE auto kw_min(A a, B b) -> decltype(a + b) { return (a != a || a < b) ? a : b; }
/// fp32 max and min as above (a NaN operand gives NaN), on sm_80 and later in one max.NaN / min.NaN
/// instruction instead of two compares and a select (a softmax's row max takes one an element).
KWIKI_DEVICE float kw_max(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || a > b) ? a : b;
#endif
}
KWIKI_DEVICE float kw_min(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || a < b) ? a : b;
#endif
}
template <class V> KWIKI_HOST_DEVICE V kw_lowest() { if constexpr (std::is_same<V, float>::value) return -INFINITY; else return LLONG_MIN; }
template <class V> KWIKI_HOST_DEVICE V kw_highest() { if constexpr (std::is_same<V, float>::value) return INFINITY; else return LLONG_MAX; }
template <class V> KWIKI_DEVICE bool kw_arg_better(V x, long long xi, V best, long long bi, bool is_max) {
  if (x != x) return !(best != best) || xi < bi;
  if (best != best) return false;
  if (is_max ? x > best : x < best) return true;
  return x == best && xi < bi;
}

/// W consecutive elements of T in 32-bit words: one load or store of 4, 8 or 16-byte pieces
/// (W * sizeof(T) bytes, aligned to that or to 16), elements read out as their compute type.
/// kByElement: W element loads instead (the scalar path of interleaved lanes, aligned only to T).
template <typename T, int W, bool kByElement = false>
struct kw_chunk {
  static constexpr int kBytes = W * static_cast<int>(sizeof(T));
  static constexpr int kWords = kBytes >= 4 ? kBytes / 4 : 1;
  unsigned int w[kWords];

  KWIKI_DEVICE void load(const T* __restrict__ p) {
    if constexpr (kByElement) {
#pragma unroll
      for (int q = 0; q < kWords; ++q) w[q] = 0;
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const T v = p[j];
        if constexpr (sizeof(T) == 4) w[j] = kwiki::bit_cast<unsigned int>(v);
        else if constexpr (sizeof(T) == 2) w[j / 2] |= static_cast<unsigned int>(kwiki::bit_cast<unsigned short>(v)) << (16 * (j & 1));
        else if constexpr (sizeof(T) == 1) w[j / 4] |= static_cast<unsigned int>(kwiki::bit_cast<unsigned char>(v)) << (8 * (j % 4));
        else {
          const unsigned long long u = kwiki::bit_cast<unsigned long long>(v);
          w[2 * j] = static_cast<unsigned int>(u);
          w[2 * j + 1] = static_cast<unsigned int>(u >> 32);
        }
      }
    } else if constexpr (kBytes < 4) {
      const T v = p[0];  // one element load (bit_cast of p[0] itself would read it byte by byte)
      if constexpr (sizeof(T) == 1) w[0] = kwiki::bit_cast<unsigned char>(v);
      else w[0] = kwiki::bit_cast<unsigned short>(v);
    } else if constexpr (kBytes % 16 == 0) {
#pragma unroll
      for (int q = 0; q < kBytes / 16; ++q) {
        const uint4 u = reinterpret_cast<const uint4*>(p)[q];
        w[4 * q] = u.x;
        w[4 * q + 1] = u.y;
        w[4 * q + 2] = u.z;
        w[4 * q + 3] = u.w;
      }
    } else if constexpr (kBytes == 8) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      w[0] = u.x;
      w[1] = u.y;
    } else {
      w[0] = *reinterpret_cast<const unsigned int*>(p);
    }
  }
  /// load() from a buffer the kernel only reads (an input or a parameter, never written by it):
  /// the read-only path on CUDA (ld.global.nc, as the hand templates' const __restrict__ pointers),
  /// which also lets these loads move past the kernel's stores.
  KWIKI_DEVICE void load_ro(const T* __restrict__ p) {
#if KWIKI_PLATFORM_CUDA
    if constexpr (!kByElement && kBytes % 16 == 0) {
#pragma unroll
      for (int q = 0; q < kBytes / 16; ++q) {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(p) + q);
        w[4 * q] = u.x;
        w[4 * q + 1] = u.y;
        w[4 * q + 2] = u.z;
        w[4 * q + 3] = u.w;
      }
      return;
    } else if constexpr (!kByElement && kBytes == 8) {
      const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
      w[0] = u.x;
      w[1] = u.y;
      return;
    } else if constexpr (!kByElement && kBytes == 4) {
      w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
      return;
    }
#endif
    load(p);
  }
  KWIKI_DEVICE auto get(int j) const {
    if constexpr (sizeof(T) == 4) return kw_to_c(kwiki::bit_cast<T>(w[j]));
    else if constexpr (std::is_same<T, kwiki_bf16>::value)  // bf16 is fp32's high half: one shift or mask, exact
      return __uint_as_float((j & 1) ? (w[j / 2] & 0xffff0000u) : (w[j / 2] << 16));
    else if constexpr (sizeof(T) == 2) return kw_to_c(kwiki::bit_cast<T>(static_cast<unsigned short>((j & 1) ? (w[j / 2] >> 16) : (w[j / 2] & 0xffffu))));
    else if constexpr (sizeof(T) == 1) return kw_to_c(kwiki::bit_cast<T>(static_cast<unsigned char>((w[j / 4] >> (8 * (j % 4))) & 0xffu)));
    else return kw_to_c(kwiki::bit_cast<T>(static_cast<unsigned long long>(w[2 * j]) | (static_cast<unsigned long long>(w[2 * j + 1]) << 32)));
  }
};

/// Two values as e4m3fn bytes (lo in the low byte), kw_f_e4m3<false>'s bytes: on CUDA one
/// cvt.rn.satfinite.e4m3x2.f32 for the pair when both lie within +-464 (the last rounding boundary;
/// the saturating cast then agrees with torch's), the scalar conversion otherwise (NaN, overflow).
KWIKI_DEVICE unsigned int kw_e4m3fn_x2(float lo, float hi) {
#if KWIKI_PLATFORM_CUDA
  if ((fabsf(lo) <= 464.f) & (fabsf(hi) <= 464.f)) return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
#endif
  return static_cast<unsigned int>(kw_f_e4m3<false>(lo)) | (static_cast<unsigned int>(kw_f_e4m3<false>(hi)) << 8);
}

/// Stores W values (compute type) as T at p, in the widest pieces kw_chunk loads.
template <int W, typename T, typename V>
KWIKI_DEVICE void kw_store_chunk(T* __restrict__ p, const V (&v)[W]) {
  constexpr int kBytes = W * static_cast<int>(sizeof(T));
  if constexpr (kBytes < 4) {
#pragma unroll
    for (int j = 0; j < W; ++j) p[j] = kw_from_c<T>(v[j]);
  } else {
    unsigned int w[kBytes / 4];
#pragma unroll
    for (int q = 0; q < kBytes / 4; ++q) w[q] = 0;
    constexpr bool kE4m3Pairs = std::is_same<T, kw_e4m3fn>::value;  // W is a multiple of 4 here
#pragma unroll
    for (int j = 0; j < W; ++j) {
      if constexpr (kE4m3Pairs) {
        if (j % 2 == 0) w[j / 4] |= kw_e4m3fn_x2(static_cast<float>(v[j]), static_cast<float>(v[j + 1])) << (8 * (j % 4));
        continue;
      }
      const T t = kw_from_c<T>(v[j]);
      if constexpr (sizeof(T) == 4) w[j] = kwiki::bit_cast<unsigned int>(t);
      else if constexpr (sizeof(T) == 2) w[j / 2] |= static_cast<unsigned int>(kwiki::bit_cast<unsigned short>(t)) << (16 * (j & 1));
      else if constexpr (sizeof(T) == 1) w[j / 4] |= static_cast<unsigned int>(kwiki::bit_cast<unsigned char>(t)) << (8 * (j % 4));
      else {
        const unsigned long long u = kwiki::bit_cast<unsigned long long>(t);
        w[2 * j] = static_cast<unsigned int>(u);
        w[2 * j + 1] = static_cast<unsigned int>(u >> 32);
      }
    }
    // Explicit vector stores: nvcc splits a uint4 struct store into four when it cannot prove the
    // address aligned (a row offset of several runtime terms), which the launcher has checked.
    if constexpr (kBytes % 16 == 0) {
#pragma unroll
      for (int q = 0; q < kBytes / 16; ++q) {
        const uint4 u = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
#if KWIKI_PLATFORM_CUDA
        __stwb(reinterpret_cast<uint4*>(p) + q, u);
#else
        reinterpret_cast<uint4*>(p)[q] = u;
#endif
      }
    } else if constexpr (kBytes == 8) {
#if KWIKI_PLATFORM_CUDA
      __stwb(reinterpret_cast<uint2*>(p), make_uint2(w[0], w[1]));
#else
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
#endif
    } else {
      *reinterpret_cast<unsigned int*>(p) = w[0];
    }
  }
}

/// kwiki::for_each_row_prefetched's contract without the prefetch: each row's slice loaded right
/// before its body. For launches of one block a row, where no next row shares the block and the
/// registers of a second slice would only cost occupancy.
template <typename G, typename Slice, typename Load, typename Body>
KWIKI_DEVICE void kw_for_each_row(long long rows, Load&& load, Body&& body) {
  for (long long row = G::first_row(); row < rows; row += G::row_stride()) {
    Slice cur;
    load(row, cur);
    body(row, static_cast<const Slice&>(cur));
  }
}

inline bool chunk_aligned(const void* p, int bytes) { return (reinterpret_cast<std::uintptr_t>(p) % static_cast<unsigned>(bytes)) == 0; }

// ---- Split rows: one row over a cluster of kCluster blocks (Hopper thread-block clusters) ----
// A few very long rows (one 128k-256k vocabulary row) leave all but a few multiprocessors idle
// when one block walks each row. On CUDA (sm_90) the row kernel can instead run a cluster of
// kCluster blocks per row: each block reduces its share, the block results are exchanged
// through distributed shared memory, and every block combines them in rank order, so all of
// them hold the same row result. HIP (CDNA has no clusters) keeps one block per row.

/// The threads of one row when a cluster of kCluster blocks shares it (kCluster > 1, CUDA only).
template <int kCluster>
struct kw_cluster_row {
#if KWIKI_PLATFORM_CUDA
  KWIKI_DEVICE static int block_rank() { return static_cast<int>(cooperative_groups::this_cluster().block_rank()); }
#else
  KWIKI_DEVICE static int block_rank() { return 0; }
#endif
  KWIKI_DEVICE static int rank() { return block_rank() * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x); }
  KWIKI_DEVICE static int size() { return kCluster * static_cast<int>(blockDim.x); }
  KWIKI_DEVICE static long long first_row() { return static_cast<long long>(blockIdx.x) / kCluster; }
  KWIKI_DEVICE static long long row_stride() { return static_cast<long long>(gridDim.x) / kCluster; }
};

/// The row group of a row kernel: a warp, a block, or (kCluster > 1) a cluster of blocks.
template <bool kWarpRow, int kCluster>
using kw_row_group = typename std::conditional<(kCluster > 1), kw_cluster_row<kCluster>, kwiki::RowGroup<kWarpRow>>::type;

/// Combines one value per block of the cluster, in block-rank order, with op; every thread of
/// every block gets the same result. Called by all threads of all the cluster's blocks with
/// their block's (already block-reduced) value. Two cluster barriers: the slot is read by all
/// blocks before any block writes it again.
template <int kCluster, typename V, typename Op>
KWIKI_DEVICE V kw_cluster_combine(V v, Op op) {
#if KWIKI_PLATFORM_CUDA
  if constexpr (kCluster > 1) {
    __shared__ V slot;
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    if (threadIdx.x == 0) slot = v;
    cluster.sync();
    V r = *cluster.map_shared_rank(&slot, 0);
#pragma unroll 1
    for (int b = 1; b < kCluster; ++b) r = op(r, *cluster.map_shared_rank(&slot, b));
    cluster.sync();
    return r;
  }
#endif
  return v;
}

/// The larger of two fp32 values by the key warp_max_f32 reduces (NaN of either sign ranks as the warp max does).
KWIKI_DEVICE float kw_key_max(float a, float b) {
  const int ka = __float_as_int(a), kb = __float_as_int(b);
  return (ka >= 0 ? ka : ka ^ 0x7fffffff) >= (kb >= 0 ? kb : kb ^ 0x7fffffff) ? a : b;
}

/// Sum and max over a row group (a warp, the block, or a cluster of blocks), every thread getting the result.
template <bool kWarpRow, int kCluster = 1, typename V>
KWIKI_DEVICE V kw_group_sum(V v) {
  if constexpr (kWarpRow) return kwiki::warp_reduce_sum(v);
  else return kw_cluster_combine<kCluster>(kwiki::block_reduce_sum(v), [](V x, V y) { return x + y; });
}
template <bool kWarpRow, int kCluster = 1, typename V>
KWIKI_DEVICE V kw_group_max(V v) {
  if constexpr (std::is_same<V, float>::value) {
    if constexpr (kWarpRow) return kwiki::RowGroup<true>::max(v);
    else return kw_cluster_combine<kCluster>(kwiki::RowGroup<false>::max(v), [](float x, float y) { return kw_key_max(x, y); });
  } else if constexpr (kWarpRow) {
    return kwiki::warp_reduce_max(v);
  } else {
    return kw_cluster_combine<kCluster>(kwiki::block_reduce_max<V>(v, kw_lowest<V>()), [](V x, V y) { return y > x ? y : x; });
  }
}
/// Arg-max/min over a row group: the best value, the lowest index among equals, NaN first.
template <bool kWarpRow, int kCluster = 1>
KWIKI_DEVICE void kw_group_arg(float& v, long long& idx, bool is_max) {
#pragma unroll
  for (int offset = KWIKI_WARP_SIZE / 2; offset > 0; offset >>= 1) {
    const float ov = kwiki_shfl_xor(v, offset);
    const long long oi = kwiki_shfl_xor(idx, offset);
    if (kw_arg_better(ov, oi, v, idx, is_max)) {
      v = ov;
      idx = oi;
    }
  }
  if constexpr (!kWarpRow) {
    __shared__ float sv[KWIKI_MAX_WARPS];
    __shared__ long long si[KWIKI_MAX_WARPS];
    __shared__ float rv;
    __shared__ long long ri;
    const int lane = threadIdx.x % KWIKI_WARP_SIZE, warp = threadIdx.x / KWIKI_WARP_SIZE;
    if (lane == 0) {
      sv[warp] = v;
      si[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
      const int nw = (blockDim.x + KWIKI_WARP_SIZE - 1) / KWIKI_WARP_SIZE;
      float bv = lane < nw ? sv[lane] : (is_max ? -INFINITY : INFINITY);
      long long bi = lane < nw ? si[lane] : LLONG_MAX;
#pragma unroll
      for (int offset = KWIKI_WARP_SIZE / 2; offset > 0; offset >>= 1) {
        const float ov = kwiki_shfl_xor(bv, offset);
        const long long oi = kwiki_shfl_xor(bi, offset);
        if (kw_arg_better(ov, oi, bv, bi, is_max)) {
          bv = ov;
          bi = oi;
        }
      }
      if (lane == 0) {
        rv = bv;
        ri = bi;
      }
    }
    __syncthreads();
    v = rv;
    idx = ri;
#if KWIKI_PLATFORM_CUDA
    if constexpr (kCluster > 1) {  // the blocks' (value, index) pairs, combined in rank order
      __shared__ float cv;
      __shared__ long long ci;
      cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
      if (threadIdx.x == 0) {
        cv = v;
        ci = idx;
      }
      cluster.sync();
      v = *cluster.map_shared_rank(&cv, 0);
      idx = *cluster.map_shared_rank(&ci, 0);
#pragma unroll 1
      for (int b = 1; b < kCluster; ++b) {
        const float ov = *cluster.map_shared_rank(&cv, b);
        const long long oi = *cluster.map_shared_rank(&ci, b);
        if (kw_arg_better(ov, oi, v, idx, is_max)) {
          v = ov;
          idx = oi;
        }
      }
      cluster.sync();
    }
#endif
  }
}

/// Blocks per row for a split-row launch of `rows` rows of `nacc` accesses on CUDA: 16 or 8
/// when the rows are too few to fill the multiprocessors one block each and long enough that
/// each block of the cluster still gets 1024 accesses or more; 1 for the ordinary launch.
inline int kw_split_cluster(long long rows, long long nacc) {
#if KWIKI_PLATFORM_CUDA
  const long long sms = kwiki::multiprocessor_count();
  if (rows < 1 || 2 * rows > sms) return 1;
  for (int c : {16, 8}) {
    if (nacc >= 1024LL * c && rows * c <= 2 * sms) return c;
  }
#else
  (void)rows;
  (void)nacc;
#endif
  return 1;
}

/// Launches kernel on clusters of c blocks (one cluster per row, 1024 threads a block); the
/// launch error, or -1 when the device cannot hold such a cluster (the caller then launches as usual).
template <typename Kernel, typename... Args>
inline int kw_launch_clusters(Kernel kernel, int c, long long rows, kwiki_stream_t stream, Args... args) {
#if KWIKI_PLATFORM_CUDA
  if (c > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(rows * c));
  cfg.blockDim = dim3(static_cast<unsigned>(kwiki::kMaxBlock));
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || clusters < 1) {
    (void)cudaGetLastError();
    return -1;
  }
  if (cudaLaunchKernelEx(&cfg, kernel, args...) != cudaSuccess) return kwiki_last_error();
  return 0;
#else
  (void)kernel;
  (void)c;
  (void)rows;
  (void)stream;
  return -1;
#endif
}

}  // namespace kwgen
// ---- end of prelude ----
)CPP";
  return text;
}

}  // namespace kwiki::gen
