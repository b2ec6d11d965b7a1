// The index's mutable state beside its generations: query log, feedback and worth counters.
#include "state_db.hpp"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "kwiki/error.hpp"
#include "sqlite_check.hpp"
#include "text_util.hpp"

namespace kwiki::detail {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS query_log(query_id TEXT NOT NULL, ts TEXT NOT NULL, request TEXT NOT NULL,
  intent TEXT NOT NULL, served TEXT NOT NULL, generation TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS query_log_by_id ON query_log(query_id);
CREATE TABLE IF NOT EXISTS feedback(query_id TEXT NOT NULL, key TEXT NOT NULL, outcome TEXT NOT NULL, ts TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS worth(key TEXT PRIMARY KEY, served INTEGER NOT NULL DEFAULT 0, applied INTEGER NOT NULL DEFAULT 0,
  effective INTEGER NOT NULL DEFAULT 0, ineffective INTEGER NOT NULL DEFAULT 0);
PRAGMA user_version=1;
)sql";

}  // namespace

StateDb::StateDb(std::string index_dir) : path_(std::move(index_dir) + "/state.sqlite") {}

std::string StateDb::feedback_marker() const { return path_ + ".has-feedback"; }

StateDb::~StateDb() {
  if (db_) sqlite3_close(db_);
}

bool StateDb::open(bool for_write) {
  if (db_) return true;
  if (failed_) return false;
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0 && st.st_size > 0;
  if (!for_write && !exists) return false;  // nothing logged yet: no adjustments
  if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    if (db_) sqlite3_close(db_);
    db_ = nullptr;
    failed_ = true;
    return false;
  }
  sqlite3_busy_timeout(db_, 2000);
  // The log is an aid, not a record of truth: no fsync and no journal file per query (a
  // WAL would be created, checkpointed and deleted by every short-lived kwiki process).
  sqlite3_exec(db_, "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF", nullptr, nullptr, nullptr);
  // CREATE ... IF NOT EXISTS costs a parse per process; only a new file needs it.
  if (!exists && sqlite3_exec(db_, kSchema, nullptr, nullptr, nullptr) != SQLITE_OK) {
    sqlite3_close(db_);
    db_ = nullptr;
    failed_ = true;
    return false;
  }
  return true;
}

void StateDb::log_query(const std::string& query_id, const std::string& request, const std::string& intent_json,
                        const std::vector<std::string>& served, const std::string& generation) {
  try {
    if (!open(true)) return;
    std::string served_list;
    for (const auto& s : served) served_list += (served_list.empty() ? "" : "\n") + s;
    // One autocommitted insert: served counts are derived from this log when needed.
    Statement s(db_, "INSERT INTO query_log VALUES(?1,?2,?3,?4,?5,?6)");
    s.bind(1, query_id);
    s.bind(2, now_iso8601());
    s.bind(3, request);
    s.bind(4, intent_json);
    s.bind(5, served_list);
    s.bind(6, generation);
    s.step();
  } catch (const Error&) {
  }
}

std::map<std::string, double> StateDb::worth_adjustments(const std::vector<std::string>& keys) {
  std::map<std::string, double> out;
  try {
    // Until the first feedback there is nothing to adjust: a marker saves opening the log.
    struct stat st {};
    if (keys.empty() || ::stat(feedback_marker().c_str(), &st) != 0 || !open(false)) return out;
    // Only records with feedback can move; that table is small, so read it whole.
    Statement s(db_, "SELECT key,applied,effective,ineffective FROM worth WHERE applied+effective+ineffective>0");
    std::map<std::string, double> all;
    while (s.step()) {
      const double applied = sqlite3_column_double(s.get(), 1);
      const double effective = sqlite3_column_double(s.get(), 2);
      const double ineffective = sqlite3_column_double(s.get(), 3);
      // A small prior: net verified outcomes, damped by volume, never more than +-0.1.
      const double signal = (effective - ineffective + 0.25 * applied) / (4.0 + effective + ineffective + applied);
      all[s.text(0)] = std::clamp(0.2 * signal, -0.1, 0.1);
    }
    for (const auto& key : keys)
      if (auto it = all.find(key); it != all.end()) out[key] = it->second;
  } catch (const Error&) {
  }
  return out;
}

void StateDb::record_feedback(const std::string& query_id, const std::string& key, const std::string& outcome) {
  static const char* kOutcomes[] = {"served", "applied", "effective", "ineffective"};
  if (std::none_of(std::begin(kOutcomes), std::end(kOutcomes), [&](const char* o) { return outcome == o; }))
    throw Error(ErrorCode::kBadInput, "unknown outcome \"" + outcome + "\" (expected served, applied, effective or ineffective)");
  if (!open(true)) throw Error(ErrorCode::kIo, "cannot open the query log for writing", path_);
  Statement q(db_, "SELECT served FROM query_log WHERE query_id=?1");
  q.bind(1, query_id);
  bool known = false, served = false;
  while (q.step()) {
    known = true;
    const std::string list = "\n" + q.text(0) + "\n";
    served = served || list.find("\n" + key + "\n") != std::string::npos;
  }
  if (!known) throw Error(ErrorCode::kBadInput, "unknown query id " + query_id + " (not in this index's query log)");
  { std::FILE* marker = std::fopen(feedback_marker().c_str(), "a"); if (marker) std::fclose(marker); }
  if (!served) throw Error(ErrorCode::kBadInput, "record " + key + " was not served by query " + query_id);
  exec_sql(db_, "BEGIN IMMEDIATE");
  try {
    Statement f(db_, "INSERT INTO feedback VALUES(?1,?2,?3,?4)");
    f.bind(1, query_id);
    f.bind(2, key);
    f.bind(3, outcome);
    f.bind(4, now_iso8601());
    f.step();
    if (outcome != "served") {
      const std::string sql = "INSERT INTO worth(key," + outcome + ") VALUES(?1,1) ON CONFLICT(key) DO UPDATE SET " + outcome +
                              "=" + outcome + "+1";
      Statement w(db_, sql.c_str());
      w.bind(1, key);
      w.step();
    }
    exec_sql(db_, "COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace kwiki::detail
