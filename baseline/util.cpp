// kwiki util: achieved rates and utilization against cited peaks.
#include "kwiki/util.hpp"

#include <cmath>

#include "kwiki/error.hpp"
#include "kwiki/planner.hpp"
#include "target.hpp"

namespace kwiki {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json peak_json(const std::string& name, const CitedValue& v, double achieved) {
  ordered_json j;
  j["name"] = name;
  if (!v.present) {
    j["value"] = nullptr;
    j["citation"] = "not recorded";
    j["pct"] = nullptr;
    return j;
  }
  j["value"] = v.value;
  j["unit"] = v.unit;
  j["citation"] = v.citation;
  j["pct"] = v.value > 0 ? ordered_json(std::round(achieved / v.value * 10000) / 100) : ordered_json();
  return j;
}

}  // namespace

ordered_json compute_utilization(QueryEngine& engine, const UtilRequest& r) {
  if (!(r.time_ms > 0) || !std::isfinite(r.time_ms)) throw Error(ErrorCode::kUsage, "--time-ms must be a positive finite number");
  if (!(r.flops >= 0) || !(r.bytes >= 0) || !std::isfinite(r.flops) || !std::isfinite(r.bytes))
    throw Error(ErrorCode::kUsage, "--flops and --bytes must be finite and not negative");
  if (r.flops == 0 && r.bytes == 0) throw Error(ErrorCode::kUsage, "give --flops, --bytes or both");
  if (r.unit != "auto" && r.unit != "matrix" && r.unit != "vector") throw Error(ErrorCode::kUsage, "--unit is matrix, vector or auto");
  const detail::TargetInfo t = detail::resolve_target(engine, r.product, r.dtype);
  const double seconds = r.time_ms * 1e-3;
  const double tflops = r.flops / seconds / 1e12;
  const double tb_s = r.bytes / seconds / 1e12;
  const bool matrix = r.unit == "matrix" || (r.unit == "auto" && r.dtype != "fp32");

  ordered_json out;
  out["gpu"] = t.product;
  out["dtype"] = r.dtype;
  out["time_ms"] = r.time_ms;
  out["flops"] = r.flops;
  out["bytes"] = r.bytes;
  out["tflops"] = tflops;
  out["gbps"] = tb_s * 1e3;
  ordered_json peaks = ordered_json::array();
  const CitedValue& compute_peak = matrix ? t.ceilings.matrix_peak_tflops : t.ceilings.vector_peak_tflops;
  if (r.flops > 0) {
    peaks.push_back(peak_json(matrix ? r.dtype + " matrix peak (dense)" : "fp32 vector peak", compute_peak, tflops));
    if (matrix && t.ceilings.measured_matrix_tflops.present) peaks.push_back(peak_json("measured matrix rate", t.ceilings.measured_matrix_tflops, tflops));
  }
  if (r.bytes > 0) {
    peaks.push_back(peak_json("HBM bandwidth", t.ceilings.bandwidth_tb_s, tb_s));
    if (t.ceilings.measured_bandwidth_tb_s.present) peaks.push_back(peak_json("measured copy bandwidth", t.ceilings.measured_bandwidth_tb_s, tb_s));
  }
  out["peaks"] = peaks;
  // SOL against the same peaks: the larger of compute time and memory time.
  double sol_us = 0;
  if (r.flops > 0 && compute_peak.present) sol_us = std::max(sol_us, r.flops / (compute_peak.value * 1e12) * 1e6);
  if (r.bytes > 0 && t.ceilings.bandwidth_tb_s.present) sol_us = std::max(sol_us, r.bytes / (t.ceilings.bandwidth_tb_s.value * 1e12) * 1e6);
  out["sol_us"] = sol_us > 0 ? ordered_json(sol_us) : ordered_json();
  out["pct_of_sol"] = sol_us > 0 ? ordered_json(std::round(sol_us / (r.time_ms * 1e3) * 10000) / 100) : ordered_json();
  if (r.grid_blocks) {
    if (*r.grid_blocks <= 0) throw Error(ErrorCode::kUsage, "--grid-blocks must be positive");
    ordered_json grid;
    grid["blocks"] = *r.grid_blocks;
    if (t.compute_units.present) {
      const double units = t.compute_units.value;
      const double waves = static_cast<double>(*r.grid_blocks) / units;
      const double last = std::fmod(static_cast<double>(*r.grid_blocks), units);
      grid[t.compute_unit_name == "SM" ? "sms" : "cus"] = units;
      grid["citation"] = t.compute_units.citation;
      grid["waves_at_one_block_per_unit"] = waves;
      grid["last_wave_fill_pct"] = last == 0 ? 100.0 : std::round(last / units * 10000) / 100;
    } else {
      grid["note"] = "the " + t.compute_unit_name + " count of " + t.product + " is not recorded";
    }
    out["grid"] = grid;
  }
  return out;
}

}  // namespace kwiki
