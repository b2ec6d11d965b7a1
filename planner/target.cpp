// Target resolution for plans: product -> architecture -> framework, compile target, ceilings.
#include "target.hpp"

#include "kwiki/error.hpp"

namespace kwiki::detail {
namespace {

std::string matrix_dtype(const std::string& dtype) {
  if (dtype.rfind("fp8", 0) == 0) return "fp8";
  if (dtype == "int8") return "int8";
  if (dtype == "fp32") return "fp32";
  if (dtype == "fp16") return "fp16";
  return "bf16";
}

}  // namespace

const ArchTarget* find_compile_target(const std::string& compile_target) {
  for (const ArchTarget& row : kArchTargets)
    if (compile_target == row.compile_target) return &row;
  return nullptr;
}

const FrameworkRow* find_framework(const std::string& name) {
  for (const FrameworkRow& row : kFrameworks)
    if (name == row.name) return &row;
  return nullptr;
}

void choose_framework(TargetInfo& t, const std::string& requested) {
  std::string known;
  for (const FrameworkRow& row : kFrameworks)
    if (t.vendor == row.vendor) known += std::string(known.empty() ? "" : ", ") + row.name;
  if (requested.empty()) {
    for (const FrameworkRow& row : kFrameworks)
      if (row.native && t.vendor == row.vendor) t.framework = row.name;
    return;
  }
  const FrameworkRow* row = find_framework(requested);
  if (!row || t.vendor != row->vendor)
    throw Error(ErrorCode::kUsage, "--framework " + requested + (row ? " writes kernels for " + std::string(row->vendor) + " GPUs, not " + t.product : " is not a framework kwiki writes") +
                                       "; for " + t.product + " use one of: " + known);
  t.framework = row->name;
}

TargetInfo resolve_target(QueryEngine& engine, const std::string& product, const std::string& dtype) {
  const HardwareAnswer hw = engine.hardware(product);
  TargetInfo t;
  const Record* sheet = nullptr;
  for (const auto& a : hw.answer.records)
    if (a.record.type == "spec-sheet") sheet = &a.record;
  if (!sheet) {
    std::string why;
    for (const auto& n : hw.answer.notes) why += (why.empty() ? "" : " ") + n;
    throw Error(ErrorCode::kNotRecorded, why.empty() ? "product " + product + " is not recorded" : why);
  }
  t.product = sheet->product;
  t.vendor = sheet->vendor;
  t.arch = sheet->arch;
  t.spec_record = sheet->id;
  t.framework = t.vendor == "amd" ? "hip" : "cuda";
  t.compile_target = "unknown";
  for (const ArchTarget& row : kArchTargets)
    if (t.arch == row.arch) t.compile_target = row.compile_target;
  t.warp_size = t.vendor == "amd" ? 64 : 32;
  t.compute_unit_name = t.vendor == "amd" ? "CU" : "SM";
  t.onchip_name = t.vendor == "amd" ? "LDS" : "shared memory";

  auto fact = [&](const std::string& field, const char* unit) {
    CitedValue v;
    for (const auto& f : hw.answer.facts) {
      if (f.product != t.product || f.field != field || !f.value.is_number()) continue;
      v.value = f.value.get<double>();
      v.unit = f.unit.empty() ? unit : f.unit;
      v.citation = f.record + ":" + f.field;
      v.present = true;
    }
    if (!v.present) t.notes.push_back(t.product + " records no " + field);
    return v;
  };
  const std::string mdt = matrix_dtype(dtype);
  t.ceilings.bandwidth_tb_s = fact("memory.bandwidth_tb_s", "TB/s");
  t.ceilings.matrix_peak_tflops = fact("peak_compute." + mdt + ".dense", "TFLOPS");
  t.ceilings.vector_peak_tflops = fact(t.vendor == "amd" ? "peak_compute.fp32.vector.dense" : "peak_compute.fp32.cuda-core.dense", "TFLOPS");
  t.compute_units = fact(t.vendor == "amd" ? "compute_units.cu_count" : "compute_units.sm_count", "");
  t.l2_mb = fact("memory.l2_cache_mb", "MB");
  if (t.vendor == "amd") t.llc_mb = fact("memory.infinity_cache_mb", "MB");
  t.onchip_kb = fact(t.vendor == "amd" ? "compute_units.lds_kb_per_cu" : "compute_units.shared_memory_kb_per_sm", "KB");

  // Measured ceilings of this product, where the wiki has them.
  for (const auto& a : hw.answer.records) {
    if (a.record.type != "measured-ceiling") continue;
    try {
      const auto doc = nlohmann::json::parse(a.record.payload);
      const auto& facts = doc.at("facts");
      const std::string metric = facts.at("metric");
      CitedValue v{facts.at("value").get<double>(), facts.at("unit"), a.record.id + ":facts.value", true};
      if (metric == "device-copy-bandwidth") t.ceilings.measured_bandwidth_tb_s = v;
      else if (metric == "gemm-rate." + mdt) t.ceilings.measured_matrix_tflops = v;
      else if (metric == "launch-latency.empty-kernel") t.ceilings.launch_floor_us = v;
      else continue;
      t.ceiling_records.push_back(a.record.id);
    } catch (const std::exception&) {
    }
  }
  if (!t.ceilings.launch_floor_us.present)
    t.notes.push_back("no measured launch floor for " + t.product + ": run bench/measure_ceilings.sh on it; attainable = SOL until then");
  return t;
}

}  // namespace kwiki::detail
