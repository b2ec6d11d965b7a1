// The element types kwiki plans for: one table of names, spellings and sizes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kwiki::detail {

/// One element type: kwiki's name, its size, and the spellings tasks use for it.
struct DtypeRow {
  const char* name;       ///< kwiki's name (bf16, fp8_e4m3fn, ...)
  double bytes;           ///< storage bytes per element
  bool floating;
  const char* spellings;  ///< space-separated other spellings (torch's names included)
};

/// Every dtype kwiki knows. "fp8_e4m3" is the format without its vendor variant: e4m3fn on
/// NVIDIA, e4m3fnuz on AMD CDNA3 (resolve_fp8 picks).
inline constexpr DtypeRow kDtypes[] = {
    {"bf16", 2, true, "bfloat16 torch.bfloat16"},
    {"fp16", 2, true, "float16 half torch.float16 torch.half"},
    {"fp32", 4, true, "float32 float torch.float32 torch.float"},
    {"fp64", 8, true, "float64 double torch.float64 torch.double"},
    {"fp8_e4m3", 1, true, "e4m3 float8_e4m3"},
    {"fp8_e4m3fn", 1, true, "float8_e4m3fn torch.float8_e4m3fn e4m3fn"},
    {"fp8_e4m3fnuz", 1, true, "float8_e4m3fnuz torch.float8_e4m3fnuz e4m3fnuz"},
    {"fp8_e5m2", 1, true, "float8_e5m2 torch.float8_e5m2 e5m2"},
    {"int8", 1, false, "torch.int8"},
    {"uint8", 1, false, "torch.uint8"},
    {"int16", 2, false, "torch.int16 short"},
    {"int32", 4, false, "torch.int32 int"},
    {"int64", 8, false, "torch.int64 long"},
    {"bool", 1, false, "torch.bool"},
};

/// The row of a spelling (case-insensitive), or nullptr.
const DtypeRow* find_dtype(std::string_view spelling);

/// kwiki's name for a spelling, or nullopt when it is none kwiki knows.
std::optional<std::string> canonical_dtype(std::string_view spelling);

/// Bytes per element of a kwiki dtype name (2 for an unknown one, the common case of 16-bit data).
double dtype_bytes(std::string_view name);

/// fp8_e4m3 resolved for a vendor: fp8_e4m3fnuz on amd, fp8_e4m3fn elsewhere; other names unchanged.
std::string resolve_fp8(const std::string& dtype, const std::string& vendor);

}  // namespace kwiki::detail
