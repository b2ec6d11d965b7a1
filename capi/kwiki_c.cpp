// The C API of libkwiki: JSON in, JSON out, exceptions turned into status codes at the edge.
#include "kwiki/kwiki.h"

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "json_args.hpp"
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

using kwiki::detail::arg_bool;
using kwiki::detail::arg_integer;
using kwiki::detail::arg_number;
using kwiki::detail::arg_string;
using kwiki::detail::arg_strings;

json parse_request(const char* text) {
  if (!text) throw kwiki::Error(kwiki::ErrorCode::kUsage, "the request is NULL; pass a JSON object");
  json j = kwiki::detail::parse_untrusted_json(text, "the request");
  if (!j.is_object()) throw kwiki::Error(kwiki::ErrorCode::kInvalidJson, "the request is not a JSON object");
  return j;
}

// Runs `body`, which returns a status and fills `result`; turns kwiki errors (and anything else)
// into a status and an error document. *out is written only when `out` is not NULL: a caller
// that does not want the document may pass NULL and still get the status.
template <class Body>
int guarded(char** out, Body body) {
  if (out) *out = nullptr;
  std::string result;
  int status = KWIKI_RUNTIME_ERROR;
  try {
    status = body(result);
  } catch (const kwiki::Error& e) {
    result = e.to_json();
    status = kwiki::exit_code_for(e.code());
  } catch (const nlohmann::json::exception& e) {
    // A request member of the wrong JSON type that a reader did not check: the caller's input.
    result = kwiki::Error(kwiki::ErrorCode::kUsage, std::string("a request member has the wrong type: ") + e.what()).to_json();
    status = KWIKI_BAD_INPUT;
  } catch (const std::exception& e) {
    result = kwiki::Error(kwiki::ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()).to_json();
  } catch (...) {
    result = kwiki::Error(kwiki::ErrorCode::kInternal, "unexpected failure").to_json();
  }
  if (out && !result.empty()) *out = dup(result);
  return status;
}

kwiki::QueryEngine& engine_of(kwiki_engine* engine) {
  if (!engine) throw kwiki::Error(kwiki::ErrorCode::kUsage, "engine is NULL: call kwiki_open first");
  return engine->engine;
}

}  // namespace

extern "C" {

const char* kwiki_version(void) { return "0.1.0"; }

int kwiki_index(const char* request_json, char** out) {
  return guarded(out, [&](std::string& result) {
    const json r = parse_request(request_json);
    kwiki::IndexOptions options;
    options.wiki_roots = arg_strings(r, "wiki");
    options.internal_roots = arg_strings(r, "internal");
    if (options.wiki_roots.empty() && options.internal_roots.empty()) options.wiki_roots = {kwiki::bundled_wiki_dir()};
    options.index_dir = kwiki::resolve_index_dir(arg_string(r, "index"));
    options.check_only = arg_bool(r, "check", false);
    options.strict = arg_bool(r, "strict", false);
    options.force = arg_bool(r, "force", false);
    options.shards = static_cast<std::size_t>(arg_integer(r, "shards", 1, 1, 256));
    const kwiki::IndexReport report = kwiki::build_index(options);
    result = kwiki::json_text(kwiki::index_report_json(options, report));
    return KWIKI_OK;
  });
}

int kwiki_open_shards(const char* index_dir, const char* shards, kwiki_engine** engine, char** error) {
  if (engine) *engine = nullptr;
  return guarded(error, [&](std::string&) {
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
  return guarded(out, [&](std::string& result) {
    kwiki::QueryEngine& e = engine_of(engine);
    const json r = parse_request(request_json);
    kwiki::QueryOptions options;
    options.brief = arg_bool(r, "brief", false);
    options.max_bytes = static_cast<std::size_t>(arg_integer(r, "max_bytes", 0, 0, 10'000'000));
    options.max_records = static_cast<std::size_t>(arg_integer(r, "max_records", 0, 0, 1000));
    options.sources = arg_bool(r, "sources", false);
    options.explain = arg_bool(r, "explain", false);
    std::optional<json> intent;
    if (r.contains("intent") && !r["intent"].is_null()) intent = r["intent"];
    const kwiki::QueryResult answer = e.query(arg_string(r, "text"), options, intent);
    result = answer.json;
    return answer.exit_code;
  });
}

int kwiki_hardware(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&](std::string& result) {
    kwiki::QueryEngine& e = engine_of(engine);
    const json r = parse_request(request_json);
    const std::string product = arg_string(r, "product");
    if (product.empty()) throw kwiki::Error(kwiki::ErrorCode::kUsage, "hardware needs \"product\"", "", "/product");
    kwiki::HardwareOptions options;
    options.field = arg_string(r, "field");
    options.vs = arg_string(r, "vs");
    options.brief = arg_bool(r, "brief", false);
    options.sources = arg_bool(r, "sources", true);
    const kwiki::HardwareAnswer a = e.hardware(product, options);
    result = a.json;
    return a.exit_code;
  });
}

int kwiki_get(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&](std::string& result) {
    kwiki::QueryEngine& e = engine_of(engine);
    const json r = parse_request(request_json);
    const kwiki::QueryResult got = e.get(arg_strings(r, "ids"));
    result = got.json;
    return got.exit_code;
  });
}

