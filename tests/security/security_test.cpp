// One test per route by which another person's task, path, message or file could make kwiki run
// a command, delete what it did not make, crash, or lose data (issue 17). Each plants a marker
// or a victim and checks that nothing ran, nothing went, and the exit code and message are the
// documented ones.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kwiki/kwiki.h"
#include "test_support.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::RunResult;
using test::run_kwiki;
using test::TempDir;

constexpr const char* kPwned = "pwned";  // the file an injected command would create

// The interpreter the tests give kwiki (the one scripts/dev.sh installs), never PATH's first.
std::map<std::string, std::string> python_env(std::map<std::string, std::string> env = {}) {
  env["KWIKI_PYTHON"] = KWIKI_TEST_PYTHON;
  return env;
}

// Runs kwiki with its working folder set to `dir` (injected relative commands land there).
RunResult run_in(const std::string& dir, std::vector<std::string> args, std::map<std::string, std::string> env = {},
                 const std::string& stdin_path = "/dev/null") {
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  RunResult r = run_kwiki(args, python_env(std::move(env)), "", stdin_path);
  fs::current_path(before);
  return r;
}

// The tests that need the dry run to reach the task's code need torch (scripts/dev.sh installs it).
bool torch_present() {
  return std::system((test::shell_quote(KWIKI_TEST_PYTHON) + " -c 'import torch' > /dev/null 2>&1").c_str()) == 0;
}

// A benchmark task copied from data/tasks/rms_norm, with files overridden by `files`.
std::string make_task(const std::string& dir, const std::map<std::string, std::string>& files = {}) {
  test::copy_tree(std::string(KWIKI_SOURCE_DIR) + "/data/tasks/rms_norm", dir);
  for (const auto& [name, text] : files) test::write_text(dir + "/" + name, text);
  return dir;
}

class Security : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    index_ = new TempDir();
    const RunResult r = run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", index()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete index_;
    index_ = nullptr;
  }
  static std::string index() { return (*index_) / "index"; }
  bool pwned() const { return fs::exists(dir_ / kPwned); }

  TempDir dir_;
  static TempDir* index_;
};
TempDir* Security::index_ = nullptr;

// ---- 1. shell injection ----

TEST_F(Security, ShapeIdCannotRunACommandInTheDryRun) {
  const std::string marker = dir_ / kPwned;
  const json shapes = {{"x'; touch " + marker + "; echo '", {{"init_kwargs", {{"hidden_size", 64}}}, {"input_kwargs", {{"num_tokens", 2}, {"hidden_size", 64}}}}}};
  const std::string task = make_task(dir_ / "task", {{"shapes.json", shapes.dump()}, {"metadata.json", "{}"}, {"roofline.json", "{}"}});
  const RunResult r = run_in(dir_.path(), {"plan", "--task", task, "--gpu", "H200", "--workspace", dir_ / "ws", "--index", index()});
  EXPECT_FALSE(pwned()) << "a shape id ran a command";
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(Security, TaskPathCannotRunACommand) {
  const std::string task = make_task(dir_ / "t'$(touch pwned)'");
  const RunResult r = run_in(dir_.path(), {"plan", "--task", task, "--gpu", "H200", "--workspace", dir_ / "ws", "--index", index()});
  EXPECT_FALSE(pwned()) << "the task path ran a command";
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(Security, WorkspacePathCannotRunACommandThroughGit) {
  const std::string task = make_task(dir_ / "task");
  const std::string ws = dir_ / "ws'$(touch pwned)'";
  const RunResult r = run_in(dir_.path(), {"plan", "--task", task, "--gpu", "H200", "--workspace", ws, "--no-dry-run", "--index", index()});
  EXPECT_FALSE(pwned()) << "the workspace path ran a command";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(ws) / ".git")) << "the workspace is still a git repository";
}

