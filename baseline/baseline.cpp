// kwiki baseline: generate the V0 kernel, build it (cached), run the harness, report, commit.
#include "kwiki/baseline.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "trace.hpp"
#include "embedded_files.hpp"
#include "file_util.hpp"
#include "kwiki/error.hpp"
#include "kwiki/memory.hpp"
#include "subprocess.hpp"
#include "target.hpp"

namespace kwiki {
namespace detail {

std::string embedded_file(const std::string& name) {
  for (const EmbeddedFile* f = kBaselineFiles; f->name; ++f)
    if (name == f->name) return f->text;
  return {};
}

}  // namespace detail
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

using Args = std::vector<std::string>;

// A compiler or tool: argument vector, stdout and stderr together, killed at the deadline.
detail::ProcessResult run_tool(const Args& argv, double timeout_seconds = 600, const std::string& stdin_text = {}) {
  detail::ProcessSpec spec;
  spec.argv = argv;
  spec.timeout_seconds = timeout_seconds;
  spec.stdin_text = stdin_text;
  return detail::run_process(spec);
}

Args concat(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw Error(ErrorCode::kIo, "cannot write", p.string());
}

std::string element_type(const std::string& dtype, const std::string& vendor) {
  if (dtype == "fp32") return "float";
  if (dtype == "fp16") return vendor == "amd" ? "__half" : "half";
  return vendor == "amd" ? "kwiki_bf16" : "__nv_bfloat16";  // kwiki_bf16: HIP's bf16, or its bits before ROCm 5.7
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string cuda_compiler() {
  for (std::string candidate : {std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "") + "/bin/nvcc",
                                std::string("/usr/local/cuda/bin/nvcc")})
    if (candidate.size() > 9 && fs::exists(candidate)) return candidate;
  return detail::find_program("nvcc");
}

int count_matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// How often each instruction pattern occurs in a listing, as {name: count} in the given order.
ordered_json instruction_counts(const std::string& listing, std::initializer_list<std::pair<const char*, const char*>> patterns) {
  ordered_json counts = ordered_json::object();
  for (const auto& [name, pattern] : patterns) counts[name] = count_matches(listing, pattern);
  return counts;
}

// Debian ships the ROCm device libraries (rocm-device-libs 5.2) without the per-target ISA
// constant of gfx942/gfx950. kwiki builds a ROCm root for clang in its cache: links to Debian's
// bitcode and headers, plus the missing oclc_isa_version_<gfx>.bc assembled from LLVM IR.
std::string prepare_rocm_root(const std::string& clang) {
  const fs::path system_bitcode = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode";
  if (!fs::exists(system_bitcode / "ockl.bc")) return {};
  const char* cache_env = std::getenv("XDG_CACHE_HOME");
  const fs::path root = fs::path(cache_env && *cache_env ? cache_env : std::string(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") + "/.cache") /
                        "kwiki" / "rocm-root";
  std::error_code ec;
  fs::create_directories(root / "amdgcn" / "bitcode", ec);
  for (const auto& e : fs::directory_iterator(system_bitcode, ec)) {
    const fs::path link = root / "amdgcn" / "bitcode" / e.path().filename();
    if (!fs::exists(link)) fs::create_symlink(e.path(), link, ec);
  }
  if (!fs::exists(root / "include")) fs::create_directory_symlink("/usr/include", root / "include", ec);
  const std::string llvm_as = fs::path(clang).parent_path() / ("llvm-as" + std::string(clang.ends_with("-19") ? "-19" : ""));
  for (const auto& [gfx, version] : std::vector<std::pair<std::string, int>>{{"942", 9402}, {"950", 9500}}) {
    const fs::path bc = root / "amdgcn" / "bitcode" / ("oclc_isa_version_" + gfx + ".bc");
    if (fs::exists(bc)) continue;
    const fs::path ll = root / ("oclc_isa_version_" + gfx + ".ll");
    write_text(ll, "; The ISA-version constant the ROCm device libraries read (" + std::to_string(version) + " = gfx" + gfx + ").\n"
                   "target triple = \"amdgcn-amd-amdhsa\"\n"
                   "@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 " + std::to_string(version) +
                   ", align 4\n");
    run_tool({fs::exists(llvm_as) ? llvm_as : std::string("llvm-as-19"), ll.string(), "-o", bc.string()}, 120);
  }
  return root.string();
}

struct Device {
  bool present = false;
  std::string name, uuid, driver;
};

Device detect_nvidia_device() {
  Device d;
  const detail::ProcessResult r = run_tool({"nvidia-smi", "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"}, 60);
  if (!r.ok() || r.out.empty()) return d;
  std::stringstream ss(r.out.substr(0, r.out.find('\n')));
  std::getline(ss, d.name, ',');
  std::getline(ss, d.uuid, ',');
  std::getline(ss, d.driver, ',');
  auto trim = [](std::string& s) {
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(" \r\n") + 1);
  };
  trim(d.name);
  trim(d.uuid);
  trim(d.driver);
  d.present = !d.name.empty();
  return d;
}

// "h200-sxm" -> "H200": the family word a device name carries.
bool device_matches(const std::string& device_name, const std::string& product) {
  std::string family = product.substr(0, product.find('-'));
  for (auto& c : family) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string name = device_name;
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto pos = name.find(family);
  if (pos == std::string::npos) return false;
  const std::size_t end = pos + family.size();
  return end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));  // H20 is not H200
}

