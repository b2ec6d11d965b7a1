// The generator's kernel IR: its tables (element types, pointwise ops, reductions) and its JSON encoding.
#include "kernel_ir.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace kwiki::gen {

const DTypeRow kDTypes[] = {
    {DType::kF32, "fp32", 4, "float", 0},
    {DType::kBF16, "bf16", 2, "float", 1},
    {DType::kF16, "fp16", 2, "float", 2},
    {DType::kF64, "fp64", 8, "double", -1},
    {DType::kE4M3FN, "fp8_e4m3fn", 1, "float", 3},
    {DType::kE4M3FNUZ, "fp8_e4m3fnuz", 1, "float", 4},
    {DType::kI8, "int8", 1, "long long", 8},
    {DType::kU8, "uint8", 1, "long long", 7},
    {DType::kI16, "int16", 2, "long long", 9},
    {DType::kI32, "int32", 4, "long long", 5},
    {DType::kI64, "int64", 8, "long long", 6},
    {DType::kBool, "bool", 1, "bool", 7},
};
static_assert(sizeof(kDTypes) / sizeof(kDTypes[0]) == static_cast<std::size_t>(DType::kCount), "one row per DType, in enum order");

const DTypeRow& dtype_row(DType t) { return kDTypes[static_cast<int>(t)]; }

std::optional<DType> dtype_from_trace(std::string_view name) {
  for (const auto& row : kDTypes)
    if (name == row.trace_name) return row.type;
  return std::nullopt;
}

bool is_float(DType t) { return std::string_view(dtype_row(t).compute) == "float" || t == DType::kF64; }
bool is_narrow_float(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kE4M3FN || t == DType::kE4M3FNUZ; }

