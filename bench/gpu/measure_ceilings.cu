// Measures a GPU's practical ceilings (device copy bandwidth, bf16 GEMM rate through cuBLAS,
// empty-kernel launch cost) and writes them as gpu-wiki measured-ceiling records (hw-1.0).
// Build and run with bench/measure_ceilings.sh; it needs only the CUDA toolkit.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "bench_cuda.cuh"  // KWIKI_CUDA_CHECK

#define KWIKI_CUBLAS_CHECK(call)                                                                       \
  do {                                                                                                 \
    const cublasStatus_t kwiki_st_ = (call);                                                           \
    if (kwiki_st_ != CUBLAS_STATUS_SUCCESS) {                                                          \
      std::fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #call, static_cast<int>(kwiki_st_)); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
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

// Random-looking, non-zero bf16 data (zeros run faster than real data on tensor cores).
__global__ void fill_bf16(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65535.0f - 0.5f) * 2.0f);
  }
}

__global__ void fill_u32(unsigned* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = static_cast<unsigned>(i * 2654435761u);
}

// 16-byte vector copy, grid-stride: the best a plain kernel does against DRAM.
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
  std::string name, uuid, driver, runtime;
  int sm_count = 0, sm_clock_mhz = 0, mem_clock_mhz = 0, l2_bytes = 0;
};

Device describe_device() {
  Device d;
  cudaDeviceProp p{};
  KWIKI_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  d.name = p.name;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                (unsigned char)p.uuid.bytes[0], (unsigned char)p.uuid.bytes[1], (unsigned char)p.uuid.bytes[2], (unsigned char)p.uuid.bytes[3],
                (unsigned char)p.uuid.bytes[4], (unsigned char)p.uuid.bytes[5], (unsigned char)p.uuid.bytes[6], (unsigned char)p.uuid.bytes[7],
                (unsigned char)p.uuid.bytes[8], (unsigned char)p.uuid.bytes[9], (unsigned char)p.uuid.bytes[10], (unsigned char)p.uuid.bytes[11],
                (unsigned char)p.uuid.bytes[12], (unsigned char)p.uuid.bytes[13], (unsigned char)p.uuid.bytes[14], (unsigned char)p.uuid.bytes[15]);
  d.uuid = uuid;
  int driver = 0, runtime = 0;
  KWIKI_CUDA_CHECK(cudaDriverGetVersion(&driver));
  KWIKI_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  d.driver = std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10);
  d.runtime = std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10);
  d.sm_count = p.multiProcessorCount;
  KWIKI_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_clock_mhz, cudaDevAttrClockRate, 0));
  KWIKI_CUDA_CHECK(cudaDeviceGetAttribute(&d.mem_clock_mhz, cudaDevAttrMemoryClockRate, 0));
  d.sm_clock_mhz /= 1000;
  d.mem_clock_mhz /= 1000;
  d.l2_bytes = p.l2CacheSize;
  return d;
}

// Times `body` with an event pair per repetition after `warmup` untimed runs; milliseconds.
template <class Body>
std::vector<double> time_reps(int warmup, int reps, Body body) {
  cudaEvent_t start, stop;
  KWIKI_CUDA_CHECK(cudaEventCreate(&start));
  KWIKI_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) body();
  KWIKI_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    KWIKI_CUDA_CHECK(cudaEventRecord(start));
    body();
    KWIKI_CUDA_CHECK(cudaEventRecord(stop));
    KWIKI_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    KWIKI_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  KWIKI_CUDA_CHECK(cudaGetLastError());
  KWIKI_CUDA_CHECK(cudaEventDestroy(start));
  KWIKI_CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
}

struct Options {
  std::string product = "h200-sxm", vendor = "nvidia", arch = "hopper", out_dir = ".";
  std::string spec_record = "nvidia.hopper.spec-sheet.h200-sxm";
  double spec_bandwidth_tb_s = 4.8, spec_bf16_tflops = 989.5;
};

