// kwiki's MCP server: initialize, tools/list and tools/call over newline-delimited JSON-RPC 2.0.
#include "kwiki/mcp.hpp"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "json_args.hpp"
#include "mcp_protocol.hpp"
#include "kwiki/answer.hpp"
#include "kwiki/error.hpp"
#include "kwiki/indexer.hpp"
#include "kwiki/planner.hpp"

namespace kwiki {
namespace {

using json = nlohmann::ordered_json;
using detail::arg_bool;
using detail::arg_integer;
using detail::arg_string;
using detail::arg_strings;

using detail::kInternalError;
using detail::kInvalidParams;
using detail::kMethodNotFound;
// Protocol revisions this server speaks, newest first: a client's supported version is echoed,
// any other gets the newest (the client then decides whether to go on).
constexpr const char* kProtocolVersions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

json property(const char* type, const char* description) { return {{"type", type}, {"description", description}}; }

json tools() {
  auto tool = [](const char* name, const char* description, json properties, json required) {
    return json{{"name", name},
                {"description", description},
                {"inputSchema", {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}, {"additionalProperties", false}}}};
  };
  json max_bytes = property("integer", "hard limit on the answer size in bytes (256 to 10000000)");
  max_bytes["minimum"] = 256;
  json max_records = property("integer", "at most this many records (1 to 1000; default 20)");
  max_records["minimum"] = 1;
  json ids = {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1}, {"description", "record ids"}};
  return json::array({
      tool("query",
           "Answer a natural-language request about GPU kernel work (Hopper, CDNA3/CDNA4) from the gpu-wiki: exact hardware facts and ranked, "
           "cited kernel know-how.",
           {{"text", property("string", "the request in prose")},
            {"brief", property("boolean", "elide long payload fields")},
            {"max_bytes", max_bytes},
            {"max_records", max_records}},
           {"text"}),
      tool("hardware", "Exact hardware facts of a GPU product with their sources; never a sibling's numbers.",
           {{"product", property("string", "e.g. H200, MI300X")},
            {"field", property("string", "dot path, e.g. peak_compute.bf16.dense")},
            {"vs", property("string", "a second product to compare")}},
           {"product"}),
      tool("get", "Records by id, payloads byte-identical to the stored ones.", {{"ids", ids}}, {"ids"}),
      tool("plan",
           "Plan a V0 kernel: semantics, target, cited roofline and design, written to a new workspace. Runs the task's reference.py "
           "(Python code) once per shape when torch is importable: give only tasks you trust.",
           {{"task", property("string", "task folder or task.json")},
            {"gpu", property("string", "target product")},
            {"workspace", property("string", "folder to create")},
            {"force", property("boolean", "replace a workspace that kwiki plan made earlier (never any other folder)")}},
           {"task", "gpu"}),
  });
}

json response(const json& id, json result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

json error_response(const json& id, int code, const std::string& message) { return detail::mcp_error(id, code, message); }

json tool_result(const std::string& text, bool is_error) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", is_error}};
}

// Arguments a tool's schema does not list are refused, as "additionalProperties": false says.
void check_argument_names(const nlohmann::json& args, const std::string& tool_name) {
  for (const auto& t : tools()) {
    if (t["name"] != tool_name) continue;
    for (const auto& [key, value] : args.items())
      if (!t["inputSchema"]["properties"].contains(key))
        throw Error(ErrorCode::kUsage, "tool \"" + tool_name + "\" takes no argument \"" + key + "\"", "", "/" + key);
  }
}

std::string require_string(const nlohmann::json& args, const char* key) {
  const std::string value = arg_string(args, key);
  if (value.empty()) throw Error(ErrorCode::kUsage, std::string("argument \"") + key + "\" is required and must be a non-empty string");
  return value;
}