// Helpers named kw_* are defined by each backend's prelude (emit_cpu.cpp, emit_gpu.cpp), so that
// one spelling serves float, integer and bool operands where the op is typed.
const PointwiseOp kPointwiseOps[] = {
    // name, torch names, arity, result, cpu, cuda, hip, dsl (Python)[, costly]
    {"neg", "neg", 1, ResultType::kSame, "(-$0)", "(-$0)", "(-$0)", "(-$0)"},
    {"abs", "abs", 1, ResultType::kSame, "kw_abs($0)", "kw_abs($0)", "kw_abs($0)", "kw_abs($0)"},
    {"exp", "exp", 1, ResultType::kFloat, "std::exp($0)", "kw_exp($0)", "kw_exp($0)", "kw_exp($0)", true},
    {"exp2", "exp2", 1, ResultType::kFloat, "std::exp2($0)", "exp2f($0)", "exp2f($0)", "kw_exp2($0)", true},
    {"expm1", "expm1", 1, ResultType::kFloat, "std::expm1($0)", "expm1f($0)", "expm1f($0)", "kw_expm1($0)", true},
    {"log", "log", 1, ResultType::kFloat, "std::log($0)", "logf($0)", "logf($0)", "kw_log($0)", true},
    {"log2", "log2", 1, ResultType::kFloat, "std::log2($0)", "log2f($0)", "log2f($0)", "kw_log2($0)", true},
    {"log1p", "log1p", 1, ResultType::kFloat, "std::log1p($0)", "log1pf($0)", "log1pf($0)", "kw_log1p($0)", true},
    {"sqrt", "sqrt", 1, ResultType::kFloat, "std::sqrt($0)", "sqrtf($0)", "sqrtf($0)", "kw_sqrt($0)", true},
    {"rsqrt", "rsqrt", 1, ResultType::kFloat, "(1.0f / std::sqrt($0))", "rsqrtf($0)", "rsqrtf($0)", "kw_rsqrt($0)"},
    {"reciprocal", "reciprocal", 1, ResultType::kFloat, "(1.0f / $0)", "kw_div(1.0f, $0)", "kw_div(1.0f, $0)", "kw_div(1.0, $0)", true},
    {"sin", "sin", 1, ResultType::kFloat, "std::sin($0)", "sinf($0)", "sinf($0)", "kw_sin($0)", true},
    {"cos", "cos", 1, ResultType::kFloat, "std::cos($0)", "cosf($0)", "cosf($0)", "kw_cos($0)", true},
    {"tanh", "tanh", 1, ResultType::kFloat, "std::tanh($0)", "kw_tanh($0)", "kw_tanh($0)", "kw_tanh($0)", true},
    {"erf", "erf", 1, ResultType::kFloat, "std::erf($0)", "erff($0)", "erff($0)", "kw_erf($0)", true},
    {"sigmoid", "sigmoid", 1, ResultType::kFloat, "(1.0f / (1.0f + std::exp(-$0)))", "kw_div(1.0f, 1.0f + kw_exp(-$0))", "kw_div(1.0f, 1.0f + kw_exp(-$0))", "kw_div(1.0, 1.0 + kw_exp(-$0))", true},
    {"silu", "silu", 1, ResultType::kFloat, "($0 / (1.0f + std::exp(-$0)))", "kw_div($0, 1.0f + kw_exp(-$0))", "kw_div($0, 1.0f + kw_exp(-$0))", "kw_div($0, 1.0 + kw_exp(-$0))", true},
    {"gelu", "gelu", 1, ResultType::kFloat, "(0.5f * $0 * (1.0f + std::erf($0 * 0.70710678118654752f)))",
     "(0.5f * $0 * (1.0f + erff($0 * 0.70710678118654752f)))", "(0.5f * $0 * (1.0f + erff($0 * 0.70710678118654752f)))", "(0.5 * $0 * (1.0 + kw_erf($0 * 0.70710678118654752)))", true},
    {"gelu_tanh", "gelu_tanh", 1, ResultType::kFloat, "(0.5f * $0 * (1.0f + std::tanh(0.79788456080286536f * ($0 + 0.044715f * $0 * $0 * $0))))",
     "(0.5f * $0 * (1.0f + kw_tanh(0.79788456080286536f * ($0 + 0.044715f * $0 * $0 * $0))))",
     "(0.5f * $0 * (1.0f + kw_tanh(0.79788456080286536f * ($0 + 0.044715f * $0 * $0 * $0))))", "(0.5 * $0 * (1.0 + kw_tanh(0.79788456080286536 * ($0 + 0.044715 * $0 * $0 * $0))))", true},
    {"hardswish", "hardswish", 1, ResultType::kFloat, "($0 * std::fmin(std::fmax($0 + 3.0f, 0.0f), 6.0f) / 6.0f)",
     "kw_div($0 * fminf(fmaxf($0 + 3.0f, 0.0f), 6.0f), 6.0f)", "kw_div($0 * fminf(fmaxf($0 + 3.0f, 0.0f), 6.0f), 6.0f)", "kw_div($0 * kw_fmin(kw_fmax($0 + 3.0, 0.0), 6.0), 6.0)"},
    {"relu", "relu", 1, ResultType::kSame, "($0 < 0 ? 0 : $0)", "($0 < 0 ? 0 : $0)", "($0 < 0 ? 0 : $0)", "kw_relu($0)"},
    {"floor", "floor", 1, ResultType::kSame, "std::floor($0)", "floorf($0)", "floorf($0)", "kw_floor($0)"},
    {"ceil", "ceil", 1, ResultType::kSame, "std::ceil($0)", "ceilf($0)", "ceilf($0)", "kw_ceil($0)"},
    {"round", "round", 1, ResultType::kSame, "std::nearbyint($0)", "rintf($0)", "rintf($0)", "kw_rint($0)"},
    {"trunc", "trunc", 1, ResultType::kSame, "std::trunc($0)", "truncf($0)", "truncf($0)", "kw_trunc($0)"},
    {"sign", "sign sgn", 1, ResultType::kSame, "kw_sign($0)", "kw_sign($0)", "kw_sign($0)", "kw_sign($0)"},
    {"logical_not", "logical_not", 1, ResultType::kBool, "(!$0)", "(!$0)", "(!$0)", "kw_not($0)"},
    {"bitwise_not", "bitwise_not", 1, ResultType::kSame, "kw_not($0)", "kw_not($0)", "kw_not($0)", "kw_bitnot($0)"},
    {"isnan", "isnan", 1, ResultType::kBool, "($0 != $0)", "($0 != $0)", "($0 != $0)", "($0 != $0)"},
    {"add", "add", 2, ResultType::kSame, "($0 + $1)", "($0 + $1)", "($0 + $1)", "($0 + $1)"},
    {"sub", "sub", 2, ResultType::kSame, "($0 - $1)", "($0 - $1)", "($0 - $1)", "($0 - $1)"},
    {"mul", "mul", 2, ResultType::kSame, "($0 * $1)", "($0 * $1)", "($0 * $1)", "($0 * $1)"},
    {"div", "div true_divide", 2, ResultType::kFloat, "kw_div($0, $1)", "kw_div($0, $1)", "kw_div($0, $1)", "kw_div($0, $1)", true},
    // A tensor divided by a Python number: torch on a GPU multiplies by the number's fp32 reciprocal
    // (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu, HIP built from the same source); on the CPU
    // it divides, which the twin does. The lowering picks it for div with a scalar divisor.
    {"div_scalar", "", 2, ResultType::kFloat, "kw_div($0, $1)", "($0 * kw_recip($1))", "($0 * kw_recip($1))", "($0 * kw_div(1.0, $1))"},
    {"pow", "pow", 2, ResultType::kFloat, "std::pow($0, $1)", "powf($0, $1)", "powf($0, $1)", "kw_pow($0, $1)", true},
    {"maximum", "maximum max.other", 2, ResultType::kSame, "kw_max($0, $1)", "kw_max($0, $1)", "kw_max($0, $1)", "kw_max($0, $1)"},
    {"minimum", "minimum min.other", 2, ResultType::kSame, "kw_min($0, $1)", "kw_min($0, $1)", "kw_min($0, $1)", "kw_min($0, $1)"},
    {"clamp_min", "clamp_min", 2, ResultType::kSame, "($0 < $1 ? $1 : $0)", "($0 < $1 ? $1 : $0)", "($0 < $1 ? $1 : $0)", "kw_where($0 < $1, $1, $0)"},
    {"clamp_max", "clamp_max", 2, ResultType::kSame, "($0 > $1 ? $1 : $0)", "($0 > $1 ? $1 : $0)", "($0 > $1 ? $1 : $0)", "kw_where($0 > $1, $1, $0)"},
    {"eq", "eq", 2, ResultType::kBool, "($0 == $1)", "($0 == $1)", "($0 == $1)", "($0 == $1)"},
    {"ne", "ne", 2, ResultType::kBool, "($0 != $1)", "($0 != $1)", "($0 != $1)", "($0 != $1)"},
    {"lt", "lt less", 2, ResultType::kBool, "($0 < $1)", "($0 < $1)", "($0 < $1)", "($0 < $1)"},
    {"le", "le less_equal", 2, ResultType::kBool, "($0 <= $1)", "($0 <= $1)", "($0 <= $1)", "($0 <= $1)"},
    {"gt", "gt greater", 2, ResultType::kBool, "($0 > $1)", "($0 > $1)", "($0 > $1)", "($0 > $1)"},
    {"ge", "ge greater_equal", 2, ResultType::kBool, "($0 >= $1)", "($0 >= $1)", "($0 >= $1)", "($0 >= $1)"},
    {"logical_and", "logical_and", 2, ResultType::kBool, "($0 && $1)", "($0 && $1)", "($0 && $1)", "kw_and($0, $1)"},
    {"logical_or", "logical_or", 2, ResultType::kBool, "($0 || $1)", "($0 || $1)", "($0 || $1)", "kw_or($0, $1)"},
    {"bitwise_and", "bitwise_and", 2, ResultType::kSame, "($0 & $1)", "($0 & $1)", "($0 & $1)", "($0 & $1)"},
    {"bitwise_or", "bitwise_or", 2, ResultType::kSame, "($0 | $1)", "($0 | $1)", "($0 | $1)", "($0 | $1)"},
    {"where", "where", 3, ResultType::kSame, "($0 ? $1 : $2)", "($0 ? $1 : $2)", "($0 ? $1 : $2)", "kw_where($0, $1, $2)"},
};
const std::size_t kPointwiseOpCount = sizeof(kPointwiseOps) / sizeof(kPointwiseOps[0]);