TEST_F(Security, MetadataIdCannotRunACommandOrLeaveTheFolder) {
  // The working folder sits two levels down in our own temporary folder, so "../" from it lands
  // in a folder only this test writes: a listing of it, not a guess at a name, says what escaped.
  const std::string task = make_task(dir_ / "task", {{"metadata.json", R"({"id": "../x'$(touch pwned)'"})"}});
  const fs::path above = dir_ / "above";
  const fs::path cwd = above / "cwd";
  fs::create_directories(cwd);
  const RunResult r = run_in(cwd, {"plan", "--task", task, "--gpu", "H200", "--no-dry-run", "--index", index()});
  EXPECT_FALSE(fs::exists(cwd / kPwned) || pwned()) << "the metadata id ran a command";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto names = [](const fs::path& d) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(names(above), std::vector<std::string>{"cwd"}) << "the workspace left the working folder";
  EXPECT_EQ(names(dir_.path()), (std::vector<std::string>{"above", "task"})) << "the workspace left the working folder";
  // The default workspace is a folder of the working folder, its name made of safe characters.
  const std::vector<std::string> made = names(cwd);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"), std::string::npos) << made[0];
}

TEST_F(Security, McpPlanWorkspaceCannotRunACommand) {
  const std::string task = make_task(dir_ / "task");
  const json call = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
                     {"params", {{"name", "plan"}, {"arguments", {{"task", task}, {"gpu", "H200"}, {"workspace", dir_ / "w'$(touch pwned)'"}}}}}};
  test::write_text(dir_ / "in.jsonl", call.dump() + "\n");
  const RunResult r = run_in(dir_.path(), {"mcp", "--index", index()}, {}, dir_ / "in.jsonl");
  EXPECT_FALSE(pwned()) << "an MCP plan ran a command";
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(json::parse(r.out.substr(0, r.out.find('\n')))["result"]["isError"], false) << r.out;
}

// A plan whose compile target carries a command: refused before any compiler runs.
TEST_F(Security, BaselineRefusesACompileTargetKwikiDidNotWrite) {
  for (const auto& [gpu, target] : std::vector<std::pair<std::string, std::string>>{{"H200", "sm_90a $(touch pwned)"}, {"MI300X", "gfx942 $(touch pwned)"}}) {
    SCOPED_TRACE(gpu);
    const std::string ws = dir_ / ("ws-" + gpu);
    ASSERT_EQ(run_in(dir_.path(), {"plan", "--task", make_task(dir_ / ("task-" + gpu)), "--gpu", gpu, "--workspace", ws, "--no-dry-run", "--index", index()})
                  .exit_code,
              0);
    json plan = json::parse(test::read_text(ws + "/plans/v0_plan.json"));
    plan["target"]["compile_target"] = target;
    test::write_text(ws + "/plans/v0_plan.json", plan.dump(2));
    const RunResult r = run_in(dir_.path(), {"baseline", "--workspace", ws, "--no-commit", "--json"});
    EXPECT_FALSE(pwned()) << "the plan's compile target ran a command";
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("compile_target"), std::string::npos) << r.err;
  }
}

// ---- 2. no predictable temporary file ----

