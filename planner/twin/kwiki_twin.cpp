// The CPU twins behind kwiki_twin_launch: launcher-ABI tensors in, cpu_reference math, stores rounded as the kernels round.
#include "kwiki_twin.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_reference.hpp"

namespace {

namespace ref = kwiki::reference;

// The launcher arguments of one call, with typed access that checks counts and element types.
class Args {
 public:
  Args(void* const* tensors, const int* dtypes, int n, const long long* dims, int nd, const double* params, int np)
      : tensors_(tensors), dtypes_(dtypes), n_(n), dims_(dims), nd_(nd), params_(params), np_(np) {}

  void expect(int tensors, int dims, int params) const {
    if (n_ != tensors || nd_ != dims || np_ < params)
      throw std::invalid_argument("expected " + std::to_string(tensors) + " tensors, " + std::to_string(dims) + " dims and " +
                                  std::to_string(params) + " params; got " + std::to_string(n_) + ", " + std::to_string(nd_) + ", " +
                                  std::to_string(np_));
  }
  std::size_t dim(int i) const {
    if (dims_[i] < 0) throw std::invalid_argument("dims[" + std::to_string(i) + "] is negative");
    return static_cast<std::size_t>(dims_[i]);
  }
  double param(int i) const { return params_[i]; }
  bool present(int i) const { return tensors_[i] != nullptr; }
  int dtype(int i) const { return dtypes_[i]; }

  // Tensor i's `count` elements as floats (what the device reads them as).
  std::vector<float> floats(int i, std::size_t count) const {
    std::vector<float> out(count);
    const void* p = need(i);
    for (std::size_t k = 0; k < count; ++k) out[k] = load(p, dtypes_[i], k);
    return out;
  }
  std::vector<std::int32_t> ints(int i, std::size_t count) const {
    std::vector<std::int32_t> out(count);
    const void* p = need(i);
    for (std::size_t k = 0; k < count; ++k) {
      if (dtypes_[i] == KWIKI_TWIN_I32) out[k] = static_cast<const std::int32_t*>(p)[k];
      else if (dtypes_[i] == KWIKI_TWIN_I64) out[k] = static_cast<std::int32_t>(static_cast<const std::int64_t*>(p)[k]);
      else throw std::invalid_argument("tensor " + std::to_string(i) + " must be int32 or int64");
    }
    return out;
  }
  std::vector<std::int64_t> int64s(int i, std::size_t count) const {
    std::vector<std::int64_t> out(count);
    const void* p = need(i);
    for (std::size_t k = 0; k < count; ++k) {
      if (dtypes_[i] == KWIKI_TWIN_I32) out[k] = static_cast<const std::int32_t*>(p)[k];
      else if (dtypes_[i] == KWIKI_TWIN_I64) out[k] = static_cast<const std::int64_t*>(p)[k];
      else throw std::invalid_argument("tensor " + std::to_string(i) + " must be int32 or int64");
    }
    return out;
  }
  // Bytes of one element of tensor i.
  std::size_t element_size(int i) const {
    switch (dtypes_[i]) {
      case KWIKI_TWIN_F32: case KWIKI_TWIN_I32: return 4;
      case KWIKI_TWIN_BF16: case KWIKI_TWIN_F16: return 2;
      case KWIKI_TWIN_E4M3FN: case KWIKI_TWIN_E4M3FNUZ: case KWIKI_TWIN_U8: return 1;
      case KWIKI_TWIN_I64: return 8;
    }
    throw std::invalid_argument("unknown element type " + std::to_string(dtypes_[i]));
  }
  // Tensor i's storage (throws when it is null).
  void* raw(int i) const { return need(i); }
  // Stores `values` into tensor i, rounded to its element type as a kernel's store rounds.
  template <class T>
  void store(int i, const std::vector<T>& values) const {
    void* p = need(i);
    for (std::size_t k = 0; k < values.size(); ++k) save(p, dtypes_[i], k, static_cast<double>(values[k]));
  }

