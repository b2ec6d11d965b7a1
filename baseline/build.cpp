// kwiki baseline's build stage: the GPU source compiled (nvcc, clang HIP) with its static evidence, or the CPU twin.
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "file_util.hpp"
#include "kwiki/error.hpp"
#include "stages.hpp"
#include "twin_build.hpp"

namespace kwiki::detail {
namespace {

std::string cuda_compiler() {
  for (std::string candidate : {std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "") + "/bin/nvcc",
                                std::string("/usr/local/cuda/bin/nvcc")})
    if (candidate.size() > 9 && fs::exists(candidate)) return candidate;
  return find_program("nvcc");
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
  const fs::path root = cache_folder() / "rocm-root";
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

// The HIP compilers to try, in order: $KWIKI_HIPCC first, then the newest clang on PATH.
std::vector<std::string> hip_compilers() {
  std::vector<std::string> out;
  if (const char* named = std::getenv("KWIKI_HIPCC"); named && *named) out.push_back(find_program(named));
  for (const char* candidate : {"clang++-22", "clang++-21", "clang++-20", "clang++-19"})
    if (std::string p = find_program(candidate); !p.empty()) out.push_back(p);
  return out;
}

// --device cpu: the family's twin library is the "kernel" (build/kernel_cpu.so).
void build_cpu(Context& c) {
  // The generator's CPU kernel (its own source), else the families' twin library.
  const TwinLibrary twin = c.cpu_source.empty() ? build_twin_library() : build_source_library(c.cpu_source, "kwiki_generated");
  c.evidence["target"] = "cpu (the family's twin)";
  if (twin.path.empty()) {
    c.result.status = "COMPILE_FAIL";
    c.result.exit_code = 4;
    c.result.notes.push_back("the CPU twin could not be built: " + twin.error);
    c.evidence["compiled"] = false;
    return;
  }
  fs::create_directories(c.ws / "build");
  fs::copy_file(twin.path, c.ws / "build" / "kernel_cpu.so", fs::copy_options::overwrite_existing);
  c.result.compiled = true;
  c.evidence["compiled"] = true;
  c.evidence["compiler"] = twin.compiler;
}

void build_gpu(Context& c) {
  fs::create_directories(c.profiles);
  fs::create_directories(c.ws / "build");
  std::string compiler;
  std::string& skip_compile = c.skip_compile;
  const std::string& target = c.header.target;
  const bool amd = c.amd;
  BaselineResult& result = c.result;
  const fs::path& profiles = c.profiles;
  const fs::path& ws = c.ws;
  const fs::path& kernel_path = c.kernel_path;
  // device_flags compile the kernel (also to a listing); link_flags make the loadable library.
  Args device_flags, link_flags;
  const auto targets_gfx950 = [](const std::string& clang) {
    return run_tool({clang, "-x", "hip", "--offload-arch=gfx950", "-nogpulib", "--offload-device-only", "-S", "-o", "/dev/null", "-"}, 120, "\n").ok();
  };
  if (!amd) {
    compiler = cuda_compiler();
    const std::string sm = target.substr(3);  // "90a" of "sm_90a": a row of the target table
    device_flags = {"-O3", "-std=c++17", "-gencode=arch=compute_" + sm + ",code=sm_" + sm, "-Xptxas", "-v", "-lineinfo"};
    // Hidden host symbols: GCC makes the static locals of inline functions (a template's "attribute
    // already set" cache) GNU-unique, bound process-wide even under RTLD_LOCAL, so a second kernel.so
    // of the same template in one process read the first one's cache, skipped its own
    // cudaFuncSetAttribute and failed its launch (cudaErrorInvalidValue). Only KWIKI_EXPORT stays visible.
    link_flags = {"-shared", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-Xcompiler", "-fvisibility-inlines-hidden",
                  "-Xcompiler", "-fno-gnu-unique"};
  } else {
    // $KWIKI_HIPCC, else the newest clang with HIP support: one that can target gfx950 wins when present.
    for (const std::string& path : hip_compilers()) {
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
      // Nothing was built, so this is a failure to build (exit 4), not "built but not measured".
      result.status = "COMPILE_FAIL";
      result.exit_code = 4;
      result.notes.push_back("no compiler here targets gfx950 (" + compiler + " cannot; CDNA4 needs LLVM 20 or newer): set KWIKI_HIPCC to one, "
                             "for example ROCm's /opt/rocm/llvm/bin/clang++; kernel.hip and the plan are ready for it");
      c.evidence["target"] = target;
      c.evidence["compiled"] = false;
      c.evidence["not_compiled_because"] = "no compiler that targets gfx950 (set KWIKI_HIPCC)";
      return;
    }
    device_flags = {"-x", "hip", "--offload-arch=" + (target == "gfx942" ? std::string("gfx942:sramecc+:xnack-") : target), "--rocm-path=" + rocm,
                    "-O3", "-std=c++17"};
    link_flags = {"-shared", "-fPIC", "-L/usr/lib/x86_64-linux-gnu", "-lamdhip64"};
  }
  ordered_json& evidence = c.evidence;
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
    const fs::path cache = cache_folder() / "builds" / hash64_hex(c.source + "\n" + flag_text + "\n" + version);
    const fs::path so = cache / "kernel.so";
    if (!fs::exists(so)) {
      fs::create_directories(cache);
      // A private output name: two baselines building the same kernel at once (several tasks of
      // one family) must not write one file; the first rename wins, the second replaces it with
      // the same bytes.
      std::string tmp = (cache / ".kernel.so.kwiki-tmp-XXXXXX").string();
      if (const int fd = ::mkstemp(tmp.data()); fd >= 0) ::close(fd);
      const ProcessResult build = run_tool(concat(concat(Args{compiler}, device_flags), concat(link_flags, {"-o", tmp, kernel_path.string()})));
      const std::string build_log = build.started ? build.out + (build.timed_out ? "\nkwiki: the compiler was stopped after 600 s\n" : "") : build.error + "\n";
      write_text(cache / "build.log", build_log);
      if (!build.ok()) {
        ::unlink(tmp.c_str());
        write_text(profiles / "build.log", build_log);
        result.status = "COMPILE_FAIL";
        result.exit_code = 4;
        result.notes.push_back("build failed: see profiles/v0/build.log");
      } else {
        fs::rename(tmp, so);
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
        const ProcessResult listing = run_tool(concat(concat(Args{compiler}, device_flags),
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
        const ProcessResult sass =
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
          const ProcessResult ptx =
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

}

}  // namespace

void build_stage(Context& c) {
  if (c.candidate == Candidate::kUserPython) {
    c.evidence["target"] = c.cpu ? "cpu" : c.header.target;
    c.evidence["compiled"] = false;
    c.evidence["not_compiled_because"] = "a Python Model: nothing to compile";
    c.result.compiled = true;  // nothing to build: the harness runs the user's Model as it is
    return;
  }
  if (c.cpu) build_cpu(c);
  else if (c.dsl && c.candidate == Candidate::kTemplate) build_dsl(c);
  else build_gpu(c);
}

}  // namespace kwiki::detail
