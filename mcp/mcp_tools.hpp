// The MCP tools: one table row per tool (name, description, input schema, handler).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kwiki/query.hpp"

namespace kwiki::detail {

/// What a tool call may use besides its arguments.
struct ToolContext {
  std::function<QueryEngine&()> engine;  ///< the engine on the serving generation
  /// Reports the progress of a long call: `progress` of `total`, and what it does now. A no-op
  /// unless the client asked for progress (params._meta.progressToken).
  std::function<void(double progress, double total, const std::string& message)> progress;
};

/// A tool's answer: its text (a JSON document) and whether the call failed.
struct ToolReply {
  std::string text;
  bool is_error = false;
};

/// One tool as tools/list shows it, with the function that answers a call.
struct McpTool {
  const char* name;
  const char* description;  ///< what to pass, what comes back and how big
  nlohmann::ordered_json input_schema;
  ToolReply (*call)(const nlohmann::json& arguments, ToolContext& context);
};

/// The tools, in workflow order: query, hardware, get, plan, baseline, util, memory.
const std::vector<McpTool>& mcp_tools();

/// The tool named `name`, or nullptr.
const McpTool* find_mcp_tool(const std::string& name);

/// Checks a call's arguments against the tool's input schema (JSON Schema, with valijson).
/// Throws kwiki::Error kUsage naming the first violation and its JSON pointer.
void check_tool_arguments(const McpTool& tool, const nlohmann::json& arguments);

}  // namespace kwiki::detail
