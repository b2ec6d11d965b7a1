// Public API of kwiki's Model Context Protocol server (JSON-RPC 2.0 over stdio).
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "kwiki/query.hpp"

namespace kwiki {

/// Serves kwiki's whole workflow to an MCP client: the tools query, hardware, get, plan, baseline
/// (with progress notifications), util and memory, brief by default. Speaks MCP 2025-06-18,
/// 2025-03-26 and 2024-11-05 (a client's version when it is one of these, else the newest).
/// Not thread-safe.
class McpServer {
 public:
  /// Sends one line (a notification) to the client while a request is handled.
  using Notify = std::function<void(const std::string& line)>;

  /// A message (one line of the stdio transport) longer than this gets an error, unread.
  static constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 20;

  /// Serves the index in `index_dir`, opened now (throws kwiki::Error as QueryEngine::open).
  /// Between requests the server notices a newly published generation and reopens on it.
  McpServer(std::string index_dir, OpenOptions options = {});
  ~McpServer();

  /// Handles one JSON-RPC message; returns the response line, or nullopt for notifications.
  /// Progress notifications of a long tool call go to `notify` before the response (when the
  /// call carries params._meta.progressToken). Never throws: malformed, oversized or too deeply
  /// nested input, and arguments that do not match the tool's schema, get a JSON-RPC error, and
  /// the server goes on.
  std::optional<std::string> handle(const std::string& message, const Notify& notify = {});

  /// Reads newline-delimited messages from `in` until EOF, writing responses to `out`. A line
  /// over kMaxMessageBytes is skipped (never held in memory whole) and answered with an error.
  void serve(std::istream& in, std::ostream& out);

 private:
  /// The engine on the generation CURRENT names now (reopened when it changed).
  QueryEngine& engine();
  /// The protocol version to answer an initialize request with.
  static std::string negotiate(const nlohmann::json& params);

  std::string index_dir_;
  OpenOptions options_;
  std::unique_ptr<QueryEngine> engine_;
  std::string protocol_version_;  ///< negotiated at initialize (the newest until then)
  bool initialized_ = false;
};

}  // namespace kwiki
