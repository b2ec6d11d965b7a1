// The index's mutable state beside its generations: query log, feedback and worth counters.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

struct sqlite3;

namespace kwiki::detail {

/// <index>/state.sqlite, journal in memory and no fsync (a log, not a ledger). Opening is lazy;
/// when the folder is read-only, logging is off.
class StateDb {
 public:
  explicit StateDb(std::string index_dir);
  ~StateDb();

  /// Records one executed query. Best effort: failures are swallowed (logging must not fail a query).
  void log_query(const std::string& query_id, const std::string& request, const std::string& intent_json,
                 const std::vector<std::string>& served, const std::string& generation);
  /// Ranking adjustments from feedback for the given keys (clamped to +-0.1).
  std::map<std::string, double> worth_adjustments(const std::vector<std::string>& keys);
  /// Records feedback. Throws kwiki::Error kBadInput when the query id is unknown or the record
  /// was not served by it.
  void record_feedback(const std::string& query_id, const std::string& key, const std::string& outcome);

 private:
  bool open(bool for_write);
  std::string feedback_marker() const;
  std::string path_;
  sqlite3* db_ = nullptr;
  bool failed_ = false;
};

}  // namespace kwiki::detail
