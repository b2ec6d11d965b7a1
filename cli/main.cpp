// kwiki command-line entry point: parses arguments and calls the libraries.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kwiki/answer.hpp"
#include "kwiki/baseline.hpp"
#include "kwiki/mcp.hpp"
#include "kwiki/memory.hpp"
#include "kwiki/util.hpp"
#include "kwiki/error.hpp"
#include "kwiki/indexer.hpp"
#include "kwiki/planner.hpp"
#include "kwiki/query.hpp"
#include "kwiki/store.hpp"

namespace {

using kwiki::Error;
using kwiki::ErrorCode;
using ordered_json = nlohmann::ordered_json;

/// Exit codes (documented in README and docs/CLI.md).
constexpr int kExitOk = 0;
constexpr int kExitNothingFound = 1;

struct OutputFlags {
  bool json = false;
  bool text = false;
  /// JSON when asked, or when stdout is not a terminal.
  bool want_json() const { return json || (!text && !::isatty(STDOUT_FILENO)); }
};

void print_line(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

int fail(const Error& e) {
  std::fprintf(stderr, "kwiki: %s\n", e.one_line().c_str());
  print_line(e.to_json());
  return kwiki::exit_code_for(e.code());
}

kwiki::Store open_store(const std::string& index_option) {
  const std::string dir = kwiki::resolve_index_dir(index_option);
  kwiki::ensure_index(dir);
  return kwiki::Store::open(dir);
}

// The serving generation's deep check, for stats and index --check: problems on stderr, exit 4.
int report_integrity(const std::vector<std::string>& problems, const std::string& dir) {
  for (const auto& p : problems) std::fprintf(stderr, "kwiki: integrity: %s\n", p.c_str());
  if (problems.empty()) return kExitOk;
  std::fprintf(stderr, "kwiki: the index in %s is damaged; rebuild it with `kwiki index --force --index %s`\n", dir.c_str(), dir.c_str());
  return kwiki::exit_code_for(ErrorCode::kIndexCorrupt);
}

// ---- kwiki index ----
struct IndexArgs {
  std::vector<std::string> wiki, internal;
  bool check = false, strict = false, force = false, list_warnings = false;
  std::size_t shards = 1;
};

int run_index(const IndexArgs& args, const std::string& index_option, const OutputFlags& out) {
  kwiki::IndexOptions options;
  options.wiki_roots = args.wiki;
  options.internal_roots = args.internal;
  if (options.wiki_roots.empty() && options.internal_roots.empty()) {
    const std::string bundled = kwiki::bundled_wiki_dir();
    if (bundled.empty()) throw Error(ErrorCode::kUsage, "no --wiki DIR given and no bundled gpu-wiki found");
    options.wiki_roots = {bundled};
  }
  options.index_dir = kwiki::resolve_index_dir(index_option);
  options.check_only = args.check;
  options.strict = args.strict;
  options.force = args.force;
  if (args.shards == 0) throw Error(ErrorCode::kUsage, "--shards must be at least 1");
  options.shards = args.shards;
  const bool tty = ::isatty(STDERR_FILENO);
  if (tty)
    options.progress = [](std::size_t done, std::size_t total) {
      std::fprintf(stderr, "\rkwiki: indexing %zu/%zu records", done, total);
      if (done == total) std::fputc('\n', stderr);
    };
  std::vector<kwiki::Diagnostic> diagnostics;
  kwiki::IndexReport report;
  try {
    report = kwiki::build_index(options, &diagnostics);
  } catch (const Error& e) {
    std::size_t shown = 0;
    for (const auto& d : diagnostics) {
      if (!d.error) continue;
      if (++shown > 20) break;
      std::fprintf(stderr, "kwiki: error: %s: %s%s%s\n", d.file.c_str(), d.pointer.c_str(), d.pointer.empty() ? "" : ": ",
                   d.message.c_str());
    }
    if (shown == 0) std::fprintf(stderr, "kwiki: error: %s\n", e.one_line().c_str());
    std::fprintf(stderr, "kwiki: nothing written; the serving index is unchanged\n");
    print_line(e.to_json());
    return kwiki::exit_code_for(e.code());
  }
  const std::size_t limit = args.list_warnings ? report.diagnostics.size() : std::min<std::size_t>(report.diagnostics.size(), 5);
  for (std::size_t i = 0; i < limit; ++i) {
    const auto& d = report.diagnostics[i];
    std::fprintf(stderr, "kwiki: warning: %s: %s: %s\n", d.file.c_str(), d.pointer.c_str(), d.message.c_str());
  }
  if (limit < report.diagnostics.size())
    std::fprintf(stderr, "kwiki: %zu more warning(s); --warnings lists them all\n", report.diagnostics.size() - limit);

  // --check also checks the index that serves now, when there is one.
  std::vector<std::string> problems;
  bool checked_index = false;
  if (args.check && !kwiki::current_generation(options.index_dir).empty()) {
    problems = kwiki::Store::open(options.index_dir).check_integrity();
    checked_index = true;
  }
  const int status = report_integrity(problems, options.index_dir);
  ordered_json j = kwiki::index_report_json(options, report);
  const std::vector<std::string>& shard_dirs = report.shard_dirs;
  if (checked_index) j["index_integrity"] = {{"ok", problems.empty()}, {"problems", problems}};
  if (out.want_json()) {
    print_line(kwiki::json_text(j));
  } else if (args.check) {
    std::printf("checked %zu records in %zu files: %zu warning(s), no errors\n", report.records, report.files,
                report.diagnostics.size());
  } else if (!report.rebuilt) {
    std::printf("index %s is up to date (%s); nothing rebuilt\n", options.index_dir.c_str(), report.generation.c_str());
  } else {
    std::printf("indexed %zu records from %zu files into %s/%s in %.2f s (%zu warning(s))\n", report.records, report.files,
                options.index_dir.c_str(), report.generation.c_str(), report.seconds, report.diagnostics.size());
  }
  if (!out.want_json())
    for (const auto& d : shard_dirs) std::printf("  full-text shard (serve with: xapian-tcpsrv --port PORT %s)\n", d.c_str());
  if (checked_index && !out.want_json()) std::printf("serving index %s: %s\n", options.index_dir.c_str(), problems.empty() ? "intact" : "DAMAGED");
  return status;
}

// ---- kwiki stats ----
int run_stats(const std::string& index_option, const OutputFlags& out) {
  const kwiki::Store store = open_store(index_option);
  const kwiki::StoreStats st = store.stats();
  const std::vector<std::string> problems = store.check_integrity();
  const int status = report_integrity(problems, kwiki::resolve_index_dir(index_option));
  if (out.want_json()) {
    ordered_json j;
    j["generation"] = st.generation;
    j["created_at"] = st.created_at;
    j["records"] = st.records;
    j["warnings"] = st.warnings;
    j["by_store"] = st.by_store;
    j["by_source"] = st.by_source;
    j["by_type"] = st.by_type;
    j["by_vendor"] = st.by_vendor;
    j["by_arch"] = st.by_arch;
    j["topics_by_arch"] = st.topics_by_arch;
    ordered_json roots = ordered_json::array();
    for (const auto& r : st.roots) roots.push_back({{"store", r.store}, {"path", r.path}, {"records", r.records}});
    j["roots"] = roots;
    if (!st.shard_dirs.empty()) j["shards"] = st.shard_dirs;
    j["integrity"] = {{"ok", problems.empty()}, {"problems", problems}};
    print_line(kwiki::json_text(j));
    return status;
  }
  std::printf("generation %s (built %s): %zu records, %zu warning(s)\n", st.generation.c_str(), st.created_at.c_str(),
              st.records, st.warnings);
  for (const auto& r : st.roots) std::printf("  root  %-18s %6zu  %s\n", r.store.c_str(), r.records, r.path.c_str());
  for (const auto& d : st.shard_dirs) std::printf("  full-text shard  %s\n", d.c_str());
  auto section = [](const char* name, const std::map<std::string, std::size_t>& m) {
    std::printf("%s:\n", name);
    for (const auto& [k, v] : m) std::printf("  %-24s %6zu\n", k.c_str(), v);
  };
  section("by store", st.by_store);
  section("by type", st.by_type);
  section("by vendor", st.by_vendor);
  section("by arch", st.by_arch);
  std::printf("topics (operator families) by arch:\n");
  for (const auto& [arch, topics] : st.topics_by_arch) {
    std::string line;
    for (const auto& [topic, n] : topics) line += (line.empty() ? "" : ", ") + topic + " " + std::to_string(n);
    std::printf("  %-10s %s\n", arch.c_str(), line.c_str());
  }
  std::printf("integrity: %s\n", problems.empty() ? "ok (store quick_check, record checksums, full-text manifest, Xapian check)" : "DAMAGED");
  return status;
}

// ---- kwiki get ----
int run_get(const std::vector<std::string>& ids, const std::string& index_option, const OutputFlags& out);

// ---- kwiki query ----
struct QueryArgs {
  std::string text;
  std::string intent_file;
  std::string remote;
  kwiki::QueryOptions options;
};

std::optional<nlohmann::json> read_intent_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kBadInput, "cannot read the intent file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (a number past double's range)
    throw Error(ErrorCode::kInvalidJson, std::string("malformed JSON: ") + e.what(), path);
  }
}

