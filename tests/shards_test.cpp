// Scale-out: the foreign corpus indexed into two shards served by two xapian-tcpsrv processes on
// loopback answers byte-identically to the single local index, and a server that stops is an
// error naming its shard, not a hang.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kwiki/kwiki.h"
#include "tcpsrv_process.hpp"
#include "test_support.hpp"

namespace kwiki {
namespace {

using nlohmann::json;
using test::RunResult;
using test::TempDir;
using test::run_kwiki;

bool tcpsrv_present() { return std::system("command -v xapian-tcpsrv > /dev/null 2>&1") == 0; }

using bench::free_loopback_port;
using TcpServer = bench::TcpServerProcess;

class Shards : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::upstream_wiki().empty()) GTEST_SKIP() << "the foreign corpus (../shared/upstream-gpu-wiki) is not here";
    if (!tcpsrv_present()) GTEST_SKIP() << "xapian-tcpsrv is not installed (Debian package xapian-tools; scripts/dev.sh deps)";
    ASSERT_EQ(run_kwiki({"index", "--wiki", test::upstream_wiki(), "--index", dir_ / "single"}).exit_code, 0);
    const RunResult r = run_kwiki({"index", "--wiki", test::upstream_wiki(), "--index", dir_ / "sharded", "--shards", "2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    shard_dirs_ = json::parse(r.out)["shards"].get<std::vector<std::string>>();
    ASSERT_EQ(shard_dirs_.size(), 2u);
    const RunResult stats = run_kwiki({"stats", "--json", "--index", dir_ / "sharded"});
    ASSERT_EQ(stats.exit_code, 0);
    EXPECT_EQ(json::parse(stats.out)["shards"].get<std::vector<std::string>>(), shard_dirs_);
  }

  // The first 50 requests of the evaluation set.
  static std::vector<std::string> requests() {
    std::ifstream in(std::string(KWIKI_SOURCE_DIR) + "/data/eval/queries.jsonl");
    std::vector<std::string> out;
    std::string line;
    while (out.size() < 50 && std::getline(in, line))
      if (!line.empty()) out.push_back(json::parse(line)["query"].get<std::string>());
    return out;
  }

  TempDir dir_;
  std::vector<std::string> shard_dirs_;
};

TEST_F(Shards, TwoRemoteShardsAnswerByteIdenticallyToTheSingleIndex) {
  TcpServer s0(shard_dirs_[0], free_loopback_port());
  TcpServer s1(shard_dirs_[1], free_loopback_port());
  ASSERT_TRUE(s0.listening() && s1.listening()) << "xapian-tcpsrv did not start";
  // Given in the wrong order on purpose: kwiki orders shards by their own metadata.
  const std::string remote = s1.endpoint() + "," + s0.endpoint();
  const auto texts = requests();
  ASSERT_EQ(texts.size(), 50u);
  int compared = 0;
  for (const auto& text : texts) {
    const RunResult single = run_kwiki({"query", text, "--brief", "--json", "--index", dir_ / "single"});
    const RunResult local = run_kwiki({"query", text, "--brief", "--json", "--index", dir_ / "sharded"});
    const RunResult remote_answer = run_kwiki({"query", text, "--brief", "--json", "--index", dir_ / "sharded", "--remote", remote});
    ASSERT_EQ(remote_answer.exit_code, single.exit_code) << text << "\n" << remote_answer.err;
    EXPECT_EQ(local.out, single.out) << "local shards differ for: " << text;
    EXPECT_EQ(remote_answer.out, single.out) << "remote shards differ for: " << text;
    compared += single.out == remote_answer.out && !single.out.empty();
  }
  EXPECT_EQ(compared, 50);
}

TEST_F(Shards, AMixOfLocalAndRemoteThroughAStubFileAnswersTheSame) {
  TcpServer s0(shard_dirs_[0], free_loopback_port());
  ASSERT_TRUE(s0.listening());
  const std::string stub = dir_ / "mix.stub";
  test::write_text(stub, "remote :" + s0.endpoint() + "\nauto " + shard_dirs_[1] + "\n");
  const std::string text = "fused add rmsnorm bandwidth bound on H200";
  const RunResult single = run_kwiki({"query", text, "--brief", "--json", "--index", dir_ / "single"});
  const RunResult mixed = run_kwiki({"query", text, "--brief", "--json", "--index", dir_ / "sharded", "--remote", stub});
  EXPECT_EQ(mixed.exit_code, single.exit_code) << mixed.err;
  EXPECT_EQ(mixed.out, single.out);
}

TEST_F(Shards, AStoppedServerIsAnErrorNamingItsShardNotAHang) {
  TcpServer s0(shard_dirs_[0], free_loopback_port());
  TcpServer s1(shard_dirs_[1], free_loopback_port());
  ASSERT_TRUE(s0.listening() && s1.listening());
  const std::string remote = s0.endpoint() + "," + s1.endpoint();
  // A long-running client (the MCP server) answers, loses shard 1 mid-run, then says which.
  const std::string session = dir_ / "session.jsonl";
  test::write_text(session,
                   R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})"
                   "\n"
                   R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query","arguments":{"text":"softmax on H100"}}})"
                   "\n");
  const RunResult before = run_kwiki({"mcp", "--index", dir_ / "sharded", "--remote", remote}, {}, "", session);
  EXPECT_EQ(before.exit_code, 0);
  EXPECT_EQ(before.out.find(R"("isError":true)"), std::string::npos) << before.out;

  const std::string fifo = dir_ / "requests";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread client([&] {
    std::ofstream out(fifo);
    out << R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query","arguments":{"text":"softmax on H100"}}})" << "\n" << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    s1.stop();
    out << R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query","arguments":{"text":"gemm tiling on H100"}}})" << "\n" << std::flush;
  });
  const auto started = std::chrono::steady_clock::now();
  const RunResult during = run_kwiki({"mcp", "--index", dir_ / "sharded", "--remote", remote}, {}, "", fifo);
  client.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 20.0) << "a stopped shard must not hang the client";
  const auto lines = during.out;
  const auto second = lines.find(R"("id":2)");
  ASSERT_NE(second, std::string::npos) << during.out << during.err;
  const std::string reply = lines.substr(second);
  EXPECT_NE(reply.find(R"("isError":true)"), std::string::npos) << reply;
  EXPECT_NE(reply.find("shard_unavailable"), std::string::npos) << reply;
  EXPECT_NE(reply.find("shard 1/2 at " + s1.endpoint()), std::string::npos) << reply;

  // A fresh command with the server gone: exit 4 and the same naming, at once.
  const RunResult after = run_kwiki({"query", "softmax on H100", "--json", "--index", dir_ / "sharded", "--remote", remote});
  EXPECT_EQ(after.exit_code, 4);
  EXPECT_NE(after.out.find(s1.endpoint()), std::string::npos) << after.out;
}