// A link planted where older kwiki wrote its dry-run script (/tmp/kwiki-dry-run-<pid>.py) is
// never written through: the victim file keeps its bytes.
TEST_F(Security, DryRunWritesNoPredictableTemporaryFile) {
  const std::string task = make_task(dir_ / "task");
  const std::string tmp = dir_ / "tmp";
  fs::create_directories(tmp);
  test::write_text(dir_ / "victim", "precious\n");
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char c;
    ::close(go[1]);
    if (::read(go[0], &c, 1) != 1) ::_exit(120);
    ::setenv("TMPDIR", tmp.c_str(), 1);
    ::setenv("KWIKI_PYTHON", KWIKI_TEST_PYTHON, 1);
    const std::string bin = test::kwiki_binary(), out = dir_ / "ws", idx = index();
    ::execl(bin.c_str(), bin.c_str(), "plan", "--task", task.c_str(), "--gpu", "H200", "--workspace", out.c_str(), "--index", idx.c_str(),
            "--json", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(go[0]);
  fs::create_symlink(dir_ / "victim", fs::path(tmp) / ("kwiki-dry-run-" + std::to_string(pid) + ".py"));
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ::close(go[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(test::read_text(dir_ / "victim"), "precious\n") << "kwiki wrote through a planted link";
}

// ---- 3. an index kwiki cannot read is reported, never rebuilt or deleted ----

class DamagedIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    const RunResult r = run_kwiki({"index", "--wiki", test::mini_wiki(), "--index", idx()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string idx() const { return dir_ / "index"; }
  std::string generation() const { return idx() + "/gen-000001"; }
  TempDir dir_;
};

TEST_F(DamagedIndex, GarbledOrEmptyCurrentIsExit4AndNothingIsDeleted) {
  for (const std::string text : {"garbage\n", "", "gen-0000\n", "../../etc\n"}) {
    SCOPED_TRACE(text);
    test::write_text(idx() + "/CURRENT", text);
    const RunResult r = run_kwiki({"query", "rmsnorm", "--index", idx()}, {{"KWIKI_BUNDLED_WIKI", test::bundled_wiki()}});
    EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
    EXPECT_EQ(json::parse(r.out)["error"]["code"], "index_corrupt") << r.out;
    EXPECT_NE(r.err.find("kwiki index --force"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(generation() + "/store.sqlite")) << "the unreadable index's generation was deleted";
    EXPECT_EQ(test::read_text(idx() + "/CURRENT"), text) << "CURRENT was rewritten";
  }
}

TEST_F(DamagedIndex, DamagedFullTextIsExit4NotACrash) {
  {
    std::fstream f(generation() + "/xapian/postlist.glass", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);
    const std::string junk(4000, '\xde');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const RunResult r = run_kwiki({"query", "rmsnorm vector loads", "--index", idx()});
  EXPECT_EQ(r.exit_code, 4) << "exit " << r.exit_code << ": " << r.err;
  EXPECT_EQ(json::parse(r.out)["error"]["code"], "index_corrupt") << r.out;
  EXPECT_NE(r.err.find("postlist.glass"), std::string::npos) << r.err;
  const RunResult stats = run_kwiki({"stats", "--index", idx(), "--json"});
  EXPECT_EQ(stats.exit_code, 4) << stats.out << stats.err;
}

TEST_F(DamagedIndex, DamagedStorePageIsExit4NotGarbage) {
  const std::string store = generation() + "/store.sqlite";
  std::string bytes = test::read_text(store);
  const auto at = bytes.find("\"sources\"");
  ASSERT_NE(at, std::string::npos);
  for (std::size_t i = at; i < at + 24; ++i) bytes[i] = '#';
  test::write_text(store, bytes);
  const RunResult stats = run_kwiki({"stats", "--index", idx(), "--json"});
  EXPECT_EQ(stats.exit_code, 4) << stats.out << stats.err;
  EXPECT_EQ(json::parse(stats.out)["integrity"]["ok"], false);
  // Every record by id: the damaged one is exit 4, the others are served; all of it valid JSON.
  int damaged = 0, served = 0;
  for (const std::string id : {"nvidia.hopper.spec-sheet.fixture-gpu", "nvidia.hopper.cuda.rmsnorm.fixture-vector-loads",
                               "generic.generic.any.measurement.fixture-doc"}) {
    const RunResult r = run_kwiki({"get", id, "--index", idx(), "--json"});
    ASSERT_FALSE(json::parse(r.out, nullptr, false).is_discarded()) << "kwiki get printed invalid JSON for " << id << ": " << r.out.substr(0, 200);
    damaged += r.exit_code == 4;
    served += r.exit_code == 0;
  }
  EXPECT_EQ(damaged, 1);
  EXPECT_EQ(served, 2);
}

// ---- 4. --force replaces only a workspace kwiki made ----

TEST_F(Security, ForceNeverReplacesAFolderKwikiDidNotMake) {
  const std::string task = make_task(dir_ / "task");
  const std::string victim = dir_ / "victim";
  test::write_text(victim + "/precious.txt", "mine\n");
  const RunResult r = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", victim, "--force", "--no-dry-run", "--index", index()}, python_env());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(".kwiki-workspace"), std::string::npos) << r.err;
  EXPECT_EQ(test::read_text(victim + "/precious.txt"), "mine\n");
  // The same through MCP.
  const json call = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
                     {"params", {{"name", "plan"}, {"arguments", {{"task", task}, {"gpu", "H200"}, {"workspace", victim}, {"force", true}}}}}};
  test::write_text(dir_ / "in.jsonl", call.dump() + "\n");
  run_kwiki({"mcp", "--index", index()}, python_env(), "", dir_ / "in.jsonl");
  EXPECT_EQ(test::read_text(victim + "/precious.txt"), "mine\n");
  // A workspace kwiki made is replaced.
  const std::string ws = dir_ / "ws";
  ASSERT_EQ(run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", ws, "--no-dry-run", "--index", index()}, python_env()).exit_code, 0);
  test::write_text(ws + "/scratch.txt", "old\n");
  const RunResult again = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", ws, "--force", "--no-dry-run", "--index", index()}, python_env());
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_FALSE(fs::exists(ws + "/scratch.txt"));
  EXPECT_TRUE(fs::exists(ws + "/.kwiki-workspace"));
}

// ---- 5. MCP: malformed, oversized, new generations ----

std::vector<json> replies(const std::string& out) {
  std::vector<json> all;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) all.push_back(json::parse(line));
  return all;
}

TEST_F(Security, McpMalformedMessagesGetErrorsAndTheServerGoesOn) {
  const std::string input = std::string(R"({"jsonrpc":2,"id":1,"method":"ping"})") + "\n" + R"({"jsonrpc":null,"id":2,"method":"ping"})" + "\n" +
                            R"({"id":3,"method":"ping"})" + "\n" + R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})" + "\n" + "[1,2]\n" +
                            std::string(200, '[') + "\n" + R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"query","arguments":{"text":"x","brief":"yes"}}})" +
                            "\n" + R"({"jsonrpc":"2.0","id":5,"method":"ping"})" + "\n";
  test::write_text(dir_ / "in.jsonl", input);
  const RunResult r = run_kwiki({"mcp", "--index", index()}, {}, "", dir_ / "in.jsonl");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> all = replies(r.out);
  ASSERT_EQ(all.size(), 8u) << r.out;
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(all[i]["error"]["code"], -32600) << all[i];  // invalid request (the deep one: too deep)
  EXPECT_EQ(all[6]["error"]["code"], -32602) << all[6];
  EXPECT_EQ(all[7]["id"], 5);
  EXPECT_TRUE(all[7].contains("result"));
}

