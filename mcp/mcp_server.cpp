// kwiki's MCP server: initialize, tools/list and tools/call over newline-delimited JSON-RPC 2.0.
#include "kwiki/mcp.hpp"

#include <iostream>
#include <nlohmann/json.hpp>

#include "kwiki/answer.hpp"
#include "kwiki/error.hpp"
#include "kwiki/planner.hpp"
#include "kwiki/query.hpp"

namespace kwiki {
namespace {

using json = nlohmann::ordered_json;

constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602;
constexpr const char* kProtocolVersion = "2024-11-05";

json tools() {
  return json::array({
      {{"name", "query"},
       {"description", "Answer a natural-language request about GPU kernel work (Hopper, CDNA3/CDNA4) from the gpu-wiki: exact hardware facts and ranked, cited kernel know-how."},
       {"inputSchema", {{"type", "object"},
                        {"properties", {{"text", {{"type", "string"}, {"description", "the request in prose"}}},
                                        {"brief", {{"type", "boolean"}, {"description", "elide long payload fields"}}},
                                        {"max_bytes", {{"type", "integer"}, {"minimum", 256}, {"description", "hard limit on the answer size"}}},
                                        {"max_records", {{"type", "integer"}, {"minimum", 1}, {"description", "at most this many records (default 20)"}}}}},
                        {"required", {"text"}}}}},
      {{"name", "hardware"},
       {"description", "Exact hardware facts of a GPU product with their sources; never a sibling's numbers."},
       {"inputSchema", {{"type", "object"},
                        {"properties", {{"product", {{"type", "string"}, {"description", "e.g. H200, MI300X"}}},
                                        {"field", {{"type", "string"}, {"description", "dot path, e.g. peak_compute.bf16.dense"}}},
                                        {"vs", {{"type", "string"}, {"description", "a second product to compare"}}}}},
                        {"required", {"product"}}}}},
      {{"name", "get"},
       {"description", "Records by id, payloads byte-identical to the stored ones."},
       {"inputSchema", {{"type", "object"},
                        {"properties", {{"ids", {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1}}}}},
                        {"required", {"ids"}}}}},
      {{"name", "plan"},
       {"description", "Plan a V0 kernel: semantics, target, cited roofline and design, written to a new workspace."},
       {"inputSchema", {{"type", "object"},
                        {"properties", {{"task", {{"type", "string"}, {"description", "task folder or task.json"}}},
                                        {"gpu", {{"type", "string"}, {"description", "target product"}}},
                                        {"workspace", {{"type", "string"}, {"description", "folder to create"}}}}},
                        {"required", {"task", "gpu"}}}}},
  });
}

json response(const json& id, json result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

json error_response(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json tool_result(const std::string& text, bool is_error) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", is_error}};
}

std::string require_string(const json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end() || !it->is_string() || it->get<std::string>().empty())
    throw Error(ErrorCode::kUsage, std::string("argument \"") + key + "\" is required and must be a non-empty string");
  return it->get<std::string>();
}

}  // namespace

McpServer::McpServer(QueryEngine& engine) : engine_(engine) {}

std::optional<std::string> McpServer::handle(const std::string& message) {
  json request = json::parse(message, nullptr, false);
  if (request.is_discarded()) return json_text(error_response(nullptr, kParseError, "parse error: not JSON"));
  if (!request.is_object() || request.value("jsonrpc", "") != "2.0" || !request.contains("method") || !request["method"].is_string())
    return json_text(error_response(request.is_object() && request.contains("id") ? request["id"] : json(), kInvalidRequest,
                                    "invalid request: expected a JSON-RPC 2.0 object with a method"));
  const std::string method = request["method"];
  const bool notification = !request.contains("id");
  const json id = notification ? json() : request["id"];
  const json params = request.value("params", json::object());
  if (notification) {
    if (method == "notifications/initialized") initialized_ = true;
    return std::nullopt;  // notifications get no response
  }
  if (method == "initialize") {
    initialized_ = true;
    return json_text(response(id, {{"protocolVersion", kProtocolVersion},
                                   {"capabilities", {{"tools", {{"listChanged", false}}}}},
                                   {"serverInfo", {{"name", "kwiki"}, {"version", "0.1.0"}}}}));
  }
  if (method == "ping") return json_text(response(id, json::object()));
  if (method == "tools/list") return json_text(response(id, {{"tools", tools()}}));
  if (method != "tools/call") return json_text(error_response(id, kMethodNotFound, "method not found: " + method));

  if (!params.is_object() || !params.contains("name") || !params["name"].is_string())
    return json_text(error_response(id, kInvalidParams, "tools/call needs params.name"));
  const std::string name = params["name"];
  const json args = params.value("arguments", json::object());
  if (!args.is_object()) return json_text(error_response(id, kInvalidParams, "params.arguments must be an object"));
  try {
    if (name == "query") {
      QueryOptions options;
      options.brief = args.value("brief", false);
      if (args.contains("max_bytes")) {
        if (!args["max_bytes"].is_number_integer() || args["max_bytes"].get<long long>() < 0)
          throw Error(ErrorCode::kUsage, "max_bytes must be a non-negative integer");
        options.max_bytes = args["max_bytes"].get<std::size_t>();
      }
      if (args.contains("max_records")) {
        if (!args["max_records"].is_number_integer() || args["max_records"].get<long long>() < 1)
          throw Error(ErrorCode::kUsage, "max_records must be a positive integer");
        options.max_records = args["max_records"].get<std::size_t>();
      }
      const QueryResult r = engine_.query(require_string(args, "text"), options);
      return json_text(response(id, tool_result(r.json, false)));
    }
    if (name == "hardware") {
      const HardwareAnswer a = engine_.hardware(require_string(args, "product"), args.value("field", ""), args.value("vs", ""));
      return json_text(response(id, tool_result(a.json, a.exit_code != 0)));
    }
    if (name == "get") {
      if (!args.contains("ids") || !args["ids"].is_array() || args["ids"].empty())
        throw Error(ErrorCode::kUsage, "argument \"ids\" must be a non-empty array of strings");
      Answer answer;
      for (const auto& v : args["ids"]) {
        if (!v.is_string()) throw Error(ErrorCode::kUsage, "ids must be strings");
        auto record = engine_.store().get(v.get<std::string>());
        if (!record) {
          answer.notes.push_back("unknown id: " + v.get<std::string>());
          continue;
        }
        AnswerRecord a;
        a.record = std::move(*record);
        a.why = {"requested by id"};
        answer.records.push_back(std::move(a));
      }
      return json_text(response(id, tool_result(render_answer_json(answer), answer.records.empty())));
    }
    if (name == "plan") {
      PlanRequest p;
      p.task_path = require_string(args, "task");
      p.product = require_string(args, "gpu");
      p.workspace = args.value("workspace", "");
      p.force = args.value("force", false);
      const PlanResult r = make_plan(p, engine_);
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
}

void McpServer::serve(std::istream& in, std::ostream& out) {
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (auto reply = handle(line)) {
      out << *reply << "\n";
      out.flush();
    }
  }
}

}  // namespace kwiki
