// kwiki::Error: names, exit codes and JSON rendering of error codes.
#include "kwiki/error.hpp"

#include <nlohmann/json.hpp>

namespace kwiki {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kUsage: return "usage";
    case ErrorCode::kBadInput: return "bad_input";
    case ErrorCode::kInvalidJson: return "invalid_json";
    case ErrorCode::kSchemaViolation: return "schema_violation";
    case ErrorCode::kDuplicateId: return "duplicate_id";
    case ErrorCode::kInvalidUtf8: return "invalid_utf8";
    case ErrorCode::kEmptyFile: return "empty_file";
    case ErrorCode::kTooLarge: return "too_large";
    case ErrorCode::kSymlinkLoop: return "symlink_loop";
    case ErrorCode::kUnreadable: return "unreadable";
    case ErrorCode::kNotCorpus: return "not_a_corpus";
    case ErrorCode::kUnknownSchema: return "unknown_schema";
    case ErrorCode::kConsistency: return "consistency";
    case ErrorCode::kNotRecorded: return "not_recorded";
    case ErrorCode::kIndexMissing: return "index_missing";
    case ErrorCode::kIndexCorrupt: return "index_corrupt";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kShardUnavailable: return "shard_unavailable";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

int exit_code_for(ErrorCode code) noexcept {
  const int category = static_cast<int>(code) / 100;
  switch (category) {
    case 1:
    case 2: return 2;
    case 3: return 3;
    default: return 4;
  }
}

Error::Error(ErrorCode code, std::string message, std::string file, std::string pointer)
    : std::runtime_error(std::move(message)), code_(code), file_(std::move(file)), pointer_(std::move(pointer)) {}

std::string Error::one_line() const {
  std::string line;
  if (!file_.empty()) line += file_ + ": ";
  if (!pointer_.empty()) line += pointer_ + ": ";
  line += what();
  return line;
}

std::string Error::to_json() const {
  nlohmann::ordered_json body;
  body["code"] = error_code_name(code_);
  body["number"] = static_cast<int>(code_);
  body["message"] = what();
  if (!file_.empty()) body["file"] = file_;
  if (!pointer_.empty()) body["pointer"] = pointer_;
  nlohmann::ordered_json root;
  root["error"] = std::move(body);
  return root.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kwiki