 private:
  void* need(int i) const {
    if (!tensors_[i]) throw std::invalid_argument("tensor " + std::to_string(i) + " is null");
    return tensors_[i];
  }
  static float bf16_bits_to_float(std::uint16_t b) {
    const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static float fp16_bits_to_float(std::uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
    return sign ? -v : v;
  }
  static float load(const void* p, int dtype, std::size_t k) {
    switch (dtype) {
      case KWIKI_TWIN_F32: return static_cast<const float*>(p)[k];
      case KWIKI_TWIN_BF16: return bf16_bits_to_float(static_cast<const std::uint16_t*>(p)[k]);
      case KWIKI_TWIN_F16: return fp16_bits_to_float(static_cast<const std::uint16_t*>(p)[k]);
      case KWIKI_TWIN_E4M3FN: return ref::fp8_decode(static_cast<const std::uint8_t*>(p)[k], false);
      case KWIKI_TWIN_E4M3FNUZ: return ref::fp8_decode(static_cast<const std::uint8_t*>(p)[k], true);
      case KWIKI_TWIN_I32: return static_cast<float>(static_cast<const std::int32_t*>(p)[k]);
      case KWIKI_TWIN_I64: return static_cast<float>(static_cast<const std::int64_t*>(p)[k]);
      case KWIKI_TWIN_U8: return static_cast<const std::uint8_t*>(p)[k];
    }
    throw std::invalid_argument("unknown element type " + std::to_string(dtype));
  }
  static std::uint16_t bits_of(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return static_cast<std::uint16_t>(u >> 16);
  }
  static void save(void* p, int dtype, std::size_t k, double v) {
    const float f = static_cast<float>(v);  // fp32 first, as the kernels compute in fp32
    switch (dtype) {
      case KWIKI_TWIN_F32: static_cast<float*>(p)[k] = f; return;
      case KWIKI_TWIN_BF16: static_cast<std::uint16_t*>(p)[k] = bits_of(ref::round_to_bf16(f)); return;
      case KWIKI_TWIN_F16: {
        const float h = ref::round_to_fp16(f);  // exactly representable: encode its bits
        std::uint16_t bits = 0;
        const std::uint32_t sign = std::signbit(h) ? 0x8000u : 0u;
        const float a = std::fabs(h);
        if (std::isnan(h)) bits = 0x7e00;
        else if (std::isinf(h)) bits = static_cast<std::uint16_t>(sign | 0x7c00);
        else if (a == 0) bits = static_cast<std::uint16_t>(sign);
        else {
          int e;
          const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
          if (e - 1 < -14) bits = static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::ldexp(a, 24)));
          else bits = static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(e - 1 + 15) << 10) |
                                                  (static_cast<std::uint32_t>(std::ldexp(m, 11)) & 0x3ff));
        }
        static_cast<std::uint16_t*>(p)[k] = bits;
        return;
      }
      case KWIKI_TWIN_E4M3FN: static_cast<std::uint8_t*>(p)[k] = ref::fp8_encode(f, false); return;
      case KWIKI_TWIN_E4M3FNUZ: static_cast<std::uint8_t*>(p)[k] = ref::fp8_encode(f, true); return;
      case KWIKI_TWIN_I32: static_cast<std::int32_t*>(p)[k] = static_cast<std::int32_t>(v); return;
      case KWIKI_TWIN_I64: static_cast<std::int64_t*>(p)[k] = static_cast<std::int64_t>(v); return;
      case KWIKI_TWIN_U8: static_cast<std::uint8_t*>(p)[k] = static_cast<std::uint8_t>(v); return;
    }
    throw std::invalid_argument("unknown element type " + std::to_string(dtype));
  }

  void* const* tensors_;
  const int* dtypes_;
  int n_;
  const long long* dims_;
  int nd_;
  const double* params_;
  int np_;
};

ref::StoreType store_type(int dtype) {
  return dtype == KWIKI_TWIN_BF16 ? ref::StoreType::kBFloat16 : dtype == KWIKI_TWIN_F16 ? ref::StoreType::kFloat16 : ref::StoreType::kFloat32;
}

// One function per family, in its launcher's tensor order (ABI.md).
void rms_norm(const Args& a) {  // x[T,H], weight[H], out[T,H]; T, H; eps
  a.expect(3, 2, 1);
  const std::size_t t = a.dim(0), h = a.dim(1);
  a.store(2, ref::rms_norm(a.floats(0, t * h), a.floats(1, h), t, h, a.param(0)));
}

