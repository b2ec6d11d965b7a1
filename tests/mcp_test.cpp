// Drives `kwiki mcp` as an MCP client would: initialize, tools/list, a call of every tool, errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.hpp"

namespace kwiki {
namespace {

using nlohmann::json;
using test::RunResult;
using test::TempDir;

TEST(Mcp, ExchangesInitializeListAndEveryToolAndRejectsBadCalls) {
  TempDir dir;
  ASSERT_EQ(test::run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", dir / "index"}).exit_code, 0);
  const std::string task = std::string(KWIKI_SOURCE_DIR) + "/data/tasks/rms_norm";
  const std::vector<std::string> messages = {
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"test","version":"1"}}})",
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
      R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})",
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"query","arguments":{"text":"rmsnorm on H200","brief":true,"max_bytes":4000}}})",
      R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"hardware","arguments":{"product":"MI300X","field":"memory.bandwidth_tb_s"}}})",
      R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get","arguments":{"ids":["nvidia.hopper.spec-sheet.h200-sxm"]}}})",
      json({{"jsonrpc", "2.0"}, {"id", 6}, {"method", "tools/call"},
            {"params", {{"name", "plan"}, {"arguments", {{"task", task}, {"gpu", "H200"}, {"workspace", dir / "ws"}}}}}}).dump(),
      R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"query","arguments":{"max_records":"many"}}})",
      R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}})",
      R"({"jsonrpc":"2.0","id":9,"method":"resources/list"})",
      R"({"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"hardware","arguments":{"product":"RTX 4090"}}})",
  };
  std::string input;
  for (const auto& m : messages) input += m + "\n";
  input += "{not json\n";
  test::write_text(dir / "in.jsonl", input);
  const RunResult r = test::run_kwiki({"mcp", "--index", dir / "index"}, {}, "", dir / "in.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<long long, json> by_id;
  json parse_error;
  std::istringstream lines(r.out);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    const json j = json::parse(line);
    EXPECT_EQ(j["jsonrpc"], "2.0");
    if (j["id"].is_null()) parse_error = j;
    else by_id[j["id"].get<long long>()] = j;
  }
  EXPECT_EQ(count, 11);  // one per request, none for the notification, one for the garbage
  EXPECT_EQ(by_id[1]["result"]["serverInfo"]["name"], "kwiki");
  EXPECT_TRUE(by_id[1]["result"]["capabilities"].contains("tools"));
  std::set<std::string> tools;
  for (const auto& t : by_id[2]["result"]["tools"]) {
    tools.insert(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object");
  }
  EXPECT_EQ(tools, (std::set<std::string>{"query", "hardware", "get", "plan"}));
  const json answer = json::parse(by_id[3]["result"]["content"][0]["text"].get<std::string>());
  EXPECT_FALSE(answer["records"].empty());
  EXPECT_LE(by_id[3]["result"]["content"][0]["text"].get<std::string>().size(), 4000u);
  EXPECT_EQ(by_id[3]["result"]["isError"], false);
  EXPECT_NE(by_id[4]["result"]["content"][0]["text"].get<std::string>().find("5.3"), std::string::npos);
  EXPECT_NE(by_id[5]["result"]["content"][0]["text"].get<std::string>().find("h200-sxm"), std::string::npos);
  EXPECT_NE(by_id[6]["result"]["content"][0]["text"].get<std::string>().find("rms_norm"), std::string::npos);
  EXPECT_EQ(by_id[7]["error"]["code"], -32602);
  EXPECT_EQ(by_id[8]["error"]["code"], -32602);
  EXPECT_EQ(by_id[9]["error"]["code"], -32601);
  EXPECT_EQ(by_id[10]["result"]["isError"], true);  // a valid call that fails is a tool error
  EXPECT_EQ(parse_error["error"]["code"], -32700);
}

}  // namespace
}  // namespace kwiki
