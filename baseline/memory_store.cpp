// kwiki memory: iteration records (memory/v<N>.json), schema-checked and written atomically.
#include "kwiki/memory.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "file_util.hpp"
#include "json_args.hpp"
#include "kwiki/error.hpp"

namespace kwiki {
namespace detail {
extern const char* const kMemorySchemaText;
}
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

struct MemorySchema {
  nlohmann::json doc;
  valijson::Schema schema;
  MemorySchema() {
    doc = nlohmann::json::parse(detail::kMemorySchemaText);
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(doc);
    parser.populateSchema(adapter, schema);
  }
};

const MemorySchema& memory_schema() {
  static const MemorySchema schema;
  return schema;
}

// The first schema violation as (pointer, message), or nullopt.
std::optional<std::pair<std::string, std::string>> violation(const ordered_json& record) {
  const nlohmann::json plain = nlohmann::json::parse(record.dump());
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::adapters::NlohmannJsonAdapter target(plain);
  valijson::ValidationResults results;
  if (validator.validate(memory_schema().schema, target, &results)) return std::nullopt;
  valijson::ValidationResults::Error error, deepest;
  std::size_t depth = 0;
  bool first = true;
  while (results.popError(error))
    if (first || error.context.size() > depth) deepest = error, depth = error.context.size(), first = false;
  std::string pointer;
  for (const auto& part : deepest.context) {
    if (part == "<root>") continue;
    std::string token = part.substr(1, part.size() - 2);
    if (token.size() >= 2 && token.front() == '"') token = token.substr(1, token.size() - 2);
    pointer += "/" + token;
  }
  return std::make_pair(pointer.empty() ? "/" : pointer, deepest.description);
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void write_atomically(const std::string& path, const std::string& text) { detail::write_file_atomically(path, text); }

// Temporaries a killed writer left: today's (.v0.json.kwiki-tmp-XXXXXX, older than a minute) and
// those of kwiki before 0.2 (v0.json.tmp-PID, whose process is gone). Never committed.
void remove_leftovers(const std::string& dir) {
  detail::remove_stale_temporaries(dir);
  static const std::regex kLegacy(R"(^v(0|[1-9][0-9]{0,5})\.json\.tmp-([0-9]{1,9})$)");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, kLegacy) || !e.is_regular_file(ec)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(m[2]));
    if (::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

// Serializes read-modify-write of the records between processes (flock on memory/.kwiki-lock).
detail::FileLock lock_records(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot create memory/: " + ec.message(), dir);
  return detail::FileLock(dir + "/.kwiki-lock");
}

ordered_json default_record(const std::string& version) {
  ordered_json r;
  r["schema_version"] = 1;
  r["version"] = version;
  r["masked"] = false;
  r["timestamp"] = now_iso8601();
  r["device"] = nullptr;
  r["performance"] = {{"latency_us", nullptr}, {"latency_us_by_shape", ordered_json::object()}, {"tflops", nullptr},
                      {"bandwidth_gbps", nullptr}, {"tflops_peak_utilization_pct", nullptr}, {"bandwidth_peak_utilization_pct", nullptr},
                      {"sol_efficiency_geomean", nullptr}, {"reference_latency_us_by_shape", ordered_json::object()},
                      {"speedup_vs_ref_geomean", nullptr}};
  r["optimization"] = {{"action_category", version == "v0" ? "baseline" : "other"},
                       {"action_description", version == "v0" ? "V0 baseline kernel" : "not described yet"}};
  r["correctness"] = {{"status", "NOT_RUN"}, {"max_abs_err", nullptr}, {"max_rel_err", nullptr}};
  r["quality_gate"] = {{"result", "not_measured"}, {"failure_reason", nullptr}};
  r["pitfalls_and_fixes"] = ordered_json::array();
  r["references"] = ordered_json::array();
  r["git_commit_hash"] = nullptr;
  return r;
}

ordered_json* walk(ordered_json& root, const std::string& path, bool create) {
  ordered_json* node = &root;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) return nullptr;
    if (!node->is_object()) return nullptr;
    if (!node->contains(part) && !create) return nullptr;
    node = &(*node)[part];
  }
  return node;
}

}  // namespace

MemoryStore::MemoryStore(std::string workspace) : dir_(std::move(workspace) + "/memory") {}

bool MemoryStore::valid_version(const std::string& version) {
  static const std::regex kVersion("^v(0|[1-9][0-9]{0,5})$");
  return std::regex_match(version, kVersion);
}

std::string MemoryStore::path_of(const std::string& version) const {
  if (!valid_version(version))
    throw Error(ErrorCode::kBadInput, "bad version \"" + version + "\": versions are v0, v1, v2, ... (no leading zeros, no suffixes)");
  return dir_ + "/" + version + ".json";
}

void MemoryStore::init() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot create memory/: " + ec.message(), dir_);
  write_atomically(dir_ + "/schema.json", std::string(detail::kMemorySchemaText));
}

void MemoryStore::write(const ordered_json& record) const {
  const detail::FileLock lock = lock_records(dir_);
  write_locked(record);
}

void MemoryStore::write_locked(const ordered_json& record) const {
  const std::string version = record.is_object() && record.contains("version") && record["version"].is_string() ? record["version"].get<std::string>() : "";
  const std::string path = path_of(version);
  if (auto v = violation(record)) throw Error(ErrorCode::kSchemaViolation, v->second, path, v->first);
  init();
  remove_leftovers(dir_);
  write_atomically(path, record.dump(2) + "\n");
}