void fused_add_rms_norm(const Args& a) {  // x, residual (in place), weight, out; T, H; eps
  a.expect(4, 2, 1);
  const std::size_t t = a.dim(0), h = a.dim(1);
  const auto r = ref::fused_add_rms_norm(a.floats(0, t * h), a.floats(1, t * h), a.floats(2, h), t, h, a.param(0), store_type(a.dtype(1)));
  a.store(1, r.residual);
  a.store(3, r.out);
}

void layer_norm(const Args& a) {  // x, weight, bias, out; T, H; eps
  a.expect(4, 2, 1);
  const std::size_t t = a.dim(0), h = a.dim(1);
  a.store(3, ref::layer_norm(a.floats(0, t * h), a.floats(1, h), a.floats(2, h), t, h, a.param(0)));
}

void softmax(const Args& a) {  // x, out; T, N
  a.expect(2, 2, 0);
  const std::size_t t = a.dim(0), n = a.dim(1);
  a.store(1, ref::softmax(a.floats(0, t * n), t, n));
}

void row_reduce(const Args& a) {  // x, out[T]; T, H; op
  a.expect(2, 2, 1);
  const std::size_t t = a.dim(0), h = a.dim(1);
  const int op = static_cast<int>(a.param(0));
  if (op < 0 || op > 2) throw std::invalid_argument("row_reduce op must be 0, 1 or 2");
  a.store(1, ref::row_reduce(a.floats(0, t * h), t, h, static_cast<ref::RowReduceOp>(op)));
}

void gated(const Args& a, bool gelu) {  // x[T,2I], out[T,I]; T, I
  a.expect(2, 2, 0);
  const std::size_t t = a.dim(0), i = a.dim(1);
  const auto x = a.floats(0, t * 2 * i);
  a.store(1, gelu ? ref::gelu_and_mul(x, t, i) : ref::silu_and_mul(x, t, i));
}

void fp8_quant(const Args& a) {  // x, q (fp8), scale[T] fp32; T, H; fp8_max
  a.expect(3, 2, 1);
  const std::size_t t = a.dim(0), h = a.dim(1);
  const bool fnuz = a.param(0) == 240.0;
  const auto r = ref::fp8_quant(a.floats(0, t * h), t, h, fnuz);
  a.store(1, r.q);
  a.store(2, r.scales);
}

void moe_gating(const Args& a) {  // gating[T,E] fp32, weights[T,k], ids[T,k]; T, E, k; renormalize
  a.expect(3, 3, 1);
  const std::size_t t = a.dim(0), e = a.dim(1), k = a.dim(2);
  if (k > e) throw std::invalid_argument("top-k above the expert count");
  const auto r = ref::moe_gating(a.floats(0, t * e), t, e, k, a.param(0) != 0);
  a.store(1, r.weights);
  a.store(2, r.ids);
}

void gemm(const Args& a) {  // x[M,K], w[N,K], bias[N] or null, out[M,N]; M, N, K
  a.expect(4, 3, 0);
  const std::size_t m = a.dim(0), n = a.dim(1), k = a.dim(2);
  const std::vector<float> bias = a.present(2) ? a.floats(2, n) : std::vector<float>();
  a.store(3, ref::gemm(a.floats(0, m * k), a.floats(1, n * k), bias, m, n, k));
}

void paged_decode_attention(const Args& a) {  // q, k_cache, v_cache, block_tables, seq_lens, out, partial_out, partial_lse
  a.expect(8, 7, 1);
  ref::PagedAttentionShape s;
  s.batch = a.dim(0);
  s.q_heads = a.dim(1);
  s.kv_heads = a.dim(2);
  s.head_size = a.dim(3);
  s.page_size = a.dim(4);
  s.max_pages = a.dim(5);
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0) throw std::invalid_argument("query heads must be a multiple of KV heads");
  const auto tables = a.ints(3, s.batch * s.max_pages);
  const auto lens = a.ints(4, s.batch);
  std::int32_t blocks = 0;
  for (const auto b : tables) blocks = std::max(blocks, b + 1);
  const std::size_t cache = static_cast<std::size_t>(blocks) * s.page_size * s.kv_heads * s.head_size;
  a.store(5, ref::paged_decode_attention(a.floats(0, s.batch * s.q_heads * s.head_size), a.floats(1, cache), a.floats(2, cache), tables, lens, s,
                                         a.param(0)));
}