kwiki::QueryEngine open_engine(const std::string& index_option, const std::string& remote_shards = {}) {
  const std::string dir = kwiki::resolve_index_dir(index_option);
  kwiki::ensure_index(dir);
  kwiki::OpenOptions options;
  options.shards = remote_shards;
  return kwiki::QueryEngine::open(dir, options);
}

int run_query(QueryArgs args, const std::string& index_option, const OutputFlags& out) {
  auto intent = read_intent_file(args.intent_file);
  if (args.text == "-") {
    // "-" reads the request from standard input (long requests exceed one argument's limit).
    std::stringstream ss;
    ss << std::cin.rdbuf();
    args.text = ss.str();
  }
  if (!intent && args.text.empty()) throw Error(ErrorCode::kUsage, "give a request text or --intent FILE; see kwiki query --help");
  kwiki::QueryEngine engine = open_engine(index_option, args.remote);
  kwiki::QueryResult result;
  try {
    result = engine.query(args.text, args.options, intent);
  } catch (const Error& e) {
    if (!args.intent_file.empty() && e.code() == ErrorCode::kBadInput && e.file().empty())
      throw Error(e.code(), e.what(), args.intent_file, e.pointer());
    throw;
  }
  if (out.want_json()) print_line(result.json);
  else std::fputs(kwiki::render_answer_text(result.answer).c_str(), stdout);
  return result.exit_code;
}

