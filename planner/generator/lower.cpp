// Lowering: a recorded aten graph to the kernel IR. Two steps: the ops become a graph of tensor
// values (views of inputs stay strided reads of them), then each value is emitted at the domain
// coordinates its consumers ask for (an affine form per dimension), from the stores down.
#include "lower.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string_view>
#include <stdexcept>

namespace kwiki::gen {
namespace {

using nlohmann::json;

/// The lowering stops: the op and why (caught in lower_graph).
struct Decline {
  std::string op, why;
};
[[noreturn]] void decline(const std::string& op, const std::string& why) { throw Decline{op, why}; }

// ---- step 1: tensor values --------------------------------------------------------------------

enum class TKind { kLeaf, kConst, kIota, kSize, kPointwise, kCast, kReduce, kReshape, kPermute, kExpand, kSlice, kSelectIdx, kCat, kGather };

/// One tensor value of the reference, with its logical shape.
struct TVal {
  TKind kind = TKind::kConst;
  std::vector<long long> shape;
  DType dtype = DType::kF32;
  std::vector<int> args;
  std::string buffer;               ///< kLeaf: the named tensor it reads
  long long offset = 0;             ///< kLeaf: element offset in it
  std::vector<long long> stride;    ///< kLeaf
  double value = 0;                 ///< kConst; kIota: start
  double step = 1;                  ///< kIota
  long long size = 0;               ///< kSize: the value
  const PointwiseOp* pw = nullptr;  ///< kPointwise
  ReduceKind reduce = ReduceKind::kSum;
  int dim = 0;                      ///< kReduce, kSlice, kSelectIdx, kCat
  bool keepdim = false;
  std::vector<int> perm;            ///< kPermute
  long long start = 0;              ///< kSlice: first index; kSelectIdx: the index
  /// kGather: args {source (a named tensor), index}; `dim` the source dimension indexed. With
  /// index_dims the index's dimensions take `dim`'s place in the result (index_select, x[idx],
  /// embedding); with same_shape the result has the index's shape (torch.gather). wrap: negative
  /// indices count from the end (x[idx]).
  bool gather_same_shape = false, gather_wrap = false;
  std::string source;
};

int rank_of(const TVal& t) { return static_cast<int>(t.shape.size()); }
long long numel(const std::vector<long long>& s) {
  long long n = 1;
  for (long long d : s) n *= d;
  return n;
}

std::string base_name(const std::string& op) {
  std::string s = op.rfind("aten.", 0) == 0 ? op.substr(5) : op;
  return s.substr(0, s.find('.'));
}
std::string overload_of(const std::string& op) {
  const auto dot = op.rfind('.');
  return dot == std::string::npos || op.rfind("aten.", 0) != 0 || dot < 5 ? "" : op.substr(dot + 1);
}

std::vector<long long> ints_of(const json& j) {
  std::vector<long long> out;
  if (j.is_array())
    for (const auto& e : j) out.push_back(e.is_object() ? e.value("s", json()).get<long long>() : e.get<long long>());
  else if (j.is_object() && j.contains("s") && j["s"].is_number_integer())
    out.push_back(j["s"].get<long long>());
  return out;
}

// Broadcast shape of torch's rule (right-aligned).
std::vector<long long> broadcast(const std::vector<long long>& a, const std::vector<long long>& b) {
  const std::size_t r = std::max(a.size(), b.size());
  std::vector<long long> out(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const long long x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const long long y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

class Graph {
 public:
  explicit Graph(const GraphSample& s) : sample_(s) {
    for (const auto& t : s.tensors) named_[t.name] = &t;
  }

  std::vector<TVal> vals;
  std::map<std::string, int> env;       ///< graph tensor name -> its current value
  std::set<std::string> written;        ///< named tensors written in place
  std::map<std::string, int> leaf_memo;

  void run() {
    if (!sample_.ops.is_array()) decline("", "the trace recorded no ops");
    for (std::size_t i = 0; i < sample_.ops.size(); ++i) op(sample_.ops[i]);
  }

  const NamedTensor* named(const std::string& n) const {
    const auto it = named_.find(n);
    return it == named_.end() ? nullptr : it->second;
  }

  int add(TVal v) {
    vals.push_back(std::move(v));
    return static_cast<int>(vals.size()) - 1;
  }

  int constant(double v, DType d, std::vector<long long> shape = {}) {
    TVal t;
    t.kind = TKind::kConst;
    t.value = v;
    t.dtype = d;
    t.shape = std::move(shape);
    return add(t);
  }

 private:
  const GraphSample& sample_;
  std::map<std::string, const NamedTensor*> named_;
  std::string cur_;  ///< the op being lowered (for messages)

  static DType dtype_of(const json& ref) {
    const auto d = dtype_from_trace(ref.value("dtype", ""));
    if (!d) decline("", "a tensor of dtype " + ref.value("dtype", std::string("?")) + ", which the generator does not compute in");
    if (*d == DType::kF64) decline("", "fp64 arithmetic (the generated kernels compute in fp32)");
    return *d;
  }
  static std::vector<long long> shape_of(const json& ref) { return ref.at("shape").get<std::vector<long long>>(); }

  // The value a reference to a tensor or a Python number stands for.
  int val(const json& ref) {
    if (ref.is_object() && ref.contains("s")) {
      const json& s = ref["s"];
      if (s.is_boolean()) return constant(s.get<bool>() ? 1 : 0, DType::kBool);
      if (s.is_number_integer()) return constant(static_cast<double>(s.get<long long>()), DType::kI64);
      if (s.is_number()) return constant(s.get<double>(), DType::kF32);
      decline(cur_, "an argument that is not a tensor or number");
    }
    if (!ref.is_object() || !ref.contains("t")) decline(cur_, "an argument that is not a tensor or number");
    const std::string name = ref["t"].get<std::string>();
    if (const auto it = env.find(name); it != env.end()) return it->second;
    // A one-element tensor made in Python (torch.tensor(448.0)): the trace recorded its value.
    if (const auto v = ref.find("value"); v != ref.end() && v->is_number())
      return constant(v->get<double>(), dtype_of(ref), shape_of(ref));
    // A view of a named tensor (an input or a parameter): a strided read of it.
    const std::string base = ref.value("base", "");
    const NamedTensor* owner = named(base);
    if (!owner) {
      if (base == "?") decline(cur_, "a view of memory two inputs share");
      decline(cur_, "a tensor the trace did not see being made (" + name + ")");
    }
    if (written.count(base)) decline(cur_, "a view of " + base + " read after it was written in place");
    if (!ref.contains("offset") || !ref.contains("stride")) decline(cur_, "a view whose offset or strides were not recorded");
    const std::string key = name;
    if (const auto it = leaf_memo.find(key); it != leaf_memo.end()) return it->second;
    TVal t;
    t.kind = TKind::kLeaf;
    t.buffer = base;
    t.offset = ref["offset"].get<long long>();
    t.stride = ref["stride"].get<std::vector<long long>>();
    t.shape = shape_of(ref);
    t.dtype = dtype_of(ref);
    t.source = name;
    const int id = add(t);
    leaf_memo[key] = id;
    return id;
  }

  // A value of `arg` broadcast or reshaped as torch would (only broadcasting by expand here).
  int expand_to(int arg, const std::vector<long long>& shape) {
    if (vals[arg].shape == shape) return arg;
    TVal t;
    t.kind = TKind::kExpand;
    t.args = {arg};
    t.shape = shape;
    t.dtype = vals[arg].dtype;
    return add(t);
  }

  int pointwise(const char* name, std::vector<int> args, DType out, const std::vector<long long>& shape) {
    TVal t;
    t.kind = TKind::kPointwise;
    t.pw = find_pointwise(name);
    t.args = std::move(args);
    t.dtype = out;
    t.shape = shape;
    t.source = cur_;
    return add(t);
  }
  int pw_auto(const char* name, std::vector<int> args, DType out) {
    std::vector<long long> shape;
    for (int a : args) shape = broadcast(shape, vals[a].shape);
    return pointwise(name, std::move(args), out, shape);
  }
  int cast(int arg, DType d) {
    if (vals[arg].dtype == d) return arg;
    TVal t;
    t.kind = TKind::kCast;
    t.args = {arg};
    t.dtype = d;
    t.shape = vals[arg].shape;
    t.source = cur_;
    return add(t);
  }
  int reduce(ReduceKind k, int arg, int dim, bool keepdim, DType out) {
    // The same reduction of the same value again (x.mean() beside x.var(), whose own mean is that
    // one) is the earlier node: one pass and one group reduction fewer in the kernel.
    for (int i = 0; i < static_cast<int>(vals.size()); ++i) {
      const TVal& e = vals[i];
      if (e.kind == TKind::kReduce && e.reduce == k && e.args.size() == 1 && e.args[0] == arg && e.dim == dim && e.keepdim == keepdim &&
          e.dtype == out)
        return i;
    }
    TVal t;
    t.kind = TKind::kReduce;
    t.reduce = k;
    t.args = {arg};
    t.dim = dim;
    t.keepdim = keepdim;
    t.dtype = out;
    t.source = cur_;
    for (int i = 0; i < rank_of(vals[arg]); ++i) {
      if (i != dim) t.shape.push_back(vals[arg].shape[i]);
      else if (keepdim) t.shape.push_back(1);
    }
    return add(t);
  }
  int size_value(long long n) {
    TVal t;
    t.kind = TKind::kSize;
    t.size = n;
    t.dtype = DType::kF32;
    return add(t);
  }

  int one_dim(const json& dims, int rank, const std::string& what) {
    const std::vector<long long> d = ints_of(dims);
    if (d.empty() && rank == 1) return 0;
    if (d.size() != 1) decline(cur_, what + " over " + std::to_string(d.size()) + " dimensions at once (the generator reduces one axis)");
    long long x = d[0] < 0 ? d[0] + rank : d[0];
    if (x < 0 || x >= rank) decline(cur_, "a dimension out of range");
    return static_cast<int>(x);
  }

  static DType acc_type(DType d) { return is_float(d) ? DType::kF32 : d; }

  // Reduction ops composed of the IR's reductions (in fp32, rounded to the result type).
  int sum(int x, int dim, bool keep, DType out) { return cast(reduce(ReduceKind::kSum, cast(x, acc_type(vals[x].dtype)), dim, keep, DType::kF32), out); }
  int mean(int x, int dim, bool keep, DType out) {
    const int s = reduce(ReduceKind::kSum, cast(x, DType::kF32), dim, keep, DType::kF32);
    return cast(pw_auto("div", {s, size_value(vals[x].shape[dim])}, DType::kF32), out);
  }
  int amax(int x, int dim, bool keep) { return reduce(ReduceKind::kMax, x, dim, keep, vals[x].dtype); }

  int log_softmax_or_softmax(int x, int dim, DType out, bool log) {
    const int xf = cast(x, DType::kF32);
    const int m = reduce(ReduceKind::kMax, xf, dim, true, DType::kF32);
    const int shifted = pw_auto("sub", {xf, m}, DType::kF32);
    const int e = pw_auto("exp", {shifted}, DType::kF32);
    const int s = reduce(ReduceKind::kSum, e, dim, true, DType::kF32);
    if (log) return cast(pw_auto("sub", {shifted, pw_auto("log", {s}, DType::kF32)}, DType::kF32), out);
    return cast(pw_auto("div", {e, s}, DType::kF32), out);
  }

  void set_out(const json& op, const json& out_ref, int v, bool in_place) {
    if (in_place) {
      const json& target = op["args"][0];
      const std::string name = target.value("t", "");
      if (named(name)) written.insert(name);
      else if (!env.count(name)) decline(cur_, "an in-place write into a view of another tensor");
      // The target keeps its dtype and shape (the op's result is cast and broadcast into it).
      v = cast(expand_to(v, shape_of(target)), dtype_of(target));
      env[name] = v;
      return;
    }
    if (out_ref.is_object() && out_ref.contains("t")) env[out_ref["t"].get<std::string>()] = v;
  }

  void op(const json& o) {
    const std::string full = o.value("op", "");
    cur_ = full;
    std::string name = base_name(full);
    const std::string ov = overload_of(full);
    bool in_place = name.size() > 1 && name.back() == '_' && name != "_";
    if (in_place) name.pop_back();
    const json& args = o.at("args");
    const json kwargs = o.value("kwargs", json::object());
    const json& out = o.at("out");
    const auto arg = [&](std::size_t i) -> const json& {
      static const json none = json{{"s", nullptr}};
      return i < args.size() ? args[i] : none;
    };
    const auto kw = [&](const char* k, std::size_t pos) -> json {
      if (kwargs.contains(k)) return kwargs[k];
      return pos < args.size() ? args[pos] : json{{"s", nullptr}};
    };
    const auto is_none = [](const json& j) { return j.is_object() && j.contains("s") && j["s"].is_null(); };
    const auto scalar = [&](const json& j) { return j.at("s").get<double>(); };
    const auto out_dtype = [&]() { return dtype_of(out.is_array() ? out[0] : out); };

    // Views of a named tensor are strided reads of it: nothing to compute.
    static const std::set<std::string> kViews = {"view", "_unsafe_view", "reshape", "_reshape_alias", "unsqueeze", "squeeze", "flatten",
                                                 "permute", "transpose", "t", "expand", "slice", "select", "split", "split_with_sizes",
                                                 "chunk", "unbind", "alias", "detach", "narrow", "as_strided", "view_as", "expand_as",
                                                 "lift_fresh", "contiguous", "clone", "_to_copy", "movedim", "unflatten"};
    const bool arg0_named = args.size() > 0 && args[0].is_object() && args[0].contains("t") && !env.count(args[0]["t"].get<std::string>()) &&
                            named(args[0].value("base", ""));
    if (kViews.count(name) && arg0_named && !in_place) {
      // _to_copy / clone / contiguous of an input make a new tensor: a read of it (and a cast).
      if (name == "_to_copy" || name == "clone" || name == "contiguous") {
        const int x = val(args[0]);
        set_out(o, out, cast(x, out_dtype()), false);
      }
      return;  // its result reads the named tensor through its recorded strides
    }

    if (const PointwiseOp* pw = pointwise_for_torch(full); pw && !(name == "max" && ov != "other") && !(name == "min" && ov != "other")) {
      std::vector<int> xs;
      for (int i = 0; i < pw->arity; ++i) xs.push_back(val(arg(i)));
      // Arguments past the operands change the op (leaky_relu's slope, softplus's beta): only
      // those modelled below are accepted.
      const std::size_t modelled = (name == "add" || name == "sub" || name == "div" || name == "gelu") ? pw->arity + 1 : pw->arity;
      for (std::size_t i = modelled; i < args.size(); ++i)
        if (!is_none(args[i])) decline(full, "an argument the generator does not model (argument " + std::to_string(i) + ")");
      std::string opname = pw->name;
      if (name == "gelu" && kw("approximate", 1).value("s", json("none")) == "tanh") opname = "gelu_tanh";
      if (name == "div" && !is_none(kw("rounding_mode", 2))) decline(full, "division with a rounding mode");
      // By a Python number in single precision: torch's GPU kernel multiplies by its fp32 reciprocal (div_scalar).
      if (name == "div" && arg(1).is_object() && arg(1).contains("s") && out_dtype() != DType::kF64) opname = "div_scalar";
      if ((name == "add" || name == "sub") && !is_none(kw("alpha", 2)) && scalar(kw("alpha", 2)) != 1.0)
        xs[1] = pw_auto("mul", {xs[1], constant(scalar(kw("alpha", 2)), DType::kF32)}, out_dtype());
      if (name == "pow" && arg(1).contains("s")) {
        const double e = scalar(arg(1));
        if (e == 2.0) return set_out(o, out, pw_auto("mul", {xs[0], xs[0]}, out_dtype()), in_place);
        if (e == 1.0) return set_out(o, out, cast(xs[0], out_dtype()), in_place);
        if (e == 0.5) return set_out(o, out, pw_auto("sqrt", {xs[0]}, out_dtype()), in_place);
        if (e == -1.0) return set_out(o, out, pw_auto("reciprocal", {xs[0]}, out_dtype()), in_place);
      }
      return set_out(o, out, pw_auto(find_pointwise(opname)->name, xs, out_dtype()), in_place);
    }

    if (name == "rsub") {  // other - alpha * self
      int a = val(arg(0));
      if (!is_none(kw("alpha", 2)) && scalar(kw("alpha", 2)) != 1.0) a = pw_auto("mul", {a, constant(scalar(kw("alpha", 2)), DType::kF32)}, out_dtype());
      return set_out(o, out, pw_auto("sub", {val(arg(1)), a}, out_dtype()), in_place);
    }
    if (name == "clamp") {
      int x = val(arg(0));
      const json lo = kw("min", 1), hi = kw("max", 2);
      if (!is_none(lo)) x = pw_auto("clamp_min", {x, val(lo)}, out_dtype());
      if (!is_none(hi)) x = pw_auto("clamp_max", {x, val(hi)}, out_dtype());
      return set_out(o, out, cast(x, out_dtype()), in_place);
    }
    if (name == "masked_fill") return set_out(o, out, pw_auto("where", {val(arg(1)), val(arg(2)), val(arg(0))}, out_dtype()), in_place);
    if (name == "_to_copy" || name == "clone" || name == "contiguous" || name == "alias" || name == "detach" || name == "lift_fresh" ||
        name == "lift_fresh_copy" || name == "to" || name == "type_as") {
      return set_out(o, out, cast(val(arg(0)), out_dtype()), in_place);
    }
    if (name == "copy") {  // dst.copy_(src)
      const int src = val(arg(1));
      const json& dst = arg(0);
      const std::string dn = dst.value("t", "");
      if (!named(dn) && !env.count(dn)) decline(full, "a copy into a view of another tensor (" + dn + ")");
      if (named(dn)) written.insert(dn);
      env[dn] = cast(expand_to(src, shape_of(dst)), dtype_of(dst));
      return;
    }
    if (name == "fill") return set_out(o, out, expand_to(val(arg(1)), shape_of(out)), in_place);
    if (name == "full" || name == "zeros" || name == "ones" || name == "full_like" || name == "zeros_like" || name == "ones_like" ||
        name == "new_zeros" || name == "new_ones" || name == "new_full" || name == "scalar_tensor" || name == "empty" || name == "empty_like" ||
        name == "new_empty") {
      double v = 0;
      if (name == "ones" || name == "ones_like" || name == "new_ones") v = 1;
      if (name == "full" || name == "new_full" || name == "full_like") v = scalar(arg(1 + (name == "new_full" ? 1 : 0) - (name == "full_like" ? 0 : 0)));
      if (name == "scalar_tensor") v = scalar(arg(0));
      if (name == "empty" || name == "empty_like" || name == "new_empty") v = NAN;  // read before written: nothing defined
      return set_out(o, out, constant(v, out_dtype(), shape_of(out)), false);
    }
    if (name == "arange") {
      double start = 0, step = 1;
      if (ov == "start" || ov == "start_step" || ov == "start_out") start = scalar(arg(0));
      if (ov == "start_step") step = scalar(arg(2));
      TVal t;
      t.kind = TKind::kIota;
      t.value = start;
      t.step = step;
      t.shape = shape_of(out);
      t.dtype = out_dtype();
      t.source = full;
      return set_out(o, out, add(t), false);
    }
    if (name == "mm" || name == "bmm" || name == "matmul") {
      const int a = val(arg(0)), b = val(arg(1));
      if (vals[a].shape.empty() || vals[a].shape.back() != 1) decline(full, "a matrix product (the generator lowers only outer products, K = 1)");
      return set_out(o, out, pw_auto("mul", {a, b}, out_dtype()), false);
    }

    // Views of computed values.
    if (name == "view" || name == "_unsafe_view" || name == "reshape" || name == "_reshape_alias" || name == "unsqueeze" || name == "squeeze" ||
        name == "flatten" || name == "view_as" || name == "unflatten") {
      TVal t;
      t.kind = TKind::kReshape;
      t.args = {val(arg(0))};
      t.shape = shape_of(out);
      t.dtype = vals[t.args[0]].dtype;
      return set_out(o, out, add(t), false);
    }
    if (name == "permute" || name == "transpose" || name == "t" || name == "movedim") {
      const int x = val(arg(0));
      const int r = rank_of(vals[x]);
      std::vector<int> perm(r);
      for (int i = 0; i < r; ++i) perm[i] = i;
      if (name == "permute") {
        const auto p = ints_of(arg(1));
        if (static_cast<int>(p.size()) != r) decline(full, "a permutation of the wrong length");
        for (int i = 0; i < r; ++i) perm[i] = static_cast<int>(p[i] < 0 ? p[i] + r : p[i]);
      } else if (r >= 2) {
        long long a = name == "t" ? 0 : ints_of(arg(1))[0], b = name == "t" ? 1 : ints_of(arg(2))[0];
        a = a < 0 ? a + r : a;
        b = b < 0 ? b + r : b;
        if (name == "movedim") decline(full, "movedim of a computed value");
        std::swap(perm[a], perm[b]);
      }
      TVal t;
      t.kind = TKind::kPermute;
      t.args = {x};
      t.perm = perm;
      t.shape = shape_of(out);
      t.dtype = vals[x].dtype;
      return set_out(o, out, add(t), false);
    }
    if (name == "expand" || name == "expand_as") return set_out(o, out, expand_to(val(arg(0)), shape_of(out)), false);
    if (name == "slice" || name == "narrow") {
      const int x = val(arg(0));
      const int r = rank_of(vals[x]);
      long long d = ints_of(arg(1))[0];
      d = d < 0 ? d + r : d;
      long long start = is_none(arg(2)) ? 0 : ints_of(arg(2))[0];
      if (start < 0) start += vals[x].shape[d];
      const long long step = name == "slice" && args.size() > 4 ? ints_of(arg(4))[0] : 1;
      TVal t;
      t.kind = TKind::kSlice;
      t.args = {x};
      t.dim = static_cast<int>(d);
      t.start = std::clamp(start, 0LL, vals[x].shape[d]);
      t.step = static_cast<double>(step);
      t.shape = shape_of(out);
      t.dtype = vals[x].dtype;
      return set_out(o, out, add(t), false);
    }
    if (name == "select") {
      const int x = val(arg(0));
      const int r = rank_of(vals[x]);
      long long d = ints_of(arg(1))[0], i = ints_of(arg(2))[0];
      d = d < 0 ? d + r : d;
      if (i < 0) i += vals[x].shape[d];
      TVal t;
      t.kind = TKind::kSelectIdx;
      t.args = {x};
      t.dim = static_cast<int>(d);
      t.start = i;
      t.shape = shape_of(out);
      t.dtype = vals[x].dtype;
      return set_out(o, out, add(t), false);
    }
    if (name == "split" || name == "split_with_sizes" || name == "chunk" || name == "unbind") {
      const int x = val(arg(0));
      const int r = rank_of(vals[x]);
      long long d = name == "unbind" ? (args.size() > 1 ? ints_of(arg(1))[0] : 0) : (args.size() > 2 ? ints_of(arg(2))[0] : 0);
      d = d < 0 ? d + r : d;
      if (!out.is_array()) decline(full, "a split with no list of results");
      long long at = 0;
      for (const auto& piece : out) {
        const auto ps = shape_of(piece);
        TVal t;
        t.args = {x};
        t.dim = static_cast<int>(d);
        t.start = at;
        t.shape = ps;
        t.dtype = vals[x].dtype;
        if (name == "unbind") {
          t.kind = TKind::kSelectIdx;
          at += 1;
        } else {
          t.kind = TKind::kSlice;
          t.step = 1;
          at += ps[d];
        }
        set_out(o, piece, add(t), false);
      }
      return;
    }
    if (name == "cat" || name == "stack") {
      std::vector<int> parts;
      for (const auto& p : arg(0)) parts.push_back(val(p));
      if (parts.empty()) decline(full, "a concatenation of nothing");
      const auto oshape = shape_of(out);
      const int r = static_cast<int>(oshape.size());
      long long d = args.size() > 1 ? ints_of(arg(1))[0] : 0;
      d = d < 0 ? d + r : d;
      if (name == "stack")
        for (auto& p : parts) {
          TVal u;
          u.kind = TKind::kReshape;
          u.args = {p};
          u.shape = vals[p].shape;
          u.shape.insert(u.shape.begin() + d, 1);
          u.dtype = vals[p].dtype;
          p = add(u);
        }
      TVal t;
      t.kind = TKind::kCat;
      t.dim = static_cast<int>(d);
      for (int p : parts) t.args.push_back(cast(p, out_dtype()));
      t.shape = oshape;
      t.dtype = out_dtype();
      t.source = full;
      return set_out(o, out, add(t), false);
    }

    // Reductions.
    const auto rank0 = [&]() { return rank_of(vals[val(arg(0))]); };
    if (name == "sum" || name == "mean" || name == "amax" || name == "amin" || name == "argmax" || name == "argmin" || name == "logsumexp" ||
        ((name == "max" || name == "min") && (ov == "dim" || ov == "default"))) {
      const int x = val(arg(0));
      const int r = rank0();
      const bool full_reduce = ov == "default" && (name == "sum" || name == "max" || name == "min" || name == "mean");
      if (full_reduce && r > 1) decline(full, "a reduction over the whole tensor");
      const int d = full_reduce ? 0 : (name == "argmax" || name == "argmin") && is_none(arg(1)) ? (r == 1 ? 0 : -1) : one_dim(arg(1), r, name);
      if (d < 0) decline(full, name + " over the flattened tensor");
      const bool keep = full_reduce ? false : args.size() > 2 && arg(2).value("s", json(false)) == true;
      if (name == "sum") return set_out(o, out, sum(x, d, keep, out_dtype()), false);
      if (name == "mean") return set_out(o, out, mean(x, d, keep, out_dtype()), false);
      if (name == "amax" || (name == "max" && ov == "default")) return set_out(o, out, amax(x, d, keep), false);
      if (name == "amin" || (name == "min" && ov == "default")) return set_out(o, out, reduce(ReduceKind::kMin, x, d, keep, vals[x].dtype), false);
      if (name == "argmax") return set_out(o, out, reduce(ReduceKind::kArgMax, x, d, keep, DType::kI64), false);
      if (name == "argmin") return set_out(o, out, reduce(ReduceKind::kArgMin, x, d, keep, DType::kI64), false);
      if (name == "logsumexp") {
        const int xf = cast(x, DType::kF32);
        const int m = reduce(ReduceKind::kMax, xf, d, true, DType::kF32);
        const int s = reduce(ReduceKind::kSum, pw_auto("exp", {pw_auto("sub", {xf, m}, DType::kF32)}, DType::kF32), d, keep, DType::kF32);
        const int mk = keep ? m : reduce(ReduceKind::kMax, xf, d, false, DType::kF32);
        return set_out(o, out, cast(pw_auto("add", {pw_auto("log", {s}, DType::kF32), mk}, DType::kF32), out_dtype()), false);
      }
      // max.dim / min.dim: (values, indices)
      const bool mx = name == "max";
      set_out(o, out[0], reduce(mx ? ReduceKind::kMax : ReduceKind::kMin, x, d, keep, vals[x].dtype), false);
      set_out(o, out[1], reduce(mx ? ReduceKind::kArgMax : ReduceKind::kArgMin, x, d, keep, DType::kI64), false);
      return;
    }
    if (name == "_softmax" || name == "_log_softmax" || name == "softmax" || name == "log_softmax") {
      const int x = val(arg(0));
      const int d = one_dim(arg(1), rank_of(vals[x]), name);
      return set_out(o, out, log_softmax_or_softmax(x, d, out_dtype(), name.find("log") != std::string::npos), false);
    }
    if (name == "linalg_vector_norm" || (name == "norm" && ov == "ScalarOpt_dim")) {
      const int x = val(arg(0));
      const double p = is_none(arg(1)) ? 2.0 : scalar(arg(1));
      const int d = one_dim(arg(2), rank_of(vals[x]), name);
      const bool keep = args.size() > 3 && arg(3).value("s", json(false)) == true;
      const int xf = cast(x, DType::kF32);
      int r;
      if (p == 2.0) r = pw_auto("sqrt", {reduce(ReduceKind::kSum, pw_auto("mul", {xf, xf}, DType::kF32), d, keep, DType::kF32)}, DType::kF32);
      else if (p == 1.0) r = reduce(ReduceKind::kSum, pw_auto("abs", {xf}, DType::kF32), d, keep, DType::kF32);
      else if (std::isinf(p) && p > 0) r = reduce(ReduceKind::kMax, pw_auto("abs", {xf}, DType::kF32), d, keep, DType::kF32);
      else decline(full, "a vector norm of order other than 1, 2 or inf");
      return set_out(o, out, cast(r, out_dtype()), false);
    }
    if (name == "var" || name == "var_mean" || name == "std") {
      const int x = val(arg(0));
      const int d = one_dim(arg(1), rank_of(vals[x]), name);
      double correction = 1;
      if (kwargs.contains("correction") && !kwargs["correction"].value("s", json()).is_null()) correction = scalar(kwargs["correction"]);
      if (ov == "dim" && args.size() > 2 && arg(2).contains("s") && arg(2)["s"].is_boolean()) correction = arg(2)["s"].get<bool>() ? 1 : 0;
      bool keep = kwargs.contains("keepdim") ? kwargs["keepdim"].value("s", json(false)) == true : (args.size() > 3 && arg(3).value("s", json(false)) == true);
      const int xf = cast(x, DType::kF32);
      const long long n = vals[x].shape[d];
      const int mu = mean(xf, d, true, DType::kF32);
      const int c = pw_auto("sub", {xf, mu}, DType::kF32);
      const int ss = reduce(ReduceKind::kSum, pw_auto("mul", {c, c}, DType::kF32), d, keep, DType::kF32);
      int v = pw_auto("div", {ss, size_value(n)}, DType::kF32);
      if (correction != 0) v = pw_auto("div", {ss, constant(static_cast<double>(n) - correction, DType::kF32)}, DType::kF32);
      if (correction != 0 && correction != 1) decline(full, "a variance with a correction other than 0 or 1");
      if (correction == 1) v = pw_auto("div", {ss, pw_auto("sub", {size_value(n), constant(1, DType::kF32)}, DType::kF32)}, DType::kF32);
      if (name == "std") v = pw_auto("sqrt", {v}, DType::kF32);
      if (name == "var_mean") {
        set_out(o, out[0], cast(v, dtype_of(out[0])), false);
        set_out(o, out[1], cast(mean(xf, d, keep, DType::kF32), dtype_of(out[1])), false);
        return;
      }
      return set_out(o, out, cast(v, out_dtype()), false);
    }
    if (name == "native_layer_norm") {
      const int x = val(arg(0));
      const int r = rank_of(vals[x]);
      if (ints_of(arg(1)).size() != 1) decline(full, "a layer norm over more than one dimension");
      const int d = r - 1;
      const int xf = cast(x, DType::kF32);
      const int mu = mean(xf, d, true, DType::kF32);
      const int c = pw_auto("sub", {xf, mu}, DType::kF32);
      const int var = pw_auto("div", {reduce(ReduceKind::kSum, pw_auto("mul", {c, c}, DType::kF32), d, true, DType::kF32), size_value(vals[x].shape[d])},
                              DType::kF32);
      const int rstd = pw_auto("rsqrt", {pw_auto("add", {var, val(arg(4))}, DType::kF32)}, DType::kF32);
      int y = pw_auto("mul", {c, rstd}, DType::kF32);
      if (!is_none(arg(2))) y = pw_auto("mul", {y, cast(val(arg(2)), DType::kF32)}, DType::kF32);
      if (!is_none(arg(3))) y = pw_auto("add", {y, cast(val(arg(3)), DType::kF32)}, DType::kF32);
      set_out(o, out[0], cast(y, dtype_of(out[0])), false);
      set_out(o, out[1], cast(mu, dtype_of(out[1])), false);
      set_out(o, out[2], cast(rstd, dtype_of(out[2])), false);
      return;
    }
    if (name == "index_select" || name == "embedding" || name == "gather" || (name == "index" && ov == "Tensor")) return gather(o, name, args, out);
    if (name == "_local_scalar_dense" || name == "item") decline(full, "a value read back to Python (.item()): data-dependent control");
    static const std::set<std::string> kKnownNo = {"sort", "topk", "cumsum", "cumprod", "kthvalue", "median", "mode", "multinomial",
                                                   "scatter", "scatter_add", "index_put", "index",
                                                   "nonzero", "unique", "bincount", "histc", "searchsorted", "conv1d", "convolution",
                                                   "addmm", "baddbmm", "_scaled_dot_product_flash_attention", "rand", "randn", "normal",
                                                   "bernoulli", "exponential", "uniform"};
    if (kKnownNo.count(name)) decline(full, "an op outside the generator's IR (scans, sorts, top-k, scatters, matrix products and random numbers are not lowered)");
    decline(full, "an op the generator does not know");
  }

  // Gathers read a named tensor (an input, a parameter or a view of one) at integer index values:
  // x.index_select(d, idx), F.embedding(idx, w), torch.gather(x, d, idx), x[idx] with one index tensor.
  void gather(const json& o, const std::string& name, const json& args, const json& out) {
    const auto at = [&](std::size_t i) -> const json& {
      static const json none = json{{"s", nullptr}};
      return i < args.size() ? args[i] : none;
    };
    TVal t;
    t.kind = TKind::kGather;
    t.shape = shape_of(out);
    t.dtype = dtype_of(out);
    t.source = cur_;
    int src = -1, idx = -1;
    long long d = 0;
    if (name == "embedding") {
      src = val(at(0));
      idx = val(at(1));
    } else if (name == "index") {
      src = val(at(0));
      const json& list = at(1);
      if (!list.is_array()) decline(cur_, "an index that is not a list of tensors");
      int found = 0;
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (list[i].is_object() && list[i].contains("s") && list[i]["s"].is_null()) continue;
        idx = val(list[i]);
        d = static_cast<long long>(i);
        ++found;
      }
      if (found != 1) decline(cur_, "indexing by " + std::to_string(found) + " index tensors at once (the generator gathers by one)");
      t.gather_wrap = true;
    } else {
      src = val(at(0));
      d = ints_of(at(1))[0];
      idx = val(at(2));
      t.gather_same_shape = name == "gather";
    }
    const TVal& sv = vals[src];
    if (sv.kind != TKind::kLeaf) decline(cur_, "a gather from a computed value (the generator gathers from inputs and parameters)");
    const int r = rank_of(sv);
    d = d < 0 ? d + r : d;
    if (d < 0 || d >= r) decline(cur_, "a dimension out of range");
    const DType it = vals[idx].dtype;
    if (it == DType::kBool || it == DType::kU8) decline(cur_, "a boolean mask index (data-dependent shape)");
    if (it != DType::kI64 && it != DType::kI32) decline(cur_, "an index of a type other than int64 or int32");
    t.dim = static_cast<int>(d);
    t.args = {src, idx};
    set_out(o, out, add(t), false);
  }
};

// ---- step 2: emission at domain coordinates -----------------------------------------------------

/// One dimension's coordinate as an affine function of the domain axes (the inner axis last).
struct Form {
  long long c0 = 0;
  std::vector<long long> coef;
  bool operator<(const Form& o) const { return std::tie(c0, coef) < std::tie(o.c0, o.coef); }
  bool operator==(const Form& o) const { return c0 == o.c0 && coef == o.coef; }
};
using Map = std::vector<Form>;

class Emitter {
 public:
  Emitter(const GraphSample& sample, Graph& g) : sample_(sample), g_(g) {}

  Kernel run() {
    choose_domain();
    canonical_maps();
    emit_results();
    k_.assign_levels();
    return std::move(k_);
  }

 private:
  const GraphSample& sample_;
  Graph& g_;
  Kernel k_;
  int naxes_ = 0;  // outer axes + the inner one
  std::vector<long long> axis_size_;
  int anchor_ = -1;
  Map anchor_map_;
  std::map<int, Map> canon_;
  std::map<std::pair<int, Map>, int> memo_;
  std::map<std::string, int> buffer_index_;

  Form zero() const { return Form{0, std::vector<long long>(naxes_, 0)}; }
  Form axis(int a) const {
    Form f = zero();
    f.coef[a] = 1;
    return f;
  }
  int inner_axis() const { return naxes_ - 1; }
  int slot(long long v) {
    k_.sizes.push_back(v);
    return static_cast<int>(k_.sizes.size()) - 1;
  }
  int fparam(double v) {
    FloatParam p;
    p.literal = v;
    k_.floats.push_back(std::move(p));
    return static_cast<int>(k_.floats.size()) - 1;
  }

  // The domain: the first reduction's operand, the reduced axis last; without reductions the
  // largest result. Every reduction must reduce that axis (checked when it is emitted).
  void choose_domain() {
    std::vector<long long> shape;
    int reduced = -1;
    for (std::size_t i = 0; i < g_.vals.size(); ++i)
      if (g_.vals[i].kind == TKind::kReduce) {
        anchor_ = g_.vals[i].args[0];
        reduced = g_.vals[i].dim;
        break;
      }
    if (anchor_ < 0) {
      long long best = -1;
      for (const auto& o : sample_.outputs) {
        const auto it = g_.env.find(o.graph_name);
        if (it != g_.env.end() && numel(g_.vals[it->second].shape) > best) {
          best = numel(g_.vals[it->second].shape);
          anchor_ = it->second;
        }
      }
      for (const auto& u : sample_.updated)
        if (const auto it = g_.env.find(u); it != g_.env.end() && numel(g_.vals[it->second].shape) > best) {
          best = numel(g_.vals[it->second].shape);
          anchor_ = it->second;
        }
      if (anchor_ < 0) decline("", "no output the graph computes");
    }
    shape = g_.vals[anchor_].shape;
    const int r = static_cast<int>(shape.size());
    if (reduced < 0) reduced = r - 1;
    naxes_ = std::max(r, 1);
    anchor_map_.assign(r, Form{});
    int next = 0;
    for (int d = 0; d < r; ++d)
      if (d != reduced) {
        k_.outer.push_back(slot(shape[d]));
        axis_size_.push_back(shape[d]);
        anchor_map_[d] = axis(next++);
      }
    if (r == 0) {
      k_.inner = slot(1);
      axis_size_.push_back(1);
    } else {
      k_.inner = slot(shape[reduced]);
      axis_size_.push_back(shape[reduced]);
      anchor_map_[reduced] = axis(inner_axis());
    }
  }

  // ---- maps through each kind of value (bwd: the operands' coordinates from the value's) ----

  Map broadcast_map(const TVal& t, const TVal& a, const Map& m) const {
    const int r = rank_of(t), ra = rank_of(a);
    Map out(ra);
    for (int j = 0; j < ra; ++j) {
      const int jt = j + r - ra;
      out[j] = (a.shape[j] == 1 && t.shape[jt] != 1) ? zero() : m[jt];
    }
    return out;
  }

  Form scaled(const Form& f, long long s) const {
    Form o = f;
    o.c0 *= s;
    for (auto& c : o.coef) c *= s;
    return o;
  }
  Form plus(const Form& a, const Form& b) const {
    Form o = a;
    o.c0 += b.c0;
    for (int i = 0; i < naxes_; ++i) o.coef[i] += b.coef[i];
    return o;
  }

  // The largest value a form takes over the domain (coefficients are checked non-negative).
  std::optional<long long> form_max(const Form& f) const {
    long long m = f.c0;
    if (f.c0 < 0) return std::nullopt;
    for (int i = 0; i < naxes_; ++i) {
      if (f.coef[i] < 0) return std::nullopt;
      m += f.coef[i] * (axis_size_[i] - 1);
    }
    return m;
  }

  // Splits one coordinate over `sizes` (row-major digits), when its terms fall on the digits.
  std::optional<std::vector<Form>> split(const Form& f, const std::vector<long long>& sizes) const {
    const int n = static_cast<int>(sizes.size());
    std::vector<Form> out(n, zero());
    std::vector<long long> place(n, 1);
    for (int i = n - 2; i >= 0; --i) place[i] = place[i + 1] * sizes[i + 1];
    long long c0 = f.c0;
    if (c0 < 0) return std::nullopt;
    for (int i = 0; i < n; ++i) {
      out[i].c0 = c0 / place[i];
      c0 %= place[i];
    }
    for (int a = 0; a < naxes_; ++a) {
      const long long c = f.coef[a];
      if (c == 0) continue;
      if (c < 0) return std::nullopt;
      int at = -1;
      for (int i = 0; i < n; ++i)
        if (c % place[i] == 0 && c / place[i] < sizes[i]) {
          at = i;
          break;
        }
      if (at < 0) return std::nullopt;
      out[at].coef[a] += c / place[at];
    }
    for (int i = 0; i < n; ++i) {
      const auto m = form_max(out[i]);
      if (!m || *m >= sizes[i]) return std::nullopt;
    }
    return out;
  }

  // Reshape: dims paired in order (equal sizes 1:1, else groups of equal products).
  std::optional<Map> reshape_map(const std::vector<long long>& from, const Map& m, const std::vector<long long>& to) const {
    Map out(to.size(), zero());
    std::size_t i = 0, j = 0;
    while (i < from.size() || j < to.size()) {
      if (i < from.size() && j < to.size() && from[i] == to[j]) {
        out[j++] = m[i++];
        continue;
      }
      if (j < to.size() && to[j] == 1) {
        ++j;
        continue;
      }
      if (i < from.size() && from[i] == 1) {
        ++i;
        continue;
      }
      if (i >= from.size() || j >= to.size()) return std::nullopt;
      // A group: extend the smaller side until the products agree.
      std::size_t i1 = i + 1, j1 = j + 1;
      long long pf = from[i], pt = to[j];
      while (pf != pt) {
        if (pf < pt) {
          if (i1 >= from.size()) return std::nullopt;
          pf *= from[i1++];
        } else {
          if (j1 >= to.size()) return std::nullopt;
          pt *= to[j1++];
        }
      }
      Form merged = zero();
      long long place = 1;
      for (std::size_t a = i1; a-- > i;) {
        merged = plus(merged, scaled(m[a], place));
        place *= from[a];
      }
      const auto parts = split(merged, std::vector<long long>(to.begin() + j, to.begin() + j1));
      if (!parts) return std::nullopt;
      for (std::size_t b = j; b < j1; ++b) out[b] = (*parts)[b - j];
      i = i1;
      j = j1;
    }
    return out;
  }

  // Operand maps of value t at map m (nullopt: the coordinates cannot be expressed).
  std::optional<std::vector<Map>> operand_maps(int id, const Map& m) const {
    const TVal& t = g_.vals[id];
    std::vector<Map> out;
    switch (t.kind) {
      case TKind::kPointwise:
      case TKind::kCast:
      case TKind::kExpand:
        for (int a : t.args) out.push_back(broadcast_map(t, g_.vals[a], m));
        return out;
      case TKind::kReduce: {
        const TVal& a = g_.vals[t.args[0]];
        Map am(rank_of(a));
        for (int j = 0, k = 0; j < rank_of(a); ++j) {
          if (j == t.dim) {
            am[j] = axis(inner_axis());
            if (t.keepdim) ++k;
          } else {
            am[j] = m[k++];
          }
        }
        out.push_back(am);
        return out;
      }
      case TKind::kReshape: {
        const auto r = reshape_map(t.shape, m, g_.vals[t.args[0]].shape);
        if (!r) return std::nullopt;
        out.push_back(*r);
        return out;
      }
      case TKind::kPermute: {
        Map am(m.size());
        for (std::size_t j = 0; j < m.size(); ++j) am[t.perm[j]] = m[j];
        out.push_back(am);
        return out;
      }
      case TKind::kSlice: {
        Map am = m;
        am[t.dim] = scaled(m[t.dim], static_cast<long long>(t.step));
        am[t.dim].c0 += t.start;
        out.push_back(am);
        return out;
      }
      case TKind::kSelectIdx: {
        Map am = m;
        Form f = zero();
        f.c0 = t.start;
        am.insert(am.begin() + t.dim, f);
        out.push_back(am);
        return out;
      }
      case TKind::kGather: {
        // The source at the result's coordinates, its indexed dimension at 0 (the index adds the
        // rest at run time); the index at the coordinates its dimensions take in the result.
        const TVal& src = g_.vals[t.args[0]];
        const int ri = t.gather_same_shape ? 1 : rank_of(g_.vals[t.args[1]]);
        Map sm(rank_of(src));
        for (int j = 0; j < rank_of(src); ++j) sm[j] = j < t.dim ? m[j] : j == t.dim ? zero() : m[j + ri - 1];
        Map im = t.gather_same_shape ? m : Map(m.begin() + t.dim, m.begin() + t.dim + ri);
        out.push_back(sm);
        out.push_back(im);
        return out;
      }
      case TKind::kCat: {
        long long at = 0;
        for (int a : t.args) {
          Map am = broadcast_map(t, g_.vals[a], m);
          am[t.dim].c0 -= at;
          at += g_.vals[a].shape[t.dim];
          out.push_back(am);
        }
        return out;
      }
      default: return out;
    }
  }

  // Forward: a value's map from its operands' (for the results not reached from the anchor backwards).
  std::optional<Map> result_map(int id) const {
    const TVal& t = g_.vals[id];
    const auto known = [&](int a) { return canon_.count(a) > 0; };
    switch (t.kind) {
      case TKind::kPointwise:
      case TKind::kCast: {
        Map m(rank_of(t), zero());
        for (int j = 0; j < rank_of(t); ++j) {
          // From an operand that spans this dim with a known map; a dim no operand has is size 1 (zero).
          bool found = false, any = false;
          for (int a : t.args) {
            const TVal& av = g_.vals[a];
            const int ja = j - (rank_of(t) - rank_of(av));
            if (ja < 0) continue;
            any = true;
            if (av.shape[ja] != t.shape[j] || !known(a)) continue;
            m[j] = canon_.at(a)[ja];
            found = true;
            break;
          }
          if (!found && (any || t.shape[j] != 1)) return std::nullopt;
        }
        return m;
      }
      case TKind::kReduce: {
        if (!known(t.args[0])) return std::nullopt;
        const Map& am = canon_.at(t.args[0]);
        Map m;
        for (int j = 0; j < static_cast<int>(am.size()); ++j) {
          if (j != t.dim) m.push_back(am[j]);
          else if (t.keepdim) m.push_back(zero());
        }
        return m;
      }
      case TKind::kReshape:
        if (!known(t.args[0])) return std::nullopt;
        return reshape_map(g_.vals[t.args[0]].shape, canon_.at(t.args[0]), t.shape);
      case TKind::kPermute: {
        if (!known(t.args[0])) return std::nullopt;
        Map m(t.perm.size());
        for (std::size_t j = 0; j < t.perm.size(); ++j) m[j] = canon_.at(t.args[0])[t.perm[j]];
        return m;
      }
      case TKind::kSelectIdx: {
        if (!known(t.args[0])) return std::nullopt;
        Map m = canon_.at(t.args[0]);
        m.erase(m.begin() + t.dim);
        return m;
      }
      default: return std::nullopt;
    }
  }

  // Every value's coordinates as the anchor's domain gives them, where they follow (both ways).
  void canonical_maps() {
    canon_[anchor_] = anchor_map_;
    for (bool changed = true; changed;) {
      changed = false;
      for (int id = static_cast<int>(g_.vals.size()) - 1; id >= 0; --id) {
        const TKind kind = g_.vals[id].kind;
        if (!canon_.count(id) || kind == TKind::kCat || kind == TKind::kSlice || kind == TKind::kSelectIdx || kind == TKind::kExpand ||
            kind == TKind::kGather)
          continue;
        const auto ops = operand_maps(id, canon_[id]);
        if (!ops) continue;
        for (std::size_t i = 0; i < ops->size(); ++i) {
          const int a = g_.vals[id].args[i];
          if (!canon_.count(a)) {
            canon_[a] = (*ops)[i];
            changed = true;
          }
        }
      }
      for (int id = 0; id < static_cast<int>(g_.vals.size()); ++id) {
        if (canon_.count(id)) continue;
        if (const auto m = result_map(id)) {
          canon_[id] = *m;
          changed = true;
        }
      }
    }
  }

  int buffer(const std::string& name, const std::string& role, DType dtype, const std::vector<long long>& shape) {
    if (const auto it = buffer_index_.find(name); it != buffer_index_.end()) {
      if (role == "updated") k_.buffers[it->second].role = "updated";
      return it->second;
    }
    Buffer b;
    b.name = name;
    b.role = role;
    b.dtype = dtype;
    for (long long d : shape) b.shape.push_back(slot(d));
    k_.buffers.push_back(b);
    buffer_index_[name] = static_cast<int>(k_.buffers.size()) - 1;
    return buffer_index_[name];
  }

  Access access(int buf, long long offset, const std::vector<long long>& stride, const Map& m) {
    Access a;
    a.buffer = buf;
    long long base = offset;
    std::vector<long long> coef(naxes_, 0);
    for (std::size_t j = 0; j < stride.size(); ++j) {
      base += stride[j] * m[j].c0;
      for (int x = 0; x < naxes_; ++x) coef[x] += stride[j] * m[j].coef[x];
    }
    a.base = slot(base);
    for (int x = 0; x + 1 < naxes_; ++x) a.outer.push_back(slot(coef[x]));
    a.inner = slot(coef[inner_axis()]);
    return a;
  }

  int node(Node n) {
    k_.nodes.push_back(std::move(n));
    return static_cast<int>(k_.nodes.size()) - 1;
  }

  // The coordinate a form describes, as an int64 value.
  int coordinate(const Form& f) {
    Node c;
    c.op = OpKind::kSize;
    c.dtype = DType::kI64;
    c.slot = slot(f.c0);
    int acc = node(c);
    for (int x = 0; x < naxes_; ++x) {
      if (f.coef[x] == 0 && x != inner_axis()) continue;
      Node io;
      io.op = OpKind::kIota;
      io.dtype = DType::kI64;
      io.axis = x == inner_axis() ? -1 : x;
      const int coord = node(io);
      Node s;
      s.op = OpKind::kSize;
      s.dtype = DType::kI64;
      s.slot = slot(f.coef[x]);
      const int sc = node(s);
      Node mul;
      mul.op = OpKind::kPointwise;
      mul.pw = find_pointwise("mul");
      mul.dtype = DType::kI64;
      mul.args = {coord, sc};
      Node add;
      add.op = OpKind::kPointwise;
      add.pw = find_pointwise("add");
      add.dtype = DType::kI64;
      add.args = {acc, node(mul)};
      acc = node(add);
    }
    return acc;
  }

  int emit(int id, const Map& m) {
    const auto key = std::make_pair(id, m);
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    const TVal& t = g_.vals[id];
    Node n;
    n.dtype = t.dtype;
    n.source = t.source;
    switch (t.kind) {
      case TKind::kLeaf: {
        const NamedTensor* nt = g_.named(t.buffer);
        const int b = buffer(t.buffer, t.buffer.rfind("param:", 0) == 0 ? "param" : "input", t.dtype, nt->shape);
        n.op = OpKind::kLoad;
        n.access = access(b, t.offset, t.stride, m);
        break;
      }
      case TKind::kConst:
        n.op = OpKind::kConst;
        n.fparam = fparam(t.value);
        break;
      case TKind::kSize:
        n.op = OpKind::kSize;
        n.slot = slot(t.size);
        break;
      case TKind::kIota: {
        const int c = coordinate(m.empty() ? zero() : m[0]);
        Node st;
        st.op = OpKind::kConst;
        st.dtype = t.dtype;
        st.fparam = fparam(t.value);
        Node sp = st;
        sp.fparam = fparam(t.step);
        Node mul;
        mul.op = OpKind::kPointwise;
        mul.pw = find_pointwise("mul");
        mul.dtype = t.dtype;
        mul.args = {c, node(sp)};
        n.op = OpKind::kPointwise;
        n.pw = find_pointwise("add");
        n.args = {node(st), node(mul)};
        break;
      }
      case TKind::kReduce: {
        for (int x = 0; x < static_cast<int>(m.size()); ++x)
          if (m[x].coef[inner_axis()] != 0) decline(t.source, "a reduction whose result is combined along the axis it reduced");
        const TVal& a = g_.vals[t.args[0]];
        if (a.shape[t.dim] != axis_size_[inner_axis()]) decline(t.source, "two reductions over axes of different lengths");
        const auto ops = operand_maps(id, m);
        n.op = OpKind::kReduce;
        n.reduce = t.reduce;
        n.args = {emit(t.args[0], (*ops)[0])};
        break;
      }
      case TKind::kGather: {
        const auto ops = operand_maps(id, m);
        const TVal& src = g_.vals[t.args[0]];
        int ix = emit(t.args[1], (*ops)[1]);
        if (t.gather_wrap) {  // x[idx]: a negative index counts from the end
          Node zero_n;
          zero_n.op = OpKind::kSize;
          zero_n.dtype = DType::kI64;
          zero_n.slot = slot(0);
          Node len;
          len.op = OpKind::kSize;
          len.dtype = DType::kI64;
          len.slot = slot(src.shape[t.dim]);
          Node lt;
          lt.op = OpKind::kPointwise;
          lt.pw = find_pointwise("lt");
          lt.dtype = DType::kBool;
          lt.args = {ix, node(zero_n)};
          Node add;
          add.op = OpKind::kPointwise;
          add.pw = find_pointwise("add");
          add.dtype = DType::kI64;
          add.args = {ix, node(len)};
          Node wrap;
          wrap.op = OpKind::kPointwise;
          wrap.pw = find_pointwise("where");
          wrap.dtype = DType::kI64;
          wrap.source = t.source;
          wrap.args = {node(lt), node(add), ix};
          ix = node(wrap);
        }
        const int b = buffer(src.buffer, src.buffer.rfind("param:", 0) == 0 ? "param" : "input", src.dtype, g_.named(src.buffer)->shape);
        n.op = OpKind::kLoad;
        n.access = access(b, src.offset, src.stride, (*ops)[0]);
        n.access.index = slot(src.stride[t.dim]);
        n.args = {ix};
        break;
      }
      case TKind::kCat: {
        const auto ops = operand_maps(id, m);
        n.op = OpKind::kSelect;
        n.args.push_back(coordinate(m[t.dim]));
        long long at = 0;
        n.bounds.push_back(slot(0));  // part i covers [bounds[i], bounds[i + 1]); the last bound is the end
        for (std::size_t i = 0; i < t.args.size(); ++i) {
          n.args.push_back(emit(t.args[i], (*ops)[i]));
          at += g_.vals[t.args[i]].shape[t.dim];
          n.bounds.push_back(slot(at));
        }
        break;
      }
      default: {
        const auto ops = operand_maps(id, m);
        if (!ops) decline(t.source, "a reshape of a computed value that splits one of the kernel's axes");
        std::vector<int> args;
        for (std::size_t i = 0; i < ops->size(); ++i) args.push_back(emit(t.args[i], (*ops)[i]));
        if (t.kind == TKind::kPointwise) {
          n.op = OpKind::kPointwise;
          n.pw = t.pw;
          n.args = args;
        } else if (t.kind == TKind::kCast) {
          n.op = OpKind::kCast;
          n.args = args;
        } else {
          // Views and broadcasts compute nothing: the operand at the mapped coordinates is the value.
          memo_[key] = args[0];
          return args[0];
        }
      }
    }
    const int at = node(std::move(n));
    memo_[key] = at;
    return at;
  }

  // Stores of every result, in forward's order, and the inputs written in place.
  void emit_results() {
    std::set<std::string> stored;
    const auto store_value = [&](const std::string& graph_name, int buf, const std::vector<long long>& stride) {
      const auto it = g_.env.find(graph_name);
      if (it == g_.env.end()) decline("", "a result the graph does not compute (" + graph_name + ")");
      const auto cm = canon_.find(it->second);
      if (cm == canon_.end()) decline(g_.vals[it->second].source, "a result whose elements do not follow from the kernel's loop (" + graph_name + ")");
      Store s;
      s.node = emit(it->second, cm->second);
      s.access = access(buf, 0, stride, cm->second);
      k_.stores.push_back(s);
    };
    const auto contiguous = [](const std::vector<long long>& shape) {
      std::vector<long long> st(shape.size(), 1);
      for (std::size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
      return st;
    };
    for (const auto& u : sample_.updated) {
      const NamedTensor* nt = g_.named(u);
      if (!nt) decline("", "an input written in place that the trace did not name");
      if (nt->stride != contiguous(nt->shape)) decline("", "an input written in place that is not contiguous (" + u + ")");
      const auto d = dtype_from_trace(nt->dtype);
      const int b = buffer(u, "updated", *d, nt->shape);
      store_value(u, b, nt->stride);
    }
    for (const auto& o : sample_.outputs) {
      const NamedTensor* nt = g_.named(o.graph_name);
      if (nt && std::find(sample_.updated.begin(), sample_.updated.end(), o.graph_name) != sample_.updated.end()) {
        k_.results.push_back({o.name, buffer_index_.at(o.graph_name)});  // forward returns the input it wrote
        continue;
      }
      if (o.graph_name.empty()) decline("", "a result that is not a tensor the graph made (" + o.name + ")");
      const auto d = dtype_from_trace(o.dtype);
      if (!d) decline("", "a result of dtype " + o.dtype);
      const int b = buffer("out:" + o.name, "output", *d, o.shape);
      k_.results.push_back({o.name, b});
      store_value(o.graph_name, b, contiguous(o.shape));
    }
    // A buffer written by the kernel may only be read where it is written (one thread owns each element).
    for (const auto& n : k_.nodes) {
      if (n.op != OpKind::kLoad || k_.buffers[n.access.buffer].role != "updated") continue;
      bool same = false;
      for (const auto& s : k_.stores)
        if (s.access.buffer == n.access.buffer && k_.sizes[s.access.base] == k_.sizes[n.access.base] &&
            k_.sizes[s.access.inner] == k_.sizes[n.access.inner]) {
          same = true;
          for (std::size_t x = 0; x < s.access.outer.size(); ++x) same = same && k_.sizes[s.access.outer[x]] == k_.sizes[n.access.outer[x]];
        }
      if (!same) decline(n.source, "an input written in place is read at other elements than those written");
    }
  }
};

// ---- fitting ----------------------------------------------------------------------------------

// Product of dims [first, last) of a named tensor's shape in a sample.
std::optional<long long> dims_product(const GraphSample& s, const std::string& tensor, int first, int last) {
  for (const auto& t : s.tensors) {
    if (t.name != tensor) continue;
    const int r = static_cast<int>(t.shape.size());
    const int f = first < 0 ? first + r : first, l = last <= 0 && first < 0 ? last + r : last;
    if (f < 0 || l > r || f > l) return std::nullopt;
    long long p = 1;
    for (int i = f; i < l; ++i) p *= t.shape[i];
    return p;
  }
  return std::nullopt;
}

}  // namespace

std::optional<long long> eval_size(const SizeExpr& e, const GraphSample& s) {
  switch (e.kind) {
    case SizeExpr::Kind::kConst: return e.value;
    case SizeExpr::Kind::kScalar: {
      const auto it = s.scalars.find(e.scalar);
      if (it == s.scalars.end() || !it->second.is_number_integer()) return std::nullopt;
      return it->second.get<long long>();
    }
    case SizeExpr::Kind::kDims: {
      auto p = dims_product(s, e.tensor, e.first, e.last);
      if (p && !e.tensor2.empty()) {
        const auto q = dims_product(s, e.tensor2, e.first2, e.last2);
        p = q ? std::optional<long long>(*p * *q) : std::nullopt;
      }
      if (!p || (*p * e.num) % e.den != 0) return std::nullopt;
      return *p * e.num / e.den;
    }
  }
  return std::nullopt;
}

Lowered lower_graph(const GraphSample& sample) {
  Lowered out;
  try {
    Graph g(sample);
    g.run();
    Emitter e(sample, g);
    out.kernel = e.run();
  } catch (const Decline& d) {
    out.op = d.op;
    out.why = d.why;
  } catch (const std::exception& e) {
    out.why = std::string("the trace is not what the generator reads: ") + e.what();
  }
  return out;
}

Lowered fit_sizes(const std::vector<Kernel>& kernels, const std::vector<const GraphSample*>& samples) {
  Lowered out;
  if (kernels.empty()) {
    out.why = "nothing to fit";
    return out;
  }
  Kernel k = kernels[0];
  const std::size_t n = samples.size();
  // Candidate expressions, simplest first: a size of one input (a run of its dims), that size
  // times or divided by a small integer, an integer argument, a constant.
  std::vector<SizeExpr> candidates;
  for (const auto& t : samples[0]->tensors) {
    const int r = static_cast<int>(t.shape.size());
    for (int len = 1; len <= r; ++len)
      for (int f = r - len; f >= 0; --f) {
        SizeExpr e;
        e.kind = SizeExpr::Kind::kDims;
        e.tensor = t.name;
        // Index from the end when the run ends at the last dim (robust to a leading batch dim).
        e.first = f + len == r ? f - r : f;
        e.last = f + len == r ? 0 : f + len;
        candidates.push_back(e);
      }
  }
  std::vector<SizeExpr> scalars;
  for (const auto& [name, v] : samples[0]->scalars)
    if (v.is_number_integer()) {
      SizeExpr e;
      e.kind = SizeExpr::Kind::kScalar;
      e.scalar = name;
      scalars.push_back(e);
    }
  const auto fits = [&](const SizeExpr& e, std::size_t slot) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = eval_size(e, *samples[i]);
      if (!v || *v != kernels[i].sizes[slot]) return false;
    }
    return true;
  };
  for (std::size_t slot = 0; slot < k.sizes.size(); ++slot) {
    std::optional<SizeExpr> found;
    bool all_same = true;
    for (std::size_t i = 1; i < n; ++i) all_same = all_same && kernels[i].sizes[slot] == kernels[0].sizes[slot];
    const long long v0 = kernels[0].sizes[slot];
    if (all_same && (v0 == 0 || v0 == 1 || v0 == -1)) {
      found = SizeExpr{};
      found->value = v0;
    }
    for (const auto& c : candidates) {
      if (found) break;
      const auto p = eval_size(c, *samples[0]);
      if (!p || *p == 0) continue;
      SizeExpr e = c;
      if (v0 % *p == 0) e.num = v0 / *p;
      else if (v0 != 0 && *p % v0 == 0) e.den = *p / v0;
      else continue;
      if (e.num == 0 || std::abs(e.num) > 64 || e.den > 64) continue;
      if (fits(e, slot)) found = e;
    }
    for (const auto& c : scalars)
      if (!found && fits(c, slot)) found = c;
    // Last, a size of one tensor times a size of another (a gathered row's output stride).
    for (std::size_t a = 0; a < candidates.size() && !found; ++a)
      for (std::size_t b = 0; b < candidates.size() && !found; ++b) {
        if (candidates[a].tensor >= candidates[b].tensor) continue;
        SizeExpr e = candidates[a];
        e.tensor2 = candidates[b].tensor;
        e.first2 = candidates[b].first;
        e.last2 = candidates[b].last;
        if (eval_size(e, *samples[0]) == v0 && fits(e, slot)) found = e;
      }
    if (!found && all_same) {
      found = SizeExpr{};
      found->value = v0;
    }
    if (!found) {
      std::string values;
      for (std::size_t i = 0; i < n; ++i) values += (i ? ", " : "") + std::to_string(kernels[i].sizes[slot]) + " (" + samples[i]->label + ")";
      out.why = "a size that no expression of the arguments gives on every traced call: " + values;
      return out;
    }
    k.size_exprs.push_back(*found);
  }
  for (std::size_t f = 0; f < k.floats.size(); ++f) {
    bool all_same = true;
    for (std::size_t i = 1; i < n; ++i) {
      const double a = kernels[i].floats[f].literal, b = kernels[0].floats[f].literal;
      all_same = all_same && (a == b || (std::isnan(a) && std::isnan(b)));
    }
    // A float equal to an argument on every call is read from that argument (eps from init_kwargs).
    std::string source;
    const double lit = kernels[0].floats[f].literal;
    const bool structural = lit == 0 || lit == 1 || lit == -1 || lit == 2 || lit == 0.5 || lit == -0.5;  // not read from an argument when the same everywhere
    for (const auto& [name, v] : samples[0]->scalars) {
      if (structural && all_same) break;
      if (!v.is_number_float()) continue;
      bool every = true;
      for (std::size_t i = 0; i < n && every; ++i) {
        const auto it = samples[i]->scalars.find(name);
        every = it != samples[i]->scalars.end() && it->second.is_number() &&
                static_cast<float>(it->second.get<double>()) == static_cast<float>(kernels[i].floats[f].literal);
      }
      if (every) {
        source = name;
        break;
      }
    }
    // A float that follows from a size (sqrt(d), 1/sqrt(d), 1/N computed in Python).
    if (!all_same && source.empty()) {
      for (const auto& c : candidates) {
        for (const char* fn : {"sqrt", "rsqrt", "recip", "id"}) {
          bool every = true;
          for (std::size_t i = 0; i < n && every; ++i) {
            const auto v = eval_size(c, *samples[i]);
            if (!v || *v <= 0) {
              every = false;
              break;
            }
            const double d = static_cast<double>(*v);
            const double want = std::string_view(fn) == "sqrt" ? std::sqrt(d) : std::string_view(fn) == "rsqrt" ? 1 / std::sqrt(d)
                                : std::string_view(fn) == "recip" ? 1 / d : d;
            every = static_cast<float>(want) == static_cast<float>(kernels[i].floats[f].literal);
          }
          if (every) {
            k.floats[f].fn = fn;
            k.floats[f].size = c;
            break;
          }
        }
        if (!k.floats[f].fn.empty()) break;
      }
    }
    if (!all_same && source.empty() && k.floats[f].fn.empty()) {
      out.why = "a constant that differs between calls and is no argument (" + std::to_string(kernels[0].floats[f].literal) + " and " +
                std::to_string(kernels[n - 1].floats[f].literal) + ")";
      return out;
    }
    k.floats[f].source = source;
  }
  k.assign_levels();
  out.kernel = std::move(k);
  return out;
}

}  // namespace kwiki::gen
