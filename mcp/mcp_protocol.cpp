// The MCP wire format, apart from the tools: one JSON-RPC 2.0 message read and checked.
#include "mcp_protocol.hpp"

#include "json_args.hpp"
#include "kwiki/error.hpp"

namespace kwiki::detail {
namespace {

// A JSON-RPC id is a string or a number (MCP: never null on a request).
bool valid_id(const nlohmann::json& id) { return id.is_string() || id.is_number(); }

McpParse refused(const nlohmann::json& id, int code, const std::string& message) {
  McpParse p;
  p.error = mcp_error(id, code, message);
  return p;
}

}  // namespace

nlohmann::ordered_json mcp_error(const nlohmann::json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

McpParse parse_mcp_message(std::string_view text, std::size_t max_bytes) {
  if (text.size() > max_bytes)
    return refused(nullptr, kInvalidRequest,
                   "message of " + std::to_string(text.size()) + " bytes exceeds the " + std::to_string(max_bytes) + "-byte limit");
  nlohmann::json request;
  try {
    request = parse_untrusted_json(text, "the message");
  } catch (const Error& e) {
    return refused(nullptr, e.code() == ErrorCode::kInvalidJson ? kParseError : kInvalidRequest, std::string("parse error: ") + e.what());
  }
  if (request.is_array()) return refused(nullptr, kInvalidRequest, "invalid request: batches are not supported");
  if (!request.is_object()) return refused(nullptr, kInvalidRequest, "invalid request: a message is a JSON object");
  const auto id = request.find("id");
  const nlohmann::json echo = id != request.end() && valid_id(*id) ? *id : nlohmann::json();
  const auto version = request.find("jsonrpc");
  const auto method = request.find("method");
  if (version == request.end() || *version != "2.0" || method == request.end() || !method->is_string() || (id != request.end() && !valid_id(*id)))
    return refused(echo, kInvalidRequest,
                   "invalid request: expected a JSON-RPC 2.0 object with \"jsonrpc\": \"2.0\", a string method and a string or number id");
  McpMessage m;
  m.id = echo;
  m.notification = id == request.end();
  m.method = method->get<std::string>();
  if (const auto params = request.find("params"); params != request.end() && !params->is_null()) {
    if (!params->is_object()) return refused(echo, kInvalidParams, "params must be an object");
    m.params = *params;
  }
  McpParse p;
  p.message = std::move(m);
  return p;
}

}  // namespace kwiki::detail