std::string fmt(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

}  // namespace

std::vector<std::string> template_patterns() {
  std::vector<std::string> out;
  for (const detail::EmbeddedFile* f = detail::kBaselineFiles; f->name; ++f) {
    const std::string n = f->name;
    if (n.size() > 4 && n.ends_with(".cuh") && n != "kwiki_compat.cuh") out.push_back(n.substr(0, n.size() - 4));
  }
  return out;
}

std::string template_source(const std::string& pattern, const std::string& dtype, const std::string& vendor) {
  const std::string body = detail::embedded_file(pattern + ".cuh");
  if (body.empty()) return {};
  const std::string compat = detail::embedded_file("kwiki_compat.cuh");
  std::string inlined;
  std::stringstream ss(body);
  for (std::string line; std::getline(ss, line);) {
    if (line.find("#include") != std::string::npos && line.find("kwiki_compat.cuh") != std::string::npos) {
      inlined += "// ---- kwiki_compat.cuh (inlined) ----\n" + compat + "\n// ---- end of kwiki_compat.cuh ----\n";
    } else {
      inlined += line + "\n";
    }
  }
  std::string out = "// V0 " + pattern + " kernel generated by kwiki baseline from its template (launcher ABI v1).\n";
  out += "// Element type and launcher are fixed here; edit freely and rerun `kwiki baseline --kernel kernel." +
         std::string(vendor == "amd" ? "hip" : "cu") + "`.\n";
  out += "#define KWIKI_T " + element_type(dtype, vendor) + "\n#define KWIKI_DEFINE_LAUNCHER 1\n\n" + inlined;
  return out;
}

namespace {

// A plan is read back from a folder anyone may have written: every field kwiki puts into a
// file name, a generated source or a compiler's arguments is checked against what kwiki writes.
std::string plan_field(const ordered_json& plan, const char* pointer, const fs::path& plan_path) {
  const ordered_json::json_pointer at(pointer);
  if (!plan.contains(at) || !plan[at].is_string())
    throw Error(ErrorCode::kBadInput, std::string("the plan has no string at ") + pointer + "; run `kwiki plan` again", plan_path.string(), pointer);
  return plan[at].get<std::string>();
}

bool only_chars(const std::string& s, const char* extra) {
  return !s.empty() && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(), [&](char c) { return std::isalnum(static_cast<unsigned char>(c)) || std::strchr(extra, c); });
}

struct PlanHeader {
  std::string pattern, vendor, product, target, dtype;
};