const PointwiseOp* find_pointwise(std::string_view name) {
  for (const auto& op : kPointwiseOps)
    if (name == op.name) return &op;
  return nullptr;
}

const PointwiseOp* pointwise_for_torch(std::string_view aten) {
  // "aten.max.other" -> base "max", overload "other"; an in-place "exp_" is "exp".
  std::string_view s = aten;
  if (s.starts_with("aten.")) s.remove_prefix(5);
  const auto dot = s.find('.');
  std::string base(s.substr(0, dot));
  const std::string overload = dot == std::string_view::npos ? "" : std::string(s.substr(dot + 1));
  if (base.size() > 1 && base.back() == '_') base.pop_back();
  for (const std::string& key : {base + "." + overload, base}) {
    for (const auto& op : kPointwiseOps) {
      std::istringstream names(op.torch);
      for (std::string n; names >> n;)
        if (n == key) return &op;
    }
  }
  return nullptr;
}

const ReduceRow kReductions[] = {
    {ReduceKind::kSum, "sum", "0"},
    {ReduceKind::kMax, "max", "-INFINITY"},
    {ReduceKind::kMin, "min", "INFINITY"},
    {ReduceKind::kArgMax, "argmax", "-INFINITY"},
    {ReduceKind::kArgMin, "argmin", "INFINITY"},
};
static_assert(sizeof(kReductions) / sizeof(kReductions[0]) == static_cast<std::size_t>(ReduceKind::kCount), "one row per ReduceKind");
const ReduceRow& reduce_row(ReduceKind k) { return kReductions[static_cast<int>(k)]; }

