// JSON Schema validation of corpus records (hw-1.0, clean-1.3) with valijson.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kwiki::detail {

/// First schema violation of a record: where (JSON pointer) and what.
struct SchemaViolation {
  std::string pointer;
  std::string message;
};

/// Holds the two parsed record schemas (embedded in the binary). Thread-safe after construction.
class SchemaValidator {
 public:
  SchemaValidator();
  ~SchemaValidator();

  /// True when `schema_name` ("hw-1.0", "clean-1.3") is a known contract.
  bool knows(const std::string& schema_name) const;
  /// The most specific violation of `record` against `schema_name`, or nullopt when valid.
  std::optional<SchemaViolation> validate(const std::string& schema_name, const nlohmann::json& record) const;
  /// The embedded schema texts, for fingerprints and `kwiki schema`.
  static std::string schema_text(const std::string& schema_name);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwiki::detail