PlanHeader read_plan_header(const ordered_json& plan, const fs::path& plan_path) {
  PlanHeader h{plan_field(plan, "/pattern/name", plan_path), plan_field(plan, "/target/vendor", plan_path),
               plan_field(plan, "/target/product", plan_path), plan_field(plan, "/target/compile_target", plan_path),
               plan_field(plan, "/task/dtype", plan_path)};
  const auto refuse = [&](const char* pointer, const std::string& why) { throw Error(ErrorCode::kBadInput, why, plan_path.string(), pointer); };
  if (!only_chars(h.pattern, "_")) refuse("/pattern/name", "the plan's pattern \"" + h.pattern + "\" is not a pattern name");
  if (h.vendor != "nvidia" && h.vendor != "amd") refuse("/target/vendor", "the plan's vendor must be nvidia or amd");
  if (!only_chars(h.product, "-_. ")) refuse("/target/product", "the plan's product \"" + h.product + "\" is not a product name");
  const detail::ArchTarget* arch = detail::find_compile_target(h.target);
  if (!arch || h.vendor != arch->vendor) {
    std::string known;
    for (const auto& row : detail::kArchTargets) known += std::string(known.empty() ? "" : ", ") + row.compile_target;
    refuse("/target/compile_target", "the plan's compile_target \"" + h.target + "\" is not one kwiki compiles for " + h.vendor + " (" + known + ")");
  }
  if (!only_chars(h.dtype, "_")) refuse("/task/dtype", "the plan's dtype \"" + h.dtype + "\" is not a dtype name");
  return h;
}

BaselineResult baseline_stages(const BaselineRequest& request);

}  // namespace

BaselineResult run_baseline(const BaselineRequest& request) {
  try {
    return baseline_stages(request);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kBadInput, std::string("plans/v0_plan.json is not a plan this kwiki wrote (") + e.what() + "); run `kwiki plan` again",
                (fs::absolute(request.workspace) / "plans" / "v0_plan.json").string());
  }
}

namespace {

BaselineResult baseline_stages(const BaselineRequest& request) {
  BaselineResult result;
  const fs::path ws = fs::absolute(request.workspace);
  const fs::path plan_path = ws / "plans" / "v0_plan.json";
  if (!fs::exists(plan_path)) throw Error(ErrorCode::kBadInput, "no plans/v0_plan.json here: run `kwiki plan` first", ws.string());
  ordered_json plan;
  try {
    plan = ordered_json::parse(read_text(plan_path));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidJson, std::string("the plan is not valid JSON: ") + e.what(), plan_path.string());
  }
  const PlanHeader header = read_plan_header(plan, plan_path);
  const std::string &pattern = header.pattern, &vendor = header.vendor, &product = header.product, &target = header.target,
                    &dtype = header.dtype;
  const bool amd = vendor == "amd";

  // 1. The kernel source.
  const fs::path kernel_path = ws / (amd ? "kernel.hip" : "kernel.cu");
  std::string source;
  if (!request.kernel_file.empty()) {
    if (!fs::exists(request.kernel_file)) throw Error(ErrorCode::kBadInput, "--kernel file not found", request.kernel_file);
    source = read_text(request.kernel_file);
    if (source.find("kwiki_launch") == std::string::npos)
      throw Error(ErrorCode::kBadInput, "the kernel defines no kwiki_launch (launcher ABI v1: see baseline/kernels/ABI.md)", request.kernel_file);
  } else {
    const std::string template_name = pattern == "fp8_quant" ? "fp8_quant" : pattern;
    source = template_source(template_name, dtype, vendor);
    if (source.empty())
      throw Error(ErrorCode::kBadInput, "kwiki has no V0 template for pattern \"" + pattern + "\"; write the kernel (launcher ABI v1) and pass --kernel FILE",
                  plan_path.string());
  }
  if (request.kernel_file.empty() || fs::absolute(request.kernel_file) != kernel_path) write_text(kernel_path, source);
  result.kernel_path = kernel_path.string();

  // 2. The shim and the harness.
  std::string shim = detail::embedded_file("kernel_shim.py");
  const std::string fp8_max = (amd && target == "gfx942") ? "240" : "448";
  shim = std::regex_replace(shim, std::regex("@PATTERN@"), pattern);
  shim = std::regex_replace(shim, std::regex("@FP8_MAX@"), fp8_max);
  // row_reduce: the op and the kept dim the planner read from the reference (0 / False elsewhere).
  const ordered_json& pattern_json = plan["pattern"];
  if (pattern == "row_reduce" && request.kernel_file.empty() && !pattern_json.contains("reduce_op_code"))
    throw Error(ErrorCode::kBadInput, "the plan names row_reduce but no reduction kwiki's template serves (sum / mean / max over dim -1 of an input, "
                                      "output in the input's dtype); write the kernel and pass --kernel FILE",
                plan_path.string());
  shim = std::regex_replace(shim, std::regex("@REDUCE_OP@"), std::to_string(pattern_json.value("reduce_op_code", 0)));
  shim = std::regex_replace(shim, std::regex("@KEEPDIM@"), pattern_json.value("keepdim", false) ? "True" : "False");
  write_text(ws / "kernel.py", shim);
  write_text(ws / "test_kernel.py", detail::embedded_file("test_kernel.py"));
  if (!fs::exists(ws / "reference.py") && fs::exists(ws / "task" / "reference.py")) fs::copy_file(ws / "task" / "reference.py", ws / "reference.py");