int run_get(const std::vector<std::string>& ids, const std::string& index_option, const OutputFlags& out) {
  const kwiki::QueryResult result = open_engine(index_option).get(ids);
  if (out.want_json()) print_line(result.json);
  else std::fputs(kwiki::render_answer_text(result.answer).c_str(), stdout);
  return result.exit_code;
}

// ---- kwiki hw ----
int run_hw(const std::string& product, const kwiki::HardwareOptions& options, const std::string& index_option, const OutputFlags& out) {
  kwiki::QueryEngine engine = open_engine(index_option);
  const kwiki::HardwareAnswer hw = engine.hardware(product, options);
  if (out.want_json()) {
    print_line(hw.json);
    return hw.exit_code;
  }
  for (const auto& f : hw.answer.facts) {
    std::printf("%-12s %-44s %s %s  [%s:%s, %s]\n", f.product.c_str(), f.field.c_str(), kwiki::json_text(f.value).c_str(), f.unit.c_str(),
                f.record.c_str(), f.field.c_str(), f.evidence.c_str());
    if (!f.alias.empty()) std::printf("%-12s alias: %s\n", "", f.alias.c_str());
  }
  if (hw.answer.comparison.is_array())
    for (const auto& row : hw.answer.comparison) std::printf("vs: %s\n", kwiki::json_text(row).c_str());
  for (const auto& n : hw.answer.notes) std::printf("note: %s\n", n.c_str());
  return hw.exit_code;
}