int kwiki_plan(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&](std::string& result) {
    kwiki::QueryEngine& e = engine_of(engine);
    const json r = parse_request(request_json);
    kwiki::PlanRequest p;
    p.task_path = arg_string(r, "task");
    p.product = arg_string(r, "gpu");
    p.workspace = arg_string(r, "workspace");
    p.pattern_override = arg_string(r, "pattern");
    p.shape_ids = arg_strings(r, "shapes");
    p.force = arg_bool(r, "force", false);
    p.dry_run = arg_bool(r, "dry_run", true);
    p.dry_run_timeout_seconds = static_cast<int>(arg_integer(r, "dry_run_timeout", 120, 1, 3600));
    if (p.task_path.empty() || p.product.empty()) throw kwiki::Error(kwiki::ErrorCode::kUsage, "plan needs \"task\" and \"gpu\"");
    const kwiki::PlanResult planned = kwiki::make_plan(p, e);
    result = kwiki::json_text(kwiki::plan_result_json(planned, arg_bool(r, "with_plan", false)));
    return KWIKI_OK;
  });
}

int kwiki_util(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&](std::string& result) {
    kwiki::QueryEngine& e = engine_of(engine);
    const json r = parse_request(request_json);
    kwiki::UtilRequest u;
    u.product = arg_string(r, "gpu");
    u.dtype = arg_string(r, "dtype", "bf16");
    u.flops = arg_number(r, "flops", 0.0, 0.0, 1e30);
    u.bytes = arg_number(r, "bytes", 0.0, 0.0, 1e30);
    u.time_ms = arg_number(r, "time_ms", 0.0, 0.0, 1e12);
    if (r.contains("grid_blocks") && !r["grid_blocks"].is_null()) u.grid_blocks = arg_integer(r, "grid_blocks", 1, 1, 1LL << 40);
    u.unit = arg_string(r, "unit", "auto");
    result = kwiki::json_text(kwiki::compute_utilization(e, u));
    return KWIKI_OK;
  });
}

int kwiki_feedback(kwiki_engine* engine, const char* request_json, char** out) {
  return guarded(out, [&](std::string& result) {
    kwiki::QueryEngine& e = engine_of(engine);
    const json r = parse_request(request_json);
    e.feedback(arg_string(r, "query_id"), arg_string(r, "id"), arg_string(r, "outcome"));
    result = R"({"recorded":true})";
    return KWIKI_OK;
  });
}

void kwiki_free(char* text) { std::free(text); }

void kwiki_close(kwiki_engine* engine) { delete engine; }

}  // extern "C"
