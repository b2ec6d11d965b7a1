// Public API of kwiki's Model Context Protocol server (JSON-RPC 2.0 over stdio).
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

namespace kwiki {

class QueryEngine;

/// Serves the tools query, hardware, get and plan to an MCP client. Not thread-safe.
class McpServer {
 public:
  explicit McpServer(QueryEngine& engine);

  /// Handles one JSON-RPC message (one line of the stdio transport); returns the response line,
  /// or nullopt for notifications. Never throws: malformed input gets a JSON-RPC error.
  std::optional<std::string> handle(const std::string& message);

  /// Reads newline-delimited messages from `in` until EOF, writing responses to `out`.
  void serve(std::istream& in, std::ostream& out);

 private:
  QueryEngine& engine_;
  bool initialized_ = false;
};

}  // namespace kwiki
