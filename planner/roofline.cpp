// Work counts of a family (its row's counter, bytes from the traced tensors) and the roofline against cited ceilings.
#include <algorithm>
#include <cmath>

#include "dtype.hpp"
#include "family.hpp"
#include "kwiki/planner.hpp"

namespace kwiki {
namespace {

double element_bytes(const std::string& dtype) { return detail::dtype_bytes(dtype); }

double tensor_bytes(const TensorSpec& t) { return t.numel_bytes(); }

}  // namespace

double TensorSpec::numel_bytes() const {
  double n = 1;
  for (long long d : shape) n *= static_cast<double>(d);
  return n * element_bytes(dtype);
}

std::optional<WorkCounts> count_work(const std::string& pattern, const ShapeCase& shape, const std::string& dtype) {
  const detail::FamilyRow* family = detail::find_family(pattern);
  if (!family || !family->work) return std::nullopt;  // the generator's work is counted from the trace
  std::optional<WorkCounts> counted = family->work(detail::WorkInput{shape, element_bytes(dtype)});
  if (!counted) return std::nullopt;
  WorkCounts w = *counted;
  // A dry run knows the real tensors: bytes are then exactly what they hold.
  if ((!shape.inputs.empty() || !shape.outputs.empty()) && !family->updates_part_of_input) {
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