void kv_cache_write(const Args& a) {  // key, value, key_cache, value_cache (in place), slot_mapping; T, Hkv, D, NB, P, X, layout
  a.expect(5, 7, 0);
  ref::KvCacheShape s;
  s.tokens = a.dim(0);
  s.kv_heads = a.dim(1);
  s.head_size = a.dim(2);
  s.num_blocks = a.dim(3);
  s.block_size = a.dim(4);
  s.x = a.dim(5);
  const std::size_t layout = a.dim(6);
  if (layout > 1) throw std::invalid_argument("layout must be 0 (vLLM) or 1 (flash)");
  s.layout = static_cast<ref::KvCacheLayout>(layout);
  if (a.dtype(0) != a.dtype(2) || a.dtype(1) != a.dtype(3)) throw std::invalid_argument("the caches must hold the rows' element type");
  // The kernel copies elements unchanged: so does the twin, byte for byte, touching only the
  // addressed slots (a cache is far larger than the rows written into it).
  const auto moves = ref::kv_cache_moves(a.int64s(4, s.tokens), s);
  for (int i : {0, 1}) {
    const std::size_t size = a.element_size(i);
    const auto* src = static_cast<const unsigned char*>(a.raw(i));
    auto* dst = static_cast<unsigned char*>(a.raw(i + 2));
    for (const auto& m : moves) std::memcpy(dst + (i == 0 ? m.key : m.value) * size, src + m.row * size, size);
  }
}

void topk_filter(const Args& a) {  // logits[B,V], k[B] or null, out[B,V]; B, V; k (when the k tensor is null)
  a.expect(3, 2, 1);
  const std::size_t b = a.dim(0), v = a.dim(1);
  std::vector<std::int64_t> k = a.present(1) ? a.int64s(1, b) : std::vector<std::int64_t>(b, static_cast<std::int64_t>(a.param(0)));
  a.store(2, ref::topk_filter(a.floats(0, b * v), b, v, k));
}

void paged_decode_attention_vllm(const Args& a) {  // q, k_cache (vLLM), v_cache (vLLM), block_tables, seq_lens, out, partials
  a.expect(8, 9, 1);
  ref::PagedAttentionShape s;
  s.batch = a.dim(0);
  s.q_heads = a.dim(1);
  s.kv_heads = a.dim(2);
  s.head_size = a.dim(3);
  s.page_size = a.dim(4);
  s.max_pages = a.dim(5);
  const std::size_t x = a.dim(7), nb = a.dim(8);
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0) throw std::invalid_argument("query heads must be a multiple of KV heads");
  const std::size_t cache = nb * s.page_size * s.kv_heads * s.head_size;
  const auto k = ref::vllm_cache_to_flash(a.floats(1, cache), nb, s.kv_heads, s.head_size, s.page_size, x, true);
  const auto v = ref::vllm_cache_to_flash(a.floats(2, cache), nb, s.kv_heads, s.head_size, s.page_size, x, false);
  a.store(5, ref::paged_decode_attention(a.floats(0, s.batch * s.q_heads * s.head_size), k, v, a.ints(3, s.batch * s.max_pages),
                                         a.ints(4, s.batch), s, a.param(0)));
}

void mla_decode(const Args& a) {  // q[B,H,Dqk], kv_cache[NB,P,Dqk], block_tables, seq_lens, out[B,H,Dv], partials; B, H, Dqk, Dv, P, MB, S, NB
  a.expect(7, 8, 1);
  ref::MlaShape s;
  s.batch = a.dim(0);
  s.heads = a.dim(1);
  s.qk_dim = a.dim(2);
  s.v_dim = a.dim(3);
  s.page_size = a.dim(4);
  s.max_pages = a.dim(5);
  const std::size_t nb = a.dim(7);
  a.store(4, ref::mla_decode(a.floats(0, s.batch * s.heads * s.qk_dim), a.floats(1, nb * s.page_size * s.qk_dim), a.ints(2, s.batch * s.max_pages),
                             a.ints(3, s.batch), s, a.param(0)));
}

