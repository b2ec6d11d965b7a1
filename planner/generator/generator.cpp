// The generator family: samples from the trace, lowering, fitting, the CPU twin's build and its proof.
#include "generator.hpp"

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "codegen.hpp"
#include "file_util.hpp"
#include "twin_build.hpp"

namespace kwiki::gen {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

NamedTensor named_of(const detail::TracedTensor& t, const std::string& prefix) {
  return {prefix + t.name, std::vector<long long>(t.shape.begin(), t.shape.end()), t.stride, t.dtype};
}

std::vector<long long> contiguous_strides(const std::vector<long long>& shape) {
  std::vector<long long> st(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

GraphSample sample_from(const json& ops, const std::vector<detail::TracedTensor>& inputs, const std::vector<detail::TracedTensor>& params,
                        const std::vector<detail::TracedTensor>& outputs, const std::vector<std::string>& updated, const json& init_kwargs,
                        const std::string& label) {
  GraphSample g;
  g.ops = ops;
  g.label = label;
  for (const auto& t : inputs) {
    if (t.is_tensor) g.tensors.push_back(named_of(t, ""));
    else g.scalars["input:" + t.name] = t.value;
  }
  for (const auto& t : params) g.tensors.push_back(named_of(t, "param:"));
  for (const auto& o : outputs)
    if (o.is_tensor) g.outputs.push_back({o.name, o.graph_name, std::vector<long long>(o.shape.begin(), o.shape.end()), o.dtype});
  g.updated = updated;
  if (init_kwargs.is_object())
    for (const auto& [k, v] : init_kwargs.items())
      if (v.is_number()) g.scalars["init:" + k] = v;
  return g;
}

// ---- the proof: the CPU twin on the traced inputs ----

using LaunchFn = int (*)(void* const*, int, const long long*, int, const double*, int, void*);

// A buffer's bytes in its storage type, from the trace's saved values (floats or integers).
std::vector<unsigned char> encode(DType d, const std::vector<double>& values) {
  const int bytes = dtype_row(d).bytes;
  std::vector<unsigned char> out(values.size() * bytes);
  for (std::size_t i = 0; i < values.size(); ++i) {
    unsigned char* p = out.data() + i * bytes;
    const double v = values[i];
    const float f = static_cast<float>(v);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    switch (d) {
      case DType::kF32: std::memcpy(p, &f, 4); break;
      case DType::kBF16: {  // saved values are exactly representable (they were bf16)
        const std::uint16_t h = static_cast<std::uint16_t>(u >> 16);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kF16: {
        // Exact for values that were fp16.
        const std::uint32_t sign = (u >> 16) & 0x8000u, ax = u & 0x7fffffffu;
        std::uint16_t h;
        if (ax > 0x7f800000u) h = static_cast<std::uint16_t>(sign | 0x7e00u);
        else if (ax >= 0x47800000u) h = static_cast<std::uint16_t>(sign | 0x7c00u);
        else if (ax < 0x38800000u) h = static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::fabs(f) * 16777216.0f));
        else h = static_cast<std::uint16_t>(sign | ((ax - 0x38000000u) >> 13));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kE4M3FN:
      case DType::kE4M3FNUZ: {
        const bool fnuz = d == DType::kE4M3FNUZ;
        unsigned char b = 0;
        if (std::isnan(f)) b = fnuz ? 0x80 : 0x7f;
        else if (f != 0) {
          const int bias = fnuz ? 8 : 7;
          const float a = std::fabs(f);
          int e;
          const float fr = std::frexp(a, &e);  // a = fr * 2^e, fr in [0.5, 1)
          int ev = e - 1;
          if (ev < 1 - bias) b = static_cast<unsigned char>(std::lround(std::ldexp(a, bias + 2)));  // subnormal
          else b = static_cast<unsigned char>(((ev + bias) << 3) | static_cast<int>(std::lround((fr * 2 - 1) * 8)));
          if (f < 0) b |= 0x80;
        }
        *p = b;
        break;
      }
      case DType::kBool:
      case DType::kU8: *p = static_cast<unsigned char>(static_cast<long long>(v)); break;
      case DType::kI8: *reinterpret_cast<signed char*>(p) = static_cast<signed char>(static_cast<long long>(v)); break;
      case DType::kI16: { const short x = static_cast<short>(static_cast<long long>(v)); std::memcpy(p, &x, 2); break; }
      case DType::kI32: { const int x = static_cast<int>(static_cast<long long>(v)); std::memcpy(p, &x, 4); break; }
      case DType::kI64: { const long long x = static_cast<long long>(v); std::memcpy(p, &x, 8); break; }
      default: break;
    }
  }
  return out;
}

double decode_one(DType d, const unsigned char* p) {
  std::uint32_t u = 0;
  float f;
  switch (d) {
    case DType::kF32: std::memcpy(&f, p, 4); return f;
    case DType::kBF16: { std::uint16_t h; std::memcpy(&h, p, 2); u = static_cast<std::uint32_t>(h) << 16; std::memcpy(&f, &u, 4); return f; }
    case DType::kF16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
      double v = exp == 0 ? std::ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : std::ldexp(mant | 0x400, exp - 25);
      return sign ? -v : v;
    }
    case DType::kE4M3FN:
    case DType::kE4M3FNUZ: {
      const bool fnuz = d == DType::kE4M3FNUZ;
      const unsigned b = *p;
      if (fnuz ? b == 0x80 : (b & 0x7f) == 0x7f) return NAN;
      const int exp = (b >> 3) & 0xf, mant = b & 7, bias = fnuz ? 8 : 7;
      const double v = exp == 0 ? std::ldexp(mant, 1 - bias - 3) : std::ldexp(1.0 + mant / 8.0, exp - bias);
      return (b & 0x80) ? -v : v;
    }
    case DType::kBool:
    case DType::kU8: return *p;
    case DType::kI8: return *reinterpret_cast<const signed char*>(p);
    case DType::kI16: { short x; std::memcpy(&x, p, 2); return x; }
    case DType::kI32: { int x; std::memcpy(&x, p, 4); return x; }
    case DType::kI64: { long long x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    default: return NAN;
  }
}

// The harness's comparison (kwiki_families.compare): tolerance per dtype, NaN and infinity
// positions exact, fp8 within one step of its grid, integers exact.
ojson compare(DType d, const std::vector<double>& got, const std::vector<double>& want) {
  ojson r = {{"ok", true}, {"max_abs", 0.0}};
  if (got.size() != want.size()) return {{"ok", false}, {"max_abs", INFINITY}, {"message", "element count differs"}};
  double rtol = 1e-5, atol = 1e-5;
  if (d == DType::kBF16) rtol = 1.6e-2, atol = 1e-2;
  if (d == DType::kF16) rtol = 1e-3, atol = 1e-3;
  long long bad = 0;
  double max_abs = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(g) || std::isnan(w)) {
      bad += std::isnan(g) != std::isnan(w);
      continue;
    }
    if (std::isinf(g) || std::isinf(w)) {
      bad += g != w;
      continue;
    }
    const double diff = std::fabs(g - w);
    max_abs = std::max(max_abs, diff);
    if (!is_float(d)) {
      bad += diff != 0;
    } else if (d == DType::kE4M3FN || d == DType::kE4M3FNUZ) {
      const double ulp = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(std::max(std::fabs(w), std::ldexp(1.0, d == DType::kE4M3FNUZ ? -7 : -6))))) - 3);
      bad += diff > ulp * 1.0001;
    } else {
      bad += diff > atol + rtol * std::fabs(w);
    }
  }
  r["max_abs"] = max_abs;
  if (bad) {
    r["ok"] = false;
    r["message"] = std::to_string(bad) + " of " + std::to_string(got.size()) + " elements beyond tolerance (max abs err " + std::to_string(max_abs) + ")";
  }
  return r;
}

