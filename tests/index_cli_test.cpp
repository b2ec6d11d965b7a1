// End-to-end tests of `kwiki index`, `kwiki get` and `kwiki stats`: bad input, atomic switches.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "corpus_generator.hpp"
#include "test_support.hpp"

namespace kwiki::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kCardId = "nvidia.hopper.cuda.rmsnorm.fixture-vector-loads";
const char* kCardRel = "kernel_wiki/records/technique-card/nvidia/hopper/cuda/nvidia.hopper.cuda.rmsnorm.fixture-vector-loads.json";
const char* kSheetRel = "hardware_wiki/records/spec-sheet/nvidia/hopper/fixture-gpu.json";

// A fixture corpus copy and an index already built from it.
class IndexedCorpus : public ::testing::Test {
 protected:
  void SetUp() override {
    copy_tree(mini_wiki(), wiki());
    const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    generation_ = current();
  }
  std::string wiki() const { return dir_ / "wiki"; }
  std::string index() const { return dir_ / "index"; }
  std::string current() const { return read_text(index() + "/CURRENT"); }

  // The previous generation still answers, unchanged.
  void expect_old_index_serving() {
    EXPECT_EQ(current(), generation_);
    const RunResult r = run_kwiki({"get", kCardId, "--index", index()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(kCardId), std::string::npos);
  }

  // Re-indexing refuses with exit 2, names `file` on stderr and in the JSON error.
  void expect_refused(const std::string& file, const std::string& code) {
    const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index()});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["error"]["code"], code) << r.out;
    EXPECT_NE(j["error"]["file"].get<std::string>().find(file), std::string::npos);
    expect_old_index_serving();
  }

  TempDir dir_;
  std::string generation_;
};

