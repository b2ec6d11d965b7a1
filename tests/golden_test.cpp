// Golden request -> expected ids/notes cases (tests/golden/*.json) against real indexes. Each case
// has a one-line "description"; a key the runner does not know fails the case (a typo must not
// turn a check into nothing).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "test_support.hpp"

namespace kwiki::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One index per corpus for the whole suite: the bundled gpu-wiki and the foreign corpus.
class GoldenIndexes {
 public:
  static GoldenIndexes& get() {
    static GoldenIndexes instance;
    return instance;
  }
  std::string index_for(const std::string& corpus) {
    auto it = built_.find(corpus);
    if (it != built_.end()) return it->second;
    std::string root;
    if (corpus == "bundled") root = bundled_wiki();
    else if (corpus == "upstream") root = upstream_wiki();
    else if (corpus == "mini") root = mini_wiki();
    if (root.empty()) return built_[corpus] = "";
    const std::string index = dir_ / ("index-" + corpus);
    const RunResult r = run_kwiki({"index", "--wiki", root, "--index", index});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return built_[corpus] = index;
  }

 private:
  TempDir dir_;
  std::map<std::string, std::string> built_;
};

std::vector<std::string> golden_files() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(KWIKI_SOURCE_DIR) + "/tests/golden"))
    if (e.path().extension() == ".json") files.push_back(e.path().stem().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Every key a case may hold, with what it checks (the runner below).
const std::set<std::string> kKnownKeys = {
    "description",          // one line: what the case shows
    "corpus", "args", "exit",  // the request (bundled | upstream | mini corpus) and its exit status
    "error_code",           // an error answer's code
    "top1", "include_top",  // rank: the first id; ids within the first k
    "exclude_vendor", "match_arch_allowed", "first_match_arch", "match_arch_of",  // scope labels
    "records_min", "records_max", "nonempty",  // how many records
    "notes_contain", "notes_absent", "output_absent",  // notes and raw output
    "max_bytes",            // the whole answer fits (plus its newline)
    "form",                 // "brief": every record in the brief form, the get hint once
    "envelope_max_fraction",  // everything but "hardware", "records" and a not-covered verdict within this share of max_bytes
    "fact_max_bytes",       // every fact within this size
    "fields_min",           // at least this many brief records carry longer payload fields whole
    "hardware", "hardware_products", "hardware_fields_present", "comparison_fields",  // exact facts
    "why_contains", "explain_field", "explain_symptom", "explain_absent", "deterministic", "brief"};

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, Case) {
  const std::string path = std::string(KWIKI_SOURCE_DIR) + "/tests/golden/" + GetParam() + ".json";
  const json c = json::parse(read_text(path));
  for (const auto& [key, value] : c.items()) ASSERT_TRUE(kKnownKeys.contains(key)) << "unknown key \"" << key << "\" in " << path;
  ASSERT_TRUE(c.contains("description") && c["description"].is_string() && !c["description"].get<std::string>().empty() &&
              c["description"].get<std::string>().find('\n') == std::string::npos)
      << path << " needs a one-line \"description\"";
  const std::string corpus = c.value("corpus", "bundled");
  const std::string index = GoldenIndexes::get().index_for(corpus);
  if (index.empty()) GTEST_SKIP() << "corpus " << corpus << " not available (../shared/upstream-gpu-wiki absent)";

  std::vector<std::string> args;
  for (const auto& a : c["args"]) {
    std::string s = a.get<std::string>();
    if (s == "@upstream-intent")
      s = corpus == "upstream" ? upstream_wiki() + "/query_intent.json" : std::string(KWIKI_SOURCE_DIR) + "/data/fixtures/intent-rmsnorm.json";
    args.push_back(s);
  }
  const bool wants_explain = c.contains("explain_field") || c.contains("explain_symptom");
  if (wants_explain && std::find(args.begin(), args.end(), "--explain") == args.end()) args.push_back("--explain");
  args.insert(args.end(), {"--index", index, "--json"});
  const RunResult r = run_kwiki(args, {{"KWIKI_BUNDLED_WIKI", "/nonexistent"}});
  ASSERT_EQ(r.exit_code, c.value("exit", 0)) << r.out.substr(0, 2000) << "\n" << r.err;
  json answer;
  ASSERT_NO_THROW(answer = json::parse(r.out)) << r.out.substr(0, 500);

  if (c.contains("error_code")) {
    EXPECT_EQ(answer["error"]["code"], c["error_code"]);
    return;
  }
  std::vector<std::string> ids;
  for (auto it = answer["records"].begin(); it != answer["records"].end(); ++it) ids.push_back(it.key());
  // nlohmann::json sorts object keys; the raw text keeps rank order (records are keyed by id).
  const std::size_t records_at = r.out.find("\"records\":{");
  std::vector<std::pair<std::size_t, std::string>> positions;
  for (const auto& id : ids) positions.emplace_back(r.out.find("\"" + id + "\":{", records_at), id);
  std::sort(positions.begin(), positions.end());
  ids.clear();
  for (const auto& [pos, id] : positions) ids.push_back(id);
  const std::string listing = [&] {
    std::string s;
    for (const auto& id : ids) s += "\n  " + id;
    return s;
  }();

  if (c.contains("top1")) {
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), c["top1"].get<std::string>()) << listing;
  }
  if (c.contains("include_top")) {
    const std::size_t k = c["include_top"]["k"];
    for (const auto& want : c["include_top"]["ids"]) {
      const auto it = std::find(ids.begin(), ids.end(), want.get<std::string>());
      EXPECT_TRUE(it != ids.end() && static_cast<std::size_t>(it - ids.begin()) < k) << want << " not in top " << k << listing;
    }
  }
  for (const auto& [key, record] : answer["records"].items()) {
    if (c.contains("exclude_vendor")) {
      // The brief form has no applies_to; ids lead with the vendor (nvidia., amd., generic.).
      const std::string vendor = record.contains("applies_to") ? record["applies_to"].value("vendor", "") : key.substr(0, key.find('.'));
      EXPECT_NE(vendor, c["exclude_vendor"].get<std::string>()) << key;
    }
    if (c.contains("match_arch_allowed")) {
      const auto& allowed = c["match_arch_allowed"];
      const json& label = record["match"].is_object() ? record["match"]["arch"] : record["match"];
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), label), allowed.end()) << key << " " << record["match"];
    }
    if (c.value("brief", false) || c.value("form", "") == "brief") {
      // The brief form: labels, a title, why; never the payload whole.
      EXPECT_FALSE(record.contains("payload")) << key;
      EXPECT_TRUE(record.contains("type") && record["match"].is_string() && record.contains("why")) << key << " " << record;
      EXPECT_TRUE(record.contains("title")) << key << " has no title";
    }
  }
  if (c.value("brief", false) || c.value("form", "") == "brief") {
    EXPECT_EQ(answer.value("form", ""), "brief");
    if (!ids.empty()) {
      EXPECT_TRUE(answer.contains("get")) << "a brief answer says once where the whole records are";
    }
    const std::size_t hint = r.out.find("kwiki get");
    EXPECT_EQ(r.out.find("kwiki get", hint + 1), std::string::npos) << "the get hint appears once";
  }
  if (c.contains("first_match_arch")) {
    ASSERT_FALSE(ids.empty());
    const json& match = answer["records"][ids.front()]["match"];
    EXPECT_EQ(match.is_object() ? match["arch"] : match, c["first_match_arch"]);
  }
  // The match label of particular records ("other-architecture" for a linked neighbour).
  const json match_arch_of = c.value("match_arch_of", json::object());
  for (const auto& [id, want] : match_arch_of.items()) {
    ASSERT_TRUE(answer["records"].contains(id)) << id << " not in the answer";
    const json& match = answer["records"][id]["match"];
    EXPECT_EQ(match.is_object() ? match["arch"] : match, want) << id;
  }
  if (c.contains("records_max")) {
    EXPECT_LE(ids.size(), c["records_max"].get<std::size_t>());
  }
  if (c.contains("records_min")) {
    EXPECT_GE(ids.size(), c["records_min"].get<std::size_t>());
  }
  if (c.value("nonempty", false)) {
    EXPECT_FALSE(ids.empty());
  }
  std::string notes;
  for (const auto& n : answer.value("notes", json::array())) notes += n.get<std::string>() + "\n";
  for (const auto& want : c.value("notes_contain", json::array()))
    EXPECT_NE(notes.find(want.get<std::string>()), std::string::npos) << "notes lack: " << want << "\n" << notes;
  for (const auto& absent : c.value("notes_absent", json::array()))
    EXPECT_EQ(notes.find(absent.get<std::string>()), std::string::npos) << "notes hold: " << absent << "\n" << notes;
  for (const auto& absent : c.value("output_absent", json::array()))
    EXPECT_EQ(r.out.find(absent.get<std::string>()), std::string::npos) << absent;
  if (c.contains("max_bytes")) {
    EXPECT_LE(r.out.size(), c["max_bytes"].get<std::size_t>() + 1);  // + newline
  }
  if (c.contains("envelope_max_fraction")) {
    // The envelope: everything but the content members, as the same JSON without them.
    json envelope = answer;
    envelope.erase("hardware");
    envelope.erase("records");
    json kept = json::array();  // the not-covered verdict is part of the answer, not of its envelope
    for (const auto& n : envelope["notes"])
      if (!n.get<std::string>().starts_with("not covered")) kept.push_back(n);
    envelope["notes"] = kept;
    const std::string skeleton = R"(,"records":{})";  // the member stays, empty
    const double bytes = static_cast<double>(envelope.dump().size() + skeleton.size());
    const std::string limit_arg = *(std::find(args.begin(), args.end(), "--max-bytes") + 1);
    EXPECT_LE(bytes, c["envelope_max_fraction"].get<double>() * std::stod(limit_arg)) << envelope.dump();
  }
  if (c.contains("fields_min")) {
    std::size_t with_fields = 0;
    for (const auto& [key, record] : answer["records"].items()) with_fields += record.contains("fields") && !record["fields"].empty();
    EXPECT_GE(with_fields, c["fields_min"].get<std::size_t>());
  }
  if (c.contains("fact_max_bytes")) {
    for (const auto& h : answer.value("hardware", json::array())) EXPECT_LE(h.dump().size(), c["fact_max_bytes"].get<std::size_t>()) << h;
  }
  for (const auto& fact : c.value("hardware", json::array())) {
    bool found = false;
    for (const auto& h : answer.value("hardware", json::array())) {
      if (h["product"] == fact["product"] && h["field"] == fact["field"]) {
        found = true;
        EXPECT_EQ(h["value"], fact["value"]) << fact;
        // The full form gives each fact its sources; the brief form only when asked (--sources).
        if (answer.value("form", "full") == "full") {
          EXPECT_FALSE(h["provenance"]["sources"].empty()) << fact;
        }
        EXPECT_NE(h["provenance"]["citation"].get<std::string>().find(":"), std::string::npos);
      }
    }
    EXPECT_TRUE(found) << "no hardware answer for " << fact;
  }
  const json why_wanted = c.value("why_contains", json::object());  // named: items() must not outlive it
  for (const auto& [id, want] : why_wanted.items()) {
    std::string why;
    if (answer["records"].contains(id))
      for (const auto& w : answer["records"][id]["match"].is_object() ? answer["records"][id]["match"]["why"] : json::array({answer["records"][id]["why"]}))
        why += w.get<std::string>() + "\n";
    EXPECT_NE(why.find(want.get<std::string>()), std::string::npos) << id << " why lacks " << want << ":\n" << why;
  }
  // Facts in "hardware" belong only to the products listed (a base product's sheet adds none).
  if (c.contains("hardware_products")) {
    const auto& allowed = c["hardware_products"];
    for (const auto& h : answer.value("hardware", json::array()))
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), h["product"]), allowed.end()) << h["product"] << " " << h["field"];
  }
  for (const auto& field : c.value("hardware_fields_present", json::array())) {
    bool found = false;
    for (const auto& h : answer.value("hardware", json::array())) found = found || h["field"] == field;
    EXPECT_TRUE(found) << field;
  }
  for (const auto& field : c.value("comparison_fields", json::array())) {
    bool found = false;
    for (const auto& row : answer.value("comparison", json::array())) found = found || (row["field"] == field && row.contains("ratio"));
    EXPECT_TRUE(found) << field;
  }
  if (c.contains("explain_field")) {
    const json& intent = answer["explain"]["intent"];
    for (const auto& [k, v] : c["explain_field"].items()) EXPECT_EQ(intent[k], v) << k;
  }
  if (c.contains("explain_symptom")) {
    const auto& symptoms = answer["explain"]["intent"]["symptoms"];
    EXPECT_NE(std::find(symptoms.begin(), symptoms.end(), c["explain_symptom"]), symptoms.end()) << symptoms;
  }
  if (c.value("explain_absent", false)) {
    EXPECT_FALSE(answer.contains("explain"));
  }
  if (c.value("deterministic", false)) {
    const RunResult again = run_kwiki(args, {{"KWIKI_BUNDLED_WIKI", "/nonexistent"}});
    EXPECT_EQ(again.out, r.out);
  }
}

INSTANTIATE_TEST_SUITE_P(Requests, Golden, ::testing::ValuesIn(golden_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace kwiki::test