void write_record(const Options& o, const Device& d, const std::string& slug, const std::string& metric, const std::string& summary,
                  double value, const std::string& unit, const Sample& s, double scale, const std::string& method,
                  const std::string& spec_field, double spec_value, const std::vector<std::string>& notes) {
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
  std::fprintf(f, "{\n \"schema\": \"hw-1.0\",\n \"id\": \"%s\",\n \"type\": \"measured-ceiling\",\n \"status\": \"current\",\n", id.c_str());
  std::fprintf(f, " \"identity\": {\"vendor\": \"%s\", \"arch\": \"%s\", \"product\": \"%s\", \"compute_capability\": \"9.0\", \"sm_arch\": \"sm_90a\"},\n",
               o.vendor.c_str(), o.arch.c_str(), o.product.c_str());
  std::fprintf(f, " \"facts\": {\n  \"summary\": \"%s\",\n  \"metric\": \"%s\",\n  \"value\": %.4g,\n  \"unit\": \"%s\",\n", json_escape(summary).c_str(),
               metric.c_str(), value, unit.c_str());
  std::fprintf(f, "  \"statistic\": \"median of %d timed repetitions\",\n  \"samples\": %d,\n", s.n, s.n);
  std::fprintf(f, "  \"spread\": {\"p10\": %.4g, \"p90\": %.4g},\n", s.p10 * scale, s.p90 * scale);
  std::fprintf(f, "  \"method\": \"%s\",\n  \"script\": \"bench/measure_ceilings.sh (bench/gpu/measure_ceilings.cu)\",\n  \"date\": \"%s\",\n",
               json_escape(method).c_str(), date);
  std::fprintf(f, "  \"device\": {\"name\": \"%s\", \"uuid\": \"%s\", \"cuda_driver_api\": \"%s\", \"cuda_runtime\": \"%s\", \"sm_count\": %d, \"l2_bytes\": %d, "
                  "\"max_sm_clock_mhz\": %d, \"memory_clock_mhz\": %d},\n",
               json_escape(d.name).c_str(), d.uuid.c_str(), d.driver.c_str(), d.runtime.c_str(), d.sm_count, d.l2_bytes, d.sm_clock_mhz,
               d.mem_clock_mhz);
  if (!spec_field.empty())
    std::fprintf(f, "  \"spec_reference\": \"%s:%s\",\n  \"percent_of_spec\": %.1f,\n", o.spec_record.c_str(), spec_field.c_str(),
                 100.0 * value / spec_value);
  std::fprintf(f, "  \"usage_notes\": [");
  for (std::size_t i = 0; i < notes.size(); ++i) std::fprintf(f, "%s\"%s\"", i ? ", " : "", json_escape(notes[i]).c_str());
  std::fprintf(f, "]\n },\n \"provenance\": {\n  \"evidence_class\": \"measured\",\n  \"sources\": [{\"title\": \"kwiki measure_ceilings run on %s (%s)\", "
                  "\"kind\": \"measurement\", \"ref\": \"bench/measure_ceilings.sh\"}],\n  \"last_verified\": \"%s\"\n }\n}\n",
               json_escape(d.name).c_str(), d.uuid.c_str(), date);
  std::fclose(f);
  std::printf("%-28s %10.4g %-7s (p10 %.4g, p90 %.4g, n=%d)  -> %s\n", metric.c_str(), value, unit.c_str(), s.p10 * scale, s.p90 * scale, s.n, path.c_str());
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
      std::fprintf(stderr, "usage: measure_ceilings [--product SLUG] [--vendor V] [--arch A] [--out DIR] [--spec-record ID] "
                           "[--spec-bandwidth TB/s] [--spec-bf16 TFLOPS]\n");
      return 2;
    }
  }
  const Device d = describe_device();
  std::printf("device: %s (%s), driver %s, runtime %s, %d SMs, L2 %d bytes, max SM clock %d MHz\n", d.name.c_str(), d.uuid.c_str(),
              d.driver.c_str(), d.runtime.c_str(), d.sm_count, d.l2_bytes, d.sm_clock_mhz);

  // 1. Device copy: 4 GiB in, 4 GiB out (far past the L2), bytes read + bytes written.
  {
    const size_t bytes = size_t(4) << 30;
    const size_t n = bytes / sizeof(int4);
    int4 *in = nullptr, *out = nullptr;
    KWIKI_CUDA_CHECK(cudaMalloc(&in, bytes));
    KWIKI_CUDA_CHECK(cudaMalloc(&out, bytes));
    fill_u32<<<4 * d.sm_count, 256>>>(reinterpret_cast<unsigned*>(in), bytes / 4);
    KWIKI_CUDA_CHECK(cudaGetLastError());
    const int grid = d.sm_count * 8;
    const auto kernel_ms = time_reps(3, 30, [&] { copy_int4<<<grid, 512>>>(in, out, n); });
    const auto memcpy_ms = time_reps(3, 30, [&] { KWIKI_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice)); });
    std::vector<double> kernel_tb, memcpy_tb;
    for (double ms : kernel_ms) kernel_tb.push_back(2.0 * bytes / (ms * 1e-3) / 1e12);
    for (double ms : memcpy_ms) memcpy_tb.push_back(2.0 * bytes / (ms * 1e-3) / 1e12);
    const Sample k = summarize(kernel_tb), m = summarize(memcpy_tb);
    const bool kernel_wins = k.median >= m.median;
    const Sample best = kernel_wins ? k : m;
    write_record(o, d, "device-copy-bandwidth", "device-copy-bandwidth", "Practical DRAM ceiling: a 4 GiB device-to-device copy, counting bytes read plus bytes written.",
                 best.median, "TB/s", best, 1.0,
                 std::string("4 GiB source and destination (far past the L2); ") +
                     (kernel_wins ? "a 16-byte-vector grid-stride copy kernel (8 blocks of 512 threads per SM)" : "cudaMemcpyAsync device-to-device") +
                     "; 3 warm-ups then 30 repetitions, each between a CUDA event pair; bandwidth = 2 x bytes / time. Other path's median: " +
                     std::to_string(kernel_wins ? m.median : k.median) + " TB/s.",
                 "memory.bandwidth_tb_s", o.spec_bandwidth_tb_s,
                 {"Use this, not the datasheet figure, as the attainable bandwidth when judging a memory-bound kernel (percent of measured copy).",
                  "A kernel that only reads (reductions) can exceed a copy's rate slightly; one that writes more than it reads can fall below it."});
    KWIKI_CUDA_CHECK(cudaFree(in));
    KWIKI_CUDA_CHECK(cudaFree(out));
  }

  // 2. bf16 GEMM through cuBLAS: 8192^3, fp32 accumulation, random non-zero data.
  {
    const int n = 8192;
    __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
    KWIKI_CUDA_CHECK(cudaMalloc(&a, sizeof(__nv_bfloat16) * n * n));
    KWIKI_CUDA_CHECK(cudaMalloc(&b, sizeof(__nv_bfloat16) * n * n));
    KWIKI_CUDA_CHECK(cudaMalloc(&c, sizeof(__nv_bfloat16) * n * n));
    fill_bf16<<<4 * d.sm_count, 256>>>(a, size_t(n) * n, 1);
    fill_bf16<<<4 * d.sm_count, 256>>>(b, size_t(n) * n, 2);
    KWIKI_CUDA_CHECK(cudaGetLastError());
    cublasHandle_t handle;
    KWIKI_CUBLAS_CHECK(cublasCreate(&handle));
    const float alpha = 1.0f, beta = 0.0f;
    const auto ms = time_reps(5, 30, [&] {
      KWIKI_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &beta, c,
                                      CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    std::vector<double> tflops;
    for (double t : ms) tflops.push_back(2.0 * n * double(n) * n / (t * 1e-3) / 1e12);
    const Sample s = summarize(tflops);
    write_record(o, d, "gemm-rate-bf16", "gemm-rate.bf16", "Practical bf16 tensor-core ceiling: cuBLAS GEMM 8192x8192x8192, fp32 accumulation.", s.median,
                 "TFLOPS", s, 1.0,
                 "cublasGemmEx, bf16 A/B/C, CUBLAS_COMPUTE_32F, 8192x8192x8192, non-zero pseudo-random inputs; 5 warm-ups then 30 repetitions, each "
                 "between a CUDA event pair; rate = 2 x M x N x K / time.",
                 "peak_compute.bf16.dense", o.spec_bf16_tflops,
                 {"Use this as the attainable bf16 matrix rate; the datasheet dense peak assumes the maximum boost clock held under full tensor load.",
                  "Zeros run faster than real data on tensor cores: never time a GEMM on zeros."});
    KWIKI_CUBLAS_CHECK(cublasDestroy(handle));
    KWIKI_CUDA_CHECK(cudaFree(a));
    KWIKI_CUDA_CHECK(cudaFree(b));
    KWIKI_CUDA_CHECK(cudaFree(c));
  }

  // 3. Launch cost of an empty kernel: per launch in a stream of back-to-back launches, and
  //    one launch alone between an event pair (what a single tiny kernel cannot go below).
  {
    const int launches = 10000;
    const auto stream_ms = time_reps(1, 20, [&] {
      for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32>>>();
    });
    std::vector<double> per_launch_us;
    for (double t : stream_ms) per_launch_us.push_back(t * 1e3 / launches);
    const Sample s = summarize(per_launch_us);
    write_record(o, d, "launch-throughput-empty-kernel", "launch-throughput.empty-kernel",
                 "Cost per launch of back-to-back empty kernels in one stream (the launch-rate floor of a chain of tiny kernels).", s.median, "us", s,
                 1.0, "10000 empty-kernel launches <<<1, 32>>> back to back in the default stream, between one CUDA event pair; 1 warm-up then 20 repetitions; per-launch time = elapsed / 10000.",
                 "", 0, {"A chain of kernels each shorter than this is launch-bound: fuse them or replay them as a CUDA graph."});
    const auto single_ms = time_reps(20, 200, [&] { empty_kernel<<<1, 32>>>(); });
    std::vector<double> single_us;
    for (double t : single_ms) single_us.push_back(t * 1e3);
    const Sample one = summarize(single_us);
    write_record(o, d, "launch-latency-empty-kernel", "launch-latency.empty-kernel",
                 "Time of one empty kernel launched alone between a CUDA event pair on an idle GPU (the floor of a single timed launch).", one.median,
                 "us", one, 1.0, "One empty-kernel launch <<<1, 32>>> between a CUDA event pair, GPU idle before each; 20 warm-ups then 200 repetitions.",
                 "", 0, {"Latency floor for the attainable time of a tiny operation: attainable = max(SOL, this floor)."});
  }
  return 0;
}
