// The C API of libkwiki: JSON in, JSON out, exceptions turned into status codes at the edge.
#include "kwiki/kwiki.h"

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kwiki/answer.hpp"
#include "kwiki/error.hpp"
#include "kwiki/indexer.hpp"
#include "kwiki/planner.hpp"
#include "kwiki/query.hpp"
#include "kwiki/util.hpp"

struct kwiki_engine {
  kwiki::QueryEngine engine;
};

namespace {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

char* dup(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

json parse_request(const char* text) {
  if (!text) throw kwiki::Error(kwiki::ErrorCode::kUsage, "the request is NULL; pass a JSON object");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw kwiki::Error(kwiki::ErrorCode::kInvalidJson, "the request is not a JSON object");
  return j;
}

// Runs `body`, turning kwiki errors (and anything else) into a status and an error document.
template <class Body>
int guarded(char** out, Body body) {
  if (out) *out = nullptr;
  try {
    return body();
  } catch (const kwiki::Error& e) {
    if (out) *out = dup(e.to_json());
    return kwiki::exit_code_for(e.code());
  } catch (const std::exception& e) {
    if (out) *out = dup(kwiki::Error(kwiki::ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()).to_json());
    return KWIKI_RUNTIME_ERROR;
  } catch (...) {
    if (out) *out = dup(kwiki::Error(kwiki::ErrorCode::kInternal, "unexpected failure").to_json());
    return KWIKI_RUNTIME_ERROR;
  }
}

std::vector<std::string> strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (auto it = j.find(key); it != j.end()) {
    if (!it->is_array()) throw kwiki::Error(kwiki::ErrorCode::kBadInput, std::string(key) + " must be an array of strings", "", std::string("/") + key);
    for (const auto& v : *it) out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

extern "C" {

const char* kwiki_version(void) { return "0.1.0"; }

int kwiki_index(const char* request_json, char** out) {
  return guarded(out, [&] {
    const json r = parse_request(request_json);
    kwiki::IndexOptions options;
    options.wiki_roots = strings(r, "wiki");
    options.internal_roots = strings(r, "internal");
    if (options.wiki_roots.empty() && options.internal_roots.empty()) options.wiki_roots = {kwiki::bundled_wiki_dir()};
    options.index_dir = kwiki::resolve_index_dir(r.value("index", ""));
    options.check_only = r.value("check", false);
    options.strict = r.value("strict", false);
    options.force = r.value("force", false);
    options.shards = r.value("shards", std::size_t{1});
    const kwiki::IndexReport report = kwiki::build_index(options);
    ordered_json j = {{"index", options.index_dir}, {"generation", report.generation}, {"rebuilt", report.rebuilt},
                      {"records", report.records}, {"warnings", report.diagnostics.size()}};
    if (!report.shard_dirs.empty()) j["shards"] = report.shard_dirs;
    *out = dup(kwiki::json_text(j));
    return KWIKI_OK;
  });
}

int kwiki_open_shards(const char* index_dir, const char* shards, kwiki_engine** engine, char** error) {
  if (engine) *engine = nullptr;
  return guarded(error, [&] {
    if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine must not be NULL");
    const std::string dir = kwiki::resolve_index_dir(index_dir ? index_dir : "");
    kwiki::ensure_index(dir);
    kwiki::OpenOptions options;
    options.shards = shards ? shards : "";
    *engine = new kwiki_engine{kwiki::QueryEngine::open(dir, options)};
    return KWIKI_OK;
  });
}

int kwiki_open(const char* index_dir, kwiki_engine** engine, char** error) {
  return kwiki_open_shards(index_dir, nullptr, engine, error);
}

int kwiki_query(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&] {
    if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine is NULL: call kwiki_open first");
    const json r = parse_request(request_json);
    kwiki::QueryOptions options;
    options.brief = r.value("brief", false);
    options.max_bytes = r.value("max_bytes", 0u);
    options.max_records = r.value("max_records", 20u);
    options.explain = r.value("explain", false);
    std::optional<json> intent;
    if (r.contains("intent")) intent = r["intent"];
    const kwiki::QueryResult result = engine->engine.query(r.value("text", ""), options, intent);
    *out = dup(result.json);
    return result.exit_code;
  });
}

int kwiki_hardware(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&] {
    if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine is NULL: call kwiki_open first");
    const json r = parse_request(request_json);
    if (!r.contains("product")) throw kwiki::Error(kwiki::ErrorCode::kUsage, "hardware needs \"product\"", "", "/product");
    const kwiki::HardwareAnswer a = engine->engine.hardware(r["product"], r.value("field", ""), r.value("vs", ""));
    *out = dup(a.json);
    return a.exit_code;
  });
}

int kwiki_get(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&] {
    if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine is NULL: call kwiki_open first");
    const json r = parse_request(request_json);
    kwiki::Answer answer;
    for (const auto& id : strings(r, "ids")) {
      auto record = engine->engine.store().get(id);
      if (!record) {
        answer.notes.push_back("unknown id: " + id);
        continue;
      }
      kwiki::AnswerRecord a;
      a.record = std::move(*record);
      a.why = {"requested by id"};
      answer.records.push_back(std::move(a));
    }
    *out = dup(kwiki::render_answer_json(answer));
    return answer.records.empty() ? KWIKI_NOTHING_FOUND : KWIKI_OK;
  });
}

int kwiki_plan(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&] {
    if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine is NULL: call kwiki_open first");
    const json r = parse_request(request_json);
    kwiki::PlanRequest p;
    p.task_path = r.value("task", "");
    p.product = r.value("gpu", "");
    p.workspace = r.value("workspace", "");
    p.pattern_override = r.value("pattern", "");
    p.shape_ids = strings(r, "shapes");
    p.force = r.value("force", false);
    p.dry_run = r.value("dry_run", true);
    if (p.task_path.empty() || p.product.empty()) throw kwiki::Error(kwiki::ErrorCode::kUsage, "plan needs \"task\" and \"gpu\"");
    const kwiki::PlanResult result = kwiki::make_plan(p, engine->engine);
    ordered_json j = {{"workspace", result.workspace}, {"pattern", result.pattern}, {"plan", result.plan}};
    *out = dup(kwiki::json_text(j));
    return KWIKI_OK;
  });
}

int kwiki_util(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&] {
    if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine is NULL: call kwiki_open first");
    const json r = parse_request(request_json);
    kwiki::UtilRequest u;
    u.product = r.value("gpu", "");
    u.dtype = r.value("dtype", "bf16");
    u.flops = r.value("flops", 0.0);
    u.bytes = r.value("bytes", 0.0);
    u.time_ms = r.value("time_ms", 0.0);
    if (r.contains("grid_blocks")) u.grid_blocks = r["grid_blocks"].get<long long>();
    u.unit = r.value("unit", "auto");
    *out = dup(kwiki::json_text(kwiki::compute_utilization(engine->engine, u)));
    return KWIKI_OK;
  });
}

int kwiki_feedback(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&] {
    if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine is NULL: call kwiki_open first");
    const json r = parse_request(request_json);
    engine->engine.feedback(r.value("query_id", ""), r.value("id", ""), r.value("outcome", ""));
    *out = dup(R"({"recorded":true})");
    return KWIKI_OK;
  });
}

void kwiki_free(char* text) { std::free(text); }

void kwiki_close(kwiki_engine* engine) { delete engine; }

}  // extern "C"