std::string SizeExpr::describe() const {
  switch (kind) {
    case Kind::kConst: return std::to_string(value);
    case Kind::kScalar: return scalar;
    case Kind::kDims: {
      std::string s = tensor + ".shape[" + std::to_string(first) + ":" + std::to_string(last) + "]";
      if (!tensor2.empty()) s += "*" + tensor2 + ".shape[" + std::to_string(first2) + ":" + std::to_string(last2) + "]";
      if (num != 1) s += "*" + std::to_string(num);
      if (den != 1) s += "/" + std::to_string(den);
      return s;
    }
  }
  return "?";
}

bool Kernel::has_reduction() const {
  for (const auto& n : nodes)
    if (n.op == OpKind::kReduce) return true;
  return false;
}

namespace {

using ojson = nlohmann::ordered_json;

const char* op_name(OpKind k) {
  static const char* names[] = {"load", "const", "iota", "size", "pointwise", "cast", "reduce", "select"};
  return names[static_cast<int>(k)];
}
const char* level_name(Level l) { return l == Level::kScalar ? "scalar" : l == Level::kRow ? "row" : "elem"; }

OpKind op_from(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(OpKind::kSelect); ++i)
    if (s == op_name(static_cast<OpKind>(i))) return static_cast<OpKind>(i);
  throw std::runtime_error("unknown IR op " + s);
}
Level level_from(const std::string& s) {
  if (s == "scalar") return Level::kScalar;
  if (s == "row") return Level::kRow;
  if (s == "elem") return Level::kElem;
  throw std::runtime_error("unknown IR level " + s);
}
DType dtype_from(const std::string& s) {
  const auto d = dtype_from_trace(s);
  if (!d) throw std::runtime_error("unknown IR dtype " + s);
  return *d;
}
ReduceKind reduce_from(const std::string& s) {
  for (const auto& r : kReductions)
    if (s == r.name) return r.kind;
  throw std::runtime_error("unknown IR reduction " + s);
}