TEST_F(Security, McpOversizedMessageIsRefusedWithoutHoldingIt) {
  {
    std::ofstream in(dir_ / "in.jsonl", std::ios::binary);
    in << R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":")" << std::string(64u << 20, 'a') << "\"}}\n";
    in << R"({"jsonrpc":"2.0","id":2,"method":"ping"})" << "\n";
  }
  // kwiki mcp alone (fork, exec, wait4), for its own peak memory.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  const std::string bin = test::kwiki_binary(), idx = index(), in = dir_ / "in.jsonl", out = dir_ / "out.jsonl";
  if (pid == 0) {
    std::freopen(in.c_str(), "r", stdin);
    std::freopen(out.c_str(), "w", stdout);
    ::execl(bin.c_str(), bin.c_str(), "mcp", "--index", idx.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::vector<json> all = replies(test::read_text(out));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["error"]["code"], -32600);
  EXPECT_NE(all[0]["error"]["message"].get<std::string>().find("limit"), std::string::npos);
  EXPECT_EQ(all[1]["id"], 2);
  EXPECT_LT(usage.ru_maxrss, 48L << 10) << "kwiki mcp held the 64 MiB line (max RSS " << usage.ru_maxrss << " KiB)";
}

// kwiki mcp as a client drives it: a request, a reindex that deletes the old generation, a request.
TEST_F(Security, McpServesTheNewGenerationAfterReindexing) {
  const std::string idx = dir_ / "index";
  ASSERT_EQ(run_kwiki({"index", "--wiki", test::mini_wiki(), "--index", idx}).exit_code, 0);
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    ::close(to_child[1]);
    ::close(from_child[0]);
    const std::string bin = test::kwiki_binary();
    ::execl(bin.c_str(), bin.c_str(), "mcp", "--index", idx.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  FILE* in = ::fdopen(from_child[0], "r");
  auto ask = [&](int id) {
    const std::string m = json({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
                                {"params", {{"name", "get"}, {"arguments", {{"ids", {"nvidia.hopper.spec-sheet.h200-sxm"}}}}}}})
                              .dump() + "\n";
    EXPECT_EQ(::write(to_child[1], m.data(), m.size()), static_cast<ssize_t>(m.size()));
    char* line = nullptr;
    std::size_t cap = 0;
    const ssize_t n = ::getline(&line, &cap, in);
    const std::string reply = n > 0 ? std::string(line, static_cast<std::size_t>(n)) : std::string();
    std::free(line);
    return json::parse(reply, nullptr, false);
  };
  const json first = ask(1);
  EXPECT_EQ(first["result"]["isError"], true) << first;  // the mini corpus has no H200 sheet
  // Two rebuilds from the bundled corpus: the generation the server opened is deleted.
  for (int i = 0; i < 2; ++i) ASSERT_EQ(run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", idx, "--force"}).exit_code, 0);
  ASSERT_FALSE(fs::exists(idx + "/gen-000001"));
  const json second = ask(2);
  EXPECT_EQ(second["result"]["isError"], false) << second;
  ::close(to_child[1]);
  std::fclose(in);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// ---- 6. the dry run's deadline holds ----

TEST_F(Security, DetachedChildOfTheReferenceDoesNotHoldThePlan) {
  if (!torch_present()) GTEST_SKIP() << KWIKI_TEST_PYTHON << " has no torch, so the dry run never reaches the task's code";
  const std::string reference = test::read_text(std::string(KWIKI_SOURCE_DIR) + "/data/tasks/rms_norm/reference.py");
  const std::string started = dir_ / "started";
  const std::string task = make_task(dir_ / "task", {{"reference.py", "import subprocess\nsubprocess.Popen(['sleep', '40'], start_new_session=True)\nopen(" +
                                                                          json(started).dump() + ", 'w').write('yes')\n" + reference}});
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", dir_ / "ws", "--index", index()}, python_env());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(fs::exists(started)) << "the reference did not run: " << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(seconds, 20.0) << "kwiki plan waited for a detached child of reference.py";
}

// A process that exists and is not a zombie (a killed orphan may wait a moment to be reaped).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

TEST_F(Security, HangingReferenceIsKilledAsAGroupAtTheDeadline) {
  if (!torch_present()) GTEST_SKIP() << KWIKI_TEST_PYTHON << " has no torch, so the dry run never reaches the task's code";
  const std::string pids = dir_ / "pids";
  const std::string reference = test::read_text(std::string(KWIKI_SOURCE_DIR) + "/data/tasks/rms_norm/reference.py");
  const std::string task = make_task(dir_ / "task", {{"reference.py", "import os, subprocess\nchild = subprocess.Popen(['sleep', '300'])\nopen(" + json(pids).dump() +
                                                                          ", 'w').write('%d %d' % (os.getpid(), child.pid))\nwhile True:\n    pass\n" + reference}});
  const auto start = std::chrono::steady_clock::now();
  // 10 s: the deadline covers torch's import too, which takes seconds on a loaded 2-core machine.
  const RunResult r = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", dir_ / "ws", "--dry-run-timeout", "10", "--index", index(), "--json"},
                                python_env());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(seconds, 30.0);
  EXPECT_NE(r.out.find("did not finish within 10 s"), std::string::npos) << r.out;
  std::istringstream ids(test::read_text(pids));
  pid_t python = 0, sleeper = 0;
  ASSERT_TRUE(ids >> python >> sleeper) << "the reference did not run";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(running(python)) << "the reference still runs";
  EXPECT_FALSE(running(sleeper)) << "the reference's child still runs";
}

TEST_F(Security, DryRunSeesAScrubbedEnvironment) {
  if (!torch_present()) GTEST_SKIP() << KWIKI_TEST_PYTHON << " has no torch, so the dry run never reaches the task's code";
  const std::string seen = dir_ / "env.json";
  const std::string reference = test::read_text(std::string(KWIKI_SOURCE_DIR) + "/data/tasks/rms_norm/reference.py");
  const std::string task =
      make_task(dir_ / "task", {{"reference.py", "import json, os\njson.dump(dict(os.environ), open(" + json(seen).dump() + ", 'w'))\n" + reference}});
  std::map<std::string, std::string> env_in = python_env();
  env_in["AWS_SECRET_ACCESS_KEY"] = env_in["GITHUB_TOKEN"] = "do-not-leak";
  const RunResult r = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", dir_ / "ws", "--index", index()}, env_in);
  ASSERT_TRUE(fs::exists(seen)) << "the reference did not run: " << r.out << r.err;
  const json env = json::parse(test::read_text(seen));
  EXPECT_FALSE(env.contains("AWS_SECRET_ACCESS_KEY"));
  EXPECT_FALSE(env.contains("GITHUB_TOKEN"));
  EXPECT_TRUE(env.contains("PATH"));
}

// ---- 8. C API: pointers and types ----

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    char* error = nullptr;
    ASSERT_EQ(kwiki_open(Security_index().c_str(), &engine_, &error), KWIKI_OK) << (error ? error : "");
    kwiki_free(error);
  }
  void TearDown() override { kwiki_close(engine_); }
  static std::string Security_index() {
    static TempDir dir;
    static const bool built = run_kwiki({"index", "--wiki", test::mini_wiki(), "--index", dir / "index"}).exit_code == 0;
    EXPECT_TRUE(built);
    return dir / "index";
  }
  kwiki_engine* engine_ = nullptr;
};

