// Measures an AMD GPU's practical ceilings (device copy bandwidth, bf16 GEMM rate through rocBLAS,
// empty-kernel launch cost) and writes them as gpu-wiki measured-ceiling records (hw-1.0): the
// HIP counterpart of measure_ceilings.cu, same methods and record fields. Built and run by
// bench/measure_ceilings.sh on a ROCm machine (hipcc, rocBLAS). Without rocBLAS headers the GEMM
// measurement is left out and says so; the copy and launch measurements need only HIP.
#include <hip/hip_runtime.h>

#if __has_include(<rocblas/rocblas.h>)
#include <rocblas/rocblas.h>
#define KWIKI_HAVE_ROCBLAS 1
#else
#define KWIKI_HAVE_ROCBLAS 0
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#define KWIKI_HIP_CHECK(call)                                                                                   \
  do {                                                                                                          \
    const hipError_t kwiki_err_ = (call);                                                                       \
    if (kwiki_err_ != hipSuccess) {                                                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, hipGetErrorString(kwiki_err_)); \
      std::exit(1);                                                                                             \
    }                                                                                                           \
  } while (0)

namespace {

struct Sample {
  double median = 0, p10 = 0, p90 = 0;
  int n = 0;
};

Sample summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9), static_cast<int>(v.size())};
}

// Random-looking, non-zero bf16 bit patterns (zeros run faster than real data on matrix cores).
__global__ void fill_bf16(uint16_t* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float f = (static_cast<float>(h & 0xffff) / 65535.0f - 0.5f) * 2.0f;
    p[i] = static_cast<uint16_t>(__float_as_uint(f) >> 16);
  }
}

__global__ void fill_u32(unsigned* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = static_cast<unsigned>(i * 2654435761u);
}

// 16-byte vector copy, grid-stride (global_load_dwordx4 / global_store_dwordx4).
__global__ void copy_int4(const int4* __restrict__ in, int4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) out[i] = in[i];
}

__global__ void empty_kernel() {}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

struct Device {
  std::string name, gfx, uuid /* PCI bus id */, driver, runtime;
  int cu_count = 0, engine_clock_mhz = 0, mem_clock_mhz = 0, l2_bytes = 0;
};

Device describe_device() {
  Device d;
  hipDeviceProp_t p{};
  KWIKI_HIP_CHECK(hipGetDeviceProperties(&p, 0));
  d.name = p.name;
  d.gfx = p.gcnArchName;
  // The PCI address names the board in every ROCm release (hipDeviceProp_t.uuid is ROCm 6+ only).
  char bus[64] = {0};
  KWIKI_HIP_CHECK(hipDeviceGetPCIBusId(bus, sizeof bus, 0));
  d.uuid = bus;
  int driver = 0, runtime = 0;
  KWIKI_HIP_CHECK(hipDriverGetVersion(&driver));
  KWIKI_HIP_CHECK(hipRuntimeGetVersion(&runtime));
  d.driver = std::to_string(driver);
  d.runtime = std::to_string(runtime);
  d.cu_count = p.multiProcessorCount;
  d.engine_clock_mhz = p.clockRate / 1000;
  d.mem_clock_mhz = p.memoryClockRate / 1000;
  d.l2_bytes = p.l2CacheSize;
  return d;
}

