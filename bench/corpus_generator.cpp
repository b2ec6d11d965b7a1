// Generates synthetic, schema-valid corpora of any size for scale benchmarks and tests.
#include "corpus_generator.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

namespace kwiki::bench {
namespace {

const std::vector<std::string> kVendors = {"nvidia", "amd", "generic"};
const std::vector<std::string> kArchNvidia = {"hopper", "blackwell", "ampere", "generic"};
const std::vector<std::string> kArchAmd = {"cdna3", "cdna4", "generic"};
const std::vector<std::string> kDsl = {"cuda", "hip", "triton", "cutedsl", "flydsl", "gluon", "any"};
const std::vector<std::string> kOps = {"rmsnorm", "layernorm", "softmax", "gemm", "decode-attention", "rope",
                                       "fp8-quant", "moe-gating", "silu-and-mul", "reduction", "elementwise"};
const std::vector<std::string> kSymptoms = {"memory-bound", "register-pressure", "bank-conflict", "low-occupancy",
                                            "tail-effect", "uncoalesced", "launch-bound"};
const std::vector<std::string> kWords = {
    "vectorize", "loads", "shared", "memory", "warp", "shuffle", "reduction", "tile", "pipeline", "stage",
    "register", "spill", "occupancy", "bandwidth", "latency", "tensor", "core", "wgmma", "mfma", "swizzle",
    "bank", "conflict", "coalesced", "prefetch", "epilogue", "fusion", "split", "persistent", "launch",
    "graph", "block", "grid", "thread", "wave", "lds", "hbm", "cache", "l2", "flush", "accumulate", "fp32",
    "bf16", "fp8", "scale", "rounding", "saturate", "online", "softmax", "rescale", "kv", "page", "gqa"};

template <class T>
const T& pick(std::mt19937& rng, const std::vector<T>& v) {
  return v[rng() % v.size()];
}

std::string sentence(std::mt19937& rng, int words) {
  std::string s;
  for (int i = 0; i < words; ++i) s += (i ? " " : "") + pick(rng, kWords);
  return s + ".";
}

nlohmann::ordered_json kernel_record(std::mt19937& rng, std::size_t i) {
  const std::string vendor = pick(rng, kVendors);
  const std::string arch = vendor == "nvidia" ? pick(rng, kArchNvidia) : vendor == "amd" ? pick(rng, kArchAmd) : "generic";
  const std::string dsl = pick(rng, kDsl);
  const std::string op = pick(rng, kOps);
  const std::string id = vendor + "." + arch + "." + dsl + "." + op + ".synthetic-" + std::to_string(i);
  nlohmann::ordered_json r;
  r["schema"] = "clean-1.3";
  r["id"] = id;
  r["type"] = "technique-card";
  r["level"] = "operator";
  r["status"] = "active";
  r["episode_key"] = arch + "|" + dsl + "|" + op + "|synthetic-" + std::to_string(i) + "|operator";
  r["retrieval"] = {
      {"scope", {{"vendor", vendor}, {"arch", arch}, {"product", nullptr}, {"dsl", dsl}, {"operator_family", op},
                 {"operators", {op}}, {"shape_signature", nlohmann::ordered_json::object()}}},
      {"generality", {{"arch", arch}, {"language", dsl}, {"workload_family", "any"}}},
      {"signals", {{"metrics", nlohmann::ordered_json::object()}, {"shape_regime", {{"predicate", "*"}}},
                   {"symptoms", {pick(rng, kSymptoms)}}}},
      {"technique_tags", {pick(rng, kWords) + "-" + pick(rng, kWords)}},
      {"triggers", {sentence(rng, 10)}}};
  r["payload"] = {{"goal", sentence(rng, 12)},
                  {"problem", {{"target", arch}, {"statement", sentence(rng, 14)}}},
                  {"technique", sentence(rng, 5)},
                  {"what", sentence(rng, 30)},
                  {"when", "when " + sentence(rng, 25)},
                  {"why", sentence(rng, 25)},
                  {"caveats", {sentence(rng, 12), sentence(rng, 12)}}};
  r["evidence"] = {{"summary", {{"confidence", "documented"}}}, {"raw", nlohmann::ordered_json::object()}};
  r["worth"] = {{"rank", {{"score", (rng() % 100) / 100.0}, {"tier", "provisional"}}}, {"gain", {{"basis", "qualitative"}}}};
  return r;
}

nlohmann::ordered_json hardware_record(std::mt19937& rng, std::size_t i) {
  const std::string product = "synthetic-gpu-" + std::to_string(i);
  const double dense = 100.0 + static_cast<double>(rng() % 900);
  nlohmann::ordered_json r;
  r["schema"] = "hw-1.0";
  r["id"] = "nvidia.hopper.spec-sheet." + product;
  r["type"] = "spec-sheet";
  r["status"] = "current";
  r["identity"] = {{"vendor", "nvidia"}, {"arch", "hopper"}, {"product", product}, {"compute_capability", "9.0"},
                   {"sm_arch", "sm_90a"}, {"aliases", {"Synthetic GPU " + std::to_string(i)}}};
  r["facts"] = {{"summary", sentence(rng, 10)},
                {"peak_compute", {{{"dtype", "bf16"}, {"unit", "TFLOPS"}, {"unit_kind", "tensor-core"}, {"dense", dense},
                                   {"sparse_2to4", 2 * dense}, {"provenance", "vendor-published"}}}},
                {"memory", {{"capacity_gb", 80}, {"bandwidth_tb_s", 3.35}, {"provenance", "vendor-published"}}},
                {"compute_units", {{"sm_count", 132}, {"provenance", "vendor-published"}}}};
  r["provenance"] = {{"evidence_class", "vendor-published"},
                     {"sources", {{{"title", "synthetic"}, {"kind", "vendor-doc"}, {"ref", "https://example.invalid/"}}}}};
  return r;
}

}  // namespace

std::size_t generate_corpus(const std::string& root, std::size_t count, unsigned seed) {
  namespace fs = std::filesystem;
  std::mt19937 rng(seed);
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const bool hardware = i % 50 == 49;
    const auto record = hardware ? hardware_record(rng, i) : kernel_record(rng, i);
    const std::string id = record["id"];
    // Spread files over folders of at most 1,000 like a real corpus tree.
    const std::string dir = root + (hardware ? "/hardware_wiki/records/spec-sheet/nvidia/hopper"
                                             : "/kernel_wiki/records/technique-card/" + std::to_string(i / 1000));
    fs::create_directories(dir);
    const std::string file = hardware ? dir + "/" + id.substr(id.rfind('.') + 1) + ".json" : dir + "/" + id + ".json";
    std::ofstream out(file, std::ios::binary);
    const std::string text = record.dump(1);
    out << text << "\n";
    bytes += text.size() + 1;
  }
  return bytes;
}

}  // namespace kwiki::bench