TEST_F(IndexedCorpus, GetServesPayloadByteIdentical) {
  const RunResult r = run_kwiki({"get", kCardId, "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string file = read_text(wiki() + "/" + kCardRel);
  const std::string payload = json::parse(file)["payload"].dump();
  // The raw payload text of the file appears verbatim in the answer.
  const std::size_t start = file.find("\"payload\": ") + 11;
  const std::size_t end = file.find("\n },\n \"evidence\"") + 2;
  EXPECT_NE(r.out.find(file.substr(start, end - start)), std::string::npos);
  const json answer = json::parse(r.out);
  EXPECT_EQ(answer["records"][kCardId]["payload"].dump(), payload);
  EXPECT_EQ(answer["records"][kCardId]["store"], "gpu_wiki");
  EXPECT_EQ(answer["records"][kCardId]["source"], "kernel_wiki");
  EXPECT_EQ(answer["records"][kCardId]["applies_to"]["arch"], "hopper");
}

TEST_F(IndexedCorpus, GetUnknownIdExitsOneWithANote) {
  const RunResult r = run_kwiki({"get", "no.such.record", "--index", index()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json::parse(r.out)["notes"][0], "unknown id: no.such.record");
}

TEST_F(IndexedCorpus, GetManyKeepsRequestOrder) {
  const RunResult r = run_kwiki({"get", "nvidia.hopper.spec-sheet.fixture-gpu", kCardId, "--index", index()});
  ASSERT_EQ(r.exit_code, 0);
  const std::size_t a = r.out.find("\"nvidia.hopper.spec-sheet.fixture-gpu\":");
  const std::size_t b = r.out.find(std::string("\"") + kCardId + "\":");
  EXPECT_LT(a, b);
}

TEST_F(IndexedCorpus, StatsCountsByTypeVendorArch) {
  const RunResult r = run_kwiki({"stats", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["records"], 3);
  EXPECT_EQ(j["by_type"]["spec-sheet"], 1);
  EXPECT_EQ(j["by_type"]["technique-card"], 1);
  EXPECT_EQ(j["by_vendor"]["nvidia"], 2);
  EXPECT_EQ(j["by_arch"]["hopper"], 2);
  EXPECT_EQ(j["roots"][0]["records"], 3);
  EXPECT_EQ(j["generation"], generation_.substr(0, generation_.size() - 1));
}

TEST_F(IndexedCorpus, UnchangedCorpusIsNotRebuilt) {
  const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["unchanged"], true);
  EXPECT_EQ(current(), generation_);
}

TEST_F(IndexedCorpus, ChangedCorpusBuildsANewGeneration) {
  auto doc = json::parse(read_text(wiki() + "/" + kCardRel));
  doc["payload"]["goal"] = "Changed goal.";
  write_text(wiki() + "/" + kCardRel, doc.dump(1));
  const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(current(), generation_);
  EXPECT_NE(run_kwiki({"get", kCardId, "--index", index()}).out.find("Changed goal."), std::string::npos);
}

TEST_F(IndexedCorpus, CheckWritesNothing) {
  write_text(wiki() + "/kernel_wiki/records/new.json", read_text(wiki() + "/" + kCardRel));
  const RunResult r = run_kwiki({"index", "--check", "--wiki", wiki(), "--index", index()});
  EXPECT_EQ(r.exit_code, 2);  // the copy duplicates an id
  fs::remove(wiki() + "/kernel_wiki/records/new.json");
  const RunResult ok = run_kwiki({"index", "--check", "--wiki", wiki(), "--index", dir_ / "never-created"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_FALSE(fs::exists(dir_ / "never-created"));
}

TEST_F(IndexedCorpus, MalformedJsonIsRefused) {
  std::string text = read_text(wiki() + "/" + kCardRel);
  text.replace(text.find("\"level\""), 7, "level");
  write_text(wiki() + "/" + kCardRel, text);
  expect_refused("fixture-vector-loads.json", "invalid_json");
}

TEST_F(IndexedCorpus, TruncatedJsonIsRefused) {
  write_text(wiki() + "/" + kCardRel, read_text(wiki() + "/" + kCardRel).substr(0, 200));
  expect_refused("fixture-vector-loads.json", "invalid_json");
}

TEST_F(IndexedCorpus, DuplicateIdsAreRefused) {
  write_text(wiki() + "/kernel_wiki/records/zz-copy.json", read_text(wiki() + "/" + kCardRel));
  expect_refused("zz-copy.json", "duplicate_id");
}

TEST_F(IndexedCorpus, SchemaViolationIsRefusedWithPointer) {
  auto doc = json::parse(read_text(wiki() + "/" + kSheetRel));
  doc["facts"].erase("memory");
  write_text(wiki() + "/" + kSheetRel, doc.dump(1));
  expect_refused("fixture-gpu.json", "schema_violation");
  const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index()});
  EXPECT_EQ(json::parse(r.out)["error"]["pointer"], "/facts");
}

TEST_F(IndexedCorpus, DanglingLinkIsAWarningAndStrictRefusesIt) {
  auto doc = json::parse(read_text(wiki() + "/" + kCardRel));
  doc["retrieval"]["links"] = {{"see_also", {"generic.generic.any.nothing.no-such-card"}}};
  write_text(wiki() + "/" + kCardRel, doc.dump(1));
  const RunResult lenient = run_kwiki({"index", "--check", "--wiki", wiki(), "--warnings"});
  EXPECT_EQ(lenient.exit_code, 0) << lenient.err;
  EXPECT_NE(lenient.err.find("links to \"generic.generic.any.nothing.no-such-card\""), std::string::npos) << lenient.err;
  const RunResult strict = run_kwiki({"index", "--check", "--strict", "--wiki", wiki()});
  EXPECT_NE(strict.exit_code, 0) << strict.out;
}

TEST_F(IndexedCorpus, HardwareRecordTriggersAndLinksAreIndexed) {
  auto doc = json::parse(read_text(wiki() + "/" + kSheetRel));
  doc["retrieval"] = {{"triggers", {"deciding how many quokka blocks fit per multiprocessor"}}, {"see_also", {kCardId}}};
  write_text(wiki() + "/" + kSheetRel, doc.dump(1));
  const RunResult r = run_kwiki({"index", "--strict", "--wiki", wiki(), "--index", index()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  doc["retrieval"]["see_also"] = {"nvidia.hopper.cuda.rmsnorm.no-such-card"};
  write_text(wiki() + "/" + kSheetRel, doc.dump(1));
  EXPECT_NE(run_kwiki({"index", "--check", "--strict", "--wiki", wiki()}).exit_code, 0);
}

TEST_F(IndexedCorpus, UnknownEnumValueIsRefused) {
  auto doc = json::parse(read_text(wiki() + "/" + kCardRel));
  doc["retrieval"]["scope"]["arch"] = "volta";
  write_text(wiki() + "/" + kCardRel, doc.dump(1));
  expect_refused("fixture-vector-loads.json", "schema_violation");
  const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index()});
  EXPECT_EQ(json::parse(r.out)["error"]["pointer"], "/retrieval/scope/arch");
}

TEST_F(IndexedCorpus, NonUtf8TextIsRefused) {
  std::string text = read_text(wiki() + "/" + kCardRel);
  text.insert(text.find("Fixture card"), "caf\xE9 ");
  write_text(wiki() + "/" + kCardRel, text);
  expect_refused("fixture-vector-loads.json", "invalid_utf8");
}

TEST_F(IndexedCorpus, EmptyFileIsRefused) {
  write_text(wiki() + "/kernel_wiki/records/empty.json", "");
  expect_refused("empty.json", "empty_file");
}

TEST_F(IndexedCorpus, FiftyMegabyteRecordIsRefused) {
  std::string big = "{\"schema\": \"clean-1.3\", \"blob\": \"" + std::string(50u << 20, 'x') + "\"}";
  write_text(wiki() + "/kernel_wiki/records/huge.json", big);
  expect_refused("huge.json", "too_large");
}

TEST_F(IndexedCorpus, SymlinkLoopIsRefused) {
  fs::create_directory_symlink("..", wiki() + "/kernel_wiki/records/technique-card/loop");
  expect_refused("loop", "symlink_loop");
}

TEST_F(IndexedCorpus, SelfReferentialSymlinkIsRefused) {
  fs::create_symlink("self.json", wiki() + "/kernel_wiki/records/self.json");
  expect_refused("self.json", "symlink_loop");
}

TEST_F(IndexedCorpus, UnreadableFolderIsRefused) {
  // root reads everything, so as root the indexer runs as nobody (setpriv, util-linux).
  std::string prefix;
  if (::geteuid() == 0) {
    if (std::system("command -v setpriv > /dev/null 2>&1") != 0) GTEST_SKIP() << "running as root without setpriv";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    for (auto it = fs::recursive_directory_iterator(dir_.path()); it != fs::recursive_directory_iterator(); ++it)
      fs::permissions(it->path(), fs::perms::all, fs::perm_options::add);
    fs::permissions(dir_.path(), fs::perms::all, fs::perm_options::add);
  }
  const std::string locked = wiki() + "/kernel_wiki/records/doc";
  fs::permissions(locked, fs::perms::none, fs::perm_options::replace);
  const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index()}, {}, prefix);
  fs::permissions(locked, fs::perms::owner_all, fs::perm_options::replace);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("records/doc"), std::string::npos) << r.err;
  EXPECT_EQ(json::parse(r.out)["error"]["code"], "unreadable");
  expect_old_index_serving();
}

