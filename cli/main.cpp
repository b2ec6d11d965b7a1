// kwiki command-line entry point: parses arguments and calls the libraries.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kwiki/answer.hpp"
#include "kwiki/error.hpp"
#include "kwiki/indexer.hpp"
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

// ---- kwiki index ----
struct IndexArgs {
  std::vector<std::string> wiki, internal;
  bool check = false, strict = false, force = false, list_warnings = false;
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

  ordered_json j;
  j["mode"] = args.check ? "check" : "index";
  j["index"] = args.check ? "" : options.index_dir;
  j["generation"] = report.generation;
  j["rebuilt"] = report.rebuilt;
  j["unchanged"] = !args.check && !report.rebuilt;
  j["files"] = report.files;
  j["records"] = report.records;
  j["warnings"] = report.diagnostics.size();
  j["by_store"] = report.by_store;
  j["seconds"] = report.seconds;
  if (out.want_json()) {
    print_line(j.dump());
  } else if (args.check) {
    std::printf("checked %zu records in %zu files: %zu warning(s), no errors\n", report.records, report.files,
                report.diagnostics.size());
  } else if (!report.rebuilt) {
    std::printf("index %s is up to date (%s); nothing rebuilt\n", options.index_dir.c_str(), report.generation.c_str());
  } else {
    std::printf("indexed %zu records from %zu files into %s/%s in %.2f s (%zu warning(s))\n", report.records, report.files,
                options.index_dir.c_str(), report.generation.c_str(), report.seconds, report.diagnostics.size());
  }
  return kExitOk;
}

// ---- kwiki stats ----
int run_stats(const std::string& index_option, const OutputFlags& out) {
  const kwiki::Store store = open_store(index_option);
  const kwiki::StoreStats st = store.stats();
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
    ordered_json roots = ordered_json::array();
    for (const auto& r : st.roots) roots.push_back({{"store", r.store}, {"path", r.path}, {"records", r.records}});
    j["roots"] = roots;
    print_line(j.dump());
    return kExitOk;
  }
  std::printf("generation %s (built %s): %zu records, %zu warning(s)\n", st.generation.c_str(), st.created_at.c_str(),
              st.records, st.warnings);
  for (const auto& r : st.roots) std::printf("  root  %-18s %6zu  %s\n", r.store.c_str(), r.records, r.path.c_str());
  auto section = [](const char* name, const std::map<std::string, std::size_t>& m) {
    std::printf("%s:\n", name);
    for (const auto& [k, v] : m) std::printf("  %-24s %6zu\n", k.c_str(), v);
  };
  section("by store", st.by_store);
  section("by type", st.by_type);
  section("by vendor", st.by_vendor);
  section("by arch", st.by_arch);
  return kExitOk;
}

// ---- kwiki get ----
int run_get(const std::vector<std::string>& ids, const std::string& index_option, const OutputFlags& out) {
  const kwiki::Store store = open_store(index_option);
  kwiki::Answer answer;
  for (const auto& id : ids) {
    auto record = store.get(id);
    if (!record) {
      answer.notes.push_back("unknown id: " + id);
      continue;
    }
    bool duplicate = false;
    for (const auto& a : answer.records) duplicate = duplicate || a.record.key == record->key;
    if (duplicate) continue;
    kwiki::AnswerRecord a;
    a.record = std::move(*record);
    a.why = {"requested by id"};
    answer.records.push_back(std::move(a));
  }
  if (out.want_json()) print_line(kwiki::render_answer_json(answer));
  else std::fputs(kwiki::render_answer_text(answer).c_str(), stdout);
  return answer.records.empty() ? kExitNothingFound : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kwiki: knowledge-base index and query engine for GPU kernel work (Hopper, CDNA3/CDNA4)."};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 answer, 1 valid request with nothing found, 2 usage or input error,\n"
      "3 not recorded, 4 runtime failure (index missing or corrupt).\n"
      "The index lives in --index DIR, else $KWIKI_INDEX, else ~/.cache/kwiki/index; commands that need\n"
      "one build it from the bundled gpu-wiki on first use.");
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

  auto* stats = app.add_subcommand("stats", "records by store, type, vendor and architecture; the generation; roots");

  std::vector<std::string> get_ids;
  auto* get = app.add_subcommand("get", "records by id, in the answer shape (payloads byte-identical to the stored ones)");
  get->add_option("ids", get_ids, "record ids (internal ones as internal_gpu_wiki::<id>)")->required();

  for (auto* sub : {index, stats, get}) {
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
  } catch (const Error& e) {
    return fail(e);
  } catch (const std::exception& e) {
    return fail(Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()));
  }
  return kExitOk;
}