// ---- kwiki feedback ----
int run_feedback(const std::string& query_id, const std::string& id, const std::string& outcome, const std::string& index_option,
                 const OutputFlags& out) {
  kwiki::QueryEngine engine = open_engine(index_option);
  engine.feedback(query_id, id, outcome);
  if (out.want_json()) print_line(kwiki::json_text(ordered_json({{"query_id", query_id}, {"id", id}, {"outcome", outcome}, {"recorded", true}})));
  else std::printf("recorded %s for %s in %s\n", outcome.c_str(), id.c_str(), query_id.c_str());
  return kExitOk;
}

// ---- kwiki plan ----
int run_plan(kwiki::PlanRequest request, const std::string& shapes, const std::string& index_option, const OutputFlags& out) {
  std::stringstream ss(shapes);
  for (std::string id; std::getline(ss, id, ',');)
    if (!id.empty()) request.shape_ids.push_back(id);
  kwiki::QueryEngine engine = open_engine(index_option);
  const kwiki::PlanResult result = kwiki::make_plan(request, engine);
  const ordered_json j = kwiki::plan_result_json(result);
  if (out.want_json()) {
    print_line(kwiki::json_text(j));
    return kExitOk;
  }
  std::printf("planned %s (%s%s) on %s in %s\n", j["task"].get<std::string>().c_str(), j["pattern"]["name"].get<std::string>().c_str(),
              j["family"].is_null() ? ", unproven" : ", proven", j["target"]["product"].get<std::string>().c_str(), result.workspace.c_str());
  for (const auto& s : j["shapes"]) {
    if (s["bound"].is_null()) std::printf("  %-22s roofline not computed\n", s["id"].get<std::string>().c_str());
    else
      std::printf("  %-22s %-7s SOL %9.2f us  attainable %9.2f us\n", s["id"].get<std::string>().c_str(), s["bound"].get<std::string>().c_str(),
                  s["sol_us"].get<double>(), s["attainable_us"].get<double>());
  }
  for (const auto& n : result.notes) std::printf("note: %s\n", n.c_str());
  return kExitOk;
}

// ---- kwiki baseline ----
int run_baseline_command(kwiki::BaselineRequest request, const std::string& shapes, const OutputFlags& out) {
  std::stringstream ss(shapes);
  for (std::string id; std::getline(ss, id, ',');)
    if (!id.empty()) request.shape_ids.push_back(id);
  // Progress on stderr when someone watches it; quiet otherwise.
  if (::isatty(STDERR_FILENO))
    request.progress = [](int step, int steps, const std::string& stage) { std::fprintf(stderr, "kwiki: [%d/%d] %s\n", step, steps, stage.c_str()); };
  const kwiki::BaselineResult r = kwiki::run_baseline(request);
  if (out.want_json()) {
    print_line(kwiki::json_text(kwiki::baseline_result_json(request, r, false)));
  } else {
    std::printf("baseline %s: %s (%s)\n", request.workspace.c_str(), r.status.c_str(),
                r.measured ? "measured" : ("not measured: " + r.not_measured_because).c_str());
    for (const auto& n : r.notes) std::printf("note: %s\n", n.c_str());
  }
  return r.exit_code;
}

// ---- kwiki util ----
int run_util(const kwiki::UtilRequest& request, const std::string& index_option, const OutputFlags& out) {
  kwiki::QueryEngine engine = open_engine(index_option);
  const ordered_json u = kwiki::compute_utilization(engine, request);
  if (out.want_json()) {
    print_line(kwiki::json_text(u));
    return kExitOk;
  }
  std::printf("%s: %.4g TFLOPS, %.4g GB/s in %.4g ms\n", u["gpu"].get<std::string>().c_str(), u["tflops"].get<double>(), u["gbps"].get<double>(),
              u["time_ms"].get<double>());
  for (const auto& p : u["peaks"])
    std::printf("  %-28s %s%% of %s %s <- %s\n", p["name"].get<std::string>().c_str(), p["pct"].is_null() ? "-" : kwiki::json_text(p["pct"]).c_str(),
                p["value"].is_null() ? "-" : kwiki::json_text(p["value"]).c_str(), p.value("unit", "").c_str(), p["citation"].get<std::string>().c_str());
  if (!u["pct_of_sol"].is_null()) std::printf("  %% of SOL: %s (SOL %s us)\n", kwiki::json_text(u["pct_of_sol"]).c_str(), kwiki::json_text(u["sol_us"]).c_str());
  if (u.contains("grid")) std::printf("  grid: %s\n", kwiki::json_text(u["grid"]).c_str());
  return kExitOk;
}

