// Public API of kwiki's Model Context Protocol server (JSON-RPC 2.0 over stdio).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "kwiki/query.hpp"

namespace kwiki {

/// Serves the tools query, hardware, get and plan to an MCP client. Not thread-safe.
class McpServer {
 public:
  /// A message (one line of the stdio transport) longer than this gets an error, unread.
  static constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 20;

  /// Serves the index in `index_dir`, opened now (throws kwiki::Error as QueryEngine::open).
  /// Between requests the server notices a newly published generation and reopens on it.
  McpServer(std::string index_dir, OpenOptions options = {});
  ~McpServer();

  /// Handles one JSON-RPC message; returns the response line, or nullopt for notifications.
  /// Never throws: malformed, oversized or too deeply nested input gets a JSON-RPC error, and
  /// the server goes on.
  std::optional<std::string> handle(const std::string& message);

  /// Reads newline-delimited messages from `in` until EOF, writing responses to `out`. A line
  /// over kMaxMessageBytes is skipped (never held in memory whole) and answered with an error.
  void serve(std::istream& in, std::ostream& out);

 private:
  /// The engine on the generation CURRENT names now (reopened when it changed).
  QueryEngine& engine();

  std::string index_dir_;
  OpenOptions options_;
  std::unique_ptr<QueryEngine> engine_;
  bool initialized_ = false;
};

}  // namespace kwiki