// The C API opens shards too; here the two shard folders, given directly (no server).
TEST_F(Shards, TheCApiOpensShardsAndAnswersLikeTheSingleIndex) {
  const std::string request = R"({"text": "online softmax for long rows", "brief": true})";
  auto answer = [&](const std::string& index, const char* shards) {
    kwiki_engine* engine = nullptr;
    char* error = nullptr;
    const int rc = kwiki_open_shards(index.c_str(), shards, &engine, &error);
    EXPECT_EQ(rc, KWIKI_OK) << (error ? error : "");
    kwiki_free(error);
    if (rc != KWIKI_OK) return std::string();
    char* out = nullptr;
    EXPECT_EQ(kwiki_query(engine, request.c_str(), &out), KWIKI_OK);
    std::string text = out ? out : "";
    kwiki_free(out);
    kwiki_close(engine);
    return text;
  };
  const std::string shards = shard_dirs_[1] + "," + shard_dirs_[0];
  const std::string single = answer(dir_ / "single", nullptr);
  ASSERT_FALSE(single.empty());
  EXPECT_EQ(answer(dir_ / "sharded", shards.c_str()), single);
}

TEST_F(Shards, ShardsOfAnotherGenerationOrAMissingShardAreRefused) {
  TcpServer s0(shard_dirs_[0], free_loopback_port());
  ASSERT_TRUE(s0.listening());
  const RunResult missing = run_kwiki({"query", "softmax", "--json", "--index", dir_ / "sharded", "--remote", s0.endpoint()});
  EXPECT_EQ(missing.exit_code, 4);
  EXPECT_NE(missing.out.find("name every shard"), std::string::npos) << missing.out;
  const RunResult foreign = run_kwiki({"query", "softmax", "--json", "--index", dir_ / "single", "--remote", s0.endpoint()});
  EXPECT_EQ(foreign.exit_code, 4);
  EXPECT_NE(foreign.out.find("another index generation"), std::string::npos) << foreign.out;
  const RunResult nonsense = run_kwiki({"query", "softmax", "--json", "--index", dir_ / "sharded", "--remote", "no-such-host-or-file"});
  EXPECT_EQ(nonsense.exit_code, 2);
}

}  // namespace
}  // namespace kwiki
