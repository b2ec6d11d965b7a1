// kwiki's MCP server: initialize, tools/list and tools/call over newline-delimited JSON-RPC 2.0.
#include "kwiki/mcp.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kwiki/answer.hpp"
#include "kwiki/error.hpp"
#include "kwiki/indexer.hpp"
#include "mcp_protocol.hpp"
#include "mcp_tools.hpp"

namespace kwiki {
namespace {

using json = nlohmann::ordered_json;

using detail::kInternalError;
using detail::kInvalidParams;
using detail::kMethodNotFound;

// Protocol revisions this server speaks, newest first. A client asking for one of them gets it;
// any other gets the newest, and the client decides whether to go on (MCP lifecycle).
constexpr const char* kProtocolVersions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};
// The first revision whose progress notifications carry a message.
constexpr std::string_view kProgressMessageSince = "2025-03-26";

// What an agent needs to know before its first call.
constexpr const char* kInstructions =
    "kwiki answers GPU kernel questions for NVIDIA Hopper and AMD CDNA3/CDNA4 from a cited knowledge base, without a language "
    "model. The workflow: query (prose in, cited facts and brief records out) -> hardware (exact numbers) -> get (whole "
    "records) -> plan (a task's V0 design, SOL per shape) -> baseline (build, check, time; progress notifications) -> util "
    "(% of peak for a measured time) -> memory (iteration records). Answers are brief by default; every number cites "
    "record:field.";

json tool_list() {
  json tools = json::array();
  for (const auto& t : detail::mcp_tools())
    tools.push_back({{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}});
  return tools;
}

json response(const json& id, json result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

json error_response(const json& id, int code, const std::string& message) { return detail::mcp_error(id, code, message); }

json tool_result(const std::string& text, bool is_error) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", is_error}};
}

// The reply to a line over the size limit (serve() counts it without holding it).
json too_large(std::size_t bytes) {
  return detail::mcp_error(nullptr, detail::kInvalidRequest,
                           "message of " + std::to_string(bytes) + " bytes exceeds the " + std::to_string(McpServer::kMaxMessageBytes) + "-byte limit");
}

}  // namespace

McpServer::McpServer(std::string index_dir, OpenOptions options)
    : index_dir_(std::move(index_dir)), options_(std::move(options)),
      engine_(std::make_unique<QueryEngine>(QueryEngine::open(index_dir_, options_))), protocol_version_(kProtocolVersions[0]) {}

McpServer::~McpServer() = default;

QueryEngine& McpServer::engine() {
  const std::string now = current_generation(index_dir_);
  if (!now.empty() && now != engine_->store().generation()) engine_ = std::make_unique<QueryEngine>(QueryEngine::open(index_dir_, options_));
  return *engine_;
}

std::string McpServer::negotiate(const nlohmann::json& params) {
  const auto asked = params.find("protocolVersion");
  if (asked != params.end() && asked->is_string())
    for (const char* v : kProtocolVersions)
      if (*asked == v) return v;
  return kProtocolVersions[0];
}