template <class Body>
std::vector<double> time_reps(int warmup, int reps, Body body) {
  hipEvent_t start, stop;
  KWIKI_HIP_CHECK(hipEventCreate(&start));
  KWIKI_HIP_CHECK(hipEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) body();
  KWIKI_HIP_CHECK(hipDeviceSynchronize());
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    KWIKI_HIP_CHECK(hipEventRecord(start));
    body();
    KWIKI_HIP_CHECK(hipEventRecord(stop));
    KWIKI_HIP_CHECK(hipEventSynchronize(stop));
    float t = 0;
    KWIKI_HIP_CHECK(hipEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  KWIKI_HIP_CHECK(hipGetLastError());
  KWIKI_HIP_CHECK(hipEventDestroy(start));
  KWIKI_HIP_CHECK(hipEventDestroy(stop));
  return ms;
}

struct Options {
  std::string product = "mi300x", vendor = "amd", arch = "cdna3", out_dir = ".";
  std::string spec_record = "amd.cdna3.spec-sheet.mi300x";
  double spec_bandwidth_tb_s = 5.3, spec_bf16_tflops = 1307.4;
};

void write_record(const Options& o, const Device& d, const std::string& slug, const std::string& metric, const std::string& summary,
                  double value, const std::string& unit, const Sample& s, const std::string& method, const std::string& spec_field,
                  double spec_value, const std::vector<std::string>& notes) {
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const std::string id = o.vendor + "." + o.arch + ".measured-ceiling." + o.product + "-" + slug;
  const std::string path = o.out_dir + "/" + o.product + "-" + slug + ".json";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::perror(path.c_str());
    std::exit(1);
  }
  const std::string gfx = d.gfx.substr(0, d.gfx.find(':'));
  std::fprintf(f, "{\n \"schema\": \"hw-1.0\",\n \"id\": \"%s\",\n \"type\": \"measured-ceiling\",\n \"status\": \"current\",\n", id.c_str());
  std::fprintf(f, " \"identity\": {\"vendor\": \"%s\", \"arch\": \"%s\", \"product\": \"%s\", \"compute_capability\": null, \"sm_arch\": null, "
                  "\"gfx_arch\": \"%s\", \"target_id\": \"%s\"},\n",
               o.vendor.c_str(), o.arch.c_str(), o.product.c_str(), gfx.c_str(), json_escape(d.gfx).c_str());
  std::fprintf(f, " \"facts\": {\n  \"summary\": \"%s\",\n  \"metric\": \"%s\",\n  \"value\": %.4g,\n  \"unit\": \"%s\",\n", json_escape(summary).c_str(),
               metric.c_str(), value, unit.c_str());
  std::fprintf(f, "  \"statistic\": \"median of %d timed repetitions\",\n  \"samples\": %d,\n", s.n, s.n);
  std::fprintf(f, "  \"spread\": {\"p10\": %.4g, \"p90\": %.4g},\n", s.p10, s.p90);
  std::fprintf(f, "  \"method\": \"%s\",\n  \"script\": \"bench/measure_ceilings.sh (bench/gpu/measure_ceilings.hip)\",\n  \"date\": \"%s\",\n",
               json_escape(method).c_str(), date);
  std::fprintf(f, "  \"device\": {\"name\": \"%s\", \"gcn_arch_name\": \"%s\", \"pci_bus_id\": \"%s\", \"hip_driver\": \"%s\", \"hip_runtime\": \"%s\", \"cu_count\": %d, "
                  "\"l2_bytes\": %d, \"max_engine_clock_mhz\": %d, \"memory_clock_mhz\": %d},\n",
               json_escape(d.name).c_str(), json_escape(d.gfx).c_str(), json_escape(d.uuid).c_str(), d.driver.c_str(), d.runtime.c_str(),
               d.cu_count, d.l2_bytes, d.engine_clock_mhz, d.mem_clock_mhz);
  if (!spec_field.empty() && spec_value > 0)
    std::fprintf(f, "  \"spec_reference\": \"%s:%s\",\n  \"percent_of_spec\": %.1f,\n", o.spec_record.c_str(), spec_field.c_str(),
                 100.0 * value / spec_value);
  std::fprintf(f, "  \"usage_notes\": [");
  for (std::size_t i = 0; i < notes.size(); ++i) std::fprintf(f, "%s\"%s\"", i ? ", " : "", json_escape(notes[i]).c_str());
  std::fprintf(f, "]\n },\n \"provenance\": {\n  \"evidence_class\": \"measured\",\n  \"sources\": [{\"title\": \"kwiki measure_ceilings run on %s (%s)\", "
                  "\"kind\": \"measurement\", \"ref\": \"bench/measure_ceilings.sh\"}],\n  \"last_verified\": \"%s\"\n }\n}\n",
               json_escape(d.name).c_str(), json_escape(d.uuid).c_str(), date);
  std::fclose(f);
  std::printf("%-28s %10.4g %-7s (p10 %.4g, p90 %.4g, n=%d)  -> %s\n", metric.c_str(), value, unit.c_str(), s.p10, s.p90, s.n, path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--product") o.product = v;
    else if (a == "--vendor") o.vendor = v;
    else if (a == "--arch") o.arch = v;
    else if (a == "--out") o.out_dir = v;
    else if (a == "--spec-record") o.spec_record = v;
    else if (a == "--spec-bandwidth") o.spec_bandwidth_tb_s = std::atof(v.c_str());
    else if (a == "--spec-bf16") o.spec_bf16_tflops = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "usage: measure_ceilings_hip [--product SLUG] [--vendor V] [--arch A] [--out DIR] [--spec-record ID] "
                           "[--spec-bandwidth TB/s] [--spec-bf16 TFLOPS]\n");
      return 2;
    }
  }
  const Device d = describe_device();
  std::printf("device: %s (%s, %s), driver %s, runtime %s, %d CUs, L2 %d bytes, max engine clock %d MHz\n", d.name.c_str(), d.gfx.c_str(),
              d.uuid.c_str(), d.driver.c_str(), d.runtime.c_str(), d.cu_count, d.l2_bytes, d.engine_clock_mhz);

  // 1. Device copy: 4 GiB in, 4 GiB out (far past the L2 and the 256 MB Infinity Cache).
  {
    const size_t bytes = size_t(4) << 30;
    const size_t n = bytes / sizeof(int4);
    int4 *in = nullptr, *out = nullptr;
    KWIKI_HIP_CHECK(hipMalloc(&in, bytes));
    KWIKI_HIP_CHECK(hipMalloc(&out, bytes));
    hipLaunchKernelGGL(fill_u32, dim3(4 * d.cu_count), dim3(256), 0, 0, reinterpret_cast<unsigned*>(in), bytes / 4);
    KWIKI_HIP_CHECK(hipGetLastError());
    const int grid = d.cu_count * 8;
    const auto kernel_ms = time_reps(3, 30, [&] { hipLaunchKernelGGL(copy_int4, dim3(grid), dim3(512), 0, 0, in, out, n); });
    const auto memcpy_ms = time_reps(3, 30, [&] { KWIKI_HIP_CHECK(hipMemcpyAsync(out, in, bytes, hipMemcpyDeviceToDevice)); });
    std::vector<double> kernel_tb, memcpy_tb;
    for (double ms : kernel_ms) kernel_tb.push_back(2.0 * bytes / (ms * 1e-3) / 1e12);
    for (double ms : memcpy_ms) memcpy_tb.push_back(2.0 * bytes / (ms * 1e-3) / 1e12);
    const Sample k = summarize(kernel_tb), m = summarize(memcpy_tb);
    const bool kernel_wins = k.median >= m.median;
    const Sample best = kernel_wins ? k : m;
    write_record(o, d, "device-copy-bandwidth", "device-copy-bandwidth",
                 "Practical HBM ceiling: a 4 GiB device-to-device copy, counting bytes read plus bytes written.", best.median, "TB/s", best,
                 std::string("4 GiB source and destination (far past L2 and Infinity Cache); ") +
                     (kernel_wins ? "a 16-byte-vector grid-stride copy kernel (8 workgroups of 512 threads per CU)" : "hipMemcpyAsync device-to-device") +
                     "; 3 warm-ups then 30 repetitions, each between a HIP event pair; bandwidth = 2 x bytes / time. Other path's median: " +
                     std::to_string(kernel_wins ? m.median : k.median) + " TB/s.",
                 "memory.bandwidth_tb_s", o.spec_bandwidth_tb_s,
                 {"Use this, not the datasheet figure, as the attainable bandwidth when judging a memory-bound kernel (percent of measured copy).",
                  "Run in the default SPX/NPS1 partition mode and say so; CPX/NPS4 modes change what one device sees."});
    KWIKI_HIP_CHECK(hipFree(in));
    KWIKI_HIP_CHECK(hipFree(out));
  }

  // 2. bf16 GEMM through rocBLAS: 8192^3, fp32 accumulation, random non-zero data.
