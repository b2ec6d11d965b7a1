// The MCP tools: one table row per tool; the libraries answer, the rows only read arguments.
#include "mcp_tools.hpp"

#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <map>
#include <memory>
#include <mutex>

#include "json_args.hpp"
#include "json_text.hpp"
#include "kwiki/baseline.hpp"
#include "kwiki/error.hpp"
#include "kwiki/memory.hpp"
#include "kwiki/planner.hpp"
#include "kwiki/util.hpp"

namespace kwiki::detail {
namespace {

using json = nlohmann::ordered_json;

// ---- schema pieces ----

json prop(const char* type, const char* description) { return {{"type", type}, {"description", description}}; }

json bounded(const char* type, const char* description, double min, double max) {
  json p = prop(type, description);
  p["minimum"] = min;
  p["maximum"] = max;
  return p;
}

json choice(const char* description, std::initializer_list<const char*> values) {
  json p = prop("string", description);
  p["enum"] = json::array();
  for (const char* v : values) p["enum"].push_back(v);
  return p;
}

json strings(const char* description, std::size_t min_items) {
  return {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", min_items}, {"description", description}};
}

json object_schema(json properties, std::initializer_list<const char*> required) {
  json req = json::array();
  for (const char* r : required) req.push_back(r);
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(req)}, {"additionalProperties", false}};
}

std::string require_string(const nlohmann::json& args, const char* key) {
  const std::string value = arg_string(args, key);
  if (value.empty()) throw Error(ErrorCode::kUsage, std::string("argument \"") + key + "\" is required and must be a non-empty string", "", std::string("/") + key);
  return value;
}

// ---- the handlers: arguments in, the library's JSON out ----

ToolReply call_query(const nlohmann::json& args, ToolContext& context) {
  QueryOptions options;
  options.brief = arg_bool(args, "brief", true);
  options.max_bytes = static_cast<std::size_t>(arg_integer(args, "max_bytes", 0, 0, 10'000'000));
  options.max_records = static_cast<std::size_t>(arg_integer(args, "max_records", 0, 0, 1000));
  options.sources = arg_bool(args, "sources", false);
  options.explain = arg_bool(args, "explain", false);
  const QueryResult r = context.engine().query(require_string(args, "text"), options);
  return {r.json, false};  // nothing found or not covered is an answer; the notes say so
}

ToolReply call_hardware(const nlohmann::json& args, ToolContext& context) {
  HardwareOptions options;
  options.field = arg_string(args, "field");
  options.vs = arg_string(args, "vs");
  options.brief = arg_bool(args, "brief", true);
  options.sources = arg_bool(args, "sources", false);
  const HardwareAnswer a = context.engine().hardware(require_string(args, "product"), options);
  return {a.json, a.exit_code != 0};
}

ToolReply call_get(const nlohmann::json& args, ToolContext& context) {
  const QueryResult r = context.engine().get(arg_strings(args, "ids"));
  return {r.json, r.exit_code != 0};
}

ToolReply call_plan(const nlohmann::json& args, ToolContext& context) {
  PlanRequest p;
  p.task_path = require_string(args, "task");
  p.product = require_string(args, "gpu");
  p.workspace = arg_string(args, "workspace");
  p.pattern_override = arg_string(args, "pattern");
  p.shape_ids = arg_strings(args, "shapes");
  p.force = arg_bool(args, "force", false);
  p.dry_run = arg_bool(args, "dry_run", true);
  p.dry_run_timeout_seconds = static_cast<int>(arg_integer(args, "dry_run_timeout", 120, 1, 3600));
  const PlanResult r = make_plan(p, context.engine());
  return {json_text(plan_result_json(r)), false};
}

ToolReply call_baseline(const nlohmann::json& args, ToolContext& context) {
  BaselineRequest b;
  b.workspace = require_string(args, "workspace");
  b.kernel_file = arg_string(args, "kernel");
  b.device = arg_string(args, "device", "gpu");
  b.shape_ids = arg_strings(args, "shapes");
  b.allow_other_device = arg_bool(args, "allow_other_device", false);
  b.timeout_sec = static_cast<int>(arg_integer(args, "timeout", 30, 1, 86400));
  b.timing = arg_bool(args, "timing", true);
  b.commit = arg_bool(args, "commit", true);
  b.progress = [&](int step, int steps, const std::string& stage) { context.progress(step, steps, stage); };
  const BaselineResult r = run_baseline(b);
  // A run that found a mismatch answered; only a run that could not run failed.
  return {json_text(baseline_result_json(b, r, arg_bool(args, "brief", true))), r.exit_code == 4};
}

ToolReply call_util(const nlohmann::json& args, ToolContext& context) {
  UtilRequest u;
  u.product = require_string(args, "gpu");
  u.dtype = arg_string(args, "dtype", "bf16");
  u.flops = arg_number(args, "flops", 0.0, 0.0, 1e30);
  u.bytes = arg_number(args, "bytes", 0.0, 0.0, 1e30);
  u.time_ms = arg_number(args, "time_ms", 0.0, 1e-9, 1e12);
  if (args.contains("grid_blocks") && !args["grid_blocks"].is_null()) u.grid_blocks = arg_integer(args, "grid_blocks", 1, 1, 1LL << 40);
  u.unit = arg_string(args, "unit", "auto");
  return {json_text(compute_utilization(context.engine(), u)), false};
}

ToolReply call_memory(const nlohmann::json& args, ToolContext&) {
  MemoryRequest m;
  m.action = require_string(args, "action");
  m.workspace = require_string(args, "workspace");
  m.version = arg_string(args, "version");
  m.include_masked = arg_bool(args, "include_masked", false);
  if (args.contains("set") && args["set"].is_object())
    for (const auto& [path, value] : args["set"].items()) m.sets.emplace_back(path, json(value));
  const std::optional<json> result = run_memory_action(m);
  if (!result) return {json_text({{"latest", nullptr}, {"notes", {"no unmasked version"}}}), false};
  return {json_text(*result), false};
}

// ---- the table ----

std::vector<McpTool> make_tools() {
  std::vector<McpTool> tools;
  tools.push_back(
      {"query",
       "Ask the GPU-kernel knowledge base (NVIDIA Hopper H100/H20/H200, AMD CDNA3/CDNA4 MI300X/MI308X/MI355X) in prose. "
       "Name what you know in `text`: the product (H200, MI300X) or architecture (sm_90a, gfx942), the framework (CUDA, HIP, "
       "Triton, CuTe DSL), the operator (rmsnorm, gemm, decode attention, ...), shapes, dtypes and any measured symptom "
       "(\"70% of DRAM bandwidth\"). Returns JSON: \"hardware\" (exact facts: value, unit, citation record:field, evidence "
       "class), \"records\" keyed by id in rank order (brief by default: type, match label, title, what to do, why, citation; "
       "about 4 KB for the default 8), \"notes\" (\"not covered\" when nothing in the knowledge base is about the request, "
       "spelling read, scope). Use get for a whole record, hardware for more facts.",
       object_schema({{"text", prop("string", "the request in prose")},
                      {"brief", prop("boolean", "brief records (default true); false gives whole records, 2-10 KB each")},
                      {"max_bytes", bounded("integer", "hard limit on the answer in bytes, spent on facts, then brief records, then "
                                                       "longer fields of the top records (256 to 10000000; 0 = none)", 0, 10'000'000)},
                      {"max_records", bounded("integer", "at most this many records (default 8 brief, 20 whole)", 0, 1000)},
                      {"sources", prop("boolean", "give each hardware fact its sources (about 1 KB more per fact)")},
                      {"explain", prop("boolean", "add the extracted intent and each record's score parts")}},
                     {"text"}),
       call_query});
  tools.push_back(
      {"hardware",
       "Exact hardware facts of one GPU product, never a sibling's numbers. Pass `product` (H200, \"h200 sxm\", H20, MI300X, "
       "MI355X, ...) and optionally `field`: a dot path (peak_compute.bf16.dense, memory.bandwidth_tb_s, "
       "compute_units.sm_count), a group (memory, clocks, power) or roofline; `vs` a second product for ratios. Returns JSON: "
       "\"hardware\" facts (value, unit, citation record:field, evidence class; their sources with sources=true), the spec "
       "sheet and measured ceilings as brief records, \"comparison\" rows with vs. One field: about 1 KB; no field: the main "
       "numbers, about 6 KB. isError when the product or field is not recorded (the notes say what is).",
       object_schema({{"product", prop("string", "the product, in any usual spelling")},
                      {"field", prop("string", "a dot path, a group, or roofline (default: the main numbers)")},
                      {"vs", prop("string", "a second product to compare with")},
                      {"brief", prop("boolean", "spec sheets as brief records (default true); false gives them whole (16 KB each)")},
                      {"sources", prop("boolean", "give each fact its sources (default false)")}},
                     {"product"}),
       call_hardware});
  tools.push_back({"get",
                   "Whole records by `ids` (from query or hardware answers). Returns JSON \"records\" keyed by id, payloads "
                   "byte-identical to the stored files: 2-10 KB per record (spec sheets about 16 KB). Unknown ids are named in the "
                   "notes (isError when none is known); a repeated id is served once.",
                   object_schema({{"ids", strings("record ids, e.g. nvidia.hopper.cuda.rmsnorm.vectorized-row-per-block", 1)}}, {"ids"}),
                   call_get});
  tools.push_back(
      {"plan",
       "Plan a first correct kernel (V0) for a task. Pass `task`: a task folder (reference.py with the PyTorch Model, input.py, "
       "shapes.json) or a task.json, with its shapes and dtypes; and `gpu`: the target product (H200, MI300X, ...; its "
       "architecture and framework follow: Hopper CUDA, CDNA HIP). Writes a git workspace with plans/v0_plan.md. Returns JSON "
       "(about 3 KB): family (the kernel family whose CPU twin reproduces the reference on every shape, or null), pattern and "
       "confidence, proof result and near misses, target, per shape its bound with SOL and attainable time in microseconds, "
       "every cited id (record:field for facts), notes. Runs the task's reference.py once per shape (dry_run) when torch is "
       "importable: plan only tasks you trust.",
       object_schema({{"task", prop("string", "task folder or task.json")},
                      {"gpu", prop("string", "target product, e.g. H200, MI300X")},
                      {"workspace", prop("string", "folder to create (default ./kwiki-<task>-<product>)")},
                      {"pattern", prop("string", "try only this family (rms_norm, gemm, ...); still proven before it is claimed")},
                      {"shapes", strings("shape ids to plan (default all)", 0)},
                      {"force", prop("boolean", "replace a workspace that kwiki plan made earlier (never any other folder)")},
                      {"dry_run", prop("boolean", "run the reference once per shape when torch is importable (default true)")},
                      {"dry_run_timeout", bounded("integer", "seconds before the dry run is stopped (default 120)", 1, 3600)}},
                     {"task", "gpu"}),
       call_plan});
  tools.push_back(
      {"baseline",
       "Write, build, check and measure the V0 kernel of a workspace made by plan (CUDA C++ on Hopper, HIP on CDNA). Pass "
       "`workspace`; `device` \"cpu\" runs the family's CPU twin through the same harness (correctness only, no GPU); `kernel` "
       "checks your own .cu/.hip/.py instead. A long run (seconds to minutes): send params._meta.progressToken for "
       "notifications/progress per stage. Returns JSON at the end (about 1 KB): status (PASS, MISMATCH, ...), compiled, measured "
       "or why not, the harness's RESULT_JSON summary (per-shape statuses, failures, latency and speedup geomeans, max "
       "errors), the report; writes baseline_report.md and memory/v0.json and commits.",
       object_schema({{"workspace", prop("string", "a workspace made by plan")},
                      {"device", choice("gpu (default) or cpu (the CPU twin, correctness only)", {"gpu", "cpu"})},
                      {"kernel", prop("string", "your kernel: a .cu/.hip file exporting kernel_abi.h's launcher, or a .py Model")},
                      {"shapes", strings("shape ids (default all)", 0)},
                      {"allow_other_device", prop("boolean", "run on a GPU other than the plan's product, labelling every figure")},
                      {"timeout", bounded("integer", "seconds per case (default 30)", 1, 86400)},
                      {"timing", prop("boolean", "time the kernel (default true); false checks correctness only")},
                      {"commit", prop("boolean", "commit in the workspace (default true)")},
                      {"brief", prop("boolean", "the RESULT_JSON summary (default true); false gives it whole")}},
                     {"workspace"}),
       call_baseline});
  tools.push_back(
      {"util",
       "Achieved TFLOPS and GB/s of a measured kernel, as % of the cited peaks and of SOL. Pass `gpu` (product), `time_ms`, "
       "and the `flops` and/or `bytes` of the timed work; `dtype` (bf16, fp16, fp8, fp32) picks the matrix peak; "
       "`grid_blocks` gives waves over the SMs/CUs. Returns JSON (about 1 KB), each peak with its citation record:field.",
       object_schema({{"gpu", prop("string", "product, e.g. H200, MI300X")},
                      {"time_ms", bounded("number", "measured time in milliseconds", 1e-9, 1e12)},
                      {"flops", bounded("number", "FLOPs of the timed work", 0, 1e30)},
                      {"bytes", bounded("number", "bytes moved by the timed work", 0, 1e30)},
                      {"dtype", prop("string", "dtype of the matrix work (default bf16)")},
                      {"grid_blocks", bounded("integer", "blocks launched", 1, 1099511627776.0)},
                      {"unit", choice("matrix, vector or auto (matrix for 16/8-bit dtypes)", {"matrix", "vector", "auto"})}},
                     {"gpu", "time_ms"}),
       call_util});
  tools.push_back(
      {"memory",
       "A workspace's iteration records (memory/vN.json, checked against their schema): `action` init, create, read, update, "
       "mask, unmask, summary, latest or list; `workspace`; `version` (v0, v1, ...) for create, read, update, mask and "
       "unmask; `set` {\"field.path\": value} for create and update. Returns the record, the versions or the summary rows as "
       "JSON (a record is under 2 KB).",
       object_schema({{"action", choice("what to do", {"init", "create", "read", "update", "mask", "unmask", "summary", "latest", "list"})},
                      {"workspace", prop("string", "the workspace")},
                      {"version", prop("string", "v0, v1, ...")},
                      {"set", {{"type", "object"}, {"description", "field.path -> value, e.g. {\"performance.latency_us\": 12.5}"}}},
                      {"include_masked", prop("boolean", "read a masked version too")}},
                     {"action", "workspace"}),
       call_memory});
  return tools;
}

// The parsed input schemas, once per process (valijson schemas are immutable after parsing).
const std::map<std::string, std::unique_ptr<valijson::Schema>>& parsed_schemas() {
  static const auto schemas = [] {
    std::map<std::string, std::unique_ptr<valijson::Schema>> out;
    for (const auto& tool : mcp_tools()) {
      const nlohmann::json doc = tool.input_schema;
      auto schema = std::make_unique<valijson::Schema>();
      valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
      valijson::adapters::NlohmannJsonAdapter adapter(doc);
      parser.populateSchema(adapter, *schema);
      out.emplace(tool.name, std::move(schema));
    }
    return out;
  }();
  return schemas;
}

}  // namespace

const std::vector<McpTool>& mcp_tools() {
  static const std::vector<McpTool> tools = make_tools();
  return tools;
}

const McpTool* find_mcp_tool(const std::string& name) {
  for (const auto& t : mcp_tools())
    if (name == t.name) return &t;
  return nullptr;
}

void check_tool_arguments(const McpTool& tool, const nlohmann::json& arguments) {
  const valijson::Schema& schema = *parsed_schemas().at(tool.name);
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::adapters::NlohmannJsonAdapter target(arguments);
  valijson::ValidationResults results;
  if (validator.validate(schema, target, &results)) return;
  // The deepest error is the most specific one.
  valijson::ValidationResults::Error error, best;
  while (results.popError(error))
    if (best.context.empty() || error.context.size() > best.context.size()) best = error;
  const std::string pointer = pointer_from_context(best.context);
  throw Error(ErrorCode::kUsage, std::string("tool \"") + tool.name + "\": " + (pointer == "/" || pointer.empty() ? "" : pointer + ": ") + best.description,
              "", pointer);
}

}  // namespace kwiki::detail
