// Helpers for kwiki tests: temporary folders, fixture copies, running the kwiki binary.
#include "test_support.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace kwiki::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "kwiki-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Restore permissions a test may have removed, so cleanup can descend.
  for (auto it = fs::recursive_directory_iterator(path_, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }
  fs::remove_all(path_, ec);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

RunResult run_kwiki(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                    const std::string& prefix, const std::string& stdin_path) {
  TempDir capture;
  std::string command = "env";
  // Task code runs with the interpreter the build chose (scripts/dev.sh's), unless a test says otherwise.
  if (!env.count("KWIKI_PYTHON")) command += " " + shell_quote(std::string("KWIKI_PYTHON=") + KWIKI_TEST_PYTHON);
  for (const auto& [k, v] : env) command += " " + shell_quote(k + "=" + v);
  command += " " + prefix + " " + shell_quote(kwiki_binary());
  for (const auto& a : args) command += " " + shell_quote(a);
  command += " > " + shell_quote(capture / "out") + " 2> " + shell_quote(capture / "err") + " < " + shell_quote(stdin_path);
  const int status = std::system(command.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(capture / "out");
  r.err = read_text(capture / "err");
  return r;
}

std::string kwiki_binary() {
  // KWIKI_TEST_BINARY runs the suite against another build (say, an older one, to see a test fail there).
  const char* other = std::getenv("KWIKI_TEST_BINARY");
  return other && *other ? other : KWIKI_BINARY;
}
std::string mini_wiki() { return std::string(KWIKI_SOURCE_DIR) + "/data/fixtures/mini-wiki"; }
std::string bundled_wiki() { return std::string(KWIKI_SOURCE_DIR) + "/gpu-wiki"; }

std::string tasks_dir() { return std::string(KWIKI_SOURCE_DIR) + "/data/tasks"; }

std::vector<std::string> data_task_names(bool generator_proven) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tasks_dir())) {
    const fs::path expected = e.path() / "expected.json";
    if (!fs::exists(expected)) continue;
    if (generator_proven && nlohmann::json::parse(read_text(expected.string())).value("generator", "") != "proven") continue;
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string upstream_wiki() {
  if (const char* env = std::getenv("KWIKI_UPSTREAM_WIKI"); env && *env) return fs::is_directory(env) ? env : "";
  const std::string path = std::string(KWIKI_SOURCE_DIR) + "/../shared/upstream-gpu-wiki";
  return fs::is_directory(path) ? fs::canonical(path).string() : "";
}

void copy_tree(const std::string& from, const std::string& to) {
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

}  // namespace kwiki::test