ojson access_json(const Access& a) {
  ojson j = {{"buffer", a.buffer}, {"base", a.base}, {"outer", a.outer}, {"inner", a.inner}};
  if (a.index >= 0) j["index"] = a.index;
  return j;
}
Access access_from(const nlohmann::json& j) {
  Access a;
  a.buffer = j.at("buffer").get<int>();
  a.base = j.at("base").get<int>();
  a.outer = j.at("outer").get<std::vector<int>>();
  a.inner = j.at("inner").get<int>();
  a.index = j.value("index", -1);
  return a;
}

ojson size_json(const SizeExpr& e) {
  switch (e.kind) {
    case SizeExpr::Kind::kConst: return {{"const", e.value}};
    case SizeExpr::Kind::kScalar: return {{"scalar", e.scalar}};
    case SizeExpr::Kind::kDims: {
      ojson j = {{"tensor", e.tensor}, {"dims", {e.first, e.last}}, {"num", e.num}, {"den", e.den}};
      if (!e.tensor2.empty()) j["tensor2"] = e.tensor2, j["dims2"] = {e.first2, e.last2};
      return j;
    }
  }
  return {};
}
SizeExpr size_from(const nlohmann::json& j) {
  SizeExpr e;
  if (j.contains("const")) {
    e.kind = SizeExpr::Kind::kConst;
    e.value = j["const"].get<long long>();
  } else if (j.contains("scalar")) {
    e.kind = SizeExpr::Kind::kScalar;
    e.scalar = j["scalar"].get<std::string>();
  } else {
    e.kind = SizeExpr::Kind::kDims;
    e.tensor = j.at("tensor").get<std::string>();
    e.first = j.at("dims").at(0).get<int>();
    e.last = j.at("dims").at(1).get<int>();
    e.num = j.at("num").get<long long>();
    e.den = j.at("den").get<long long>();
    if (j.contains("tensor2")) {
      e.tensor2 = j.at("tensor2").get<std::string>();
      e.first2 = j.at("dims2").at(0).get<int>();
      e.last2 = j.at("dims2").at(1).get<int>();
    }
    if (e.den == 0) throw std::runtime_error("a size expression divides by 0");
  }
  return e;
}

}  // namespace

ojson Kernel::to_json() const {
  ojson j;
  j["schema"] = "kwiki-kernel-ir-1";
  j["outer"] = outer;
  j["inner"] = inner;
  j["sizes"] = sizes;
  ojson exprs = ojson::array();
  for (const auto& e : size_exprs) exprs.push_back(size_json(e));
  j["size_exprs"] = exprs;
  ojson fl = ojson::array();
  for (const auto& f : floats) {
    ojson e = {{"literal", f.literal}};
    if (!f.source.empty()) e["source"] = f.source;
    if (!f.fn.empty()) e["fn"] = f.fn, e["size"] = size_json(f.size);
    fl.push_back(e);
  }
  j["floats"] = fl;
  ojson bufs = ojson::array();
  for (const auto& b : buffers)
    bufs.push_back({{"name", b.name}, {"role", b.role}, {"dtype", dtype_row(b.dtype).trace_name}, {"shape", b.shape}});
  j["buffers"] = bufs;
  ojson ns = ojson::array();
  for (const auto& n : nodes) {
    ojson e = {{"op", op_name(n.op)}, {"dtype", dtype_row(n.dtype).trace_name}, {"level", level_name(n.level)}, {"args", n.args}};
    if (n.op == OpKind::kLoad) e["access"] = access_json(n.access);
    if (n.op == OpKind::kPointwise) e["pw"] = n.pw->name;
    if (n.op == OpKind::kReduce) e["reduce"] = reduce_row(n.reduce).name;
    if (n.op == OpKind::kConst) e["fparam"] = n.fparam;
    if (n.op == OpKind::kIota) e["axis"] = n.axis;
    if (n.op == OpKind::kSize) e["slot"] = n.slot;
    if (n.op == OpKind::kSelect) e["bounds"] = n.bounds;
    if (!n.source.empty()) e["source"] = n.source;
    ns.push_back(e);
  }
  j["nodes"] = ns;
  ojson st = ojson::array();
  for (const auto& s : stores) st.push_back({{"node", s.node}, {"access", access_json(s.access)}});
  j["stores"] = st;
  ojson rs = ojson::array();
  for (const auto& r : results) rs.push_back({{"name", r.name}, {"buffer", r.buffer}});
  j["results"] = rs;
  return j;
}