TEST_F(CApi, NullOutOnASuccessfulCallReturnsTheStatus) {
  EXPECT_EQ(kwiki_query(engine_, R"({"text":"rmsnorm vector loads on the fixture gpu"})", nullptr), KWIKI_OK);
  EXPECT_EQ(kwiki_get(engine_, R"({"ids":["nvidia.hopper.spec-sheet.fixture-gpu"]})", nullptr), KWIKI_OK);
  EXPECT_EQ(kwiki_hardware(engine_, R"({"product":"fixture-gpu"})", nullptr), KWIKI_OK);
}

TEST_F(CApi, WrongTypesAndRangesAreStatus2WithTheMember) {
  const std::vector<std::pair<int (*)(kwiki_engine*, const char*, char**), std::string>> calls = {
      {kwiki_query, R"({"text":"x","max_records":"many"})"}, {kwiki_query, R"({"text":"x","max_bytes":-1})"},
      {kwiki_query, R"({"text":5})"},                        {kwiki_query, R"({"text":"x","brief":"yes"})"},
      {kwiki_get, R"({"ids":[1,2]})"},                       {kwiki_get, R"({"ids":"nvidia"})"},
      {kwiki_hardware, R"({"product":7})"},                  {kwiki_util, R"({"gpu":"fixture-gpu","time_ms":-1,"bytes":10})"},
      {kwiki_util, R"({"gpu":"fixture-gpu","time_ms":1,"bytes":"lots"})"}, {kwiki_plan, R"({"task":["a"],"gpu":"fixture-gpu"})"},
      {kwiki_query, std::string(5000, '[') + std::string(5000, ']')},
  };
  for (const auto& [call, request] : calls) {
    SCOPED_TRACE(request.substr(0, 80));
    char* out = nullptr;
    EXPECT_EQ(call(engine_, request.c_str(), &out), KWIKI_BAD_INPUT) << (out ? out : "");
    ASSERT_NE(out, nullptr);
    EXPECT_FALSE(json::parse(out, nullptr, false).is_discarded());
    kwiki_free(out);
  }
  char* out = nullptr;
  EXPECT_EQ(kwiki_query(nullptr, R"({"text":"x"})", &out), KWIKI_BAD_INPUT);
  kwiki_free(out);
  EXPECT_EQ(kwiki_query(engine_, nullptr, nullptr), KWIKI_BAD_INPUT);
}

