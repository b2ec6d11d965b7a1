// Public API of kwiki util: achieved rates and utilization against cited peaks.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kwiki {

class QueryEngine;

/// What was measured.
struct UtilRequest {
  std::string product;            ///< e.g. H200
  std::string dtype = "bf16";     ///< picks the matrix peak
  double flops = 0;               ///< total FLOPs of the timed work
  double bytes = 0;               ///< total bytes moved
  double time_ms = 0;             ///< measured time
  std::optional<long long> grid_blocks;  ///< blocks launched, for wave quantization
  std::string unit = "auto";      ///< matrix | vector | auto (matrix for 16/8-bit dtypes)
};

/// TFLOPS, GB/s, % of the matching peaks, % of SOL, waves; each peak with its record id and
/// field. Throws kwiki::Error kUsage for non-positive time or negative counts, kNotRecorded for
/// an unrecorded product.
nlohmann::ordered_json compute_utilization(QueryEngine& engine, const UtilRequest& request);

}  // namespace kwiki
