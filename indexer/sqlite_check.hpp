// KWIKI_SQLITE_CHECK: checked SQLite calls that record file, line and the call text.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kwiki/error.hpp"

namespace kwiki::detail {

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const char* call, const char* file, int line, ErrorCode code);

/// Owns a prepared statement.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt* get() const { return stmt_; }
  /// Binds text (copied) at 1-based index; empty binds NULL when null_if_empty.
  void bind(int index, const std::string& text, bool null_if_empty = false);
  void bind(int index, double value);
  void bind(int index, long long value);
  /// Steps once; true when a row is available.
  bool step();
  /// Resets for the next execution, clearing bindings.
  void reset();
  /// Column as string ("" for NULL).
  std::string text(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// Prepared statements kept for the life of a connection: preparing costs more than stepping.
/// Not thread-safe.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  /// The statement for `sql`, prepared on first use and reset (bindings cleared) on every call.
  Statement& get(const char* sql);

 private:
  sqlite3* db_;
  std::vector<std::pair<std::string, std::unique_ptr<Statement>>> cache_;
};

/// Runs SQL with no result rows.
void exec_sql(sqlite3* db, const char* sql);

}  // namespace kwiki::detail

#define KWIKI_SQLITE_CHECK(db, call, code)                                                          \
  do {                                                                                              \
    const int kwiki_rc_ = (call);                                                                   \
    if (kwiki_rc_ != SQLITE_OK && kwiki_rc_ != SQLITE_DONE && kwiki_rc_ != SQLITE_ROW)              \
      ::kwiki::detail::throw_sqlite((db), kwiki_rc_, #call, __FILE__, __LINE__, (code));             \
  } while (0)