// The extreme element offsets an access reaches over the domain.
std::pair<long long, long long> access_range(const Kernel& k, const Access& a, const std::vector<long long>& s) {
  long long lo = s[a.base], hi = s[a.base];
  const auto span = [&](long long coef, long long n) {
    const long long v = coef * (n - 1);
    (v < 0 ? lo : hi) += v;
  };
  for (std::size_t x = 0; x < a.outer.size(); ++x) span(s[a.outer[x]], s[k.outer[x]]);
  span(s[a.inner], s[k.inner]);
  return {lo, hi};
}

enum class Checked { kPass, kFail, kNotChecked };

// Runs the twin on one traced shape; fills `result` per output and says whether all matched
// (not checked: the trace did not save a tensor this large).
Checked prove_shape(const Kernel& k, LaunchFn launch, const detail::Trace& trace, const detail::ShapeTrace& st, const GraphSample& sample,
                 ojson& result, double& worst, std::string& why) {
  std::vector<long long> sizes;
  for (const auto& e : k.size_exprs) {
    const auto v = eval_size(e, sample);
    if (!v) {
      why = "a size expression has no value on shape \"" + st.id + "\"";
      return Checked::kFail;
    }
    sizes.push_back(*v);
  }
  std::vector<double> floats;
  for (const auto& f : k.floats) {
    if (!f.fn.empty()) {
      const auto v = eval_size(f.size, sample);
      if (!v || *v <= 0) {
        why = "a constant derived from a size has no value on shape \"" + st.id + "\"";
        return Checked::kFail;
      }
      const double d = static_cast<double>(*v);
      floats.push_back(f.fn == "sqrt" ? std::sqrt(d) : f.fn == "rsqrt" ? 1 / std::sqrt(d) : f.fn == "recip" ? 1 / d : d);
    } else if (f.source.empty()) {
      floats.push_back(f.literal);
    } else {
      floats.push_back(sample.scalars.at(f.source).get<double>());
    }
  }
  const auto find = [](const std::vector<detail::TracedTensor>& list, const std::string& name) -> const detail::TracedTensor* {
    for (const auto& t : list)
      if (t.name == name) return &t;
    return nullptr;
  };
  std::vector<std::vector<unsigned char>> data(k.buffers.size());
  std::vector<long long> count(k.buffers.size());
  for (std::size_t b = 0; b < k.buffers.size(); ++b) {
    const Buffer& buf = k.buffers[b];
    long long n = 1;
    for (int s : buf.shape) n *= sizes[s];
    count[b] = n;
    if (buf.role == "output") {
      std::vector<double> fill(n, is_float(buf.dtype) ? std::numeric_limits<double>::quiet_NaN() : -1);  // unwritten elements cannot pass
      data[b] = encode(buf.dtype, fill);
      continue;
    }
    const bool param = buf.name.rfind("param:", 0) == 0;
    const detail::TracedTensor* t = param ? find(st.params, buf.name.substr(6)) : find(st.inputs, buf.name);
    if (!t || t->file.empty()) {
      why = "the trace did not save " + buf.name + " on shape \"" + st.id + "\" (over 4M elements at the traced size)";
      return Checked::kNotChecked;
    }
    std::vector<double> values;
    if (t->storage == "f32") for (float f : detail::load_floats(trace, *t)) values.push_back(f);
    else for (long long v : detail::load_integers(trace, *t)) values.push_back(static_cast<double>(v));
    if (static_cast<long long>(values.size()) != n) {
      why = buf.name + " holds " + std::to_string(values.size()) + " values, the kernel expects " + std::to_string(n);
      return Checked::kFail;
    }
    data[b] = encode(buf.dtype, values);
  }
  // Every access must stay inside its buffer (the IR came from a file another process wrote).
  const auto inside = [&](const Access& a) {
    const auto [lo, hi] = access_range(k, a, sizes);
    return lo >= 0 && hi < count[a.buffer];
  };
  long long rows = 1;
  for (int o : k.outer) rows *= sizes[o];
  if (rows > 0 && sizes[k.inner] > 0) {
    // Loads under a concat's branch are read only where their part is chosen: not checked here.
    std::vector<bool> branch(k.nodes.size(), false);
    for (std::size_t i = k.nodes.size(); i-- > 0;) {
      const Node& n = k.nodes[i];
      for (std::size_t a = 0; a < n.args.size(); ++a)
        if (branch[i] || (n.op == OpKind::kSelect && a > 0)) branch[n.args[a]] = true;
    }
    for (std::size_t i = 0; i < k.nodes.size(); ++i)
      if (k.nodes[i].op == OpKind::kLoad && !branch[i] && !inside(k.nodes[i].access)) {
        why = "a load of the lowered kernel falls outside " + k.buffers[k.nodes[i].access.buffer].name;
        return Checked::kFail;
      }
    for (const auto& s : k.stores)
      if (!inside(s.access)) {
        why = "a store of the lowered kernel falls outside " + k.buffers[s.access.buffer].name;
        return Checked::kFail;
      }
  }
  std::vector<void*> ptrs;
  for (auto& d : data) ptrs.push_back(d.data());
  const int rc = launch(ptrs.data(), static_cast<int>(ptrs.size()), sizes.data(), static_cast<int>(sizes.size()), floats.data(),
                        static_cast<int>(floats.size()), nullptr);
  if (rc != 0) {
    why = "the generated CPU kernel refused its arguments (" + std::to_string(rc) + ")";
    return Checked::kFail;
  }
  bool all = true;
  for (std::size_t b = 0; b < k.buffers.size(); ++b) {
    const Buffer& buf = k.buffers[b];
    if (buf.role != "output" && buf.role != "updated") continue;
    const detail::TracedTensor* want = buf.role == "updated" ? find(st.updated, buf.name) : nullptr;
    std::string label = buf.name;
    if (buf.role == "output") {
      label = buf.name.substr(4);  // "out:NAME"
      want = find(st.outputs, label);
    }
    if (!want || want->file.empty()) {
      why = "the trace did not save the reference's " + label + " on shape \"" + st.id + "\" (over 4M elements at the traced size)";
      return Checked::kNotChecked;
    }
    std::vector<double> ref;
    if (want->storage == "f32") for (float f : detail::load_floats(trace, *want)) ref.push_back(f);
    else for (long long v : detail::load_integers(trace, *want)) ref.push_back(static_cast<double>(v));
    std::vector<double> got(count[b]);
    const int bytes = dtype_row(buf.dtype).bytes;
    for (long long i = 0; i < count[b]; ++i) got[i] = decode_one(buf.dtype, data[b].data() + i * bytes);
    ojson c = compare(buf.dtype, got, ref);
    if (want->dtype != dtype_row(buf.dtype).trace_name) c = {{"ok", false}, {"max_abs", 0.0}, {"message", "dtype " + std::string(dtype_row(buf.dtype).trace_name) + ", reference " + want->dtype}};
    worst = std::max(worst, c["max_abs"].get<double>());
    if (!c["ok"].get<bool>()) {
      all = false;
      if (why.empty()) why = label + " differs on shape \"" + st.id + "\": " + c.value("message", std::string());
    }
    result[label] = c;
  }
  return all ? Checked::kPass : Checked::kFail;
}

}  // namespace

