// kwiki baseline's report stage: baseline_report.md and memory/v0.json from the plan and the harness's result.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "kwiki/memory.hpp"
#include "stages.hpp"

namespace kwiki::detail {
namespace {

std::string fmt(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

void report_stage(Context& c) {
  const ordered_json& plan = c.plan;
  const BaselineRequest& request = c.request;
  BaselineResult& result = c.result;
  const fs::path& ws = c.ws;
  const fs::path& kernel_path = c.kernel_path;
  const ordered_json& evidence = c.evidence;
  const std::string &pattern = c.header.pattern, &product = c.header.product, &target = c.header.target, &dtype = c.header.dtype;
  const std::string& device_label = c.device_label;
  std::map<std::string, ordered_json> plan_shapes;
  for (const auto& s : plan["shapes"]) plan_shapes[s["id"]] = s;
  auto fact = [&](const std::string& metric_prefix) -> std::pair<double, std::string> {
    for (const auto& f : plan["hardware_facts"])
      if (f["metric"].get<std::string>().rfind(metric_prefix, 0) == 0 && f["value"].is_number()) return {f["value"].get<double>(), f["citation"]};
    return {0, ""};
  };
  const auto [bw, bw_cite] = fact("bandwidth");
  const auto [mpeak, mpeak_cite] = fact("matrix peak");
  const auto [vpeak, vpeak_cite] = fact("vector peak");
  const auto [mbw, mbw_cite] = fact("measured copy bandwidth");
  std::string perf_table = "| shape | status | latency us (p10-p90) | reference us | speedup | TFLOPS | GB/s | % peak BW | % peak compute | % SOL |\n"
                           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  std::vector<double> sol_eff, tflops_all, gbps_all, bw_pct_all, tf_pct_all;
  const ordered_json& rj = result.result_json;
  for (const auto& [id, s] : plan_shapes) {
    if (!request.shape_ids.empty() && std::find(request.shape_ids.begin(), request.shape_ids.end(), id) == request.shape_ids.end()) continue;
    const std::string status = rj.is_object() && rj["statuses"].contains(id) ? rj["statuses"][id].get<std::string>() : result.status;
    if (!rj.is_object() || !rj["latency_us_by_shape"].contains(id)) {
      // The reason is stated once above the table; each row only says it was not measured.
      perf_table += "| " + id + " | " + status + " | " + (result.not_measured_because.empty() ? "not measured: failed correctness" : "not measured") +
                    " | | | | | | | |\n";
      continue;
    }
    const double us = rj["latency_us_by_shape"][id];
    const auto& spread = rj["latency_spread_by_shape"][id];
    const double ref = rj["reference_latency_us_by_shape"].value(id, 0.0);
    const auto& work = s["work"];
    const double flops = work.is_object() ? work["matrix_flops"].get<double>() + work["vector_flops"].get<double>() : 0;
    const double bytes = work.is_object() ? work["bytes_read"].get<double>() + work["bytes_written"].get<double>() : 0;
    const double tflops = flops / (us * 1e-6) / 1e12, gbps = bytes / (us * 1e-6) / 1e9;
    const bool matrix = work.is_object() && work["matrix_flops"].get<double>() > 0;
    const double peak = matrix ? mpeak : vpeak;
    const double sol = s["roofline"].is_object() ? s["roofline"]["sol_us"].get<double>() : 0;
    tflops_all.push_back(tflops);
    gbps_all.push_back(gbps);
    if (bw > 0) bw_pct_all.push_back(100 * gbps / (bw * 1e3));
    if (peak > 0) tf_pct_all.push_back(100 * tflops / peak);
    if (sol > 0) sol_eff.push_back(sol / us);
    perf_table += "| " + id + " | " + status + " | " + fmt(us) + " (" + fmt(spread["p10"].get<double>()) + "-" + fmt(spread["p90"].get<double>()) + ") | " +
                  (ref > 0 ? fmt(ref) : "-") + " | " + (ref > 0 ? fmt(ref / us, 3) + "x" : "-") + " | " + fmt(tflops) + " | " + fmt(gbps) + " | " +
                  (bw > 0 ? fmt(100 * gbps / (bw * 1e3), 3) : "-") + (mbw > 0 ? " (" + fmt(100 * gbps / (mbw * 1e3), 3) + " of measured copy)" : "") + " | " +
                  (peak > 0 ? fmt(100 * tflops / peak, 3) : "-") + " | " + (sol > 0 ? fmt(100 * sol / us, 3) : "-") + " |\n";
  }
  auto geomean = [](const std::vector<double>& v) -> ordered_json {
    if (v.empty()) return nullptr;
    double s = 0;
    for (double x : v) s += std::log(std::max(x, 1e-30));
    return std::exp(s / static_cast<double>(v.size()));
  };

  std::string report = "# Baseline report: " + plan["task"]["name"].get<std::string>() + " on " + product + " (V0)\n\n";
  std::string candidate;
  switch (c.candidate) {
    case Candidate::kTemplate:
      candidate = c.cpu ? "the " + c.family + " family's CPU twin (build/kernel_cpu.so)" : "`" + kernel_path.filename().string() + "` (kwiki template for " + pattern + ")";
      break;
    case Candidate::kUserGpu: candidate = "`" + kernel_path.filename().string() + "` (your kernel, from " + request.kernel_file + ")"; break;
    case Candidate::kUserPython: candidate = "`" + c.python_model.filename().string() + "` (your Python Model, from " + request.kernel_file + ")"; break;
  }
  report += "- candidate: " + candidate + ", behind `" + (c.candidate == Candidate::kUserPython ? c.python_model.filename().string() : std::string("kernel.py")) +
            "`; harness `test_kernel.py`; reference `reference.py`\n";
  report += "- target: " + (c.cpu ? std::string("cpu") : target) + "; compiled: " + (result.compiled ? "yes" : "no") + "; status: **" + result.status + "**\n";
  report += "- device: " + (device_label.empty() ? "none used (not measured: " + result.not_measured_because + ")" : device_label) + "\n";
  if (rj.is_object() && rj.contains("environment")) report += "- environment: `" + rj["environment"].dump() + "`\n";
  report += "\n## Reference semantics\n\nPattern " + pattern + ", dtype " + dtype + "; see plans/v0_plan.md for inputs, outputs and the roofline.\n";
  report += "\n## V0 configuration\n\n";
  for (const auto& item : plan["design"]["choices"]) report += "- " + item["aspect"].get<std::string>() + ": " + item["choice"].get<std::string>() + " <- " + item["record"].get<std::string>() + "\n";
  report += "\n## Static evidence (compiler report and listing)\n\n```json\n" + evidence.dump(2) + "\n```\n";
  report += "\n## Correctness\n\n";
  if (rj.is_object()) {
    // null: not finite (an output held NaN or Inf where the reference did not).
    const auto err = [&](const char* key) { return rj[key].is_number() ? fmt(rj[key].get<double>()) : std::string("not finite"); };
    report += "Seeds: " + rj["seeds"].dump() + "; max abs err " + err("max_abs_err") + ", max rel err " + err("max_rel_err") + ".\n\n";
    for (const auto& f : rj["failures"]) report += "- " + f["shape"].get<std::string>() + ": " + f["status"].get<std::string>() + " " + f["messages"].dump() + "\n";
  } else {
    report += "Not run: " + result.not_measured_because + ".\n";
  }
  report += "\n## Performance\n\nTimed with device events around the kernel alone, the L2 evicted before each repetition by reading a buffer of at least twice its size, median of the repetitions (harness v1).\n"
            "Peaks: bandwidth " + (bw > 0 ? fmt(bw) + " TB/s <- " + bw_cite : std::string("not recorded")) + "; matrix " +
            (mpeak > 0 ? fmt(mpeak) + " TFLOPS <- " + mpeak_cite : std::string("not recorded")) + "; vector " +
            (vpeak > 0 ? fmt(vpeak) + " TFLOPS <- " + vpeak_cite : std::string("not recorded")) +
            (mbw > 0 ? "; measured copy " + fmt(mbw) + " TB/s <- " + mbw_cite : std::string("")) + ".\n\n" + perf_table;
  if (rj.is_object() && rj["latency_us_geomean"].is_number())
    report += "\nGeomean latency " + fmt(rj["latency_us_geomean"].get<double>()) + " us; speedup vs reference (geomean) " +
              (rj["speedup_vs_ref_geomean"].is_number() ? fmt(rj["speedup_vs_ref_geomean"].get<double>(), 3) + "x" : "-") + ".\n";
  report += "\n## Not measured\n\n" + (result.not_measured_because.empty() ? std::string("Every planned shape ran.\n") : result.not_measured_because + ": no figure above was invented.\n");
  report += "\n## Records consulted\n\n";
  for (const auto& item : plan["records_consulted"]) report += "- " + item["record"].get<std::string>() + " (query " + item["query_id"].get<std::string>() + ")\n";
  write_text(ws / "baseline_report.md", report);

  // memory/v0.json
  MemoryStore memory(ws.string());
  ordered_json record;
  record["schema_version"] = 1;
  record["version"] = "v0";
  record["masked"] = false;
  record["timestamp"] = now_iso8601();
  record["device"] = device_label.empty() ? ordered_json() : ordered_json(device_label);
  ordered_json perf;
  perf["latency_us"] = rj.is_object() && rj["latency_us_geomean"].is_number() ? rj["latency_us_geomean"] : ordered_json();
  perf["latency_us_by_shape"] = rj.is_object() ? rj["latency_us_by_shape"] : ordered_json::object();
  perf["tflops"] = geomean(tflops_all);
  perf["bandwidth_gbps"] = geomean(gbps_all);
  perf["tflops_peak_utilization_pct"] = geomean(tf_pct_all);
  perf["bandwidth_peak_utilization_pct"] = geomean(bw_pct_all);
  perf["sol_efficiency_geomean"] = geomean(sol_eff);
  perf["reference_latency_us_by_shape"] = rj.is_object() ? rj["reference_latency_us_by_shape"] : ordered_json::object();
  perf["speedup_vs_ref_geomean"] = rj.is_object() && rj["speedup_vs_ref_geomean"].is_number() ? rj["speedup_vs_ref_geomean"] : ordered_json();
  record["performance"] = perf;
  record["optimization"] = {{"action_category", "baseline"},
                            {"action_description", request.kernel_file.empty() ? "V0 from the kwiki " + pattern + " template" : "V0: user kernel " + request.kernel_file}};
  record["correctness"] = {{"status", result.status == "PASS" || result.status == "MISMATCH" || result.status == "COMPILE_FAIL" || result.status == "RUNTIME_FAIL" ||
                                              result.status == "TIMEOUT_FAIL"
                                          ? result.status
                                          : "NOT_RUN"},
                           {"max_abs_err", rj.is_object() ? rj["max_abs_err"] : ordered_json()},
                           {"max_rel_err", rj.is_object() ? rj["max_rel_err"] : ordered_json()}};
  record["quality_gate"] = {{"result", !result.measured ? "not_measured" : (result.status == "PASS" ? "pass" : "fail")},
                            {"failure_reason", result.measured && result.status != "PASS" ? ordered_json(result.status) : ordered_json()}};
  record["pitfalls_and_fixes"] = ordered_json::array();
  ordered_json refs = ordered_json::array();
  for (const auto& item : plan["records_consulted"])
    refs.push_back({{"source_type", "gpu-wiki"}, {"record_id", item["record"]}, {"query_id", item["query_id"]}, {"description", item["aspect"]}});
  record["references"] = refs;
  record["git_commit_hash"] = nullptr;
  if (fs::exists(ws / "memory" / "v0.json")) fs::remove(ws / "memory" / "v0.json");
  memory.write(record);

}

}  // namespace kwiki::detail