// ---- 9. memory: concurrent updates, killed writes, deep values ----

class Memory : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = dir_ / "ws";
    ASSERT_EQ(run_kwiki({"memory", "init", "--workspace", ws_}).exit_code, 0);
    ASSERT_EQ(run_kwiki({"memory", "create", "--workspace", ws_, "--version", "v0"}).exit_code, 0);
  }
  TempDir dir_;
  std::string ws_;
};

// Each process adds its own keys, one per update: a lost update loses a key for good.
TEST_F(Memory, ConcurrentUpdatesLoseNothing) {
  constexpr int kRounds = 25;
  auto writer = [&](const std::string& object, const std::string& prefix) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (int i = 1; i <= kRounds; ++i)
        if (run_kwiki({"memory", "update", "--workspace", ws_, "--version", "v0", "--set", object + "." + prefix + std::to_string(i) + "=" + std::to_string(i)})
                .exit_code != 0)
          ::_exit(1);
      ::_exit(0);
    }
    return pid;
  };
  const pid_t a = writer("performance.latency_us_by_shape", "a");
  const pid_t b = writer("performance.reference_latency_us_by_shape", "b");
  for (pid_t p : {a, b}) {
    int status = 0;
    ::waitpid(p, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const json record = json::parse(test::read_text(ws_ + "/memory/v0.json"));
  EXPECT_EQ(record["performance"]["latency_us_by_shape"].size(), static_cast<std::size_t>(kRounds)) << "updates were lost: " << record["performance"];
  EXPECT_EQ(record["performance"]["reference_latency_us_by_shape"].size(), static_cast<std::size_t>(kRounds)) << "updates were lost";
}

TEST_F(Memory, TemporariesOfAKilledWriteAreRemovedAndNeverCommitted) {
  const std::string legacy = ws_ + "/memory/v0.json.tmp-999999";  // kwiki before 0.2, its process gone
  const std::string current = ws_ + "/memory/.v0.json.kwiki-tmp-AbC123";
  test::write_text(legacy, "{half");
  test::write_text(current, "{half");
  const auto old_time = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(current, old_time);
  ASSERT_EQ(run_kwiki({"memory", "update", "--workspace", ws_, "--version", "v0", "--set", "device=\"x\""}).exit_code, 0);
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_FALSE(fs::exists(current));
}

TEST_F(Memory, DeeplyNestedSetValueIsAUsageErrorNotACrash) {
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  const RunResult r = run_kwiki({"memory", "update", "--workspace", ws_, "--version", "v0", "--set", "pitfalls_and_fixes=" + deep});
  EXPECT_EQ(r.exit_code, 2) << r.err.substr(0, 300);
  EXPECT_NE(r.err.find("deeper than"), std::string::npos) << r.err.substr(0, 300);
}

// ---- 10. numbers ----

TEST_F(Security, NegativeZeroAndInfiniteNumbersAreRefused) {
  const std::string idx = dir_ / "index";
  const std::vector<std::vector<std::string>> cases = {
      {"query", "rmsnorm", "--max-bytes", "-1", "--index", index()},
      {"query", "rmsnorm", "--max-records", "-1", "--index", index()},
      {"query", "rmsnorm", "--max-records", "0", "--index", index()},
      {"baseline", "--workspace", dir_ / "none", "--timeout", "-1"},
      {"index", "--wiki", test::mini_wiki(), "--index", idx, "--shards", "-1"},
      {"index", "--wiki", test::mini_wiki(), "--index", idx, "--shards", "100000"},
      {"util", "--gpu", "H200", "--time-ms", "inf", "--bytes", "10", "--index", index()},
      {"util", "--gpu", "H200", "--time-ms", "1", "--bytes", "-5", "--index", index()},
      {"plan", "--task", dir_ / "none", "--gpu", "H200", "--dry-run-timeout", "0", "--index", index()},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args[0] + " " + args[args.size() > 4 ? 3 : 1]);
    const RunResult r = run_kwiki(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(json::parse(r.out, nullptr, false)["error"]["code"], "usage") << r.out;
  }
  EXPECT_FALSE(fs::exists(idx)) << "a refused --shards left an index folder behind";
}

}  // namespace
}  // namespace kwiki