std::optional<std::string> McpServer::handle(const std::string& message, const Notify& notify) {
  json id;  // null until the request's own id is known to be valid
  try {
    detail::McpParse parsed = detail::parse_mcp_message(message, kMaxMessageBytes);
    if (!parsed.message) return json_text(parsed.error);
    const detail::McpMessage& request = *parsed.message;
    id = request.id;
    const std::string& method = request.method;
    const nlohmann::json& params = request.params;
    if (request.notification) {
      if (method == "notifications/initialized") initialized_ = true;
      return std::nullopt;  // notifications get no response
    }
    if (method == "initialize") {
      protocol_version_ = negotiate(params);
      json result = {{"protocolVersion", protocol_version_},
                     {"capabilities", {{"tools", {{"listChanged", false}}}}},
                     {"serverInfo", {{"name", "kwiki"}, {"version", "0.1.0"}}}};
      if (protocol_version_ >= kProgressMessageSince) result["instructions"] = kInstructions;  // a 2025-03-26 field
      return json_text(response(id, std::move(result)));
    }
    if (method == "ping") return json_text(response(id, json::object()));
    if (method == "tools/list") return json_text(response(id, {{"tools", tool_list()}}));
    if (method != "tools/call") return json_text(error_response(id, kMethodNotFound, "method not found: " + method));

    if (!params.contains("name") || !params["name"].is_string()) return json_text(error_response(id, kInvalidParams, "tools/call needs params.name, a string"));
    const std::string name = params["name"];
    const detail::McpTool* tool = detail::find_mcp_tool(name);
    if (!tool) {
      std::string names;
      for (const auto& t : detail::mcp_tools()) names += (names.empty() ? "" : ", ") + std::string(t.name);
      return json_text(error_response(id, kInvalidParams, "unknown tool \"" + name + "\" (tools: " + names + ")"));
    }
    const nlohmann::json args = params.contains("arguments") && !params["arguments"].is_null() ? params["arguments"] : nlohmann::json::object();
    if (!args.is_object()) return json_text(error_response(id, kInvalidParams, "params.arguments must be an object"));
    // A progress token (string or integer) asks for notifications/progress while the call runs.
    nlohmann::json token;
    if (const auto meta = params.find("_meta"); meta != params.end() && meta->is_object() && meta->contains("progressToken")) {
      token = (*meta)["progressToken"];
      if (!token.is_string() && !token.is_number_integer())
        return json_text(error_response(id, kInvalidParams, "params._meta.progressToken must be a string or an integer"));
    }
    detail::ToolContext context;
    context.engine = [this]() -> QueryEngine& { return engine(); };
    context.progress = [&](double progress, double total, const std::string& what) {
      if (token.is_null() || !notify) return;
      auto number = [](double v) { return v == std::floor(v) ? json(static_cast<long long>(v)) : json(v); };
      json p = {{"progressToken", token}, {"progress", number(progress)}, {"total", number(total)}};
      if (protocol_version_ >= kProgressMessageSince) p["message"] = what;
      notify(json_text({{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", std::move(p)}}));
    };
    try {
      detail::check_tool_arguments(*tool, args);
      const detail::ToolReply reply = tool->call(args, context);
      return json_text(response(id, tool_result(reply.text, reply.is_error)));
    } catch (const Error& e) {
      // Bad arguments are protocol errors; a valid call that fails is a tool result with isError.
      if (e.code() == ErrorCode::kUsage) return json_text(error_response(id, kInvalidParams, e.what()));
      return json_text(response(id, tool_result(e.to_json(), true)));
    } catch (const std::exception& e) {
      return json_text(response(id, tool_result(Error(ErrorCode::kInternal, e.what()).to_json(), true)));
    }
  } catch (const std::exception& e) {
    return json_text(error_response(id, kInternalError, std::string("internal error: ") + e.what()));
  } catch (...) {
    return json_text(error_response(id, kInternalError, "internal error"));
  }
}

void McpServer::serve(std::istream& in, std::ostream& out) {
  // Notifications (progress) go out as they happen, each a line of its own.
  const Notify notify = [&out](const std::string& line) {
    out << line << "\n";
    out.flush();
  };
  std::string line;
  std::size_t oversized = 0;  // bytes of a line over the limit: counted as they arrive, never kept
  auto add = [&](const char* data, std::size_t n) {
    if (oversized == 0 && line.size() + n <= kMaxMessageBytes) {
      line.append(data, n);
    } else {
      oversized += line.size() + n;
      line.clear();
    }
  };
  auto finish_line = [&] {
    std::optional<std::string> reply;
    if (oversized > 0) reply = json_text(too_large(oversized));
    else if (line.find_first_not_of(" \t\r") != std::string::npos) reply = handle(line, notify);
    if (reply) {
      out << *reply << "\n";
      out.flush();
    }
    line.clear();
    oversized = 0;
  };
  // getline into a fixed buffer returns at each newline (an interactive client is answered at
  // once) and at most this many bytes at a time (a huge line is never held whole).
  char buf[65536];
  for (;;) {
    in.getline(buf, sizeof buf);
    const auto got = static_cast<std::size_t>(in.gcount());
    const bool eof = in.eof();
    const bool filled = in.fail() && !eof && got == sizeof buf - 1;
    add(buf, !filled && !eof && got > 0 ? got - 1 : got);  // gcount counts the newline it consumed
    if (filled) {
      in.clear();
      continue;
    }
    if (eof || in.fail()) {
      if (!line.empty() || oversized > 0) finish_line();
      break;
    }
    finish_line();
  }
}

}  // namespace kwiki