// ---- kwiki memory ----
struct MemoryArgs {
  std::string action, workspace, version;
  std::vector<std::string> sets;
  bool include_masked = false;
};

int run_memory(const MemoryArgs& a, const OutputFlags& out) {
  kwiki::MemoryRequest request{a.action, a.workspace, a.version, {}, a.include_masked};
  for (const auto& s : a.sets) request.sets.push_back(kwiki::MemoryStore::parse_assignment(s));
  const std::optional<ordered_json> result = kwiki::run_memory_action(request);
  if (!result) {
    print_line(kwiki::json_text({{"latest", nullptr}}));
    return kExitNothingFound;
  }
  if (out.want_json() || a.action != "summary") {
    print_line(kwiki::json_text(*result));
  } else {
    std::printf("%-8s %-7s %-13s %-14s %-10s %-8s %s\n", "version", "masked", "status", "latency_us", "SOL eff", "speedup", "action");
    for (const auto& r : *result)
      std::printf("%-8s %-7s %-13s %-14s %-10s %-8s %s\n", r["version"].get<std::string>().c_str(), r["masked"].get<bool>() ? "yes" : "no",
                  r["status"].get<std::string>().c_str(), kwiki::json_text(r["latency_us"]).c_str(), kwiki::json_text(r["sol_efficiency_geomean"]).c_str(),
                  kwiki::json_text(r["speedup_vs_ref_geomean"]).c_str(), r["action"].get<std::string>().c_str());
  }
  return kExitOk;
}

// Numbers from the command line: finite, and within the range the option allows (CLI11 would
// otherwise read "-1" into an unsigned option as a huge value, and "inf" as a number).
CLI::Validator finite_in(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < min || v > max)
          return "must be a finite number from " + CLI::detail::to_string(min) + " to " + CLI::detail::to_string(max) + ", got \"" + text + "\"";
        return std::string();
      },
      "NUMBER");
}