#if KWIKI_HAVE_ROCBLAS
  {
    const int n = 8192;
    uint16_t *a = nullptr, *b = nullptr, *c = nullptr;
    KWIKI_HIP_CHECK(hipMalloc(&a, sizeof(uint16_t) * n * n));
    KWIKI_HIP_CHECK(hipMalloc(&b, sizeof(uint16_t) * n * n));
    KWIKI_HIP_CHECK(hipMalloc(&c, sizeof(uint16_t) * n * n));
    hipLaunchKernelGGL(fill_bf16, dim3(4 * d.cu_count), dim3(256), 0, 0, a, size_t(n) * n, 1u);
    hipLaunchKernelGGL(fill_bf16, dim3(4 * d.cu_count), dim3(256), 0, 0, b, size_t(n) * n, 2u);
    KWIKI_HIP_CHECK(hipGetLastError());
    rocblas_handle handle;
    if (rocblas_create_handle(&handle) != rocblas_status_success) return 1;
    const float alpha = 1.0f, beta = 0.0f;
    const auto ms = time_reps(5, 30, [&] {
      const rocblas_status st = rocblas_gemm_ex(handle, rocblas_operation_none, rocblas_operation_none, n, n, n, &alpha, a, rocblas_datatype_bf16_r, n,
                                                b, rocblas_datatype_bf16_r, n, &beta, c, rocblas_datatype_bf16_r, n, c, rocblas_datatype_bf16_r, n,
                                                rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0);
      if (st != rocblas_status_success) {
        std::fprintf(stderr, "rocblas_gemm_ex failed: %d\n", static_cast<int>(st));
        std::exit(1);
      }
    });
    std::vector<double> tflops;
    for (double t : ms) tflops.push_back(2.0 * n * double(n) * n / (t * 1e-3) / 1e12);
    const Sample s = summarize(tflops);
    write_record(o, d, "gemm-rate-bf16", "gemm-rate.bf16", "Practical bf16 matrix-core ceiling: rocBLAS GEMM 8192x8192x8192, fp32 accumulation.",
                 s.median, "TFLOPS", s,
                 "rocblas_gemm_ex, bf16 A/B/C/D, fp32 compute, 8192x8192x8192, non-zero pseudo-random inputs; 5 warm-ups then 30 repetitions, each "
                 "between a HIP event pair; rate = 2 x M x N x K / time.",
                 "peak_compute.bf16.dense", o.spec_bf16_tflops,
                 {"Use this as the attainable bf16 matrix rate; the datasheet peak assumes the peak engine clock under full matrix load.",
                  "hipBLASLt (what PyTorch prefers on MI300) can be faster than rocBLAS for this shape; if so, record that run as well."});
    rocblas_destroy_handle(handle);
    KWIKI_HIP_CHECK(hipFree(a));
    KWIKI_HIP_CHECK(hipFree(b));
    KWIKI_HIP_CHECK(hipFree(c));
  }
