// Work counts per pattern (FLOPs by unit, bytes moved) and the roofline against cited ceilings.
#include <algorithm>
#include <cmath>

#include "kwiki/planner.hpp"

namespace kwiki {
namespace {

double element_bytes(const std::string& dtype) {
  if (dtype == "fp32" || dtype == "int32") return 4;
  if (dtype == "int64" || dtype == "fp64") return 8;
  if (dtype.rfind("fp8", 0) == 0 || dtype == "int8") return 1;
  return 2;  // bf16, fp16
}

double tensor_bytes(const TensorSpec& t) {
  double n = 1;
  for (long long d : t.shape) n *= static_cast<double>(d);
  return n * element_bytes(t.dtype);
}

}  // namespace

std::optional<WorkCounts> count_work(const std::string& pattern, const ShapeCase& shape, const std::string& dtype) {
  auto dim = [&](const char* name) -> std::optional<double> {
    auto it = shape.dims.find(name);
    if (it == shape.dims.end()) return std::nullopt;
    return it->second;
  };
  const double e = element_bytes(dtype);
  WorkCounts w;
  const auto t = dim("num_tokens");
  const auto h = dim("hidden_size");
  if (pattern == "rms_norm" && t && h) {
    w.bytes_read = (*t * *h + *h) * e;  // x, weight
    w.bytes_written = *t * *h * e;
    w.vector_flops = 4 * *t * *h + *t;  // square, sum, scale, weight per element; rsqrt per row
    w.basis = "x[T,H] and weight[H] read, out[T,H] written; 4 vector ops per element + 1 rsqrt per row";
  } else if (pattern == "fused_add_rms_norm" && t && h) {
    w.bytes_read = (2 * *t * *h + *h) * e;  // x, residual, weight
    w.bytes_written = 2 * *t * *h * e;      // out, residual (in place)
    w.vector_flops = 5 * *t * *h + *t;
    w.basis = "x, residual [T,H] and weight[H] read; out and residual [T,H] written; 5 vector ops per element + 1 rsqrt per row";
  } else if (pattern == "layer_norm" && t && h) {
    w.bytes_read = (*t * *h + 2 * *h) * e;
    w.bytes_written = *t * *h * e;
    w.vector_flops = 7 * *t * *h + *t;
    w.basis = "x[T,H], weight and bias [H] read, out written; 7 vector ops per element (2 sums, centre, square, scale, weight, bias) + 1 rsqrt per row";
  } else if (pattern == "softmax" && t && h) {
    w.bytes_read = *t * *h * e;
    w.bytes_written = *t * *h * e;
    w.vector_flops = 5 * *t * *h;
    w.basis = "x[T,N] read, y[T,N] written; max, subtract, exp, sum, divide per element";
  } else if (pattern == "row_reduce" && t && h) {
    w.bytes_read = *t * *h * e;
    w.bytes_written = *t * e;
    w.vector_flops = *t * *h;
    w.basis = "x[T,H] read, out[T] written (one element per row); one add or max per element";
  } else if ((pattern == "silu_and_mul" || pattern == "gelu_and_mul") && t && (dim("intermediate_size") || h)) {
    const double i = dim("intermediate_size") ? *dim("intermediate_size") : *h;
    w.bytes_read = 2 * *t * i * e;
    w.bytes_written = *t * i * e;
    w.vector_flops = (pattern == "silu_and_mul" ? 6 : 10) * *t * i;
    w.basis = pattern == "silu_and_mul" ? "x[T,2I] read, y[T,I] written; sigmoid (4 ops) + 2 products per output"
                                        : "x[T,2I] read, y[T,I] written; tanh-form gelu (8 ops) + 2 products per output";
  } else if (pattern == "gemm" && t && dim("in_features") && dim("out_features")) {
    const double m = *t, k = *dim("in_features"), n = *dim("out_features");
    const bool bias = shape.init_kwargs.value("bias", false) == true;
    w.matrix_flops = 2 * m * n * k;
    w.vector_flops = bias ? m * n : 0;
    w.bytes_read = (m * k + n * k + (bias ? n : 0)) * e;
    w.bytes_written = m * n * e;
    w.basis = "A[M,K] and W[N,K] (+bias[N]) read once, C[M,N] written once; 2MNK matrix FLOPs";
  } else if (pattern == "paged_decode_attention" && dim("num_seqs") && dim("num_q_heads") && dim("num_kv_heads") && dim("head_size") &&
             dim("context_len")) {
    const double b = *dim("num_seqs"), hq = *dim("num_q_heads"), hkv = *dim("num_kv_heads"), d = *dim("head_size"), l = *dim("context_len");
    const double page = dim("block_size") ? *dim("block_size") : 16;
    w.bytes_read = b * hq * d * e + 2 * b * hkv * l * d * e + b * std::ceil(l / page) * 4 + b * 4;
    w.bytes_written = b * hq * d * e;
    w.matrix_flops = 4 * b * hq * l * d;  // QK^T and PV
    w.vector_flops = 5 * b * hq * l;      // scale, max, subtract, exp, sum
    w.basis = "q, K and V pages (each KV head once per sequence: GQA), block table and lengths read; out written; QK^T + PV = 4*B*Hq*L*D";
  } else if (pattern == "fp8_quant" && t && h) {
    w.bytes_read = *t * *h * e;
    w.bytes_written = *t * *h * 1 + *t * 4;
    w.vector_flops = 5 * *t * *h + *t;
    w.basis = "x[T,H] read; fp8 q[T,H] and fp32 scale[T] written; abs, max, scale, 2-sided clamp per element";
  } else if (pattern == "moe_gating" && t && dim("num_experts") && dim("topk")) {
    const double ex = *dim("num_experts"), k = *dim("topk");
    w.bytes_read = *t * ex * 4;
    w.bytes_written = *t * k * (4 + 4);
    w.vector_flops = 5 * *t * ex + *t * ex * k;
    w.basis = "fp32 logits[T,E] read; fp32 weights and int32 ids [T,k] written; softmax (5 ops) + k selection passes per expert";
  } else if (pattern == "rope" && t && dim("num_q_heads") && dim("num_kv_heads") && dim("head_size")) {
    const double heads = *dim("num_q_heads") + *dim("num_kv_heads"), d = *dim("head_size");
    w.bytes_read = heads * *t * d * e + *t * d * e;
    w.bytes_written = heads * *t * d * e;
    w.vector_flops = 3 * heads * *t * d;
    w.basis = "q and k [T,heads,D] and the cos/sin rows read, q and k written in place; 3 ops per element";
  } else {
    return std::nullopt;
  }
  // A dry run knows the real tensors: bytes are then exactly what they hold.
  if (!shape.inputs.empty() || !shape.outputs.empty()) {
    double read = 0, written = 0;
    for (const auto& in : shape.inputs) {
      read += tensor_bytes(in);
      if (in.updated) written += tensor_bytes(in);
    }
    for (const auto& out : shape.outputs)
      if (out.alias_of.empty()) written += tensor_bytes(out);  // an aliased output was counted as its input
    w.bytes_read = read;
    w.bytes_written = written;
    w.basis += "; bytes from the dry run's tensors";
  }
  return w;
}

Roofline evaluate_roofline(const WorkCounts& work, const Ceilings& c) {
  Roofline r;
  r.work = work;
  const double bytes = work.bytes_read + work.bytes_written;
  const double flops = work.matrix_flops + work.vector_flops;
  r.intensity = bytes > 0 ? flops / bytes : 0;
  const double matrix_us = c.matrix_peak_tflops.present && c.matrix_peak_tflops.value > 0 ? work.matrix_flops / (c.matrix_peak_tflops.value * 1e12) * 1e6 : 0;
  const double vector_us = c.vector_peak_tflops.present && c.vector_peak_tflops.value > 0 ? work.vector_flops / (c.vector_peak_tflops.value * 1e12) * 1e6 : 0;
  r.compute_us = matrix_us + vector_us;
  r.memory_us = c.bandwidth_tb_s.present && c.bandwidth_tb_s.value > 0 ? bytes / (c.bandwidth_tb_s.value * 1e12) * 1e6 : 0;
  r.sol_us = std::max(r.compute_us, r.memory_us);
  const CitedValue& peak = work.matrix_flops > 0 ? c.matrix_peak_tflops : c.vector_peak_tflops;
  r.ridge = peak.present && c.bandwidth_tb_s.present && c.bandwidth_tb_s.value > 0 ? peak.value / c.bandwidth_tb_s.value : 0;
  r.floor_us = c.launch_floor_us.present ? c.launch_floor_us.value : 0;
  r.attainable_us = std::max(r.sol_us, r.floor_us);
  if (r.floor_us > r.sol_us) r.bound = "latency";
  else r.bound = r.compute_us > r.memory_us ? "compute" : "memory";
  return r;
}

}  // namespace kwiki
