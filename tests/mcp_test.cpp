// Drives `kwiki mcp` as an MCP client would: version negotiation, every tool, progress
// notifications of a CPU baseline, and malformed calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "test_support.hpp"

namespace kwiki {
namespace {

using nlohmann::json;
using test::RunResult;
using test::TempDir;

// What one server session sent back: responses by id, notifications in order, and where each
// notification stood relative to the responses.
struct Session {
  std::map<long long, json> by_id;
  std::vector<json> notifications;
  std::vector<json> all;  ///< every line, in order
  std::vector<json> unnumbered;  ///< responses with a null id (parse errors)
};

class Mcp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const RunResult r = test::run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", index()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string index() { return (*dir_) / "index"; }

  // Sends the lines (after an initialize for `version`, unless `version` is empty) to one server.
  static Session session(const std::vector<std::string>& lines, const std::string& version = "2025-06-18") {
    std::string input;
    if (!version.empty())
      input += json({{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"},
                     {"params", {{"protocolVersion", version}, {"capabilities", json::object()}, {"clientInfo", {{"name", "test"}, {"version", "1"}}}}}})
                   .dump() +
               "\n" + R"({"jsonrpc":"2.0","method":"notifications/initialized"})" + "\n";
    for (const auto& l : lines) input += l + "\n";
    static int n = 0;
    const std::string in = (*dir_) / ("in-" + std::to_string(n++) + ".jsonl");
    test::write_text(in, input);
    const RunResult r = test::run_kwiki({"mcp", "--index", index()}, {}, "", in);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    Session s;
    std::istringstream out(r.out);
    for (std::string line; std::getline(out, line);) {
      const json j = json::parse(line);
      EXPECT_EQ(j["jsonrpc"], "2.0") << line;
      s.all.push_back(j);
      if (j.contains("method")) s.notifications.push_back(j);
      else if (j["id"].is_null()) s.unnumbered.push_back(j);
      else s.by_id[j["id"].get<long long>()] = j;
    }
    return s;
  }

  static std::string call(long long id, const std::string& tool, const json& arguments, const json& meta = nullptr) {
    json params = {{"name", tool}, {"arguments", arguments}};
    if (!meta.is_null()) params["_meta"] = meta;
    return json({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", params}}).dump();
  }

  // The tool result's text, parsed, and whether it was an error.
  static std::pair<json, bool> result_of(const json& response) {
    EXPECT_TRUE(response.contains("result")) << response;
    const std::string text = response["result"]["content"][0]["text"];
    return {json::parse(text), response["result"]["isError"].get<bool>()};
  }
  static std::size_t text_size(const json& response) { return response["result"]["content"][0]["text"].get<std::string>().size(); }

  static TempDir* dir_;
};
TempDir* Mcp::dir_ = nullptr;

TEST_F(Mcp, InitializeAnswersTheClientsVersionWhenSupportedElseTheNewest) {
  for (const std::string v : {"2025-06-18", "2025-03-26", "2024-11-05", "2099-01-01", "not-a-version"}) {
    const Session s = session({}, v);
    const json& result = s.by_id.at(0)["result"];
    const bool supported = v == "2025-06-18" || v == "2025-03-26" || v == "2024-11-05";
    EXPECT_EQ(result["protocolVersion"], supported ? v : "2025-06-18") << v;
    EXPECT_EQ(result["serverInfo"]["name"], "kwiki");
    EXPECT_TRUE(result["capabilities"].contains("tools"));
    // "instructions" came with 2025-03-26; an older client gets no field it does not know.
    EXPECT_EQ(result.contains("instructions"), result["protocolVersion"] != "2024-11-05") << v;
  }
  // No protocolVersion at all: the newest.
  const Session s = session({R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})"}, "");
  EXPECT_EQ(s.by_id.at(1)["result"]["protocolVersion"], "2025-06-18");
}

TEST_F(Mcp, ListsTheWholeWorkflowWithDescriptionsThatSayWhatToPassAndWhatComesBack) {
  const Session s = session({R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})"});
  std::set<std::string> names;
  for (const auto& t : s.by_id.at(1)["result"]["tools"]) {
    names.insert(t["name"]);
    const std::string d = t["description"];
    EXPECT_GT(d.size(), 200u) << t["name"] << " has a one-line description";
    EXPECT_NE(d.find("Returns"), std::string::npos) << t["name"] << ": what comes back";
    EXPECT_NE(d.find("KB"), std::string::npos) << t["name"] << ": how big";
    EXPECT_EQ(t["inputSchema"]["type"], "object");
    EXPECT_EQ(t["inputSchema"]["additionalProperties"], false);
    for (const auto& [key, p] : t["inputSchema"]["properties"].items()) EXPECT_TRUE(p.contains("description")) << t["name"] << "." << key;
  }
  EXPECT_EQ(names, (std::set<std::string>{"query", "hardware", "get", "plan", "baseline", "util", "memory"}));
}

TEST_F(Mcp, QueryIsBriefByDefaultAndSaysWhatItDoesNotCover) {
  const std::string readme = "my bf16 rmsnorm on H200 only reaches 70% of DRAM bandwidth";
  const Session s = session({call(1, "query", {{"text", readme}}), call(2, "query", {{"text", readme}, {"brief", false}}),
                             call(3, "query", {{"text", "3d stencil heat equation kernel"}}),
                             call(4, "query", {{"text", readme}, {"max_bytes", 2000}})});
  const auto [brief, brief_error] = result_of(s.by_id.at(1));
  EXPECT_FALSE(brief_error);
  EXPECT_EQ(brief["form"], "brief");
  EXPECT_EQ(brief["records"].size(), 8u);
  EXPECT_LE(text_size(s.by_id.at(1)), 4500u);
  EXPECT_EQ(brief["hardware"][0]["value"], 4.8);
  const auto [whole, whole_error] = result_of(s.by_id.at(2));
  EXPECT_FALSE(whole.contains("form"));
  EXPECT_GT(text_size(s.by_id.at(2)), 10 * text_size(s.by_id.at(1)));
  const auto [uncovered, uncovered_error] = result_of(s.by_id.at(3));
  EXPECT_FALSE(uncovered_error) << "a request the corpus does not cover is an answer, not a failed call";
  EXPECT_NE(uncovered["notes"].dump().find("not covered"), std::string::npos) << uncovered["notes"];
  EXPECT_LE(text_size(s.by_id.at(4)), 2000u);
}

TEST_F(Mcp, HardwareWithAFieldReturnsThatFact) {
  const Session s = session({call(1, "hardware", {{"product", "MI300X"}, {"field", "memory.bandwidth_tb_s"}}),
                             call(2, "hardware", {{"product", "MI300X"}, {"field", "memory.bandwidth_tb_s"}, {"sources", true}}),
                             call(3, "hardware", {{"product", "RTX 4090"}}), call(4, "hardware", {{"product", "H20"}, {"vs", "H200"}, {"field", "peak_compute.bf16.dense"}})});
  const auto [fact, fact_error] = result_of(s.by_id.at(1));
  EXPECT_FALSE(fact_error);
  ASSERT_EQ(fact["hardware"].size(), 1u) << fact;
  EXPECT_EQ(fact["hardware"][0]["field"], "memory.bandwidth_tb_s");
  EXPECT_EQ(fact["hardware"][0]["value"], 5.3);
  EXPECT_EQ(fact["hardware"][0]["provenance"]["citation"], "amd.cdna3.spec-sheet.mi300x:memory.bandwidth_tb_s");
  EXPECT_FALSE(fact["hardware"][0]["provenance"].contains("sources"));
  EXPECT_LT(text_size(s.by_id.at(1)), 2000u) << "a field is not the whole 16 KB sheet";
  const auto [sourced, sourced_error] = result_of(s.by_id.at(2));
  EXPECT_FALSE(sourced["hardware"][0]["provenance"]["sources"].empty());
  EXPECT_TRUE(result_of(s.by_id.at(3)).second) << "an unrecorded product is a failed call";
  const auto [vs, vs_error] = result_of(s.by_id.at(4));
  ASSERT_EQ(vs["comparison"].size(), 1u);
  EXPECT_NEAR(vs["comparison"][0]["ratio"].get<double>(), 148 / 989.5, 1e-3);
}

TEST_F(Mcp, GetServesEachIdOnceAndNamesTheUnknown) {
  const std::string id = "nvidia.hopper.spec-sheet.h200-sxm";
  const Session s = session({call(1, "get", {{"ids", {id, id, "no.such.record"}}}), call(2, "get", {{"ids", {"no.such.record"}}})});
  const auto [got, got_error] = result_of(s.by_id.at(1));
  EXPECT_FALSE(got_error);
  EXPECT_EQ(got["records"].size(), 1u);
  const std::string notes = got["notes"].dump();
  EXPECT_NE(notes.find("repeated id served once: " + id), std::string::npos) << notes;
  EXPECT_NE(notes.find("unknown id: no.such.record"), std::string::npos) << notes;
  // The payload is the stored bytes.
  const RunResult cli = test::run_kwiki({"get", id, "--index", index(), "--json"});
  EXPECT_EQ(json::parse(cli.out)["records"][id]["payload"], got["records"][id]["payload"]);
  EXPECT_TRUE(result_of(s.by_id.at(2)).second);
}

TEST_F(Mcp, PlanThenCpuBaselineWithProgressThenUtilAndMemory) {
  const std::string ws = (*dir_) / "ws";
  const std::string task = std::string(KWIKI_SOURCE_DIR) + "/data/tasks/rms_norm";
  const Session s = session({call(1, "plan", {{"task", task}, {"gpu", "H200"}, {"workspace", ws}}),
                             call(2, "baseline", {{"workspace", ws}, {"device", "cpu"}, {"commit", false}}, {{"progressToken", "run-1"}}),
                             call(3, "util", {{"gpu", "H200"}, {"time_ms", 0.12}, {"bytes", 536870912}}),
                             call(4, "memory", {{"action", "update"}, {"workspace", ws}, {"version", "v0"}, {"set", {{"performance.latency_us", 125.5}}}}),
                             call(5, "memory", {{"action", "read"}, {"workspace", ws}, {"version", "v0"}}),
                             call(6, "memory", {{"action", "list"}, {"workspace", ws}})});
  // plan: family, confidence, proof result, SOL per shape, cited ids.
  const auto [plan, plan_error] = result_of(s.by_id.at(1));
  ASSERT_FALSE(plan_error) << plan;
  EXPECT_EQ(plan["family"], "rms_norm");
  EXPECT_DOUBLE_EQ(plan["confidence"].get<double>(), 1.0);
  EXPECT_EQ(plan["proof"]["ran"], true);
  EXPECT_NE(plan["proof"]["result"].get<std::string>().find("proven"), std::string::npos);
  ASSERT_FALSE(plan["shapes"].empty());
  for (const auto& shape : plan["shapes"]) {
    EXPECT_GT(shape["sol_us"].get<double>(), 0) << shape;
    EXPECT_GE(shape["attainable_us"].get<double>(), shape["sol_us"].get<double>()) << shape;
  }
  std::string cited;
  for (const auto& c : plan["cited"]) cited += c.get<std::string>() + "\n";
  EXPECT_NE(cited.find("nvidia.hopper.spec-sheet.h200-sxm:memory.bandwidth_tb_s"), std::string::npos) << cited;
  EXPECT_NE(cited.find("nvidia.hopper.cuda.rmsnorm.vectorized-row-per-block"), std::string::npos) << cited;

  // baseline: one notification per stage, in order, before its response; then the summary.
  std::vector<double> progress;
  std::size_t response_at = 0, last_notification_at = 0;
  for (std::size_t i = 0; i < s.all.size(); ++i) {
    if (s.all[i].contains("id") && s.all[i]["id"] == 2) response_at = i;
    if (s.all[i].value("method", "") != "notifications/progress") continue;
    const json& p = s.all[i]["params"];
    EXPECT_EQ(p["progressToken"], "run-1");
    EXPECT_EQ(p["total"], 6);
    EXPECT_FALSE(p["message"].get<std::string>().empty()) << "2025-06-18 progress carries a message";
    progress.push_back(p["progress"].get<double>());
    last_notification_at = i;
  }
  EXPECT_EQ(progress, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_LT(last_notification_at, response_at);
  const auto [base, base_error] = result_of(s.by_id.at(2));
  EXPECT_FALSE(base_error) << base;
  EXPECT_EQ(base["status"], "PASS") << base;
  EXPECT_EQ(base["measured"], false);
  EXPECT_EQ(base["result"]["all_pass"], true) << base["result"];
  EXPECT_EQ(base["result"]["statuses"].size(), plan["shapes"].size());
  EXPECT_LT(text_size(s.by_id.at(2)), 1500u);

  const auto [util, util_error] = result_of(s.by_id.at(3));
  EXPECT_FALSE(util_error);
  EXPECT_NEAR(util["gbps"].get<double>(), 536870912 / 0.12e-3 / 1e9, 1e-6);
  EXPECT_EQ(util["peaks"][0]["citation"], "nvidia.hopper.spec-sheet.h200-sxm:memory.bandwidth_tb_s");

  const auto [updated, updated_error] = result_of(s.by_id.at(4));
  EXPECT_FALSE(updated_error) << updated;
  const auto [read, read_error] = result_of(s.by_id.at(5));
  EXPECT_EQ(read["performance"]["latency_us"], 125.5) << read;
  const auto [list, list_error] = result_of(s.by_id.at(6));
  EXPECT_EQ(list, json::array({"v0"}));
}

TEST_F(Mcp, ProgressOfAnOlderClientHasNoMessage) {
  // 2024-11-05 progress notifications know no "message": the server leaves it out.
  const std::string ws = (*dir_) / "ws-old";
  const std::string task = std::string(KWIKI_SOURCE_DIR) + "/data/tasks/rms_norm";
  const Session s = session({call(1, "plan", {{"task", task}, {"gpu", "H200"}, {"workspace", ws}}),
                             call(2, "baseline", {{"workspace", ws}, {"device", "cpu"}, {"commit", false}}, {{"progressToken", 7}})},
                            "2024-11-05");
  ASSERT_EQ(s.notifications.size(), 6u);
  for (const auto& n : s.notifications) {
    EXPECT_EQ(n["params"]["progressToken"], 7);
    EXPECT_FALSE(n["params"].contains("message")) << n;
  }
  EXPECT_EQ(result_of(s.by_id.at(2)).first["status"], "PASS");
}

TEST_F(Mcp, MalformedCallsGetJsonRpcErrorsAndTheServerGoesOn) {
  const Session s = session({
      call(1, "query", {{"max_records", "many"}, {"text", "x"}}),            // wrong type
      call(2, "query", {{"txt", "rmsnorm"}}),                                 // unknown argument (and text missing)
      call(3, "no_such_tool", json::object()),                                // unknown tool
      call(4, "hardware", json::object()),                                    // required argument missing
      call(5, "memory", {{"action", "explode"}, {"workspace", "/tmp"}}),      // not one of the actions
      R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"query","arguments":[1,2]}})",  // arguments not an object
      call(7, "query", {{"text", "x"}}, {{"progressToken", json::array()}}),  // a progress token of the wrong type
      R"({"jsonrpc":"2.0","id":8,"method":"resources/list"})",                // not a method of this server
      "{not json",                                                            // not JSON
      R"({"jsonrpc":"2.0","id":9,"method":"ping"})",                          // still serving
  });
  for (long long id : {1, 2, 3, 4, 5, 6, 7}) EXPECT_EQ(s.by_id.at(id)["error"]["code"], -32602) << s.by_id.at(id);
  EXPECT_NE(s.by_id.at(1)["error"]["message"].get<std::string>().find("/max_records"), std::string::npos) << s.by_id.at(1);
  EXPECT_NE(s.by_id.at(2)["error"]["message"].get<std::string>().find("query"), std::string::npos) << s.by_id.at(2);
  EXPECT_NE(s.by_id.at(3)["error"]["message"].get<std::string>().find("tools: query, hardware"), std::string::npos) << s.by_id.at(3);
  EXPECT_EQ(s.by_id.at(8)["error"]["code"], -32601);
  ASSERT_EQ(s.unnumbered.size(), 1u);
  EXPECT_EQ(s.unnumbered[0]["error"]["code"], -32700);
  EXPECT_TRUE(s.by_id.at(9).contains("result"));
}

}  // namespace
}  // namespace kwiki
