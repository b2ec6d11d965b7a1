// The element types kwiki plans for: one table of names, spellings and sizes.
#include "dtype.hpp"

#include <cctype>
#include <sstream>

namespace kwiki::detail {

const DtypeRow* find_dtype(std::string_view spelling) {
  std::string lowered(spelling);
  for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const DtypeRow& row : kDtypes) {
    if (lowered == row.name) return &row;
    std::istringstream words(row.spellings);
    for (std::string w; words >> w;)
      if (lowered == w) return &row;
  }
  return nullptr;
}

std::optional<std::string> canonical_dtype(std::string_view spelling) {
  if (const DtypeRow* row = find_dtype(spelling)) return std::string(row->name);
  return std::nullopt;
}

double dtype_bytes(std::string_view name) {
  const DtypeRow* row = find_dtype(name);
  return row ? row->bytes : 2;
}

std::string resolve_fp8(const std::string& dtype, const std::string& vendor) {
  if (dtype != "fp8_e4m3") return dtype;
  return vendor == "amd" ? "fp8_e4m3fnuz" : "fp8_e4m3fn";
}

}  // namespace kwiki::detail