#else
  std::printf("gemm-rate.bf16: not measured (built without rocBLAS headers)\n");
#endif

  // 3. Launch cost of an empty kernel: back-to-back in one stream, and one alone.
  {
    const int launches = 10000;
    const auto stream_ms = time_reps(1, 20, [&] {
      for (int i = 0; i < launches; ++i) hipLaunchKernelGGL(empty_kernel, dim3(1), dim3(64), 0, 0);
    });
    std::vector<double> per_launch_us;
    for (double t : stream_ms) per_launch_us.push_back(t * 1e3 / launches);
    const Sample s = summarize(per_launch_us);
    write_record(o, d, "launch-throughput-empty-kernel", "launch-throughput.empty-kernel",
                 "Cost per launch of back-to-back empty kernels in one stream (the launch-rate floor of a chain of tiny kernels).", s.median, "us", s,
                 "10000 empty-kernel launches (1 workgroup of 64 threads) back to back in the default stream, between one HIP event pair; 1 warm-up "
                 "then 20 repetitions; per-launch time = elapsed / 10000.",
                 "", 0, {"A chain of kernels each shorter than this is launch-bound: fuse them or replay them as a HIP graph."});
    const auto single_ms = time_reps(20, 200, [&] { hipLaunchKernelGGL(empty_kernel, dim3(1), dim3(64), 0, 0); });
    std::vector<double> single_us;
    for (double t : single_ms) single_us.push_back(t * 1e3);
    const Sample one = summarize(single_us);
    write_record(o, d, "launch-latency-empty-kernel", "launch-latency.empty-kernel",
                 "Time of one empty kernel launched alone between a HIP event pair on an idle GPU (the floor of a single timed launch).", one.median,
                 "us", one, "One empty-kernel launch (1 workgroup of 64 threads) between a HIP event pair, GPU idle before each; 20 warm-ups then 200 repetitions.",
                 "", 0, {"Latency floor for the attainable time of a tiny operation: attainable = max(SOL, this floor)."});
  }
  return 0;
}