Kernel Kernel::from_json(const nlohmann::json& j) {
  try {
    if (j.value("schema", "") != "kwiki-kernel-ir-1") throw std::runtime_error("not a kwiki-kernel-ir-1 document");
    Kernel k;
    k.outer = j.at("outer").get<std::vector<int>>();
    k.inner = j.at("inner").get<int>();
    k.sizes = j.at("sizes").get<std::vector<long long>>();
    for (const auto& e : j.at("size_exprs")) k.size_exprs.push_back(size_from(e));
    for (const auto& f : j.at("floats")) {
      FloatParam p{f.at("literal").get<double>(), f.value("source", ""), f.value("fn", ""), {}};
      if (!p.fn.empty()) {
        if (p.fn != "sqrt" && p.fn != "rsqrt" && p.fn != "recip" && p.fn != "id") throw std::runtime_error("unknown float function " + p.fn);
        p.size = size_from(f.at("size"));
      }
      k.floats.push_back(std::move(p));
    }
    for (const auto& b : j.at("buffers"))
      k.buffers.push_back({b.at("name").get<std::string>(), b.at("role").get<std::string>(), dtype_from(b.at("dtype").get<std::string>()),
                           b.at("shape").get<std::vector<int>>()});
    for (const auto& e : j.at("nodes")) {
      Node n;
      n.op = op_from(e.at("op").get<std::string>());
      n.dtype = dtype_from(e.at("dtype").get<std::string>());
      n.level = level_from(e.at("level").get<std::string>());
      n.args = e.at("args").get<std::vector<int>>();
      if (n.op == OpKind::kLoad) n.access = access_from(e.at("access"));
      if (n.op == OpKind::kPointwise) {
        n.pw = find_pointwise(e.at("pw").get<std::string>());
        if (!n.pw) throw std::runtime_error("unknown pointwise op " + e.at("pw").get<std::string>());
        if (static_cast<int>(n.args.size()) != n.pw->arity) throw std::runtime_error(std::string("wrong operand count for ") + n.pw->name);
      }
      if (n.op == OpKind::kReduce) n.reduce = reduce_from(e.at("reduce").get<std::string>());
      if (n.op == OpKind::kConst) n.fparam = e.at("fparam").get<int>();
      if (n.op == OpKind::kIota) n.axis = e.at("axis").get<int>();
      if (n.op == OpKind::kSize) n.slot = e.at("slot").get<int>();
      if (n.op == OpKind::kSelect) n.bounds = e.at("bounds").get<std::vector<int>>();
      n.source = e.value("source", "");
      k.nodes.push_back(std::move(n));
    }
    for (const auto& s : j.at("stores")) k.stores.push_back({s.at("node").get<int>(), access_from(s.at("access"))});
    // Every index must point where it may: operands before their node, slots and buffers in range.
    const int nslots = static_cast<int>(k.sizes.size());
    const auto slot_ok = [&](int s) { return s >= 0 && s < nslots; };
    const auto access_ok = [&](const Access& a) {
      if (a.buffer < 0 || a.buffer >= static_cast<int>(k.buffers.size()) || !slot_ok(a.base) || !slot_ok(a.inner)) return false;
      if (a.outer.size() != k.outer.size()) return false;
      for (int s : a.outer)
        if (!slot_ok(s)) return false;
      return true;
    };
    if (!slot_ok(k.inner) || (!k.size_exprs.empty() && k.size_exprs.size() != k.sizes.size())) throw std::runtime_error("bad slots");
    for (int s : k.outer)
      if (!slot_ok(s)) throw std::runtime_error("bad outer slot");
    for (const auto& b : k.buffers)
      for (int s : b.shape)
        if (!slot_ok(s)) throw std::runtime_error("bad buffer shape slot");
    for (std::size_t i = 0; i < k.nodes.size(); ++i) {
      const Node& n = k.nodes[i];
      for (int a : n.args)
        if (a < 0 || a >= static_cast<int>(i)) throw std::runtime_error("operand after its node");
      if (n.op == OpKind::kLoad && !access_ok(n.access)) throw std::runtime_error("bad load access");
      // A load has no operand, or (a gather) one integer index scaled by the stride in slot `index`.
      if (n.op == OpKind::kLoad && (n.args.size() != (n.access.index >= 0 ? 1u : 0u) || (n.access.index >= 0 && !slot_ok(n.access.index))))
        throw std::runtime_error("bad gather index");
      if (n.op == OpKind::kConst && (n.fparam < 0 || n.fparam >= static_cast<int>(k.floats.size()))) throw std::runtime_error("bad float param");
      if (n.op == OpKind::kSize && !slot_ok(n.slot)) throw std::runtime_error("bad size slot");
      if (n.op == OpKind::kIota && (n.axis < -1 || n.axis >= static_cast<int>(k.outer.size()))) throw std::runtime_error("bad iota axis");
      if (n.op == OpKind::kSelect) {
        if (n.bounds.size() != n.args.size()) throw std::runtime_error("select bounds");
        for (int s : n.bounds)
          if (!slot_ok(s)) throw std::runtime_error("bad select bound");
      }
      if ((n.op == OpKind::kCast || n.op == OpKind::kReduce) && n.args.size() != 1) throw std::runtime_error("cast/reduce take one operand");
    }
    for (const auto& r : j.at("results")) k.results.push_back({r.at("name").get<std::string>(), r.at("buffer").get<int>()});
    for (const auto& r : k.results)
      if (r.buffer < 0 || r.buffer >= static_cast<int>(k.buffers.size())) throw std::runtime_error("bad result buffer");
    for (const auto& s : k.stores)
      if (s.node < 0 || s.node >= static_cast<int>(k.nodes.size()) || !access_ok(s.access) || s.access.index >= 0) throw std::runtime_error("bad store");
    return k;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed kernel IR: ") + e.what());
  }
}

void Kernel::assign_levels() {
  // A coefficient is zero when its fitted expression is the constant 0 (else this sample's value).
  const auto zero = [&](int slot) {
    if (!size_exprs.empty()) return size_exprs[slot].kind == SizeExpr::Kind::kConst && size_exprs[slot].value == 0;
    return sizes[slot] == 0;
  };
  for (auto& n : nodes) {
    Level l = Level::kScalar;
    for (int a : n.args) l = std::max(l, nodes[a].level);
    switch (n.op) {
      case OpKind::kLoad:
        if (!zero(n.access.inner)) l = Level::kElem;
        else
          for (int s : n.access.outer)
            if (!zero(s)) l = std::max(l, Level::kRow);
        break;
      case OpKind::kIota: l = n.axis < 0 ? Level::kElem : Level::kRow; break;
      case OpKind::kReduce: l = Level::kRow; break;
      default: break;
    }
    n.level = l;
  }
}

std::string Kernel::signature() const {
  ojson j = to_json();
  for (auto& n : j["nodes"]) n.erase("level");
  j.erase("sizes");
  j.erase("size_exprs");
  for (auto& f : j["floats"]) f.erase("literal"), f.erase("size");
  return j.dump();
}

}  // namespace kwiki::gen
