// Exact hardware lookups: product spellings to spec sheets, field paths to values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwiki/query.hpp"
#include "kwiki/store.hpp"
#include "lexicon.hpp"
#include "sqlite_check.hpp"

namespace kwiki::detail {

/// How a product spelling resolved.
struct ProductResolution {
  enum class Status { kRecorded, kKnownUnrecorded, kUnknown } status = Status::kUnknown;
  std::string product;  ///< canonical slug when known
  std::string key;      ///< spec-sheet record key when recorded
};

/// Resolves a spelling ("H200 SXM", "h200-141gb", "mi300x") against the store's aliases, then
/// the lexicon. Never guesses a sibling: an unrecorded product stays unrecorded.
ProductResolution resolve_product(StatementCache& db, const Lexicon& lexicon, const std::string& spelling);

/// Spec-sheet record key of a canonical product slug, or "".
std::string spec_sheet_key(StatementCache& db, const std::string& product);

/// The product a spec sheet derives from (identity.derived_from: same silicon), or "".
std::string base_product(const Record& sheet);

/// Canonical slugs of every recorded product, sorted.
std::vector<std::string> recorded_products(StatementCache& db);

/// Keys of the measured-ceiling records of a product, sorted.
std::vector<std::string> measured_ceiling_keys(StatementCache& db, const std::string& product);

/// Answers one field (exact path, or every fact under a prefix) of a spec sheet. "roofline"
/// computes ridge points from the peaks and bandwidth. Empty when the sheet records nothing
/// there; a field listed under `unavailable` answers null with that text as derivation. A field
/// in the other vendor's word (sm_count on an AMD sheet, cu_count on an NVIDIA one, tbp_w /
/// max_tdp_w, ...) that this sheet does not answer is answered with the sheet's own field, and
/// FactAnswer::alias says which field answered and why.
std::vector<FactAnswer> lookup_fields(const Store& store, const Record& sheet, const std::string& field);

/// The notes text for a product kwiki knows but does not record.
std::string not_recorded_note(const Lexicon& lexicon, const std::string& product, const std::vector<std::string>& recorded);

}  // namespace kwiki::detail
