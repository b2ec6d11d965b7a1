// libFuzzer target: the parsers of other people's input (MCP messages and their tool arguments,
// a task's shapes.json, metadata.json, input.py factory and task.json) never crash, hang, or throw
// anything but kwiki::Error with an input error's code, on any bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "json_args.hpp"
#include "kwiki/error.hpp"
#include "mcp_protocol.hpp"
#include "task_parse.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// A parser may refuse its input, only with an input error.
template <class Body>
void refuses_cleanly(Body body) {
  try {
    body();
  } catch (const kwiki::Error& e) {
    const auto code = e.code();
    check(code == kwiki::ErrorCode::kUsage || code == kwiki::ErrorCode::kBadInput || code == kwiki::ErrorCode::kInvalidJson ||
          code == kwiki::ErrorCode::kSchemaViolation);
    check(!e.one_line().empty());
  }
}

constexpr const char* kReference = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n";
constexpr const char* kFactory = "def _make_inputs(num_tokens, hidden_size, seed=0, device='cuda'):\n    return {}\n";
constexpr const char* kShapes = R"({"s": {"init_kwargs": {"hidden_size": 64}, "input_kwargs": {"num_tokens": 2, "hidden_size": 64}}})";

void fuzz_mcp(const std::string& text) {
  const kwiki::detail::McpParse parsed = kwiki::detail::parse_mcp_message(text, std::size_t{1} << 20);
  check(parsed.message.has_value() != parsed.error.is_object());
  if (!parsed.message) {
    check(parsed.error["error"]["code"].is_number_integer());
    return;
  }
  const auto& m = *parsed.message;
  check(m.params.is_object());
  check(m.notification || m.id.is_string() || m.id.is_number());
  const auto args = m.params.find("arguments");
  if (args == m.params.end() || !args->is_object()) return;
  for (const char* key : {"text", "product", "task", "workspace", "brief", "force", "max_bytes", "ids"}) {
    refuses_cleanly([&] { kwiki::detail::arg_string(*args, key); });
    refuses_cleanly([&] { kwiki::detail::arg_bool(*args, key, false); });
    refuses_cleanly([&] { check(kwiki::detail::arg_integer(*args, key, 1, 1, 1000) >= 1); });
    refuses_cleanly([&] { kwiki::detail::arg_number(*args, key, 0.0, 0.0, 1e30); });
    refuses_cleanly([&] { kwiki::detail::arg_strings(*args, key); });
  }
}

kwiki::detail::BenchmarkFiles benchmark(std::string shapes = kShapes) {
  kwiki::detail::BenchmarkFiles files;
  files.dir = "/nonexistent-fuzz/task";
  files.reference = kReference;
  files.factory = kFactory;
  files.shapes = std::move(shapes);
  return files;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The first byte picks the parser; the rest is its input.
  switch (data[0] % 6) {
    case 0:
      fuzz_mcp(input);
      break;
    case 1:
      refuses_cleanly([&] { check(!kwiki::detail::parse_benchmark_task(benchmark(input)).shapes.empty()); });
      break;
    case 2:
      refuses_cleanly([&] {
        auto files = benchmark();
        files.metadata = input;
        kwiki::detail::parse_benchmark_task(files);
      });
      break;
    case 3:
      refuses_cleanly([&] {
        auto files = benchmark();
        files.factory = input;
        kwiki::detail::parse_benchmark_task(files);
      });
      break;
    case 4:
      refuses_cleanly([&] { kwiki::detail::parse_task_json("/nonexistent-fuzz/task.json", input); });
      break;
    case 5:
      refuses_cleanly([&] {
        auto files = benchmark();
        files.roofline = input;
        kwiki::detail::parse_benchmark_task(files);
      });
      break;
  }
  return 0;
}