TEST_F(IndexedCorpus, NotACorpusRootIsRefused) {
  const RunResult r = run_kwiki({"index", "--wiki", dir_ / "index", "--index", index()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(json::parse(r.out)["error"]["code"], "not_a_corpus");
  expect_old_index_serving();
}

TEST_F(IndexedCorpus, InjectedFailureBeforeSwitchKeepsOldGeneration) {
  auto doc = json::parse(read_text(wiki() + "/" + kCardRel));
  doc["payload"]["goal"] = "Never served.";
  write_text(wiki() + "/" + kCardRel, doc.dump(1));
  const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--index", index()}, {{"KWIKI_TEST_FAIL_BEFORE_SWITCH", "1"}});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  expect_old_index_serving();
  EXPECT_EQ(run_kwiki({"get", kCardId, "--index", index()}).out.find("Never served."), std::string::npos);
  for (const auto& entry : fs::directory_iterator(index()))
    EXPECT_EQ(entry.path().string().find(".staging"), std::string::npos) << "staging left behind";
}

TEST_F(IndexedCorpus, InternalStoreIdsAreNamespaced) {
  const RunResult r = run_kwiki({"index", "--wiki", wiki(), "--internal", mini_wiki(), "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["by_store"]["internal_gpu_wiki"], 3);
  const RunResult g = run_kwiki({"get", std::string("internal_gpu_wiki::") + kCardId, kCardId, "--index", index()});
  ASSERT_EQ(g.exit_code, 0);
  const json j = json::parse(g.out);
  EXPECT_EQ(j["records"].size(), 2u);
  EXPECT_EQ(j["records"][std::string("internal_gpu_wiki::") + kCardId]["wiki_id"], kCardId);
  EXPECT_EQ(j["records"][std::string("internal_gpu_wiki::") + kCardId]["store"], "internal_gpu_wiki");
}

TEST_F(IndexedCorpus, IndexEnvironmentVariableIsHonoured) {
  const RunResult r = run_kwiki({"get", kCardId}, {{"KWIKI_INDEX", index()}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(IndexCli, FirstUseBuildsFromBundledWikiAndSaysSo) {
  TempDir dir;
  const RunResult r = run_kwiki({"get", kCardId, "--index", dir / "fresh"}, {{"KWIKI_BUNDLED_WIKI", mini_wiki()}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("building it from the bundled gpu-wiki"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "fresh/CURRENT"));
}

TEST(IndexCli, UsageErrorIsJsonAndExitTwo) {
  const RunResult r = run_kwiki({"index", "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(json::parse(r.out)["error"]["code"], "usage");
}

TEST(IndexCli, HelpExitsZero) {
  const RunResult r = run_kwiki({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
}

TEST(IndexCli, CorruptIndexExitsFour) {
  TempDir dir;
  write_text(dir / "index/CURRENT", "gen-000001\n");
  fs::create_directories(dir / "index/gen-000001");
  write_text(dir / "index/gen-000001/store.sqlite", "not a database");
  const RunResult r = run_kwiki({"stats", "--index", dir / "index"});
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_EQ(json::parse(r.out)["error"]["code"], "index_corrupt");
}

// A corpus big enough that indexing takes a while: the fixture plus generated records.
std::string make_big_corpus(const TempDir& dir, std::size_t records) {
  const std::string wiki = dir / "big";
  copy_tree(mini_wiki(), wiki);
  kwiki::bench::generate_corpus(dir / "generated", records);
  fs::rename(dir / "generated/kernel_wiki/records/technique-card", wiki + "/kernel_wiki/records/generated");
  fs::rename(dir / "generated/hardware_wiki/records/spec-sheet/nvidia/hopper", wiki + "/hardware_wiki/records/generated");
  return wiki;
}

TEST_F(IndexedCorpus, KilledIndexerLeavesOldGenerationServing) {
  const std::string big = make_big_corpus(dir_, 6000);
  const pid_t pid = fork();
  if (pid == 0) {
    execl(kwiki_binary().c_str(), "kwiki", "index", "--wiki", big.c_str(), "--index", index().c_str(), "--json",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill it once the staging generation exists: it is part-way through writing.
  bool staged = false;
  for (int i = 0; i < 2000 && !staged; ++i) {
    for (const auto& e : fs::directory_iterator(index()))
      staged = staged || e.path().string().ends_with(".staging");
    if (!staged) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(staged);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "indexer finished before it could be killed";
  expect_old_index_serving();
  // The next run cleans the stale staging folder and publishes.
  const RunResult r = run_kwiki({"index", "--wiki", big, "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["records"], 6003);
  for (const auto& e : fs::directory_iterator(index())) EXPECT_FALSE(e.path().string().ends_with(".staging"));
}

TEST_F(IndexedCorpus, ReadersAnswerWhileAnIndexIsRebuilt) {
  const std::string big = make_big_corpus(dir_, 6000);
  const std::string expected = run_kwiki({"get", kCardId, "--index", index()}).out;
  const pid_t pid = fork();
  if (pid == 0) {
    execl(kwiki_binary().c_str(), "kwiki", "index", "--wiki", big.c_str(), "--index", index().c_str(), "--json",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int reads = 0, status = 0;
  bool exited = false;
  while (!exited) {
    const RunResult r = run_kwiki({"get", kCardId, "--index", index()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected);
    ++reads;
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_GE(reads, 2);
  EXPECT_NE(current(), generation_);
  EXPECT_EQ(run_kwiki({"get", kCardId, "--index", index()}).out, expected);
}

TEST(UpstreamCorpus, IndexesUnchangedAndServesPayloadsByteIdentical) {
  const std::string upstream = upstream_wiki();
  if (upstream.empty()) GTEST_SKIP() << "../shared/upstream-gpu-wiki not found";
  TempDir dir;
  const RunResult r = run_kwiki({"index", "--wiki", upstream, "--index", dir / "index", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out);
  EXPECT_GE(report["records"].get<int>(), 870);
  EXPECT_GT(report["warnings"].get<int>(), 0);  // its known defects are reported, not refused
  // A hardware record: the payload is the whole file; a kernel record: the file's payload member.
  const std::string hw_file = upstream + "/hardware_wiki/records/spec-sheet/amd/cdna3/mi300x.json";
  const RunResult hw = run_kwiki({"get", "amd.cdna3.spec-sheet.mi300x", "--index", dir / "index"});
  ASSERT_EQ(hw.exit_code, 0);
  std::string hw_text = read_text(hw_file);
  while (!hw_text.empty() && (hw_text.back() == '\n' || hw_text.back() == ' ')) hw_text.pop_back();
  EXPECT_NE(hw.out.find("\"payload\":" + hw_text + "}"), std::string::npos);
  int checked = 0;
  for (const auto& entry : fs::recursive_directory_iterator(upstream + "/kernel_wiki/records")) {
    if (entry.path().filename() == "index.json" || entry.path().extension() != ".json") continue;
    if (++checked > 25) break;
    const std::string text = read_text(entry.path());
    const json doc = json::parse(text);
    const RunResult g = run_kwiki({"get", doc["id"].get<std::string>(), "--index", dir / "index"});
    ASSERT_EQ(g.exit_code, 0);
    const json answer = json::parse(g.out);
    EXPECT_EQ(answer["records"][doc["id"].get<std::string>()]["payload"], doc["payload"]);
  }
}

TEST(BundledCorpus, PassesStrictValidation) {
  const RunResult r = run_kwiki({"index", "--check", "--strict", "--wiki", bundled_wiki(), "--warnings"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace kwiki::test