void fused_moe(const Args& a) {  // hidden, w13, w2, topk_weights, topk_ids, out, 6 scratch; T, H, I, E, k, BM
  a.expect(12, 6, 0);
  ref::FusedMoeShape s;
  s.tokens = a.dim(0);
  s.hidden = a.dim(1);
  s.intermediate = a.dim(2);
  s.experts = a.dim(3);
  s.topk = a.dim(4);
  if (s.hidden == 0 || s.intermediate == 0 || s.experts == 0 || s.topk == 0 || a.dim(5) == 0)
    throw std::invalid_argument("H, I, E, k and BM must be positive");
  // The scratch tensors (6..11) are the kernel's; the twin needs none of them.
  const std::size_t rows = s.tokens * s.topk;
  a.store(5, ref::fused_moe(a.floats(0, s.tokens * s.hidden), a.floats(1, s.experts * 2 * s.intermediate * s.hidden),
                            a.floats(2, s.experts * s.hidden * s.intermediate), a.floats(3, rows), a.ints(4, rows), s, store_type(a.dtype(0))));
}

// Tensor i's `count` fp8 values in the format fnuz names: an fp8 tensor of that format, or raw bytes
// (uint8) read as the kernel reads them.
std::vector<float> fp8_values(const Args& a, int i, std::size_t count, double fnuz) {
  const int want = fnuz != 0.0 ? KWIKI_TWIN_E4M3FNUZ : KWIKI_TWIN_E4M3FN;
  if (a.dtype(i) != want && a.dtype(i) != KWIKI_TWIN_U8)
    throw std::invalid_argument("tensor " + std::to_string(i) + " must be fp8 of the format fnuz names");
  if (a.dtype(i) != KWIKI_TWIN_U8) return a.floats(i, count);
  std::vector<float> v(count);
  const auto* p = static_cast<const std::uint8_t*>(a.raw(i));
  for (std::size_t k = 0; k < count; ++k) v[k] = ref::fp8_decode(p[k], fnuz != 0.0);
  return v;
}

void fp8_block_gemm(const Args& a) {  // A[M,K] fp8, B[N,K] fp8, As, Bs (fp32), out[M,N]; M, N, K, BN, BK; fnuz
  a.expect(5, 5, 1);
  ref::Fp8BlockGemmShape s;
  s.m = a.dim(0);
  s.n = a.dim(1);
  s.k = a.dim(2);
  s.block_n = a.dim(3);
  s.block_k = a.dim(4);
  // As the launcher: 128 x 128 scale blocks only, K in whole 16-byte rows.
  if (s.block_n != 128 || s.block_k != 128) throw std::invalid_argument("the launcher serves 128 x 128 scale blocks only");
  if (s.k % 16 != 0) throw std::invalid_argument("K must be a multiple of 16 (16-byte fp8 rows)");
  const double fnuz = a.param(0);
  if (fnuz != 0.0 && fnuz != 1.0) throw std::invalid_argument("fnuz must be 0 (e4m3fn) or 1 (e4m3fnuz)");
  const std::size_t kb = (s.k + 127) / 128, nb = (s.n + 127) / 128;
  a.store(4, ref::fp8_block_gemm(fp8_values(a, 0, s.m * s.k, fnuz), fp8_values(a, 1, s.n * s.k, fnuz), a.floats(2, s.m * kb), a.floats(3, nb * kb), s));
}

// hidden, w13 (fp8), w2 (fp8), w13_scale, w2_scale, topk_weights, topk_ids, out, 9 scratch; T, H, I, E, k, BM; fnuz
void fused_moe_fp8(const Args& a) {
  a.expect(17, 6, 1);
  ref::FusedMoeShape s;
  s.tokens = a.dim(0);
  s.hidden = a.dim(1);
  s.intermediate = a.dim(2);
  s.experts = a.dim(3);
  s.topk = a.dim(4);
  if (s.hidden == 0 || s.intermediate == 0 || s.experts == 0 || s.topk == 0 || a.dim(5) == 0)
    throw std::invalid_argument("H, I, E, k and BM must be positive");
  // As the launcher: the quantization groups and scale blocks are 128 wide, H and I whole groups.
  if (s.hidden % 128 != 0 || s.intermediate % 128 != 0) throw std::invalid_argument("H and I must be multiples of 128");
  const double fnuz = a.param(0);
  if (fnuz != 0.0 && fnuz != 1.0) throw std::invalid_argument("fnuz must be 0 (e4m3fn) or 1 (e4m3fnuz)");
  const std::size_t hb = s.hidden / 128, ib = s.intermediate / 128, rows = s.tokens * s.topk;
  // The scratch tensors (8..16) are the kernel's; the twin needs none of them.
  a.store(7, ref::fused_moe_fp8(a.floats(0, s.tokens * s.hidden), fp8_values(a, 1, s.experts * 2 * s.intermediate * s.hidden, fnuz),
                                fp8_values(a, 2, s.experts * s.hidden * s.intermediate, fnuz), a.floats(3, s.experts * 2 * ib * hb),
                                a.floats(4, s.experts * hb * ib), a.floats(5, rows), a.ints(6, rows), s, store_type(a.dtype(0)), fnuz != 0.0));
}