ordered_json MemoryStore::create(const std::string& version, const ordered_json& fields) const {
  const std::string path = path_of(version);
  const detail::FileLock lock = lock_records(dir_);
  if (fs::exists(path)) throw Error(ErrorCode::kBadInput, "version " + version + " exists; update it, or create the next one", path);
  ordered_json record = default_record(version);
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    ordered_json* node = walk(record, it.key(), true);
    if (!node) throw Error(ErrorCode::kUsage, "bad field path " + it.key());
    *node = it.value();
  }
  write_locked(record);
  return record;
}

ordered_json MemoryStore::read(const std::string& version, bool include_masked) const {
  const std::string path = path_of(version);
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kBadInput, "no version " + version + " in this workspace", path);
  ordered_json record;
  try {
    record = ordered_json::parse(in);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidJson, std::string("the record is not valid JSON: ") + e.what(), path);
  }
  if (record.value("masked", false) && !include_masked)
    throw Error(ErrorCode::kBadInput, "version " + version + " is masked; read it with --include-masked, or unmask it", path);
  return record;
}

ordered_json MemoryStore::update(const std::string& version, const std::vector<std::pair<std::string, ordered_json>>& sets) const {
  path_of(version);  // a bad version name is refused before any lock or folder
  const detail::FileLock lock = lock_records(dir_);
  ordered_json record = read(version, true);
  for (const auto& [path, value] : sets) {
    if (path == "version" || path == "schema_version") throw Error(ErrorCode::kUsage, path + " cannot be changed");
    ordered_json* node = walk(record, path, true);
    if (!node) throw Error(ErrorCode::kUsage, "bad field path " + path);
    *node = value;
  }
  write_locked(record);  // validates: a bad type leaves the old file untouched
  return record;
}

void MemoryStore::set_masked(const std::string& version, bool masked) const {
  path_of(version);
  const detail::FileLock lock = lock_records(dir_);
  ordered_json record = read(version, true);
  record["masked"] = masked;
  write_locked(record);
}

std::vector<std::string> MemoryStore::list() const {
  std::vector<std::pair<long, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".json" && valid_version(stem)) found.emplace_back(std::stol(stem.substr(1)), stem);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [n, v] : found) out.push_back(v);
  return out;
}

std::optional<std::string> MemoryStore::latest() const {
  const auto versions = list();
  for (auto it = versions.rbegin(); it != versions.rend(); ++it)
    if (!read(*it, true).value("masked", false)) return *it;
  return std::nullopt;
}

ordered_json MemoryStore::summary() const {
  ordered_json rows = ordered_json::array();
  for (const auto& v : list()) {
    const ordered_json r = read(v, true);
    rows.push_back({{"version", v},
                    {"masked", r["masked"]},
                    {"status", r["correctness"]["status"]},
                    {"latency_us", r["performance"]["latency_us"]},
                    {"sol_efficiency_geomean", r["performance"].value("sol_efficiency_geomean", ordered_json())},
                    {"speedup_vs_ref_geomean", r["performance"].value("speedup_vs_ref_geomean", ordered_json())},
                    {"action", r["optimization"]["action_description"]}});
  }
  return rows;
}

std::pair<std::string, ordered_json> MemoryStore::parse_assignment(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw Error(ErrorCode::kUsage, "--set takes field.path=value, got \"" + text + "\"");
  const std::string key = text.substr(0, eq), raw = text.substr(eq + 1);
  if (detail::json_nesting_depth(raw) > detail::kMaxJsonDepth)
    throw Error(ErrorCode::kUsage, "--set " + key + ": the value nests deeper than " + std::to_string(detail::kMaxJsonDepth) + " levels");
  ordered_json value = ordered_json::parse(raw, nullptr, false);
  if (value.is_discarded()) value = raw;  // a bare word is a string
  return {key, value};
}

std::optional<ordered_json> run_memory_action(const MemoryRequest& a) {
  if (a.workspace.empty()) throw Error(ErrorCode::kUsage, "kwiki memory needs --workspace DIR");
  const MemoryStore store(a.workspace);
  auto need_version = [&] {
    if (a.version.empty()) throw Error(ErrorCode::kUsage, "kwiki memory " + a.action + " needs --version vN");
  };
  if (a.action == "init") {
    store.init();
    return ordered_json{{"initialized", a.workspace + "/memory"}};
  }
  if (a.action == "create") {
    need_version();
    ordered_json fields = ordered_json::object();
    for (const auto& [k, v] : a.sets) fields[k] = v;
    return store.create(a.version, fields);
  }
  if (a.action == "read") {
    need_version();
    return store.read(a.version, a.include_masked);
  }
  if (a.action == "update") {
    need_version();
    if (a.sets.empty()) throw Error(ErrorCode::kUsage, "kwiki memory update needs at least one --set field.path=value");
    return store.update(a.version, a.sets);
  }
  if (a.action == "mask" || a.action == "unmask") {
    need_version();
    store.set_masked(a.version, a.action == "mask");
    return ordered_json{{"version", a.version}, {"masked", a.action == "mask"}};
  }
  if (a.action == "summary") return store.summary();
  if (a.action == "latest") {
    const auto v = store.latest();
    if (!v) return std::nullopt;
    return store.read(*v);
  }
  if (a.action == "list") return ordered_json(store.list());
  throw Error(ErrorCode::kUsage, "unknown memory action \"" + a.action + "\" (init, create, read, update, mask, unmask, summary, latest, list)");
}

}  // namespace kwiki
