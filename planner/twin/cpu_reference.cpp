// cpu_reference.cpp: fp64 CPU references of the kwiki V0 kernel patterns (see the header).
#include "cpu_reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace kwiki::reference {
namespace {

/// Throws std::invalid_argument when `actual` is not `expected`.
void expect_size(const char* what, std::size_t actual, std::size_t expected) {
  if (actual != expected)
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(expected) + " elements, got " +
                                std::to_string(actual));
}

/// q rounded to the nearest integer, ties to even (independent of the FP rounding mode).
double round_half_even(double q) {
  const double f = std::floor(q);
  const double d = q - f;
  if (d > 0.5) return f + 1.0;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

/// a >= 0 rounded to a binary grid with `mant_bits` explicit mantissa bits and smallest normal
/// exponent `emin` (subnormals below 2^emin share the spacing 2^(emin - mant_bits)), ties to
/// even. No overflow handling.
double round_to_grid(double a, int mant_bits, int emin) {
  if (a == 0.0) return 0.0;
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): floor(log2 a) = e - 1
  const int binade = std::max(e - 1, emin);
  const double spacing = std::ldexp(1.0, binade - mant_bits);
  return round_half_even(a / spacing) * spacing;
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }

double gelu_tanh(double g) {
  const double k_beta = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * g * (1.0 + std::tanh(k_beta * (g + 0.044715 * g * g * g)));
}

template <typename F>
std::vector<double> gated(const std::vector<float>& x, std::size_t rows, std::size_t inter, F act) {
  expect_size("gated x", x.size(), rows * 2 * inter);
  std::vector<double> out(rows * inter);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t i = 0; i < inter; ++i)
      out[t * inter + i] = act(static_cast<double>(x[t * 2 * inter + i])) * static_cast<double>(x[t * 2 * inter + inter + i]);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Storage roundings
// ---------------------------------------------------------------------------------------------

float round_to_bf16(float v) {
  if (std::isnan(v)) return v;
  std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // nearest even on the 16 dropped bits
  bits &= 0xffff0000u;
  return std::bit_cast<float>(bits);
}

float round_to_fp16(float v) {
  if (std::isnan(v) || std::isinf(v)) return v;
  const double a = std::fabs(static_cast<double>(v));
  // 65520 is the midpoint between 65504 (the largest half) and 65536: it and above round to inf.
  double r = a >= 65520.0 ? std::numeric_limits<double>::infinity() : round_to_grid(a, 10, -14);
  if (std::signbit(v)) r = -r;
  return static_cast<float>(r);
}

