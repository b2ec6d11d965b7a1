// Error type and stable error codes shared by every kwiki component.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kwiki {

/// Stable error codes. The numbers are part of the public contract: never renumber.
/// The hundreds digit is the category and decides the CLI exit code (see exit_code_for).
enum class ErrorCode : std::uint16_t {
  kUsage = 100,           ///< bad command-line usage
  kBadInput = 200,        ///< generic invalid input
  kInvalidJson = 201,     ///< malformed or truncated JSON
  kSchemaViolation = 202, ///< record violates its JSON Schema
  kDuplicateId = 203,     ///< two records share an id
  kInvalidUtf8 = 204,     ///< text is not UTF-8
  kEmptyFile = 205,       ///< a record file is empty
  kTooLarge = 206,        ///< a record file exceeds the size limit
  kSymlinkLoop = 207,     ///< a symbolic link loops back into the walk
  kUnreadable = 208,      ///< a file or folder cannot be read
  kNotCorpus = 209,       ///< a --wiki root holds no record folders
  kUnknownSchema = 210,   ///< the record's "schema" names no known contract
  kConsistency = 211,     ///< a cross-field check failed (strict mode)
  kNotRecorded = 300,     ///< a known product or field that the corpus does not record
  kIndexMissing = 400,    ///< no index where one is needed
  kIndexCorrupt = 401,    ///< the index cannot be opened or read
  kIo = 402,              ///< writing the index failed
  kBusy = 403,            ///< another writer holds the index lock
  kShardUnavailable = 404,  ///< a full-text shard (local or remote) cannot be reached or does not match
  kInternal = 499,        ///< a bug: please report
};

/// Short machine-readable name of a code, e.g. "schema_violation".
const char* error_code_name(ErrorCode code) noexcept;

/// CLI exit status for a code: 2 usage/input, 3 not recorded, 4 runtime.
int exit_code_for(ErrorCode code) noexcept;

/// The one exception type kwiki throws across component boundaries.
/// `file` and `pointer` (a JSON pointer) locate bad input when known.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, std::string file = {}, std::string pointer = {});

  ErrorCode code() const noexcept { return code_; }
  const std::string& file() const noexcept { return file_; }
  const std::string& pointer() const noexcept { return pointer_; }

  /// One line for a human: "file: pointer: message".
  std::string one_line() const;
  /// {"error":{"code":..., "number":..., "message":..., "file":..., "pointer":...}}
  std::string to_json() const;

 private:
  ErrorCode code_;
  std::string file_;
  std::string pointer_;
};

}  // namespace kwiki