CLI::Validator whole_in(long long min, long long max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || v < min || v > max)
          return "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ", got \"" + text + "\"";
        return std::string();
      },
      "INT");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kwiki: knowledge-base index and query engine for GPU kernel work (Hopper, CDNA3/CDNA4)."};
  app.require_subcommand(1);
  const std::string footer =
      "Exit codes: 0 answer, 1 valid request with nothing found (or not covered: the notes say so), 2 usage or input error,\n"
      "3 not recorded, 4 runtime failure (index missing or corrupt, a shard unreachable, a build failure),\n5 baseline built but not measured (no suitable GPU).\n"
      "The index lives in --index DIR, else $KWIKI_INDEX, else ~/.cache/kwiki/index; commands that need\n"
      "one build it from the bundled gpu-wiki on first use.";
  app.footer(footer);
  std::string index_option;
  OutputFlags out;
  app.add_option("--index", index_option, "index folder (default: $KWIKI_INDEX or ~/.cache/kwiki/index)");
  app.add_flag("--json", out.json, "print JSON (the default when stdout is not a terminal)");
  app.add_flag("--text", out.text, "print text for humans (the default on a terminal)");

  IndexArgs index_args;
  auto* index = app.add_subcommand("index", "validate corpus roots and build a new index generation");
  index->add_option("--wiki", index_args.wiki, "public corpus root (repeatable; default: the bundled gpu-wiki)");
  index->add_option("--internal", index_args.internal, "private corpus root; its ids become internal_gpu_wiki::<id>");
  index->add_flag("--check", index_args.check, "validate only; write nothing");
  index->add_flag("--strict", index_args.strict, "treat consistency warnings as errors");
  index->add_flag("--force", index_args.force, "rebuild even when the corpus is unchanged");
  index->add_flag("--warnings", index_args.list_warnings, "list every warning on stderr");
  index->add_option("--shards", index_args.shards,
                    "split the full-text index into N Xapian shard databases (each servable by xapian-tcpsrv; 1 to 256, default 1)")
      ->check(whole_in(1, 256));

  auto* stats = app.add_subcommand("stats", "records by store, type, vendor and architecture; the generation; roots");

  std::vector<std::string> get_ids;
  auto* get = app.add_subcommand("get", "records by id, in the answer shape (payloads byte-identical to the stored ones; a repeated id once)");
  get->add_option("ids", get_ids, "record ids (internal ones as internal_gpu_wiki::<id>)")->required();

  QueryArgs query_args;
  auto* query = app.add_subcommand("query", "answer a natural-language request from the knowledge base");
  query->add_option("text", query_args.text, "the request, in prose (quote it); - reads it from standard input");
  query->add_flag("--brief", query_args.options.brief,
                  "the brief form: per record its id, type, match label, title, what to do, why and citation (8 records, about 4 KB); "
                  "facts without sources; kwiki get ID gives a record whole");
  query->add_option("--max-bytes", query_args.options.max_bytes,
                    "hard limit on the answer's size in bytes (256 to 10000000; 0 = none), spent on facts, then records in the brief "
                    "form, then (without --brief) longer fields of the top records; while content is dropped, the notes and the "
                    "dropped ids take at most a tenth")
      ->check(whole_in(0, 10'000'000));
  query->add_option("--max-records", query_args.options.max_records, "at most this many records (1 to 1000; default 20, 8 with --brief)")
      ->check(whole_in(1, 1000));
  query->add_flag("--sources", query_args.options.sources, "brief form: give each hardware fact its sources too");
  query->add_flag("--explain", query_args.options.explain, "add the extracted intent and score parts under \"explain\"");
  query->footer(
      "A typo of a lexicon word (an operator, product, framework, symptom) is read as that word and the notes say so;\n"
      "a word the knowledge base or the lexicon knows is never rewritten. When the leading records share no operator,\n"
      "topic, instruction or symptom with the request, the notes say it is not covered, name the nearest records, and\n"
      "the exit status is 1. The answer contract (full and brief forms, budgets): docs/ANSWERS.md.\n\n" +
      footer);
  query->add_option("--intent", query_args.intent_file, "replay an upstream 8-slot intent JSON file instead of extracting one");
  query->add_option("--remote", query_args.remote,
                    "full text from shards served elsewhere: HOST:PORT[,HOST:PORT...] (xapian-tcpsrv), shard folders or a "
                    "stub file, every shard once; the store stays local (--index)");

  std::string hw_product;
  kwiki::HardwareOptions hw_options;
  auto* hw = app.add_subcommand("hw", "exact hardware facts of a product, with their sources");
  hw->add_option("--product", hw_product, "product, in any usual spelling (H200, \"h200 sxm\", MI300X)")->required();
  hw->add_option("--field", hw_options.field, "dot path, e.g. peak_compute.bf16.dense, memory.bandwidth_tb_s, roofline");
  hw->add_option("--vs", hw_options.vs, "a second product: both values and the ratio for every shared numeric field");
  hw->add_flag("--brief", hw_options.brief, "spec sheets in the brief form (title and citation), not whole; facts keep their sources");

  std::string fb_query, fb_id, fb_outcome;
  auto* feedback = app.add_subcommand("feedback", "record what a served record did for you (feeds ranking)");
  feedback->add_option("query_id", fb_query, "the query_id of the answer")->required();
  feedback->add_option("id", fb_id, "a record id that answer served")->required();
  feedback->add_option("--outcome", fb_outcome, "served | applied | effective | ineffective")->required();

  kwiki::PlanRequest plan_request;
  std::string plan_shapes;
  bool no_dry_run = false;
  auto* plan = app.add_subcommand("plan", "plan a V0 kernel: semantics, target, cited roofline and design, in a new workspace");
  plan->add_option("--task", plan_request.task_path, "task folder (benchmark layout) or task.json")->required();
  plan->add_option("--gpu", plan_request.product, "target product, e.g. H200, MI300X (must be recorded in the wiki)")->required();
  plan->add_option("--workspace", plan_request.workspace, "workspace folder to create (default ./kwiki-<task>-<product>)");
  plan->add_option("--pattern", plan_request.pattern_override, "try only this family (rms_norm, gemm, ..., or generated: the kernel generator, docs/GENERATOR.md); it is still proven before it is claimed");
  plan->add_option("--framework", plan_request.framework,
                   "language of the V0: cuda or cutedsl on NVIDIA targets, hip or flydsl on AMD (default cuda / hip); "
                   "cutedsl and flydsl kernels are written from the generator's IR, or from a family's own DSL V0; a proven family without one gives way to the generator (docs/DSL.md)")
      ->check(CLI::IsMember({"cuda", "hip", "cutedsl", "flydsl"}));
  plan->add_option("--shapes", plan_shapes, "comma-separated shape ids to plan (default: all)");
  plan->add_flag("--force", plan_request.force, "replace an existing workspace");
  plan->add_flag("--no-dry-run", no_dry_run, "do not run the PyTorch reference even when torch is importable");
  plan->footer(
      "kwiki plan RUNS CODE: the task's reference.py and input.py are executed (python with torch, $KWIKI_PYTHON\n"
      "or python3) once per shape for the dry run, with your user's rights. They run in their own process group with a\n"
      "scrubbed environment and are killed at --dry-run-timeout, but that is no sandbox: plan only tasks you trust,\n"
      "or pass --no-dry-run. --force replaces only a folder that kwiki plan made (it holds .kwiki-workspace).\n"
      "A family is claimed only when its CPU twin reproduces the reference on every shape; otherwise the plan says\n"
      "kwiki has no V0 for the task and why. Task formats, the trace and the proof: docs/TASKS.md.");
  plan->add_option("--dry-run-timeout", plan_request.dry_run_timeout_seconds,
                   "seconds the dry run may take before its process group is killed (1 to 3600, default 120)")
      ->check(whole_in(1, 3600));

  kwiki::BaselineRequest baseline_request;
  std::string baseline_shapes;
  bool no_commit = false;
  auto* baseline = app.add_subcommand("baseline", "write, build, check and measure the V0 kernel of a planned workspace; report and commit");
  baseline->add_option("--workspace", baseline_request.workspace, "a workspace made by kwiki plan")->required();
  baseline->add_option("--kernel", baseline_request.kernel_file,
                       "check and measure your kernel instead of kwiki's V0: a .cu/.hip file exporting kernel_abi.h's launcher, or a .py "
                       "file with a Model like the reference's");
  baseline->add_option("--device", baseline_request.device,
                       "gpu (default), or cpu: run the family's CPU twin (or your Python Model) through the same harness, correctness only")
      ->check(CLI::IsMember({"gpu", "cpu"}));
  baseline->add_option("--shapes", baseline_shapes, "comma-separated shape ids (default: all)");
  baseline->add_flag("--allow-other-device", baseline_request.allow_other_device, "run on a GPU other than the plan's product, labelling every figure");
  baseline->add_option("--timeout", baseline_request.timeout_sec, "seconds per case before TIMEOUT_FAIL (1 to 86400, default 30)")
      ->check(whole_in(1, 86400));
  baseline->add_flag("--no-commit", no_commit, "do not commit in the workspace");
  bool no_timing = false;
  baseline->add_flag("--no-timing", no_timing, "check correctness only (say, while other work shares the GPU); nothing is timed");
  baseline->footer("Exit: 0 measured and correct, 1 ran but incorrect, 2 usage or input error, 4 build or runtime failure, 5 built but not measured (no suitable device).");

  kwiki::UtilRequest util_request;
  long long grid_blocks = 0;
  auto* util = app.add_subcommand("util", "achieved TFLOPS and GB/s, % of the cited peaks and of SOL");
  util->add_option("--gpu", util_request.product, "product (H200, MI300X, ...)")->required();
  util->add_option("--dtype", util_request.dtype, "dtype of the matrix work (bf16, fp16, fp8, fp32)");
  util->add_option("--flops", util_request.flops, "FLOPs of the timed work")->check(finite_in(0, 1e30));
  util->add_option("--bytes", util_request.bytes, "bytes moved by the timed work")->check(finite_in(0, 1e30));
  util->add_option("--time-ms", util_request.time_ms, "measured time in milliseconds (> 0)")->required()->check(finite_in(1e-9, 1e12));
  util->add_option("--grid-blocks", grid_blocks, "blocks launched (reports waves over the SMs/CUs)")->check(whole_in(1, 1LL << 40));
  util->add_option("--unit", util_request.unit, "matrix | vector | auto (default: matrix for 16/8-bit dtypes)");

  MemoryArgs memory_args;
  auto* memory = app.add_subcommand("memory", "a workspace's iteration records: init|create|read|update|mask|unmask|summary|latest|list");
  memory->add_option("action", memory_args.action, "init | create | read | update | mask | unmask | summary | latest | list")->required();
  memory->add_option("--workspace", memory_args.workspace, "the workspace")->required();
  memory->add_option("--version", memory_args.version, "v0, v1, ...");
  memory->add_option("--set", memory_args.sets, "field.path=value (JSON when it parses: numbers, true, null, \"text\"; else text)");
  memory->add_flag("--include-masked", memory_args.include_masked, "read a masked version");

  auto* mcp = app.add_subcommand("mcp",
                                 "serve kwiki to an MCP client over stdio (MCP 2025-06-18, 2025-03-26, 2024-11-05; tools: query, hardware, "
                                 "get, plan, baseline, util, memory; answers brief by default)");

  for (auto* sub : {mcp}) sub->add_option("--index", index_option, "index folder");
  mcp->add_option("--remote", query_args.remote, "full text from shards served elsewhere (as kwiki query --remote)");
  for (auto* sub : {baseline, memory}) {
    sub->add_flag("--json", out.json, "print JSON");
    sub->add_flag("--text", out.text, "print text");
  }
  for (auto* sub : {index, stats, get, query, hw, feedback, plan, util}) {
    sub->add_option("--index", index_option, "index folder");
    sub->add_flag("--json", out.json, "print JSON");
    sub->add_flag("--text", out.text, "print text");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(Error(ErrorCode::kUsage, e.what() + std::string("; see kwiki --help")));
  }
  try {
    if (*index) return run_index(index_args, index_option, out);
    if (*stats) return run_stats(index_option, out);
    if (*get) return run_get(get_ids, index_option, out);
    if (*query) return run_query(query_args, index_option, out);
    if (*hw) return run_hw(hw_product, hw_options, index_option, out);
    if (*feedback) return run_feedback(fb_query, fb_id, fb_outcome, index_option, out);
    if (*baseline) {
      baseline_request.commit = !no_commit;
      baseline_request.timing = !no_timing;
      return run_baseline_command(baseline_request, baseline_shapes, out);
    }
    if (*util) {
      if (grid_blocks != 0) util_request.grid_blocks = grid_blocks;
      return run_util(util_request, index_option, out);
    }
    if (*memory) return run_memory(memory_args, out);
    if (*mcp) {
      const std::string dir = kwiki::resolve_index_dir(index_option);
      kwiki::ensure_index(dir);
      kwiki::OpenOptions options;
      options.shards = query_args.remote;
      kwiki::McpServer server(dir, options);
      server.serve(std::cin, std::cout);
      return kExitOk;
    }
    if (*plan) {
      plan_request.dry_run = !no_dry_run;
      return run_plan(plan_request, plan_shapes, index_option, out);
    }
  } catch (const Error& e) {
    return fail(e);
  } catch (const std::exception& e) {
    return fail(Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()));
  }
  return kExitOk;
}
