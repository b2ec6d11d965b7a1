// Checked SQLite calls and a small prepared-statement wrapper.
#include "sqlite_check.hpp"

namespace kwiki::detail {

void throw_sqlite(sqlite3* db, int rc, const char* call, const char* file, int line, ErrorCode code) {
  std::string message = "SQLite error " + std::to_string(rc) + " (" + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) +
                        ") in " + call + " at " + file + ":" + std::to_string(line);
  throw Error(code, message);
}

Statement::Statement(sqlite3* db, const char* sql) : db_(db) {
  KWIKI_SQLITE_CHECK(db_, sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr), ErrorCode::kIndexCorrupt);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::bind(int index, const std::string& text, bool null_if_empty) {
  if (null_if_empty && text.empty()) {
    KWIKI_SQLITE_CHECK(db_, sqlite3_bind_null(stmt_, index), ErrorCode::kIo);
  } else {
    KWIKI_SQLITE_CHECK(db_, sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT),
                       ErrorCode::kIo);
  }
}

void Statement::bind(int index, double value) { KWIKI_SQLITE_CHECK(db_, sqlite3_bind_double(stmt_, index, value), ErrorCode::kIo); }

void Statement::bind(int index, long long value) { KWIKI_SQLITE_CHECK(db_, sqlite3_bind_int64(stmt_, index, value), ErrorCode::kIo); }

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(db_, rc, "sqlite3_step", __FILE__, __LINE__, ErrorCode::kIndexCorrupt);
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (!p) return {};
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

Statement& StatementCache::get(const char* sql) {
  for (auto& [text, statement] : cache_) {
    if (text == sql) {
      statement->reset();
      return *statement;
    }
  }
  cache_.emplace_back(sql, std::make_unique<Statement>(db_, sql));
  return *cache_.back().second;
}

void exec_sql(sqlite3* db, const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string message = std::string("SQLite error: ") + (err ? err : sqlite3_errstr(rc)) + " in: " + sql;
    sqlite3_free(err);
    throw Error(ErrorCode::kIo, message);
  }
}

}  // namespace kwiki::detail