// The reply to a line over the size limit (serve() counts it without holding it).
json too_large(std::size_t bytes) {
  return detail::mcp_error(nullptr, detail::kInvalidRequest,
                           "message of " + std::to_string(bytes) + " bytes exceeds the " + std::to_string(McpServer::kMaxMessageBytes) + "-byte limit");
}

}  // namespace

McpServer::McpServer(std::string index_dir, OpenOptions options)
    : index_dir_(std::move(index_dir)), options_(std::move(options)),
      engine_(std::make_unique<QueryEngine>(QueryEngine::open(index_dir_, options_))) {}

McpServer::~McpServer() = default;

QueryEngine& McpServer::engine() {
  const std::string now = current_generation(index_dir_);
  if (!now.empty() && now != engine_->store().generation()) engine_ = std::make_unique<QueryEngine>(QueryEngine::open(index_dir_, options_));
  return *engine_;
}

std::optional<std::string> McpServer::handle(const std::string& message) {
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
      initialized_ = true;
      const std::string asked = params.contains("protocolVersion") && params["protocolVersion"].is_string() ? params["protocolVersion"].get<std::string>() : "";
      const bool known = std::any_of(std::begin(kProtocolVersions), std::end(kProtocolVersions), [&](const char* v) { return asked == v; });
      return json_text(response(id, {{"protocolVersion", known ? asked : std::string(kProtocolVersions[0])},
                                     {"capabilities", {{"tools", {{"listChanged", false}}}}},
                                     {"serverInfo", {{"name", "kwiki"}, {"version", "0.1.0"}}}}));
    }
    if (method == "ping") return json_text(response(id, json::object()));
    if (method == "tools/list") return json_text(response(id, {{"tools", tools()}}));
    if (method != "tools/call") return json_text(error_response(id, kMethodNotFound, "method not found: " + method));

    if (!params.contains("name") || !params["name"].is_string()) return json_text(error_response(id, kInvalidParams, "tools/call needs params.name"));
    const std::string name = params["name"];
    const nlohmann::json args = params.contains("arguments") && !params["arguments"].is_null() ? params["arguments"] : nlohmann::json::object();
    if (!args.is_object()) return json_text(error_response(id, kInvalidParams, "params.arguments must be an object"));
    try {
      check_argument_names(args, name);
      if (name == "query") {
        QueryOptions options;
        options.brief = arg_bool(args, "brief", false);
        options.max_bytes = static_cast<std::size_t>(arg_integer(args, "max_bytes", 0, 0, 10'000'000));
        options.max_records = static_cast<std::size_t>(arg_integer(args, "max_records", 20, 1, 1000));
        const std::string text = require_string(args, "text");
        const QueryResult r = engine().query(text, options);
        return json_text(response(id, tool_result(r.json, false)));
      }
      if (name == "hardware") {
        const std::string product = require_string(args, "product");
        HardwareOptions options;
        options.field = arg_string(args, "field");
        options.vs = arg_string(args, "vs");
        const HardwareAnswer a = engine().hardware(product, options);
        return json_text(response(id, tool_result(a.json, a.exit_code != 0)));
      }
      if (name == "get") {
        const std::vector<std::string> ids = arg_strings(args, "ids");
        if (ids.empty()) throw Error(ErrorCode::kUsage, "argument \"ids\" must be a non-empty array of strings");
        const QueryResult got = engine().get(ids);
        return json_text(response(id, tool_result(got.json, got.exit_code != 0)));
      }
      if (name == "plan") {
        PlanRequest p;
        p.task_path = require_string(args, "task");
        p.product = require_string(args, "gpu");
        p.workspace = arg_string(args, "workspace");
        p.force = arg_bool(args, "force", false);
        const PlanResult r = make_plan(p, engine());
        return json_text(response(id, tool_result(json_text({{"workspace", r.workspace}, {"pattern", r.pattern}, {"notes", r.notes}}), false)));
      }
      return json_text(error_response(id, kInvalidParams, "unknown tool: " + name));
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
    else if (line.find_first_not_of(" \t\r") != std::string::npos) reply = handle(line);
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