std::vector<GraphSample> samples_of(const detail::ShapeTrace& s, const json& real_init_kwargs) {
  std::vector<GraphSample> out;
  std::vector<std::string> updated;
  for (const auto& t : s.inputs)
    if (t.updated) updated.push_back(t.name);
  out.push_back(sample_from(s.graph.value("ops", json::array()), s.inputs, s.params, s.outputs, updated, s.small_init_kwargs,
                            "\"" + s.id + "\" traced at 1/" + std::to_string(s.factor)));
  if (s.real_ok && s.real_graph.is_object() && s.real_graph.contains("ops") && !s.real_graph.value("differs_from_small", false) &&
      !s.real_graph.value("truncated", false) && !s.real_graph["ops"].empty())
    out.push_back(sample_from(s.real_graph["ops"], s.real_inputs, s.real_params, s.real_outputs, updated, real_init_kwargs, "\"" + s.id + "\" at its given sizes"));
  return out;
}

ojson Generation::launch_recipe() const {
  const ojson ir = kernel.to_json();
  ojson r;
  r["buffers"] = ir["buffers"];
  r["size_exprs"] = ir["size_exprs"];
  r["floats"] = ir["floats"];
  r["results"] = ir["results"];
  return r;
}

Generation generate_from_trace(const detail::Trace& trace, const std::vector<ShapeCase>& shapes) {
  Generation g;
  std::vector<GraphSample> samples;
  std::string missing_real;  // a shape without its given sizes' graph (checked once every call lowered)
  std::vector<const detail::ShapeTrace*> proven_on;
  for (const auto& s : trace.shapes) {
    if (!s.ok) continue;
    json init = json::object();
    for (const auto& c : shapes)
      if (c.id == s.id) init = c.init_kwargs;
    std::vector<GraphSample> these = samples_of(s, init);
    if (these.size() < 2 && missing_real.empty())
      missing_real = "the reference's ops at the given sizes of shape \"" + s.id + "\" were not recorded (" +
                     (s.real_error.empty() ? std::string("its graph differs from the traced one") : s.real_error) +
                     "), so the kernel's sizes and constants cannot be fitted with confidence";
    for (auto& x : these) samples.push_back(std::move(x));
    proven_on.push_back(&s);
  }
  if (samples.empty()) {
    g.why = "no traced call to lower";
    return g;
  }
  // Every traced call lowers to one IR (only the sizes may differ).
  std::vector<Kernel> kernels;
  std::vector<const GraphSample*> used;
  for (const auto& s : samples) {
    for (const auto& t : s.tensors) {
      // Contiguous, or expanded along leading dims (stride 0): then the first slice of the
      // materialized tensor holds what the strides read, so a contiguous copy serves as well.
      std::size_t lead = 0;
      while (lead < t.stride.size() && t.stride[lead] == 0) ++lead;
      const std::vector<long long> rest(t.shape.begin() + static_cast<long>(lead), t.shape.end());
      if (!t.stride.empty() && std::vector<long long>(t.stride.begin() + static_cast<long>(lead), t.stride.end()) != contiguous_strides(rest)) {
        g.why = "input " + t.name + " is not contiguous; the generator reads inputs in their logical order";
        return g;
      }
    }
    Lowered l = lower_graph(s);
    if (!l.kernel) {
      g.op = l.op;
      g.why = l.why + " (" + s.label + ")";
      return g;
    }
    if (const char* dump = std::getenv("KWIKI_GENERATOR_DUMP"); dump && *dump)  // a developer's view of each sample's IR
      detail::write_file_atomically(std::string(dump) + "/sample" + std::to_string(kernels.size()) + ".json", l.kernel->to_json().dump(1));
    if (!kernels.empty() && l.kernel->signature() != kernels[0].signature()) {
      g.why = "the reference computes differently on " + s.label + " than on " + used[0]->label + " (another graph)";
      return g;
    }
    kernels.push_back(std::move(*l.kernel));
    used.push_back(&s);
  }
  // The given sizes' graph is what the fit generalizes from: sizes and constants that follow
  // from the arguments differ between it and the shrunk run (a sqrt(d) baked in by Python).
  if (!missing_real.empty()) {
    g.why = missing_real;
    return g;
  }
  if (kernels[0].sizes.size() > 480) {
    g.why = "a kernel of more than 480 sizes (the launcher passes them by value)";
    return g;
  }
  Lowered fitted = fit_sizes(kernels, used);
  if (!fitted.kernel) {
    g.why = fitted.why;
    return g;
  }
  g.kernel = std::move(*fitted.kernel);
  g.lowered = true;

  // The proof: the IR's CPU twin on each traced shape's inputs, against the reference's outputs.
  const detail::TwinLibrary lib = detail::build_source_library(emit_source(g.kernel, Backend::kCpu), "kwiki_generated");
  if (lib.path.empty()) {
    g.why = lib.error;
    return g;
  }
  void* handle = ::dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    g.why = std::string("cannot load the generated CPU kernel: ") + ::dlerror();
    return g;
  }
  const auto launch = reinterpret_cast<LaunchFn>(::dlsym(handle, "kwiki_launch"));
  if (!launch) {
    g.why = "the generated CPU kernel has no kwiki_launch";
    ::dlclose(handle);
    return g;
  }
  g.proof_ran = true;
  g.proven = true;
  int checked = 0;
  std::size_t sample_index = 0;
  for (const auto* st : proven_on) {
    while (sample_index < used.size() && used[sample_index]->label.find("traced at") == std::string::npos) ++sample_index;
    const GraphSample& small = *used[sample_index++];
    ojson r = ojson::object();
    std::string why;
    const Checked c = prove_shape(g.kernel, launch, trace, *st, small, r, g.worst_abs, why);
    if (c == Checked::kNotChecked) r = {{"not_checked", why}};
    g.shapes[st->id] = r;
    checked += c == Checked::kPass;
    if (c == Checked::kFail) {
      g.proven = false;
      if (g.why.empty()) g.why = why;
    }
  }
  ::dlclose(handle);
  if (checked == 0 && g.proven) {
    g.proven = false;
    g.why = "no traced shape was small enough to check (every one over 4M elements)";
  }
  return g;
}

}  // namespace kwiki::gen