float round_to(StoreType type, float v) {
  switch (type) {
    case StoreType::kBFloat16: return round_to_bf16(v);
    case StoreType::kFloat16: return round_to_fp16(v);
    case StoreType::kFloat32: break;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// FP8 E4M3
// ---------------------------------------------------------------------------------------------

float fp8_max_value(bool fnuz) { return fnuz ? 240.0f : 448.0f; }

float fp8_round(float x, bool fnuz) {
  if (std::isnan(x)) return std::numeric_limits<float>::quiet_NaN();
  const double max_v = fp8_max_value(fnuz);
  const double a = std::fabs(static_cast<double>(x));
  // Below max the rounded value cannot exceed max (max is on the grid); at or above, saturate.
  const double r = a >= max_v ? max_v : round_to_grid(a, 3, fnuz ? -7 : -6);
  if (r == 0.0) return (fnuz || !std::signbit(x)) ? 0.0f : -0.0f;
  return static_cast<float>(std::signbit(x) ? -r : r);
}

std::uint8_t fp8_encode(float x, bool fnuz) {
  if (std::isnan(x)) return fnuz ? 0x80 : 0x7f;
  const float r = fp8_round(x, fnuz);
  const std::uint8_t sign = std::signbit(r) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(r));
  if (a == 0.0) return sign;  // fnuz: fp8_round never returns -0
  const int bias = fnuz ? 8 : 7;
  const int emin = 1 - bias;
  int e = 0;
  std::frexp(a, &e);
  const int ex = e - 1;  // floor(log2 a)
  if (ex < emin) {       // subnormal: a = m * 2^(emin - 3)
    const int m = static_cast<int>(std::ldexp(a, 3 - emin));
    return static_cast<std::uint8_t>(sign | m);
  }
  const int m = static_cast<int>(std::ldexp(a, 3 - ex)) - 8;  // a = (8 + m) * 2^(ex - 3)
  return static_cast<std::uint8_t>(sign | ((ex + bias) << 3) | m);
}

float fp8_decode(std::uint8_t byte, bool fnuz) {
  if (fnuz ? byte == 0x80 : (byte & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  const int bias = fnuz ? 8 : 7;
  const int e = (byte >> 3) & 0xf;
  const int m = byte & 0x7;
  const double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - 3) : std::ldexp(static_cast<double>(8 + m), e - bias - 3);
  return static_cast<float>((byte & 0x80) ? -v : v);
}

// ---------------------------------------------------------------------------------------------
// Row patterns
// ---------------------------------------------------------------------------------------------

std::vector<double> rms_norm(const std::vector<float>& x, const std::vector<float>& weight, std::size_t rows, std::size_t cols,
                             double eps) {
  expect_size("rms_norm x", x.size(), rows * cols);
  expect_size("rms_norm weight", weight.size(), cols);
  std::vector<double> out(rows * cols);
  for (std::size_t t = 0; t < rows; ++t) {
    const float* xr = x.data() + t * cols;
    double ss = 0.0;
    for (std::size_t j = 0; j < cols; ++j) ss += static_cast<double>(xr[j]) * xr[j];
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
    for (std::size_t j = 0; j < cols; ++j) out[t * cols + j] = xr[j] * rstd * weight[j];
  }
  return out;
}

FusedAddRmsNormResult fused_add_rms_norm(const std::vector<float>& x, const std::vector<float>& residual,
                                         const std::vector<float>& weight, std::size_t rows, std::size_t cols, double eps,
                                         StoreType residual_type) {
  expect_size("fused_add_rms_norm x", x.size(), rows * cols);
  expect_size("fused_add_rms_norm residual", residual.size(), rows * cols);
  FusedAddRmsNormResult r;
  r.residual.resize(rows * cols);
  for (std::size_t i = 0; i < rows * cols; ++i) {
    // The sum of two floats is exact in double; rounding it to float is the kernel's fp32 add.
    const float sum32 = static_cast<float>(static_cast<double>(x[i]) + static_cast<double>(residual[i]));
    r.residual[i] = round_to(residual_type, sum32);
  }
  r.out = rms_norm(r.residual, weight, rows, cols, eps);
  return r;
}

std::vector<double> layer_norm(const std::vector<float>& x, const std::vector<float>& weight, const std::vector<float>& bias,
                               std::size_t rows, std::size_t cols, double eps) {
  expect_size("layer_norm x", x.size(), rows * cols);
  expect_size("layer_norm weight", weight.size(), cols);
  expect_size("layer_norm bias", bias.size(), cols);
  std::vector<double> out(rows * cols);
  for (std::size_t t = 0; t < rows; ++t) {
    const float* xr = x.data() + t * cols;
    double sum = 0.0;
    for (std::size_t j = 0; j < cols; ++j) sum += xr[j];
    const double mean = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (std::size_t j = 0; j < cols; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(cols) + eps);
    for (std::size_t j = 0; j < cols; ++j) out[t * cols + j] = (xr[j] - mean) * rstd * weight[j] + bias[j];
  }
  return out;
}

std::vector<double> softmax(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  expect_size("softmax x", x.size(), rows * cols);
  std::vector<double> out(rows * cols);
  for (std::size_t t = 0; t < rows; ++t) {
    const float* xr = x.data() + t * cols;
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < cols; ++j) m = std::max(m, static_cast<double>(xr[j]));
    double s = 0.0;
    for (std::size_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
    for (std::size_t j = 0; j < cols; ++j) out[t * cols + j] = std::exp(xr[j] - m) / s;
  }
  return out;
}

std::vector<double> row_reduce(const std::vector<float>& x, std::size_t rows, std::size_t cols, RowReduceOp op) {
  expect_size("row_reduce x", x.size(), rows * cols);
  if (op == RowReduceOp::kMax && cols == 0 && rows > 0) throw std::invalid_argument("row_reduce: the max of an empty row is undefined");
  std::vector<double> out(rows);
  for (std::size_t t = 0; t < rows; ++t) {
    const float* xr = x.data() + t * cols;
    if (op == RowReduceOp::kMax) {
      double m = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < cols; ++j) m = std::isnan(xr[j]) || std::isnan(m) ? std::numeric_limits<double>::quiet_NaN() : std::max(m, static_cast<double>(xr[j]));
      out[t] = m;
    } else {
      const double s = std::accumulate(xr, xr + cols, 0.0);
      out[t] = op == RowReduceOp::kMean ? s / static_cast<double>(cols) : s;  // cols = 0: 0 / 0 = NaN
    }
  }
  return out;
}

std::vector<double> silu_and_mul(const std::vector<float>& x, std::size_t rows, std::size_t inter) {
  return gated(x, rows, inter, silu);
}

std::vector<double> gelu_and_mul(const std::vector<float>& x, std::size_t rows, std::size_t inter) {
  return gated(x, rows, inter, gelu_tanh);
}

Fp8QuantResult fp8_quant(const std::vector<float>& x, std::size_t rows, std::size_t cols, bool fnuz, float eps, ScalarDivision division) {
  expect_size("fp8_quant x", x.size(), rows * cols);
  const double max_v = fp8_max_value(fnuz);
  Fp8QuantResult r;
  r.q.resize(rows * cols);
  r.dequant.resize(rows * cols);
  r.scales.resize(rows);
  for (std::size_t t = 0; t < rows; ++t) {
    const float* xr = x.data() + t * cols;
    // amax propagates NaN (torch's amax does; std::max would drop it), and then so do the
    // scale and every value of the row.
    double amax = 0.0;
    for (std::size_t j = 0; j < cols; ++j) {
      const double a = std::fabs(static_cast<double>(xr[j]));
      amax = std::isnan(a) || std::isnan(amax) ? std::numeric_limits<double>::quiet_NaN() : std::max(amax, a);
    }
    // amax is a float and eps is taken as the fp32 constant the kernel uses.
    const double kept = std::isnan(amax) ? amax : std::max(amax, static_cast<double>(eps));  // a float's value
    const float scale = division == ScalarDivision::kReciprocal ? static_cast<float>(kept) * (1.0f / static_cast<float>(max_v))
                                                                : static_cast<float>(kept / max_v);
    r.scales[t] = scale;
    for (std::size_t j = 0; j < cols; ++j) {
      // The quotient of two floats rounded from double to float is the fp32 division exactly
      // (double carries more than 2 x 24 + 2 bits), so this is the kernel's x / scale.
      const float ratio = static_cast<float>(static_cast<double>(xr[j]) / static_cast<double>(scale));
      const float q = fp8_round(static_cast<float>(std::clamp(static_cast<double>(ratio), -max_v, max_v)), fnuz);
      r.q[t * cols + j] = q;
      r.dequant[t * cols + j] = static_cast<double>(q) * scale;
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// MoE gating, GEMM, paged decode attention
// ---------------------------------------------------------------------------------------------

MoeGatingResult moe_gating(const std::vector<float>& gating, std::size_t rows, std::size_t experts, std::size_t k, bool renormalize) {
  expect_size("moe_gating gating", gating.size(), rows * experts);
  if (k == 0 || k > experts) throw std::invalid_argument("moe_gating: need 1 <= k <= experts");
  MoeGatingResult r;
  r.weights.resize(rows * k);
  r.ids.resize(rows * k);
  const std::vector<double> probs = softmax(gating, rows, experts);
  std::vector<std::int32_t> order(experts);
  for (std::size_t t = 0; t < rows; ++t) {
    const double* p = probs.data() + t * experts;
    std::iota(order.begin(), order.end(), 0);
    // Stable: among equal probabilities the lower id (earlier in `order`) stays first.
    std::stable_sort(order.begin(), order.end(), [p](std::int32_t a, std::int32_t b) { return p[a] > p[b]; });
    double sum = 0.0;
    for (std::size_t j = 0; j < k; ++j) sum += p[order[j]];
    for (std::size_t j = 0; j < k; ++j) {
      r.ids[t * k + j] = order[j];
      r.weights[t * k + j] = renormalize ? p[order[j]] / sum : p[order[j]];
    }
  }
  return r;
}

std::vector<double> gemm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias, std::size_t M,
                         std::size_t N, std::size_t K) {
  expect_size("gemm x", x.size(), M * K);
  expect_size("gemm w", w.size(), N * K);
  if (!bias.empty()) expect_size("gemm bias", bias.size(), N);
  std::vector<double> out(M * N);
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      double acc = bias.empty() ? 0.0 : static_cast<double>(bias[n]);
      for (std::size_t kk = 0; kk < K; ++kk) acc += static_cast<double>(x[m * K + kk]) * w[n * K + kk];
      out[m * N + n] = acc;
    }
  return out;
}

std::vector<double> paged_decode_attention(const std::vector<float>& query, const std::vector<float>& key_cache,
                                           const std::vector<float>& value_cache, const std::vector<std::int32_t>& block_tables,
                                           const std::vector<std::int32_t>& seq_lens, const PagedAttentionShape& s, double scale) {
  const std::size_t B = s.batch, Hq = s.q_heads, Hkv = s.kv_heads, D = s.head_size, P = s.page_size, MB = s.max_pages;
  if (Hkv == 0 || Hq % Hkv != 0) throw std::invalid_argument("paged_decode_attention: kv_heads must divide q_heads");
  if (P == 0 || D == 0) throw std::invalid_argument("paged_decode_attention: page_size and head_size must be positive");
  expect_size("paged_decode_attention query", query.size(), B * Hq * D);
  const std::size_t page_elems = P * Hkv * D;
  if (key_cache.size() % page_elems != 0) throw std::invalid_argument("paged_decode_attention: key_cache is not whole pages");
  const std::size_t NB = key_cache.size() / page_elems;
  expect_size("paged_decode_attention value_cache", value_cache.size(), NB * page_elems);
  expect_size("paged_decode_attention block_tables", block_tables.size(), B * MB);
  expect_size("paged_decode_attention seq_lens", seq_lens.size(), B);
  const std::size_t group = Hq / Hkv;
  std::vector<double> out(B * Hq * D, 0.0);
  std::vector<double> scores;
  std::vector<std::size_t> rows;  // offset of token t's [Hkv, D] slab in the caches
  for (std::size_t b = 0; b < B; ++b) {
    if (seq_lens[b] < 0) throw std::invalid_argument("paged_decode_attention: negative seq_len");
    const std::size_t L = static_cast<std::size_t>(seq_lens[b]);
    if (L > MB * P) throw std::invalid_argument("paged_decode_attention: seq_len exceeds the block table");
    rows.resize(L);
    for (std::size_t t = 0; t < L; ++t) {
      const std::int32_t page = block_tables[b * MB + t / P];
      if (page < 0 || static_cast<std::size_t>(page) >= NB) throw std::invalid_argument("paged_decode_attention: page out of range");
      rows[t] = (static_cast<std::size_t>(page) * P + t % P) * Hkv * D;
    }
    for (std::size_t h = 0; h < Hq; ++h) {
      if (L == 0) continue;  // zeros
      const std::size_t kvh = h / group;
      const float* q = query.data() + (b * Hq + h) * D;
      scores.assign(L, 0.0);
      double m = -std::numeric_limits<double>::infinity();
      for (std::size_t t = 0; t < L; ++t) {
        const float* k = key_cache.data() + rows[t] + kvh * D;
        double dot = 0.0;
        for (std::size_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * k[d];
        scores[t] = dot * scale;
        m = std::max(m, scores[t]);
      }
      double sum = 0.0;
      for (double& sc : scores) {
        sc = std::exp(sc - m);
        sum += sc;
      }
      double* o = out.data() + (b * Hq + h) * D;
      for (std::size_t t = 0; t < L; ++t) {
        const float* v = value_cache.data() + rows[t] + kvh * D;
        const double p = scores[t] / sum;
        for (std::size_t d = 0; d < D; ++d) o[d] += p * v[d];
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cross-lane reductions, emulated
// ---------------------------------------------------------------------------------------------

std::size_t kv_key_offset(const KvCacheShape& s, std::size_t block, std::size_t off, std::size_t h, std::size_t d) {
  if (s.layout == KvCacheLayout::kFlash) return ((block * s.block_size + off) * s.kv_heads + h) * s.head_size + d;
  return (((block * s.kv_heads + h) * (s.head_size / s.x) + d / s.x) * s.block_size + off) * s.x + d % s.x;
}

std::size_t kv_value_offset(const KvCacheShape& s, std::size_t block, std::size_t off, std::size_t h, std::size_t d) {
  if (s.layout == KvCacheLayout::kFlash) return ((block * s.block_size + off) * s.kv_heads + h) * s.head_size + d;
  return ((block * s.kv_heads + h) * s.head_size + d) * s.block_size + off;
}

std::vector<KvCacheMove> kv_cache_moves(const std::vector<std::int64_t>& slot_mapping, const KvCacheShape& s) {
  if (s.block_size == 0 || s.head_size == 0 || s.kv_heads == 0) throw std::invalid_argument("kv_cache_write: empty page, head or head count");
  if (s.layout == KvCacheLayout::kVllm && (s.x == 0 || s.head_size % s.x != 0))
    throw std::invalid_argument("kv_cache_write: x must divide head_size");
  expect_size("kv_cache_write slot_mapping", slot_mapping.size(), s.tokens);
  const std::size_t row = s.kv_heads * s.head_size;
  std::vector<KvCacheMove> moves;
  for (std::size_t t = 0; t < s.tokens; ++t) {
    const std::int64_t slot = slot_mapping[t];
    if (slot == -1) continue;  // a padding token: nothing to store
    if (slot < -1 || static_cast<std::uint64_t>(slot) >= s.num_blocks * s.block_size)
      throw std::invalid_argument("kv_cache_write: slot " + std::to_string(slot) + " of token " + std::to_string(t) + " is outside the cache");
    const std::size_t block = static_cast<std::size_t>(slot) / s.block_size, off = static_cast<std::size_t>(slot) % s.block_size;
    for (std::size_t h = 0; h < s.kv_heads; ++h)
      for (std::size_t d = 0; d < s.head_size; ++d)
        moves.push_back({t * row + h * s.head_size + d, kv_key_offset(s, block, off, h, d), kv_value_offset(s, block, off, h, d)});
  }
  return moves;
}

void kv_cache_write(const std::vector<float>& key, const std::vector<float>& value, std::vector<float>& key_cache,
                    std::vector<float>& value_cache, const std::vector<std::int64_t>& slot_mapping, const KvCacheShape& s) {
  const std::size_t row = s.kv_heads * s.head_size, cache = s.num_blocks * s.block_size * row;
  expect_size("kv_cache_write key", key.size(), s.tokens * row);
  expect_size("kv_cache_write value", value.size(), s.tokens * row);
  expect_size("kv_cache_write key_cache", key_cache.size(), cache);
  expect_size("kv_cache_write value_cache", value_cache.size(), cache);
  for (const KvCacheMove& m : kv_cache_moves(slot_mapping, s)) {
    key_cache[m.key] = key[m.row];
    value_cache[m.value] = value[m.row];
  }
}

std::vector<double> topk_filter(const std::vector<float>& logits, std::size_t rows, std::size_t cols, const std::vector<std::int64_t>& k) {
  expect_size("topk_filter logits", logits.size(), rows * cols);
  expect_size("topk_filter k", k.size(), rows);
  std::vector<double> out(logits.begin(), logits.end());
  std::vector<double> sorted(cols);
  // torch.topk's order: NaN above every number.
  const auto above = [](double a, double b) { return (std::isnan(a) && !std::isnan(b)) || a > b; };
  for (std::size_t r = 0; r < rows; ++r) {
    if (k[r] < 1 || static_cast<std::uint64_t>(k[r]) > cols)
      throw std::invalid_argument("topk_filter: k = " + std::to_string(k[r]) + " of row " + std::to_string(r) + " is not in [1, " + std::to_string(cols) + "]");
    if (static_cast<std::size_t>(k[r]) == cols) continue;
    double* row = out.data() + r * cols;
    std::copy(row, row + cols, sorted.begin());
    std::nth_element(sorted.begin(), sorted.begin() + (k[r] - 1), sorted.end(), above);
    const double threshold = sorted[static_cast<std::size_t>(k[r] - 1)];
    for (std::size_t c = 0; c < cols; ++c)
      if (row[c] < threshold) row[c] = -std::numeric_limits<double>::infinity();
  }
  return out;
}

std::vector<float> vllm_cache_to_flash(const std::vector<float>& cache, std::size_t num_blocks, std::size_t kv_heads, std::size_t head_size,
                                       std::size_t block_size, std::size_t x, bool key) {
  KvCacheShape vllm{0, kv_heads, head_size, num_blocks, block_size, key ? x : 1, KvCacheLayout::kVllm};
  if (key && (x == 0 || head_size % x != 0)) throw std::invalid_argument("vllm_cache_to_flash: x must divide head_size");
  expect_size("vllm_cache_to_flash cache", cache.size(), num_blocks * block_size * kv_heads * head_size);
  KvCacheShape flash = vllm;
  flash.layout = KvCacheLayout::kFlash;
  std::vector<float> out(cache.size());
  for (std::size_t b = 0; b < num_blocks; ++b)
    for (std::size_t o = 0; o < block_size; ++o)
      for (std::size_t h = 0; h < kv_heads; ++h)
        for (std::size_t d = 0; d < head_size; ++d)
          out[kv_key_offset(flash, b, o, h, d)] = cache[key ? kv_key_offset(vllm, b, o, h, d) : kv_value_offset(vllm, b, o, h, d)];
  return out;
}

std::vector<double> mla_decode(const std::vector<float>& query, const std::vector<float>& kv_cache, const std::vector<std::int32_t>& block_tables,
                               const std::vector<std::int32_t>& seq_lens, const MlaShape& s, double scale) {
  if (s.v_dim == 0 || s.v_dim > s.qk_dim) throw std::invalid_argument("mla_decode: need 0 < v_dim <= qk_dim");
  // One KV head whose key is the whole cache row and whose value is the same row: the first
  // v_dim dims of paged attention with Hkv = 1 and D = qk_dim.
  PagedAttentionShape p{s.batch, s.heads, 1, s.qk_dim, s.page_size, s.max_pages};
  const std::vector<double> full = paged_decode_attention(query, kv_cache, kv_cache, block_tables, seq_lens, p, scale);
  std::vector<double> out(s.batch * s.heads * s.v_dim);
  for (std::size_t r = 0; r < s.batch * s.heads; ++r)
    std::copy(full.begin() + static_cast<std::ptrdiff_t>(r * s.qk_dim), full.begin() + static_cast<std::ptrdiff_t>(r * s.qk_dim + s.v_dim),
              out.begin() + static_cast<std::ptrdiff_t>(r * s.v_dim));
  return out;
}

std::vector<double> fused_moe(const std::vector<float>& hidden, const std::vector<float>& w13, const std::vector<float>& w2,
                              const std::vector<float>& topk_weights, const std::vector<std::int32_t>& topk_ids, const FusedMoeShape& s,
                              StoreType intermediate) {
  const std::size_t t_n = s.tokens, h_n = s.hidden, i_n = s.intermediate, e_n = s.experts, k_n = s.topk;
  expect_size("fused_moe hidden", hidden.size(), t_n * h_n);
  expect_size("fused_moe w13", w13.size(), e_n * 2 * i_n * h_n);
  expect_size("fused_moe w2", w2.size(), e_n * h_n * i_n);
  expect_size("fused_moe topk_weights", topk_weights.size(), t_n * k_n);
  expect_size("fused_moe topk_ids", topk_ids.size(), t_n * k_n);
  auto round = [&](double v) { return static_cast<double>(round_to(intermediate, static_cast<float>(v))); };
  std::vector<double> out(t_n * h_n, 0.0), act(i_n);
  for (std::size_t t = 0; t < t_n; ++t) {
    const float* x = hidden.data() + t * h_n;
    for (std::size_t slot = 0; slot < k_n; ++slot) {
      const std::int32_t e = topk_ids[t * k_n + slot];
      if (e < 0 || static_cast<std::size_t>(e) >= e_n) continue;  // a remote or masked expert adds nothing
      const float* w_gate = w13.data() + static_cast<std::size_t>(e) * 2 * i_n * h_n;
      const float* w_up = w_gate + i_n * h_n;
      for (std::size_t n = 0; n < i_n; ++n) {
        double gate = 0, up = 0;
        for (std::size_t h = 0; h < h_n; ++h) {
          gate += static_cast<double>(x[h]) * w_gate[n * h_n + h];
          up += static_cast<double>(x[h]) * w_up[n * h_n + h];
        }
        const double g = round(gate), u = round(up);
        act[n] = round(round(silu(g)) * u);
      }
      const double weight = topk_weights[t * k_n + slot];
      const float* w_down = w2.data() + static_cast<std::size_t>(e) * h_n * i_n;
      for (std::size_t h = 0; h < h_n; ++h) {
        double y = 0;
        for (std::size_t n = 0; n < i_n; ++n) y += act[n] * w_down[h * i_n + n];
        out[t * h_n + h] += weight * y;
      }
    }
  }
  return out;
}

std::vector<double> prefill_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                      const std::vector<std::int32_t>& cu_seqlens_q, const std::vector<std::int32_t>& kv_lens,
                                      const std::vector<std::int32_t>& block_tables, const PrefillAttentionShape& s, double scale) {
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0) throw std::invalid_argument("prefill_attention: query heads must be a multiple of KV heads");
  if (s.paged && (s.page_size == 0 || s.kv_tokens % s.page_size != 0))
    throw std::invalid_argument("prefill_attention: the paged caches hold whole pages (Tk = NB * P)");
  const std::size_t D = s.head_size, row_q = s.q_heads * D, row_k = s.kv_heads * D;
  expect_size("prefill_attention q", q.size(), s.q_tokens * row_q);
  expect_size("prefill_attention k", k.size(), s.kv_tokens * row_k);
  expect_size("prefill_attention v", v.size(), s.kv_tokens * row_k);
  expect_size("prefill_attention cu_seqlens_q", cu_seqlens_q.size(), s.batch + 1);
  expect_size("prefill_attention kv_lens", kv_lens.size(), s.paged ? s.batch : s.batch + 1);
  if (s.paged) expect_size("prefill_attention block_tables", block_tables.size(), s.batch * s.max_pages);
  if (cu_seqlens_q[0] != 0 || static_cast<std::size_t>(cu_seqlens_q[s.batch]) != s.q_tokens)
    throw std::invalid_argument("prefill_attention: cu_seqlens_q must run from 0 to Tq = " + std::to_string(s.q_tokens));
  const std::size_t group = s.q_heads / s.kv_heads;
  std::vector<double> out(s.q_tokens * row_q, 0.0);
  std::vector<std::size_t> rows;  // k/v row of each key of the sequence
  std::vector<double> w;
  for (std::size_t b = 0; b < s.batch; ++b) {
    const std::int32_t q0 = cu_seqlens_q[b], q1 = cu_seqlens_q[b + 1];
    if (q1 < q0) throw std::invalid_argument("prefill_attention: cu_seqlens_q decreases at sequence " + std::to_string(b));
    const std::size_t lq = static_cast<std::size_t>(q1 - q0);
    if (lq > s.max_seqlen_q)
      throw std::invalid_argument("prefill_attention: sequence " + std::to_string(b) + " has " + std::to_string(lq) + " queries, past max_seqlen_q");
    rows.clear();
    if (!s.paged) {
      const std::int32_t k0 = kv_lens[b], k1 = kv_lens[b + 1];
      if (k0 < 0 || k1 < k0 || static_cast<std::size_t>(k1) > s.kv_tokens)
        throw std::invalid_argument("prefill_attention: cu_seqlens_k of sequence " + std::to_string(b) + " leaves k/v");
      for (std::int32_t j = k0; j < k1; ++j) rows.push_back(static_cast<std::size_t>(j));
    } else {
      const std::int32_t len = kv_lens[b];
      if (len < 0 || static_cast<std::size_t>(len) > s.max_pages * s.page_size)
        throw std::invalid_argument("prefill_attention: seq_lens of sequence " + std::to_string(b) + " is outside [0, MB * P]");
      for (std::int32_t t = 0; t < len; ++t) {
        const std::int32_t page = block_tables[b * s.max_pages + static_cast<std::size_t>(t) / s.page_size];
        if (page < 0 || static_cast<std::size_t>(page) >= s.kv_tokens / s.page_size)
          throw std::invalid_argument("prefill_attention: page " + std::to_string(page) + " of sequence " + std::to_string(b) + " is outside the cache");
        rows.push_back(static_cast<std::size_t>(page) * s.page_size + static_cast<std::size_t>(t) % s.page_size);
      }
    }
    const long long lk = static_cast<long long>(rows.size());
    for (std::size_t i = 0; i < lq; ++i) {
      // Causal, aligned to the end: query i is token i + lk - lq of the sequence.
      const long long seen_ll = s.causal ? std::min(lk, static_cast<long long>(i) + lk - static_cast<long long>(lq) + 1) : lk;
      const std::size_t seen = seen_ll < 0 ? 0 : static_cast<std::size_t>(seen_ll);
      for (std::size_t h = 0; h < s.q_heads; ++h) {
        const float* qi = q.data() + (static_cast<std::size_t>(q0) + i) * row_q + h * D;
        const std::size_t kvh = h / group;
        w.assign(seen, 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j < seen; ++j) {
          const float* kj = k.data() + rows[j] * row_k + kvh * D;
          double dot = 0.0;
          for (std::size_t d = 0; d < D; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          w[j] = dot * scale;
          mx = std::max(mx, w[j]);
        }
        double sum = 0.0;
        for (std::size_t j = 0; j < seen; ++j) sum += (w[j] = std::exp(w[j] - mx));
        double* oi = out.data() + (static_cast<std::size_t>(q0) + i) * row_q + h * D;
        for (std::size_t j = 0; j < seen; ++j) {
          const float* vj = v.data() + rows[j] * row_k + kvh * D;
          for (std::size_t d = 0; d < D; ++d) oi[d] += w[j] / sum * vj[d];
        }
      }
    }
  }
  return out;
}

std::vector<double> fp8_block_gemm(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& a_scales,
                                   const std::vector<float>& b_scales, const Fp8BlockGemmShape& s) {
  if (s.block_n == 0 || s.block_k == 0) throw std::invalid_argument("fp8_block_gemm: block sizes must be positive");
  const std::size_t kb = (s.k + s.block_k - 1) / s.block_k, nb = (s.n + s.block_n - 1) / s.block_n;
  expect_size("fp8_block_gemm a", a.size(), s.m * s.k);
  expect_size("fp8_block_gemm b", b.size(), s.n * s.k);
  expect_size("fp8_block_gemm a_scales", a_scales.size(), s.m * kb);
  expect_size("fp8_block_gemm b_scales", b_scales.size(), nb * kb);
  std::vector<double> out(s.m * s.n, 0.0);
  // Four columns at a time (independent sums keep the FPU busy: the proof runs this at serving
  // sizes); each block's partial is exact in fp64 (at most block_k products of 8 significant bits
  // each, well inside 53 bits), so the order of its terms does not matter.
  constexpr std::size_t kCols = 4;
  for (std::size_t m = 0; m < s.m; ++m) {
    const float* arow = a.data() + m * s.k;
    for (std::size_t n0 = 0; n0 < s.n; n0 += kCols) {
      const std::size_t cols = std::min(kCols, s.n - n0);
      double acc[kCols] = {0, 0, 0, 0};
      for (std::size_t blk = 0; blk < kb; ++blk) {
        double part[kCols] = {0, 0, 0, 0};
        const std::size_t k0 = blk * s.block_k, k_end = std::min(s.k, (blk + 1) * s.block_k);
        if (cols == kCols) {
          const float *b0 = b.data() + n0 * s.k, *b1 = b0 + s.k, *b2 = b1 + s.k, *b3 = b2 + s.k;
          for (std::size_t k = k0; k < k_end; ++k) {
            const double x = arow[k];
            part[0] += x * b0[k];
            part[1] += x * b1[k];
            part[2] += x * b2[k];
            part[3] += x * b3[k];
          }
        } else {
          for (std::size_t c = 0; c < cols; ++c) {
            const float* brow = b.data() + (n0 + c) * s.k;
            for (std::size_t k = k0; k < k_end; ++k) part[c] += static_cast<double>(arow[k]) * brow[k];
          }
        }
        for (std::size_t c = 0; c < cols; ++c) {
          const float scale = a_scales[m * kb + blk] * b_scales[((n0 + c) / s.block_n) * kb + blk];  // fp32, as the reference's As * Bs
          acc[c] += part[c] * scale;
        }
      }
      for (std::size_t c = 0; c < cols; ++c) out[m * s.n + n0 + c] = acc[c];
    }
  }
  return out;
}

std::vector<double> fused_moe_fp8(const std::vector<float>& hidden, const std::vector<float>& w13, const std::vector<float>& w2,
                                  const std::vector<float>& w13_scale, const std::vector<float>& w2_scale, const std::vector<float>& topk_weights,
                                  const std::vector<std::int32_t>& topk_ids, const FusedMoeShape& s, StoreType intermediate, bool fnuz,
                                  ScalarDivision division) {
  constexpr std::size_t kGroup = 128;  // the quantization group and the scale block of both GEMMs
  constexpr float kEps = 1e-10f;       // per_token_group_quant_fp8's eps
  const std::size_t t_n = s.tokens, h_n = s.hidden, i_n = s.intermediate, e_n = s.experts, k_n = s.topk;
  if (h_n % kGroup != 0 || i_n % kGroup != 0) throw std::invalid_argument("fused_moe_fp8: H and I must be multiples of 128 (the group quantization)");
  const std::size_t hb = h_n / kGroup, ib = i_n / kGroup;
  expect_size("fused_moe_fp8 hidden", hidden.size(), t_n * h_n);
  expect_size("fused_moe_fp8 w13", w13.size(), e_n * 2 * i_n * h_n);
  expect_size("fused_moe_fp8 w2", w2.size(), e_n * h_n * i_n);
  expect_size("fused_moe_fp8 w13_scale", w13_scale.size(), e_n * 2 * ib * hb);
  expect_size("fused_moe_fp8 w2_scale", w2_scale.size(), e_n * hb * ib);
  expect_size("fused_moe_fp8 topk_weights", topk_weights.size(), t_n * k_n);
  expect_size("fused_moe_fp8 topk_ids", topk_ids.size(), t_n * k_n);
  auto round = [&](double v) { return round_to(intermediate, static_cast<float>(v)); };
  auto slice = [](const std::vector<float>& v, std::size_t at, std::size_t n) {
    return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + n));
  };
  // Each token's row quantized per group of 128 (the reference quantizes the k copies of it alike).
  const Fp8QuantResult a = fp8_quant(hidden, t_n * hb, kGroup, fnuz, kEps, division);
  std::vector<double> slot_out(t_n * k_n * h_n, 0.0);
  for (std::size_t e = 0; e < e_n; ++e) {
    // The expert's (token, slot) entries in the reference's mask order, and their quantized rows.
    std::vector<std::size_t> entries;
    for (std::size_t j = 0; j < t_n * k_n; ++j)
      if (topk_ids[j] == static_cast<std::int32_t>(e)) entries.push_back(j);
    if (entries.empty()) continue;
    const std::size_t m = entries.size();
    std::vector<float> aq(m * h_n), as(m * hb);
    for (std::size_t r = 0; r < m; ++r) {
      const std::size_t t = entries[r] / k_n;
      std::copy_n(a.q.begin() + static_cast<std::ptrdiff_t>(t * h_n), h_n, aq.begin() + static_cast<std::ptrdiff_t>(r * h_n));
      std::copy_n(a.scales.begin() + static_cast<std::ptrdiff_t>(t * hb), hb, as.begin() + static_cast<std::ptrdiff_t>(r * hb));
    }
    Fp8BlockGemmShape up_shape;
    up_shape.m = m;
    up_shape.n = 2 * i_n;
    up_shape.k = h_n;
    const std::vector<double> gate_up = fp8_block_gemm(aq, slice(w13, e * 2 * i_n * h_n, 2 * i_n * h_n), as, slice(w13_scale, e * 2 * ib * hb, 2 * ib * hb), up_shape);
    // SiluAndMul on the GEMM's 16-bit output, then the intermediate quantized per group of 128.
    std::vector<float> act(m * i_n);
    for (std::size_t r = 0; r < m; ++r)
      for (std::size_t n = 0; n < i_n; ++n) {
        const double g = round(gate_up[r * 2 * i_n + n]), u = round(gate_up[r * 2 * i_n + i_n + n]);
        act[r * i_n + n] = round(static_cast<double>(round(silu(g))) * u);
      }
    const Fp8QuantResult aq2 = fp8_quant(act, m * ib, kGroup, fnuz, kEps, division);
    Fp8BlockGemmShape down_shape;
    down_shape.m = m;
    down_shape.n = h_n;
    down_shape.k = i_n;
    const std::vector<double> y = fp8_block_gemm(aq2.q, slice(w2, e * h_n * i_n, h_n * i_n), aq2.scales, slice(w2_scale, e * hb * ib, hb * ib), down_shape);
    for (std::size_t r = 0; r < m; ++r)
      for (std::size_t h = 0; h < h_n; ++h) slot_out[entries[r] * h_n + h] = round(y[r * h_n + h]);  // the GEMM's 16-bit output
  }
  // The weighted sum over the slots in slot order; slots of ids outside [0, E) stayed zero.
  std::vector<double> out(t_n * h_n, 0.0);
  for (std::size_t t = 0; t < t_n; ++t)
    for (std::size_t slot = 0; slot < k_n; ++slot) {
      const std::size_t j = t * k_n + slot;
      if (topk_ids[j] < 0 || static_cast<std::size_t>(topk_ids[j]) >= e_n) continue;
      for (std::size_t h = 0; h < h_n; ++h) out[t * h_n + h] += static_cast<double>(topk_weights[j]) * slot_out[j * h_n + h];
    }
  return out;
}

std::vector<float> wave_butterfly_emulated(const std::vector<float>& lanes, int warp_size, bool max) {
  if (warp_size <= 0 || (warp_size & (warp_size - 1)) != 0)
    throw std::invalid_argument("wave_butterfly_emulated: warp_size must be a power of two");
  expect_size("wave_butterfly_emulated lanes", lanes.size(), static_cast<std::size_t>(warp_size));
  std::vector<float> v = lanes;
  std::vector<float> next(v.size());
  for (int offset = warp_size / 2; offset > 0; offset >>= 1) {
    // All lanes read their partner's value from before this step (one shuffle), then update.
    for (int i = 0; i < warp_size; ++i) {
      const float own = v[static_cast<std::size_t>(i)];
      const float other = v[static_cast<std::size_t>(i ^ offset)];
      next[static_cast<std::size_t>(i)] = max ? (other > own ? other : own) : own + other;  // fp32, as on the device
    }
    v.swap(next);
  }
  return v;
}

float wave_reduce_emulated(const std::vector<float>& lanes, int warp_size) { return wave_butterfly_emulated(lanes, warp_size).front(); }

float block_reduce_emulated(const std::vector<float>& threads, int warp_size) {
  if (warp_size <= 0 || threads.empty() || threads.size() % static_cast<std::size_t>(warp_size) != 0 || threads.size() > 1024)
    throw std::invalid_argument("block_reduce_emulated: the block must be whole warps, at most 1024 threads");
  const std::size_t ws = static_cast<std::size_t>(warp_size);
  const std::size_t num_warps = threads.size() / ws;
  if (num_warps > ws) throw std::invalid_argument("block_reduce_emulated: more warps than lanes in warp 0");
  std::vector<float> partial(ws, 0.0f);  // lanes >= num_warps read 0
  for (std::size_t w = 0; w < num_warps; ++w) {
    const std::vector<float> lanes(threads.begin() + static_cast<std::ptrdiff_t>(w * ws),
                                   threads.begin() + static_cast<std::ptrdiff_t>((w + 1) * ws));
    partial[w] = wave_reduce_emulated(lanes, warp_size);
  }
  return wave_reduce_emulated(partial, warp_size);
}

}  // namespace kwiki::reference