// q, k, v, cu_seqlens_q, kv_lens (cu_seqlens_k or seq_lens), out, block_tables or null;
// B, Hq, Hkv, D, Tq, Tk, max_seqlen_q, causal, layout, P, MB; scale
void prefill_attention(const Args& a) {
  a.expect(7, 11, 1);
  ref::PrefillAttentionShape s;
  s.batch = a.dim(0);
  s.q_heads = a.dim(1);
  s.kv_heads = a.dim(2);
  s.head_size = a.dim(3);
  s.q_tokens = a.dim(4);
  s.kv_tokens = a.dim(5);
  s.max_seqlen_q = a.dim(6);
  if (a.dim(7) > 1 || a.dim(8) > 1) throw std::invalid_argument("causal and layout must be 0 or 1");
  s.causal = a.dim(7) == 1;
  s.paged = a.dim(8) == 1;
  s.page_size = s.paged ? a.dim(9) : 0;
  s.max_pages = s.paged ? a.dim(10) : 0;
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0) throw std::invalid_argument("query heads must be a multiple of KV heads");
  const std::size_t kv = s.kv_tokens * s.kv_heads * s.head_size;
  const auto tables = s.paged ? a.ints(6, s.batch * s.max_pages) : std::vector<std::int32_t>();
  a.store(5, ref::prefill_attention(a.floats(0, s.q_tokens * s.q_heads * s.head_size), a.floats(1, kv), a.floats(2, kv), a.ints(3, s.batch + 1),
                                    a.ints(4, s.paged ? s.batch : s.batch + 1), tables, s, a.param(0)));
}

struct TwinRow {
  const char* family;
  void (*run)(const Args&);
};

// Every family with a twin: the same names as the planner's family table.
const TwinRow kTwins[] = {
    {"rms_norm", rms_norm},
    {"fused_add_rms_norm", fused_add_rms_norm},
    {"layer_norm", layer_norm},
    {"softmax", softmax},
    {"row_reduce", row_reduce},
    {"gelu_and_mul", [](const Args& a) { gated(a, true); }},
    {"fp8_quant", fp8_quant},
    {"moe_gating", moe_gating},
    {"gemm", gemm},
    {"paged_decode_attention", paged_decode_attention},
    {"kv_cache_write", kv_cache_write},
    {"topk_filter", topk_filter},
    {"paged_decode_attention_vllm", paged_decode_attention_vllm},
    {"mla_decode", mla_decode},
    {"fused_moe", fused_moe},
    {"fp8_block_gemm", fp8_block_gemm},
    {"fused_moe_fp8", fused_moe_fp8},
    {"prefill_attention", prefill_attention},
};

void say(char* error, int size, const std::string& text) {
  if (!error || size <= 0) return;
  std::snprintf(error, static_cast<std::size_t>(size), "%s", text.c_str());
}

}  // namespace

extern "C" int kwiki_twin_abi_version(void) { return 1; }

extern "C" int kwiki_twin_launch(const char* family, void* const* tensors, const int* dtypes, int num_tensors, const long long* dims,
                                 int num_dims, const double* params, int num_params, char* error, int error_size) {
  if (!family || (num_tensors > 0 && (!tensors || !dtypes)) || (num_dims > 0 && !dims) || (num_params > 0 && !params)) {
    say(error, error_size, "null argument");
    return -1;
  }
  for (const TwinRow& row : kTwins) {
    if (std::strcmp(row.family, family) != 0) continue;
    try {
      row.run(Args(tensors, dtypes, num_tensors, dims, num_dims, params, num_params));
      return 0;
    } catch (const std::exception& e) {
      say(error, error_size, std::string(family) + ": " + e.what());
      return -1;
    }
  }
  say(error, error_size, std::string("no twin for family ") + family);
  return -1;
}
