// The MCP wire format, apart from the tools: one JSON-RPC 2.0 message read and checked.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kwiki::detail {

/// JSON-RPC 2.0 error codes.
inline constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602,
                     kInternalError = -32603;

/// One well-formed request or notification.
struct McpMessage {
  nlohmann::json id;            ///< string or number; null for a notification
  bool notification = false;    ///< no "id": gets no response
  std::string method;
  nlohmann::json params = nlohmann::json::object();  ///< always an object
};

/// The outcome of reading a message: the message, or the error response to send back.
struct McpParse {
  std::optional<McpMessage> message;
  nlohmann::ordered_json error;  ///< a full JSON-RPC error response when message is empty
};

/// Reads one message: at most `max_bytes`, nested at most kMaxJsonDepth, a JSON-RPC 2.0 object
/// with "jsonrpc": "2.0", a string method, a string or number id (or none), object params. Never
/// throws; every other input gets its error response (-32700 not JSON, -32600 anything else,
/// -32602 params not an object).
McpParse parse_mcp_message(std::string_view text, std::size_t max_bytes);

/// A JSON-RPC error response.
nlohmann::ordered_json mcp_error(const nlohmann::json& id, int code, const std::string& message);

}  // namespace kwiki::detail
