// Turns one record file's text into a validated Record, its hardware facts and warnings.
#pragma once

#include <string>
#include <vector>

#include "kwiki/indexer.hpp"
#include "kwiki/record.hpp"
#include "schema_validator.hpp"

namespace kwiki::detail {

/// A record ready for the store.
struct BuiltRecord {
  Record record;
  std::vector<HardwareFact> facts;  ///< flattened facts (hardware records only)
};

/// Where a record file sits.
struct RecordLocation {
  std::string display_path;  ///< path shown in messages
  std::string rel_path;      ///< relative to the corpus root
  std::string root;          ///< the corpus root
  std::string source;        ///< hardware_wiki | kernel_wiki
  bool internal = false;     ///< from an --internal root
};

/// Parses, validates and extracts one record. Throws kwiki::Error (file and JSON pointer set)
/// for problems that refuse the corpus; appends consistency findings to `warnings`.
BuiltRecord build_record(const SchemaValidator& validator, const std::string& text,
                         const RecordLocation& where, std::vector<Diagnostic>& warnings);

}  // namespace kwiki::detail