  // 3. Build, cached by source, flags and compiler.
  const fs::path profiles = ws / "profiles" / "v0";
  fs::create_directories(profiles);
  fs::create_directories(ws / "build");
  std::string compiler, skip_compile;
  // device_flags compile the kernel (also to a listing); link_flags make the loadable library.
  Args device_flags, link_flags;
  const auto targets_gfx950 = [](const std::string& clang) {
    return run_tool({clang, "-x", "hip", "--offload-arch=gfx950", "-nogpulib", "--offload-device-only", "-S", "-o", "/dev/null", "-"}, 120, "\n").ok();
  };
  if (!amd) {
    compiler = cuda_compiler();
    const std::string sm = target.substr(3);  // "90a" of "sm_90a": a row of the target table
    device_flags = {"-O3", "-std=c++17", "-gencode=arch=compute_" + sm + ",code=sm_" + sm, "-Xptxas", "-v", "-lineinfo"};
    link_flags = {"-shared", "-Xcompiler", "-fPIC"};
  } else {
    // The newest clang with HIP support wins: a compiler that can target gfx950 is used when present.
    for (const char* candidate : {"clang++-22", "clang++-21", "clang++-20", "clang++-19"}) {
      const std::string path = detail::find_program(candidate);
      if (path.empty()) continue;
      if (compiler.empty()) compiler = path;
      if (target == "gfx950" && targets_gfx950(path)) {
        compiler = path;
        break;
      }
    }
    const std::string rocm = compiler.empty() ? "" : prepare_rocm_root(compiler);
    if (!compiler.empty() && rocm.empty()) {
      skip_compile = "Debian's rocm-device-libs are not installed (scripts/dev.sh deps installs them)";
      compiler.clear();
    }
    if (!compiler.empty() && target == "gfx950" && !targets_gfx950(compiler)) {
      skip_compile = compiler + " cannot target gfx950 (CDNA4 needs LLVM 20 or newer); kernel.hip, the plan and this report are ready for such a compiler";
      compiler.clear();
    }
    device_flags = {"-x", "hip", "--offload-arch=" + (target == "gfx942" ? std::string("gfx942:sramecc+:xnack-") : target), "--rocm-path=" + rocm,
                    "-O3", "-std=c++17"};
    link_flags = {"-shared", "-fPIC", "-L/usr/lib/x86_64-linux-gnu", "-lamdhip64"};
  }
  ordered_json evidence;
  evidence["target"] = target;
  if (compiler.empty()) {
    if (skip_compile.empty()) skip_compile = std::string("no ") + (amd ? "HIP compiler (clang++-19) found" : "CUDA compiler (nvcc) found");
    result.notes.push_back("not compiled: " + skip_compile);
    result.not_measured_because = "not compiled: " + skip_compile;
    evidence["compiled"] = false;
    evidence["not_compiled_because"] = skip_compile;
  } else {
    const std::string version = run_tool({compiler, "--version"}, 60).out;
    std::string flag_text;
    for (const auto& f : concat(device_flags, link_flags)) flag_text += f + '\x1f';
    const char* cache_env = std::getenv("XDG_CACHE_HOME");
    const fs::path cache = fs::path(cache_env && *cache_env ? cache_env : std::string(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") + "/.cache") /
                           "kwiki" / "builds" / detail::hash64_hex(source + "\n" + flag_text + "\n" + version);
    const fs::path so = cache / "kernel.so";
    if (!fs::exists(so)) {
      fs::create_directories(cache);
      const detail::ProcessResult build =
          run_tool(concat(concat(Args{compiler}, device_flags), concat(link_flags, {"-o", (cache / "kernel.so.tmp").string(), kernel_path.string()})));
      const std::string build_log = build.started ? build.out + (build.timed_out ? "\nkwiki: the compiler was stopped after 600 s\n" : "") : build.error + "\n";
      write_text(cache / "build.log", build_log);
      if (!build.ok()) {
        write_text(profiles / "build.log", build_log);
        result.status = "COMPILE_FAIL";
        result.exit_code = 4;
        result.notes.push_back("build failed: see profiles/v0/build.log");
      } else {
        fs::rename(cache / "kernel.so.tmp", so);
      }
    } else {
      result.notes.push_back("build cache hit: " + cache.string());
    }
    if (fs::exists(so)) {
      result.compiled = true;
      fs::copy_file(so, ws / "build" / "kernel.so", fs::copy_options::overwrite_existing);
      const std::string log = read_text(cache / "build.log");
      write_text(profiles / "build.log", log);
      evidence["compiled"] = true;
      // Static evidence: the compiler's resource report and the instruction listing.
      std::smatch m;
      const std::regex regs(R"(Used (\d+) registers)"), spill(R"((\d+) bytes spill stores, (\d+) bytes spill loads)"), stack(R"((\d+) bytes stack frame)");
      int max_regs = 0, spill_bytes = 0, stack_bytes = 0;
      for (auto it = std::sregex_iterator(log.begin(), log.end(), regs); it != std::sregex_iterator(); ++it) max_regs = std::max(max_regs, std::stoi((*it)[1]));
      for (auto it = std::sregex_iterator(log.begin(), log.end(), spill); it != std::sregex_iterator(); ++it)
        spill_bytes = std::max(spill_bytes, std::stoi((*it)[1]) + std::stoi((*it)[2]));
      for (auto it = std::sregex_iterator(log.begin(), log.end(), stack); it != std::sregex_iterator(); ++it) stack_bytes = std::max(stack_bytes, std::stoi((*it)[1]));
      if (!amd) {
        evidence["max_registers_per_thread"] = max_regs;
        evidence["spill_bytes"] = spill_bytes;
        evidence["stack_frame_bytes"] = stack_bytes;
      }
      if (amd) {
        // The device ISA listing: the same source compiled device-only to assembly.
        const detail::ProcessResult listing = run_tool(concat(concat(Args{compiler}, device_flags),
                                                              {"--offload-device-only", "-S", "-o", (profiles / ("kernel-" + target + ".s")).string(),
                                                               kernel_path.string()}));
        if (listing.ok()) {
          const std::string isa = read_text(profiles / ("kernel-" + target + ".s"));
          evidence["listing"] = "profiles/v0/kernel-" + target + ".s";
          evidence["instructions"] = instruction_counts(isa, {{"v_mfma", R"(\bv_mfma_)"},
                                      {"global_load_dwordx4", R"(\bglobal_load_dwordx4\b)"},
                                      {"buffer_load_dwordx4", R"(\bbuffer_load_dwordx4\b)"},
                                      {"global_store_dwordx4", R"(\bglobal_store_dwordx4\b)"},
                                      {"ds_read_b128", R"(\bds_read_b128\b)"},
                                      {"ds_write_b128", R"(\bds_write_b128\b)"},
                                      {"scratch (spills)", R"(\bscratch_(load|store))"}});
          std::smatch vg;
          const std::regex vgpr(R"(;\s*NumVgprs:\s*(\d+))"), scratch(R"(;\s*ScratchSize:\s*(\d+))");
          int max_vgpr = 0, max_scratch = 0;
          for (auto it = std::sregex_iterator(isa.begin(), isa.end(), vgpr); it != std::sregex_iterator(); ++it) max_vgpr = std::max(max_vgpr, std::stoi((*it)[1]));
          for (auto it = std::sregex_iterator(isa.begin(), isa.end(), scratch); it != std::sregex_iterator(); ++it) max_scratch = std::max(max_scratch, std::stoi((*it)[1]));
          evidence["max_vgprs"] = max_vgpr;
          evidence["scratch_bytes"] = max_scratch;
          evidence["spill_bytes"] = max_scratch;
        }
      }
      if (!amd) {
        const fs::path cuobjdump = fs::path(compiler).parent_path() / "cuobjdump";
        const detail::ProcessResult sass =
            run_tool({fs::exists(cuobjdump) ? cuobjdump.string() : std::string("cuobjdump"), "--dump-sass", (ws / "build" / "kernel.so").string()}, 300);
        const std::string& sass_text = sass.out;
        if (sass.ok()) {
          write_text(profiles / "kernel.sass", sass_text);
          evidence["listing"] = "profiles/v0/kernel.sass";
          evidence["instructions"] = instruction_counts(sass_text, {{"LDG.E.128", R"(LDG\.E\.128)"},
                                      {"STG.E.128", R"(STG\.E\.128)"},
                                      {"HMMA", R"(\bHMMA)"},
                                      {"HGMMA", R"(\bHGMMA)"},
                                      {"LDSM (ldmatrix)", R"(\bLDSM)"},
                                      {"LDGSTS (cp.async)", R"(\bLDGSTS)"},
                                      {"UTMALDG (TMA)", R"(\bUTMALDG)"},
                                      {"LDL/STL (local memory)", R"(\b(LDL|STL)\b)"}});
        } else {
          // No disassembler here (a minimal toolkit): the PTX shows the same choices one level up.
          Args ptx_flags = device_flags;
          for (auto& f : ptx_flags) f = std::regex_replace(f, std::regex("code=sm_"), "code=compute_");
          const detail::ProcessResult ptx =
              run_tool(concat(concat(Args{compiler}, ptx_flags), {"-ptx", "-o", (profiles / "kernel.ptx").string(), kernel_path.string()}));
          if (ptx.ok()) {
            const std::string text = read_text(profiles / "kernel.ptx");
            evidence["listing"] = "profiles/v0/kernel.ptx (no cuobjdump here; SASS evidence needs the full CUDA toolkit)";
            evidence["instructions"] = instruction_counts(text, {{"ld.global.v4 (16-byte loads)", R"(ld\.global(\.[a-z0-9_]+)*\.v4\.)"},
                                        {"st.global.v4 (16-byte stores)", R"(st\.global(\.[a-z0-9_]+)*\.v4\.)"},
                                        {"mma.sync", R"(mma\.sync)"},
                                        {"wgmma", R"(wgmma\.)"},
                                        {"ldmatrix", R"(ldmatrix)"},
                                        {"cp.async", R"(cp\.async\.(ca|cg))"},
                                        {"cp.async.bulk (TMA)", R"(cp\.async\.bulk)"},
                                        {"ld.local/st.local", R"((ld|st)\.local)"}});
          }
        }
      }
    }
  }
  result.static_evidence = evidence;

  // 4. Run where the plan's device is.
  std::string device_label;
  if (result.compiled) {
    const Device device = amd ? Device{} : detect_nvidia_device();
    if (!device.present) {
      result.not_measured_because = amd ? "no AMD GPU" : "no NVIDIA GPU on this machine";
    } else if (!device_matches(device.name, product) && !request.allow_other_device) {
      result.not_measured_because = "the GPU here is " + device.name + ", not the plan's " + product + " (pass --allow-other-device to run anyway)";
    } else if (!run_tool({detail::find_python(), "-c", "import torch"}, 120).ok()) {
      result.not_measured_because = "torch is not importable by " + detail::find_python() + " here, so the reference cannot run (set KWIKI_PYTHON)";
    } else {
      device_label = device.name + " (" + device.uuid + ")" + (device_matches(device.name, product) ? "" : " [not the plan's product]");
      std::string shapes;
      for (const auto& s : request.shape_ids) shapes += (shapes.empty() ? "" : ",") + s;
      detail::ProcessSpec harness;
      harness.argv = {detail::find_python(), "test_kernel.py", "--version", "v0"};
      if (!shapes.empty()) harness.argv.insert(harness.argv.end(), {"--shapes", shapes});
      harness.cwd = ws.string();
      harness.set_env = {{"KWIKI_KERNEL_SO", (ws / "build" / "kernel.so").string()}, {"TEST_TIMEOUT_SEC", std::to_string(request.timeout_sec)}};
      // The harness bounds each case itself; this bounds the whole run (a hung import, a wedged device).
      const std::size_t cases = std::max<std::size_t>(1, request.shape_ids.empty() ? plan["shapes"].size() : request.shape_ids.size());
      harness.timeout_seconds = 120.0 + 4.0 * request.timeout_sec * static_cast<double>(cases);
      const detail::ProcessResult run_result = detail::run_process(harness);
      const std::string harness_log =
          run_result.started ? run_result.out + (run_result.timed_out ? "\nkwiki: the harness was stopped at its deadline\n" : "") : run_result.error;
      write_text(profiles / "test_kernel.log", harness_log);
      const auto pos = harness_log.rfind("[test_kernel] RESULT_JSON=");
      if (pos != std::string::npos) {
        std::string line = harness_log.substr(pos + 26);
        line = line.substr(0, line.find('\n'));
        result.result_json = ordered_json::parse(line, nullptr, false);  // no exceptions: a bad line is a RUNTIME_FAIL
      }
      const bool well_formed = !result.result_json.is_discarded() && result.result_json.is_object() &&
                               result.result_json.contains("all_pass") && result.result_json["all_pass"].is_boolean();
      if (pos == std::string::npos || !well_formed) {
        result.result_json = ordered_json();
        result.status = "RUNTIME_FAIL";
        result.exit_code = 4;
        result.notes.push_back(pos == std::string::npos ? "the harness printed no RESULT_JSON: see profiles/v0/test_kernel.log"
                                                        : "the harness's RESULT_JSON line is not a valid result: see profiles/v0/test_kernel.log");
      } else {
        result.measured = !result.result_json["latency_us_by_shape"].empty();
        result.status = result.result_json["all_pass"].get<bool>() ? "PASS" : "MISMATCH";
        for (const auto& f : result.result_json["failures"])
          if (f["status"] != "MISMATCH") result.status = f["status"];
        result.exit_code = result.status == "PASS" ? 0 : 1;
      }
    }
  }
  if (result.status.empty()) {
    result.status = "NOT_RUN";
    // Not compiled because the toolchain is absent is "not measured", not a failure.
    result.exit_code = result.compiled || !skip_compile.empty() ? kExitNotMeasured : 4;
    if (result.not_measured_because.empty()) result.not_measured_because = result.notes.empty() ? "not compiled" : result.notes.back();
  }

  // 5. Report, memory, commit.
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
  report += "- kernel: `" + kernel_path.filename().string() + "` (" + (request.kernel_file.empty() ? "kwiki template for " + pattern : "user kernel " + request.kernel_file) +
            "), shim `kernel.py`, harness `test_kernel.py`, reference `reference.py`\n";
  report += "- target: " + target + "; compiled: " + (result.compiled ? "yes" : "no") + "; status: **" + result.status + "**\n";
  report += "- device: " + (device_label.empty() ? "none used (not measured: " + result.not_measured_because + ")" : device_label) + "\n";
  if (rj.is_object() && rj.contains("environment")) report += "- environment: `" + rj["environment"].dump() + "`\n";
  report += "\n## Reference semantics\n\nPattern " + pattern + ", dtype " + dtype + "; see plans/v0_plan.md for inputs, outputs and the roofline.\n";
  report += "\n## V0 configuration\n\n";
  for (const auto& c : plan["design"]["choices"]) report += "- " + c["aspect"].get<std::string>() + ": " + c["choice"].get<std::string>() + " <- " + c["record"].get<std::string>() + "\n";
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
  for (const auto& c : plan["records_consulted"]) report += "- " + c["record"].get<std::string>() + " (query " + c["query_id"].get<std::string>() + ")\n";
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
  for (const auto& c : plan["records_consulted"])
    refs.push_back({{"source_type", "gpu-wiki"}, {"record_id", c["record"]}, {"query_id", c["query_id"]}, {"description", c["aspect"]}});
  record["references"] = refs;
  record["git_commit_hash"] = nullptr;
  if (fs::exists(ws / "memory" / "v0.json")) fs::remove(ws / "memory" / "v0.json");
  memory.write(record);

  if (request.commit && fs::exists(ws / ".git")) {
    const auto commit = [&](const char* message) {
      // Temporaries and the lock stay out even in a workspace whose .gitignore predates them.
      return detail::run_git(ws.string(), {"add", "-A", "--", ".", ":(exclude)*.kwiki-tmp-*", ":(exclude)*.kwiki-lock"}).ok() &&
             detail::run_git(ws.string(), {"commit", "-qm", message}).ok();
    };
    if (commit("V0: baseline kernel")) {
      const std::string hash = detail::run_git(ws.string(), {"rev-parse", "HEAD"}).out.substr(0, 40);
      memory.update("v0", {{"git_commit_hash", hash}});
      commit("V0: memory/v0.json");
    } else {
      result.notes.push_back("git commit failed in the workspace");
    }
  }
  return result;
}

}  // namespace
}  // namespace kwiki
