// The generator's backends: the kernel IR written as CUDA C++, HIP C++ and CPU C++ (the twin).
// One expression writer serves all three; the skeletons (elementwise, rows in registers, rows
// re-read) are written around it, and every statement names the reference op it implements.
#include "codegen.hpp"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "codegen_prelude.hpp"

namespace kwiki::gen {
namespace {

std::string storage_type(DType d, Backend b) {
  const bool gpu = b != Backend::kCpu;
  switch (d) {
    case DType::kF32: return "float";
    case DType::kBF16: return gpu ? "kwiki_bf16" : "kw_bf16";
    case DType::kF16: return gpu ? "kwiki_half" : "kw_f16";
    case DType::kF64: return "double";
    case DType::kE4M3FN: return gpu ? "kwgen::kw_e4m3fn" : "kw_e4m3fn";
    case DType::kE4M3FNUZ: return gpu ? "kwgen::kw_e4m3fnuz" : "kw_e4m3fnuz";
    case DType::kI8: return "signed char";
    case DType::kU8: return "unsigned char";
    case DType::kI16: return "short";
    case DType::kI32: return "int";
    case DType::kI64: return "long long";
    case DType::kBool: return "bool";
    default: break;
  }
  return "float";
}
std::string compute_type(DType d) { return dtype_row(d).compute; }

std::string float_literal(double v) {
  if (std::isnan(v)) return "kw_nan()";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return "static_cast<float>(" + s + ")";
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

/// Which loads and stores the vector path keeps as W-element chunks, and which loads sit under a
/// concat's branch (read only when their part is chosen: never hoisted, never chunked).
struct Analysis {
  std::set<int> needed, guarded;
  std::map<int, int> chunk_of;  ///< load node -> chunk index (loads of one access share a chunk)
  std::vector<int> chunk_node;  ///< chunk index -> its first load node
  /// Interleaved loads (x[..., 0::2] beside x[..., 1::2]): one chunk of W * stride elements holds
  /// every lane, and each load picks its own. stride 1 is a plain chunk.
  std::vector<int> chunk_stride;
  std::vector<long long> chunk_base;  ///< a strided chunk's first element in its row (its lane-0 base); unused at stride 1
  std::map<int, int> lane_of;         ///< load node -> its lane in a strided chunk (0 at stride 1)
  std::vector<int> reduces;     ///< reduce nodes in order
  std::vector<bool> row_varying;  ///< chunk index -> its access moves with the row (else: the same for every row, a weight)
  std::vector<int> kept;        ///< elementwise values one pass computes and a later pass reads again (kept in registers when they fit)
};

bool is_const(const Kernel& k, int slot, long long v) {
  const SizeExpr& e = k.size_exprs[slot];
  return e.kind == SizeExpr::Kind::kConst && e.value == v;
}

Analysis analyse(const Kernel& k) {
  Analysis a;
  std::set<int> unguarded;
  std::function<void(int, bool)> walk = [&](int id, bool guarded) {
    const bool seen = a.needed.count(id) > 0;
    if (seen && (guarded || unguarded.count(id))) return;
    a.needed.insert(id);
    if (!guarded) unguarded.insert(id);
    const Node& n = k.nodes[id];
    if (n.op == OpKind::kSelect) {
      walk(n.args[0], guarded);
      for (std::size_t i = 1; i < n.args.size(); ++i) walk(n.args[i], true);
      return;
    }
    for (int x : n.args) walk(x, guarded);
  };
  for (const auto& s : k.stores) walk(s.node, false);
  for (int id : a.needed)
    if (!unguarded.count(id)) a.guarded.insert(id);
  // Chunk candidates: unit-stride loads, and loads of stride 2 or 4 from a constant base, which
  // share one chunk with the other lanes of their span only when every lane is read (else the
  // span would read elements the reference never touches, past the end of a row or buffer).
  struct Candidate {
    int id, stride, lane;
    long long base;
  };
  std::map<std::string, std::vector<Candidate>> groups;
  std::vector<std::string> order;
  for (int id = 0; id < static_cast<int>(k.nodes.size()); ++id) {
    const Node& n = k.nodes[id];
    if (n.op == OpKind::kReduce && a.needed.count(id)) a.reduces.push_back(id);
    if (n.op != OpKind::kLoad || !a.needed.count(id) || a.guarded.count(id) || n.level != Level::kElem) continue;
    const SizeExpr& inner = k.size_exprs[n.access.inner];
    const SizeExpr& base = k.size_exprs[n.access.base];
    Candidate c{id, 1, 0, 0};
    std::string key = std::to_string(n.access.buffer);
    // A gathered row (an embedding row, a cache row by position) is a chunk when its index is the
    // same for the whole row; an index per element is a scalar load.
    if (n.access.index >= 0) {
      if (k.nodes[n.args[0]].level == Level::kElem) continue;
      key += "|i" + std::to_string(n.args[0]) + "*" + k.size_exprs[n.access.index].describe();
    }
    if (is_const(k, n.access.inner, 1)) {
      key += "|" + base.describe();
    } else if (inner.kind == SizeExpr::Kind::kConst && (inner.value == 2 || inner.value == 4) && base.kind == SizeExpr::Kind::kConst && base.value >= 0) {
      c.stride = static_cast<int>(inner.value);
      c.lane = static_cast<int>(base.value % inner.value);
      c.base = base.value - c.lane;
      key += "|s" + std::to_string(c.stride) + "|" + std::to_string(c.base);
    } else {
      continue;
    }
    for (int s : n.access.outer) key += "|" + k.size_exprs[s].describe();
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(c);
  }
  for (const auto& key : order) {
    const auto& g = groups[key];
    if (g.front().stride > 1) {
      std::set<int> lanes;
      for (const auto& c : g) lanes.insert(c.lane);
      if (static_cast<int>(lanes.size()) != g.front().stride) continue;
    }
    const int ci = static_cast<int>(a.chunk_node.size());
    a.chunk_node.push_back(g.front().id);
    a.chunk_stride.push_back(g.front().stride);
    a.chunk_base.push_back(g.front().base);
    const Node& first = k.nodes[g.front().id];
    bool varies = first.access.index >= 0 && k.nodes[first.args[0]].level == Level::kRow;
    for (int o : first.access.outer) varies = varies || !is_const(k, o, 0);
    a.row_varying.push_back(varies);
    for (const auto& c : g) {
      a.chunk_of[c.id] = ci;
      a.lane_of[c.id] = c.lane;
    }
  }
  // Passes: one per reduction, then the stores. A computed elementwise value two passes need is
  // kept from the first (exp(x - max) of a softmax), unless it only converts a loaded element.
  std::vector<std::set<int>> passes;
  const auto closure = [&](int root) {
    std::set<int> out;
    std::function<void(int)> walk = [&](int id) {
      if (out.count(id) || a.guarded.count(id)) return;
      const Node& n = k.nodes[id];
      if (n.op == OpKind::kReduce && id != root) return;
      out.insert(id);
      if (n.op == OpKind::kSelect) return;
      for (int x : n.args) walk(x);
    };
    walk(root);
    out.erase(root);
    return out;
  };
  for (int r : a.reduces) passes.push_back(closure(r));
  std::set<int> final_pass;
  for (const auto& s : k.stores)
    for (int id : closure(s.node)) final_pass.insert(id);
  for (const auto& s : k.stores) final_pass.insert(s.node);
  passes.push_back(final_pass);
  for (int id = 0; id < static_cast<int>(k.nodes.size()); ++id) {
    const Node& n = k.nodes[id];
    if (n.level != Level::kElem || n.op == OpKind::kLoad || n.op == OpKind::kReduce) continue;
    if (n.op == OpKind::kCast && k.nodes[n.args[0]].op == OpKind::kLoad) continue;
    // Only a value a division or a transcendental computes is worth the registers (exp(x - max));
    // a cheap one (fused_add_rms_norm's rounded x + residual) is computed again from the row's chunks.
    bool costly = false;
    std::function<void(int)> cost = [&](int x) {
      const Node& m = k.nodes[x];
      if (costly || m.level != Level::kElem || m.op == OpKind::kLoad || m.op == OpKind::kReduce) return;
      costly = m.op == OpKind::kPointwise && m.pw->costly;
      for (int y : m.args) cost(y);
    };
    cost(id);
    if (!costly) continue;
    int uses = 0;
    for (const auto& p : passes) uses += p.count(id) > 0;
    if (uses < 2) continue;
    // Keep only the outermost: a kept value's operands are not kept for its sake.
    a.kept.push_back(id);
  }
  std::set<int> inner;
  for (int id : a.kept)
    for (int x : closure(id)) inner.insert(x);
  std::vector<int> outer;
  for (int id : a.kept)
    if (!inner.count(id)) outer.push_back(id);
  a.kept = outer;
  return a;
}

/// A division of an element by a value the same for the whole row or kernel (x / scale, exp(x) /
/// sum): on the GPU its divisor's reciprocal is taken once, where the divisor is (kw_recip), and each
/// element divides through it (kw_div_by, the division's bits without a division an element).
bool divides_by_row(const Kernel& k, const Node& n) {
  if (n.op != OpKind::kPointwise || std::string_view(n.pw->name) != "div" || n.level != Level::kElem) return false;
  const Node& divisor = k.nodes[n.args[1]];
  const auto single = [](DType d) { return std::string_view(dtype_row(d).compute) != "double"; };
  return divisor.level != Level::kElem && single(n.dtype) && single(divisor.dtype) && single(k.nodes[n.args[0]].dtype);
}

/// Whether node `id` reads a reduction's result (through any of its operands).
bool reads_reduction(const Kernel& k, int id) {
  const Node& n = k.nodes[id];
  if (n.op == OpKind::kReduce) return true;
  for (int x : n.args)
    if (reads_reduction(k, x)) return true;
  return false;
}

/// Writes expressions of nodes as statements, in nested scopes.
class Writer {
 public:
  Writer(const Kernel& k, Backend b, const Analysis& an) : k_(k), b_(b), an_(an) {}

  /// How a load outside a chunk, an in-chunk load, and a reduce result are spelled.
  std::function<std::string(int)> chunk_value;  ///< load node id -> its value in the current chunk element
  /// The GPU row kernels: a row divisor's reciprocal once a row (recip, kw_div_by). Not in the
  /// elementwise kernel, where it would be once a chunk and its branch an element spilled (fp8
  /// static quant, 4 chunks a step: 4 bytes).
  bool row_divisors = false;
  std::string indent = "    ";

  std::string size(int slot) const {
    const SizeExpr& e = k_.size_exprs[slot];
    if (e.kind == SizeExpr::Kind::kConst) return std::to_string(e.value) + "LL";
    return "a.s[" + std::to_string(slot) + "]";
  }
  std::string fparam(int i) const {
    const FloatParam& f = k_.floats[i];
    if (f.source.empty() && f.fn.empty()) return float_literal(f.literal);
    return "a.f[" + std::to_string(i) + "]";
  }
  std::string row_offset(const Access& acc, const std::string& base = "") const {
    std::string s = base.empty() ? size(acc.base) : base;
    for (std::size_t x = 0; x < acc.outer.size(); ++x)
      if (!is_const(k_, acc.outer[x], 0)) s += " + " + size(acc.outer[x]) + " * o" + std::to_string(x);
    return s;
  }
  std::string offset(const Access& acc) const {
    std::string s = row_offset(acc);
    if (!is_const(k_, acc.inner, 0)) s += " + " + size(acc.inner) + " * c";
    return "(" + s + ")";
  }
  std::string buf(int b) const { return "a.b" + std::to_string(b); }
  /// A gather's run-time term: its index value times the indexed dimension's stride ("" for none).
  std::string index_term(const Node& n) {
    if (n.access.index < 0) return "";
    return " + " + size(n.access.index) + " * static_cast<long long>(" + value(n.args[0]) + ")";
  }

  void push() { scopes_.emplace_back(); }
  void pop() { scopes_.pop_back(); }
  std::string& out() { return out_; }
  void line(const std::string& s) { out_ += indent + s + "\n"; }

  /// Emits every row-level node `targets` need (outside guarded branches) into the current scope.
  void hoist(const std::vector<int>& targets, const std::set<int>& done_reduces) {
    std::set<int> seen;
    std::function<void(int)> walk = [&](int id) {
      if (seen.count(id) || an_.guarded.count(id)) return;
      seen.insert(id);
      const Node& n = k_.nodes[id];
      if (n.op == OpKind::kReduce && !done_reduces.count(id)) return;
      if (n.level != Level::kElem) {
        value(id);
        return;
      }
      if (n.op == OpKind::kSelect) {
        walk(n.args[0]);
        return;
      }
      for (int x : n.args) walk(x);
      if (row_divisors && divides_by_row(k_, n) && ready(n.args[1], done_reduces)) recip(n.args[1]);
    };
    for (int t : targets) walk(t);
  }

  /// Whether row-level node `id` can be computed now: every reduction it reads is done.
  bool ready(int id, const std::set<int>& done_reduces) const {
    const Node& n = k_.nodes[id];
    if (n.op == OpKind::kReduce) return done_reduces.count(id) > 0;
    for (int x : n.args)
      if (!ready(x, done_reduces)) return false;
    return true;
  }

  /// The reciprocal of row-level node `id`, written once into the current scope.
  std::string recip(int id) {
    if (const auto r = find(recip_key(id))) return *r;
    const std::string d = value(id), name = "rcp" + std::to_string(id);
    line("const float " + name + " = kw_recip(static_cast<float>(" + d + "));  // 1 / " + d + ", once for the divisions by it");
    scopes_.back()[recip_key(id)] = name;
    return name;
  }

  /// Kept values (register variant): 0 not yet computed, 1 computed in this pass, 2 readable from keep<id>.
  std::map<int, int> keep_state;
  /// After a pass: what it computed is readable in the next.
  void end_pass() {
    for (auto& [id, st] : keep_state)
      if (st == 1) st = 2;
  }

  std::string value(int id) {
    if (const auto f = find(id)) return *f;
    const Node& n = k_.nodes[id];
    const std::string v = "v" + std::to_string(id);
    if (const auto ks = keep_state.find(id); ks != keep_state.end() && ks->second == 2) {
      // Read back when the kept values fit in registers (kKeep), else computed again.
      line(compute_type(n.dtype) + " " + v + ";");
      line("if constexpr (kKeep) {");
      line("  " + v + " = keep" + std::to_string(id) + "[i][j];");
      line("} else {");
      push();
      const std::string saved = indent;
      indent += "  ";
      ks->second = 3;
      const std::string inner = value(id);
      ks->second = 2;
      line(v + " = " + inner + ";");
      indent = saved;
      pop();
      line("}");
      scopes_.back()[id] = v;
      return v;
    }
    if (const auto ks = keep_state.find(id); ks != keep_state.end() && ks->second == 3) {
      // The recomputation inside the fallback branch: an ordinary value under another name.
      ks->second = 4;
      const std::string inner = value(id);
      ks->second = 3;
      return inner;
    }
    const std::string ct = compute_type(n.dtype);
    std::string expr;
    switch (n.op) {
      case OpKind::kLoad:
        if (chunk_value && an_.chunk_of.count(id)) expr = chunk_value(id);
        else expr = "kw_to_c(" + buf(n.access.buffer) + "[" + offset(n.access) + index_term(n) + "])";
        break;
      case OpKind::kConst: expr = "static_cast<" + ct + ">(" + fparam(n.fparam) + ")"; break;
      case OpKind::kSize: expr = "static_cast<" + ct + ">(" + size(n.slot) + ")"; break;
      case OpKind::kIota: expr = "static_cast<" + ct + ">(" + (n.axis < 0 ? std::string("c") : "o" + std::to_string(n.axis)) + ")"; break;
      case OpKind::kReduce: expr = "r" + std::to_string(id); break;
      case OpKind::kPointwise: {
        std::vector<std::string> xs;
        for (int x : n.args) xs.push_back(value(x));
        std::string s = b_ == Backend::kCpu ? n.pw->cpu : b_ == Backend::kCuda ? n.pw->cuda : n.pw->hip;
        if (const auto r = find(recip_key(n.args[1])); r && b_ != Backend::kCpu && divides_by_row(k_, n))
          s = "kw_div_by(static_cast<float>($0), static_cast<float>($1), " + *r + ")";
        for (int i = static_cast<int>(xs.size()) - 1; i >= 0; --i) s = replace_all(s, "$" + std::to_string(i), xs[i]);
        expr = round(n.dtype, "static_cast<" + ct + ">(" + s + ")");
        break;
      }
      case OpKind::kCast: expr = cast(value(n.args[0]), k_.nodes[n.args[0]].dtype, n.dtype); break;
      case OpKind::kSelect: {
        const std::string coord = value(n.args[0]);
        line(ct + " " + v + ";  // " + n.source);
        const std::size_t parts = n.args.size() - 1;
        for (std::size_t p = 0; p < parts; ++p) {
          const std::string cond = p + 1 < parts ? "if (" + coord + " < " + size(n.bounds[p + 1]) + ") " : "";
          line((p ? "else " : "") + cond + "{");
          push();
          const std::string saved = indent;
          indent += "  ";
          const std::string pv = value(n.args[p + 1]);
          line(v + " = static_cast<" + ct + ">(" + pv + ");");
          indent = saved;
          pop();
          line("}");
        }
        scopes_.back()[id] = v;
        return v;
      }
    }
    const std::string name = keep_state.count(id) && keep_state[id] == 4 ? v + "r" : v;
    line("const " + ct + " " + name + " = " + expr + ";" + (n.source.empty() ? "" : "  // " + n.source));
    if (const auto ks = keep_state.find(id); ks != keep_state.end() && ks->second == 0) {
      line("if constexpr (kKeep) keep" + std::to_string(id) + "[i][j] = " + name + ";");
      ks->second = 1;
    }
    scopes_.back()[id] = name;
    return name;
  }

  std::string round(DType d, const std::string& x) const {
    switch (d) {
      case DType::kBF16: return "kw_round_bf16(" + x + ")";
      case DType::kF16: return "kw_round_f16(" + x + ")";
      case DType::kE4M3FN: return "kw_round_e4m3fn(" + x + ")";
      case DType::kE4M3FNUZ: return "kw_round_e4m3fnuz(" + x + ")";
      default: return x;
    }
  }
  std::string cast(const std::string& x, DType from, DType to) const {
    if (is_float(to)) return round(to, "static_cast<float>(" + x + ")");
    if (to == DType::kBool) return "(" + x + " != 0)";
    const std::string narrow = to == DType::kI8 ? "signed char" : to == DType::kU8 ? "unsigned char" : to == DType::kI16 ? "short" : to == DType::kI32 ? "int" : "long long";
    (void)from;
    return "static_cast<long long>(static_cast<" + narrow + ">(static_cast<long long>(" + x + ")))";  // toward zero, as torch casts
  }

 private:
  /// Scope keys: a node's value under its id, its reciprocal (recip) under recip_key(id).
  static int recip_key(int id) { return -2 - id; }
  std::optional<std::string> find(int key) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (const auto f = it->find(key); f != it->end()) return f->second;
    return std::nullopt;
  }

  const Kernel& k_;
  Backend b_;
  const Analysis& an_;
  std::vector<std::map<int, std::string>> scopes_{1};
  std::string out_;
};

// ---- pieces shared by the skeletons ----

std::string args_struct(const Kernel& k, Backend b) {
  std::string s = "struct Args {\n";
  for (std::size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& buf = k.buffers[i];
    const bool ro = buf.role == "input" || buf.role == "param";
    s += "  " + std::string(ro ? "const " : "") + storage_type(buf.dtype, b) + "* b" + std::to_string(i) + ";  // " + buf.role + " " + buf.name + "\n";
  }
  s += "  long long s[" + std::to_string(std::max<std::size_t>(1, k.sizes.size())) + "];  // size slots\n";
  s += "  float f[" + std::to_string(std::max<std::size_t>(1, k.floats.size())) + "];  // float parameters\n";
  if (b != Backend::kCpu && k.outer.size() > 1) s += "  int flat_rows;  // every access's outer axes collapse into one row stride (the launcher checks)\n";
  s += "};\n";
  return s;
}

std::string row_coords(const Kernel& k, const Writer& w, const std::string& ind);

/// The node whose value a GPU store converts: a cast to the stored float type is skipped (the store
/// rounds the same way), which saves fp8 stores an encode and a decode per element.
int stored_node(const Kernel& k, const Store& s) {
  const Node& n = k.nodes[s.node];
  const DType to = k.buffers[s.access.buffer].dtype;
  const auto narrow = [](DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kE4M3FN || d == DType::kE4M3FNUZ; };
  const auto floating = [&](DType d) { return narrow(d) || d == DType::kF32 || d == DType::kF64; };
  if (n.op == OpKind::kCast && n.dtype == to && narrow(to) && floating(k.nodes[n.args[0]].dtype)) return n.args[0];
  return s.node;
}

/// The GPU kernels' row coordinates: with Args::flat_rows the last outer axis takes the whole row
/// index and the others are 0 (no 64-bit division per row); else the row is divided out per axis.
std::string row_coords(const Kernel& k, const Writer& w, const std::string& ind, bool flat_field) {
  const int last = static_cast<int>(k.outer.size()) - 1;
  if (!flat_field || last < 1) return row_coords(k, w, ind);
  std::string s;
  for (int x = 0; x <= last; ++x) s += ind + "long long o" + std::to_string(x) + " = " + (x == last ? "row" : "0") + ";\n";
  s += ind + "if (!a.flat_rows) {\n" + ind + "  long long rem = row;\n";
  for (int x = last; x >= 0; --x) {
    const std::string o = "o" + std::to_string(x);
    if (x == 0) s += ind + "  " + o + " = rem;\n";
    else s += ind + "  " + o + " = rem % " + w.size(k.outer[x]) + ";\n" + ind + "  rem /= " + w.size(k.outer[x]) + ";\n";
  }
  s += ind + "}\n";
  for (int x = 0; x <= last; ++x) s += ind + "(void)o" + std::to_string(x) + ";\n";
  return s;
}

/// The launcher's test for Args::flat_rows: no value reads an outer coordinate, and for every access
/// each outer stride is the last one's times the sizes inside it (an axis of size 1 may have any).
std::string flat_rows_test(const Kernel& k, const Writer& w) {
  for (const Node& n : k.nodes)
    if (n.op == OpKind::kIota && n.axis >= 0) return "false";
  const int last = static_cast<int>(k.outer.size()) - 1;
  std::string t = w.size(k.outer[last]) + " != 1";
  const auto check = [&](const Access& acc) {
    std::string inside = w.size(k.outer[last]);
    for (int x = last - 1; x >= 0; --x) {
      t += " && (" + w.size(k.outer[x]) + " == 1 || " + w.size(acc.outer[x]) + " == " + w.size(acc.outer[last]) + " * " + inside + ")";
      inside += " * " + w.size(k.outer[x]);
    }
  };
  for (const Node& n : k.nodes)
    if (n.op == OpKind::kLoad) check(n.access);
  for (const Store& st : k.stores) check(st.access);
  return t;
}

std::string row_coords(const Kernel& k, const Writer& w, const std::string& ind) {
  std::string s = ind + "long long rem = row;\n";
  for (int x = static_cast<int>(k.outer.size()) - 1; x >= 0; --x) {
    const std::string o = "o" + std::to_string(x);
    if (x == 0) s += ind + "const long long " + o + " = rem;\n";
    else s += ind + "const long long " + o + " = rem % " + w.size(k.outer[x]) + ";\n" + ind + "rem /= " + w.size(k.outer[x]) + ";\n";
    s += ind + "(void)" + o + ";\n";
  }
  s += ind + "(void)rem;\n";
  return s;
}

/// The elementwise kernel may run flat (one index for every access) when no value depends on the
/// coordinates: no arange, no concat by coordinate, no gather, no per-row load.
bool flat_eligible(const Kernel& k) {
  for (const Node& n : k.nodes) {
    if (n.op == OpKind::kIota || n.op == OpKind::kSelect) return false;
    if (n.op == OpKind::kLoad && (n.access.index >= 0 || n.level == Level::kRow)) return false;
  }
  return true;
}

/// The accesses of element-level loads and of every store (what must be contiguous to run flat).
std::vector<const Access*> element_accesses(const Kernel& k) {
  std::vector<const Access*> out;
  for (const Node& n : k.nodes)
    if (n.op == OpKind::kLoad && n.level == Level::kElem) out.push_back(&n.access);
  for (const Store& st : k.stores) out.push_back(&st.access);
  return out;
}

std::string rows_expr(const Kernel& k, const Writer& w) {
  std::string s = "1LL";
  for (int o : k.outer) s += " * " + w.size(o);
  return s;
}

// The identity, combine step and group step of a reduction (in fp32 unless its operand is integer).
struct ReduceCode {
  std::string acc_type, init, combine, finish;
};
ReduceCode reduce_code(const Kernel& k, int id) {
  const Node& n = k.nodes[id];
  const DType in = k.nodes[n.args[0]].dtype;
  const std::string ct = compute_type(in) == "bool" ? "long long" : compute_type(in);
  const std::string acc = "acc" + std::to_string(id);
  ReduceCode r;
  r.acc_type = ct;
  switch (n.reduce) {
    case ReduceKind::kSum: r.init = "0"; r.combine = acc + " += x;"; break;
    case ReduceKind::kMax: r.init = ct == "float" ? "-INFINITY" : "kw_lowest<long long>()"; r.combine = acc + " = kw_max(" + acc + ", x);"; break;
    case ReduceKind::kMin: r.init = ct == "float" ? "INFINITY" : "kw_highest<long long>()"; r.combine = acc + " = kw_min(" + acc + ", x);"; break;
    case ReduceKind::kArgMax:
      r.init = ct == "float" ? "-INFINITY" : "kw_lowest<long long>()";
      r.combine = "if (kw_arg_better(x, c, " + acc + ", idx" + std::to_string(id) + ", true)) { " + acc + " = x; idx" + std::to_string(id) + " = c; }";
      break;
    case ReduceKind::kArgMin:
      r.init = ct == "float" ? "INFINITY" : "kw_highest<long long>()";
      r.combine = "if (kw_arg_better(x, c, " + acc + ", idx" + std::to_string(id) + ", false)) { " + acc + " = x; idx" + std::to_string(id) + " = c; }";
      break;
    default: break;
  }
  return r;
}
bool is_arg(const Node& n) { return n.reduce == ReduceKind::kArgMax || n.reduce == ReduceKind::kArgMin; }

// ---- the CPU twin: plain loops, one row at a time, every pass re-reading memory ----

std::string emit_cpu(const Kernel& k) {
  const Analysis an = analyse(k);
  Writer w(k, Backend::kCpu, an);
  std::string body;
  const std::string ind = "    ";
  body += row_coords(k, w, ind);
  w.indent = ind;
  std::set<int> done;
  for (int id : an.reduces) {
    const Node& n = k.nodes[id];
    const ReduceCode rc = reduce_code(k, id);
    w.hoist({n.args[0]}, done);
    // fp32 values summed in double on the CPU (the GPU's tree order is as exact; torch's CPU sums pairwise).
    const std::string at = rc.acc_type == "float" && n.reduce == ReduceKind::kSum ? "double" : rc.acc_type;
    w.line(at + " acc" + std::to_string(id) + " = " + rc.init + ";  // " + n.source);
    if (is_arg(n)) w.line("long long idx" + std::to_string(id) + " = 0;");
    w.line("for (long long c = 0; c < N; ++c) {");
    w.push();
    w.indent = ind + "  ";
    w.line("const auto x = " + w.value(n.args[0]) + ";");
    w.line(rc.combine);
    w.indent = ind;
    w.pop();
    w.line("}");
    const std::string res = is_arg(n) ? "idx" + std::to_string(id) : "acc" + std::to_string(id);
    w.line("const " + compute_type(n.dtype) + " r" + std::to_string(id) + " = static_cast<" + compute_type(n.dtype) + ">(" + res + ");");
    done.insert(id);
  }
  std::vector<int> targets;
  for (const auto& s : k.stores) targets.push_back(s.node);
  w.hoist(targets, done);
  bool any_elem = false;
  for (const auto& s : k.stores) any_elem = any_elem || k.nodes[s.node].level == Level::kElem || !is_const(k, s.access.inner, 0);
  w.line(std::string("for (long long c = 0; c < ") + (any_elem ? "N" : "1") + "; ++c) {");
  w.push();
  w.indent = ind + "  ";
  for (const auto& s : k.stores) {
    const Buffer& b = k.buffers[s.access.buffer];
    const std::string v = w.value(s.node);
    const bool per_row = is_const(k, s.access.inner, 0);
    w.line(std::string(per_row && any_elem ? "if (c == 0) " : "") + w.buf(s.access.buffer) + "[" + w.offset(s.access) + "] = kw_from_c<" +
           storage_type(b.dtype, Backend::kCpu) + ">(" + v + ");  // " + b.name);
  }
  w.indent = ind;
  w.pop();
  w.line("}");
  body += w.out();

  std::string src = cpu_prelude();
  src += "\nnamespace {\n" + args_struct(k, Backend::kCpu) + "}  // namespace\n\n";
  src += "extern \"C\" int kwiki_abi_version(void) { return 1; }\n\n";
  src += "extern \"C\" int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,\n"
         "                            int num_params, void* stream) {\n  (void)stream;\n";
  src += "  if (tensors == nullptr || num_tensors != " + std::to_string(k.buffers.size()) + " || num_dims != " + std::to_string(k.sizes.size()) +
         " || num_params != " + std::to_string(k.floats.size()) + ") return -1;\n  Args a;\n";
  for (std::size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& b = k.buffers[i];
    const bool ro = b.role == "input" || b.role == "param";
    src += "  a.b" + std::to_string(i) + " = static_cast<" + (ro ? "const " : "") + storage_type(b.dtype, Backend::kCpu) + "*>(tensors[" + std::to_string(i) +
           "]);\n  if (a.b" + std::to_string(i) + " == nullptr) return -1;\n";
  }
  src += "  for (int i = 0; i < num_dims; ++i) a.s[i] = dims[i];\n  for (int i = 0; i < num_params; ++i) a.f[i] = static_cast<float>(params[i]);\n";
  src += "  const long long rows = " + rows_expr(k, w) + ";\n  const long long N = " + w.size(k.inner) + ";\n";
  src += "  if (rows < 0 || N < 0) return -1;\n  for (long long row = 0; row < rows; ++row) {\n" + body + "  }\n  return 0;\n}\n";
  return src;
}

// ---- the GPU kernels ----

int vector_width(const Kernel& k, const Analysis& an) {
  int min_bytes = 16;
  for (int node : an.chunk_node) min_bytes = std::min(min_bytes, dtype_row(k.buffers[k.nodes[node].access.buffer].dtype).bytes);
  for (const auto& s : k.stores)
    if (is_const(k, s.access.inner, 1)) min_bytes = std::min(min_bytes, dtype_row(k.buffers[s.access.buffer].dtype).bytes);
  int w = 16 / min_bytes;
  // Every chunk must be a whole number of 4-byte words.
  for (int node : an.chunk_node)
    while (w > 1 && w * dtype_row(k.buffers[k.nodes[node].access.buffer].dtype).bytes < 4) w = 1;
  for (const auto& s : k.stores)
    if (is_const(k, s.access.inner, 1) && w * dtype_row(k.buffers[s.access.buffer].dtype).bytes < 4) w = 1;
  return w;
}

/// How a row kernel is launched: as the hand template of the same make is, each launch measured on
/// the H200 (the numbers in the templates' comments, from bench/gpu/row_launch_sweep.cu).
struct RowLaunchRule {
  const char* like;  ///< the hand template
  const char* why;   ///< what its measurement found
  int min_bytes;     ///< bytes of the row a thread holds at least (kMinVpt chunks): fewer threads a row, more rows an SM
  bool resident;     ///< a resident grid whose blocks stride over the rows, the next row prefetched; else a block a row
};
enum class RowMake : std::uint8_t { kQuantize, kInPlace, kMaxThenSum, kTwoReductions, kNorm, kCount };
constexpr RowLaunchRule kRowLaunchRules[] = {
    {"fp8_quant.cuh", "four 16-byte accesses a thread and one block a row, 83.0 -> 64.3 us at 16384 x 5120", 64, false},
    {"fused_add_rms_norm.cuh", "one block a row, the residual written before the barrier", 16, false},
    {"softmax.cuh", "one 16-byte access a thread (the generated softmax with layer_norm's two: 98.88 us at 8192 x 8192, softmax.cuh 79.97)", 16, true},
    {"layer_norm.cuh", "two 16-byte accesses a thread, 50.5 -> 48.1 us at 16384 x 2560", 32, true},
    {"rms_norm.cuh", "a resident grid prefetching the next row, 2.87 -> 3.78 TB/s at 16384 x 8192", 16, true},
};
static_assert(sizeof(kRowLaunchRules) / sizeof(kRowLaunchRules[0]) == static_cast<std::size_t>(RowMake::kCount), "a row make is a rule");

/// The make of a row kernel: a quantization (one reduction, one-byte element results from a wider
/// row), a buffer updated in place, a max then a sum (a softmax), two or more reductions, or a norm
/// (one reduction).
const RowLaunchRule& row_launch_rule(const Kernel& k, const Analysis& an, const std::vector<int>& vec_stores) {
  int widest_in = 0, narrowest_out = 16;
  for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci)
    if (an.row_varying[ci]) widest_in = std::max(widest_in, dtype_row(k.buffers[k.nodes[an.chunk_node[ci]].access.buffer].dtype).bytes);
  for (int si : vec_stores) narrowest_out = std::min(narrowest_out, dtype_row(k.buffers[k.stores[si].access.buffer].dtype).bytes);
  bool in_place = false;
  for (const Buffer& b : k.buffers) in_place = in_place || b.role == "updated";
  RowMake make = RowMake::kNorm;
  if (an.reduces.size() == 1 && narrowest_out == 1 && widest_in > 1) make = RowMake::kQuantize;
  else if (in_place) make = RowMake::kInPlace;
  else if (an.reduces.size() == 2 && k.nodes[an.reduces[0]].reduce == ReduceKind::kMax && k.nodes[an.reduces[1]].reduce == ReduceKind::kSum)
    make = RowMake::kMaxThenSum;
  else if (an.reduces.size() >= 2) make = RowMake::kTwoReductions;
  return kRowLaunchRules[static_cast<int>(make)];
}

std::string emit_gpu(const Kernel& k, Backend backend) {
  const Analysis an = analyse(k);
  const Skeleton sk = schedule(k);
  const int vw = vector_width(k, an);
  Writer probe(k, backend, an);

  // A chunk's type, where its span starts, and how a load picks its element j from it.
  const auto chunk_type = [&](std::size_t ci) {
    const int st = an.chunk_stride[ci];
    return "kw_chunk<" + storage_type(k.buffers[k.nodes[an.chunk_node[ci]].access.buffer].dtype, backend) + ", W" +
           (st > 1 ? " * " + std::to_string(st) + ", W == 1" : std::string()) + ">";
  };
  const auto chunk_ptr = [&](Writer& w, std::size_t ci, const std::string& chunk_var) {
    const Node& n = k.nodes[an.chunk_node[ci]];
    const Access& acc = n.access;
    const int st = an.chunk_stride[ci];
    const std::string off = (st > 1 ? w.row_offset(acc, std::to_string(an.chunk_base[ci]) + "LL") : w.row_offset(acc)) + w.index_term(n);
    return w.buf(acc.buffer) + " + (" + off + ") + static_cast<long long>(" + chunk_var + ") * W" + (st > 1 ? " * " + std::to_string(st) : std::string());
  };
  // A chunk of a buffer the kernel only reads loads through the read-only path (kw_chunk::load_ro).
  const auto load_fn = [&](std::size_t ci) {
    const std::string& role = k.buffers[k.nodes[an.chunk_node[ci]].access.buffer].role;
    return std::string(role == "input" || role == "param" ? ".load_ro(" : ".load(");
  };
  const auto pick = [&](int id) {
    const int ci = an.chunk_of.at(id), st = an.chunk_stride[ci];
    return st > 1 ? ".get(j * " + std::to_string(st) + " + " + std::to_string(an.lane_of.at(id)) + ")" : std::string(".get(j)");
  };

  // Fast math when every result is stored as bf16 or fp16 (the prelude's kw_exp, kw_tanh, kw_div).
  bool narrow = !k.stores.empty();
  for (const auto& st : k.stores) {
    const DType d = k.buffers[st.access.buffer].dtype;
    narrow = narrow && (d == DType::kBF16 || d == DType::kF16);
  }
  std::string src = std::string("#define KWGEN_FAST_MATH ") + (narrow ? "1" : "0") + "  // every result is " +
                    (narrow ? "bf16/fp16: approximate exp, tanh and division" : "not only bf16/fp16: accurate exp, tanh and division") + "\n" +
                    gpu_prelude();
  src += "\nnamespace kwgen {\n\n" + args_struct(k, backend) + "\n";

  // Stores that take W outputs of one chunk at once.
  std::vector<int> vec_stores;
  for (std::size_t i = 0; i < k.stores.size(); ++i)
    if (is_const(k, k.stores[i].access.inner, 1) && k.nodes[k.stores[i].node].level == Level::kElem) vec_stores.push_back(static_cast<int>(i));

  // Element results no reduction feeds (fused_add_rms_norm's residual) the register row kernel
  // writes in its first pass, before the first barrier, as the hand template does. Only into a
  // buffer the kernel reads through this row's chunks alone (in registers by then), never re-read.
  std::set<int> early_stores;
  for (int si : vec_stores) {
    const int b = k.stores[si].access.buffer;
    bool chunks_only = true;
    for (std::size_t id = 0; id < k.nodes.size(); ++id) {
      const Node& n = k.nodes[id];
      if (n.op != OpKind::kLoad || n.access.buffer != b) continue;
      const auto ci = an.chunk_of.find(static_cast<int>(id));
      chunks_only = chunks_only && ci != an.chunk_of.end() && an.row_varying[ci->second];
    }
    if (chunks_only && !reads_reduction(k, stored_node(k, k.stores[si]))) early_stores.insert(si);
  }

  // The per-chunk element loop over j, writing the stores `which` names; shared by both skeletons.
  const auto final_pass = [&](Writer& w, const std::string& chunk_var, const std::set<int>& which) {
    for (int si : vec_stores)
      if (which.count(si)) w.line(compute_type(k.nodes[k.stores[si].node].dtype) + " st" + std::to_string(si) + "[W];");
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < W; ++j) {");
    w.push();
    const std::string saved = w.indent;
    w.indent += "  ";
    w.line("const long long c = static_cast<long long>(" + chunk_var + ") * W + j;");
    w.line("(void)c;");
    for (std::size_t i = 0; i < k.stores.size(); ++i) {
      const Store& s = k.stores[i];
      const Buffer& b = k.buffers[s.access.buffer];
      if (!which.count(static_cast<int>(i))) continue;
      const std::string v = w.value(stored_node(k, s));
      if (std::find(vec_stores.begin(), vec_stores.end(), static_cast<int>(i)) != vec_stores.end()) {
        w.line("st" + std::to_string(i) + "[j] = " + v + ";  // " + b.name);
      } else {
        const bool per_row = is_const(k, s.access.inner, 0);
        const std::string cond = per_row ? "if (c == 0) " : "";
        w.line(cond + w.buf(s.access.buffer) + "[" + w.offset(s.access) + "] = kw_from_c<" + storage_type(b.dtype, backend) + ">(" + v + ");  // " +
               b.name);
      }
    }
    w.indent = saved;
    w.pop();
    w.line("}");
    for (int si : vec_stores) {
      if (!which.count(si)) continue;
      const Store& s = k.stores[si];
      const Buffer& b = k.buffers[s.access.buffer];
      w.line("kw_store_chunk<W>(" + w.buf(s.access.buffer) + " + (" + w.row_offset(s.access) + ") + static_cast<long long>(" + chunk_var + ") * W, st" +
             std::to_string(si) + ");  // " + b.name);
    }
  };

  // Chunk declarations and loads for the loop kernels (re-read variant and elementwise).
  const auto chunk_loads = [&](Writer& w, const std::string& chunk_var) {
    for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci) {
      w.line(chunk_type(ci) + " l" + std::to_string(ci) + ";");
      w.line("l" + std::to_string(ci) + load_fn(ci) + chunk_ptr(w, ci, chunk_var) + ");");
    }
  };

  if (sk == Skeleton::kElementwise) {
    // kFlat: the launcher found every access contiguous over the whole domain, so one flat index
    // addresses them all (row 0, every coordinate 0): no division per element, and W-wide chunks
    // whenever the total is a multiple of W (a [N, C, 7, 7] map has none along its 7-wide rows).
    // A thread takes up to U = 4 chunks a step (once the grid reaches its cap), all loads issued before the first store.
    const auto coords = [&](Writer& w) {
      w.line("const long long row = kFlat ? 0LL : static_cast<long long>(v / nacc);");
      w.line("const long long chunk = kFlat ? static_cast<long long>(v) : static_cast<long long>(v - static_cast<IdxT>(row) * nacc);");
      w.out() += row_coords(k, w, w.indent, true);
    };
    Writer wl(k, backend, an);  // the loads of chunk u
    wl.indent = "        ";
    coords(wl);
    for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci)
      wl.line("l" + std::to_string(ci) + "[u]" + load_fn(ci) + chunk_ptr(wl, ci, "chunk") + ");");
    Writer w(k, backend, an);  // the values and stores of chunk u
    w.indent = "        ";
    w.chunk_value = [&](int id) { return "l" + std::to_string(an.chunk_of.at(id)) + "[u]" + pick(id); };
    coords(w);
    std::vector<int> targets;
    for (const auto& s : k.stores) targets.push_back(s.node);
    w.hoist(targets, {});
    std::set<int> all_stores;
    for (std::size_t i = 0; i < k.stores.size(); ++i) all_stores.insert(static_cast<int>(i));
    final_pass(w, "chunk", all_stores);
    std::string decls;
    for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci) decls += "    " + chunk_type(ci) + " l" + std::to_string(ci) + "[U];\n";
    const std::string step = "      const IdxT v = first + static_cast<IdxT>(u) * stride;\n      if (v >= total) break;\n";
    src += "/// Elementwise: a grid-stride loop over rows x (N / W) chunks of W elements; chunk loads and stores\n"
           "/// are 16-byte vectors on the vector path (W > 1), scalar otherwise. IdxT: 32- or 64-bit indexing.\n";
    src += "template <int W, bool kFlat, typename IdxT>\nKWIKI_GLOBAL void __launch_bounds__(256) kernel_elementwise(const Args a, IdxT rows, IdxT nacc) {\n";
    src += "  constexpr int U = kFlat ? 4 : 1;  // chunks a thread takes a step\n";
    src += "  const IdxT total = rows * nacc;\n  const IdxT stride = static_cast<IdxT>(gridDim.x) * blockDim.x;\n";
    src += "  for (IdxT first = static_cast<IdxT>(blockIdx.x) * blockDim.x + threadIdx.x; first < total; first += stride * U) {\n" + decls;
    src += "    #pragma unroll\n    for (int u = 0; u < U; ++u) {\n" + step + "      {\n" + wl.out() + "      }\n    }\n";
    src += "    #pragma unroll\n    for (int u = 0; u < U; ++u) {\n" + step + "      {\n" + w.out() + "      }\n    }\n";
    src += "  }\n}\n\n";
    src += "template <int W, bool kFlat = false>\nint launch(const Args& a, long long rows, long long N, kwiki_stream_t stream) {\n"
           "  const long long nacc = N / W;\n  const long long total = rows * nacc;\n"
           "  // One chunk a thread while the grid fits the cap (a [32, 96, 28, 28] map: 1176 blocks, not 294 taking\n"
           "  // 4 chunks each, which left most SMs with one block); past it each thread loops over U chunks a step.\n"
           "  const long long blocks = kwiki::ceil_div(total, 256LL);\n"
           "  const long long cap = static_cast<long long>(kwiki::multiprocessor_count()) * 16;\n"
           "  const dim3 grid(static_cast<unsigned>(blocks < cap ? blocks : cap));\n"
           "  if (total < (1LL << 31)) kernel_elementwise<W, kFlat, unsigned><<<grid, 256, 0, stream>>>(a, static_cast<unsigned>(rows), static_cast<unsigned>(nacc));\n"
           "  else kernel_elementwise<W, kFlat, unsigned long long><<<grid, 256, 0, stream>>>(a, static_cast<unsigned long long>(rows), static_cast<unsigned long long>(nacc));\n"
           "  return kwiki_last_error();\n}\n\n";
  } else {
    const RowLaunchRule& rule = row_launch_rule(k, an, vec_stores);
    // Rows: the row's chunks in registers (VPT per thread, next row prefetched), or re-read per pass (VPT = 0).
    const auto body = [&](bool registers) {
      Writer w(k, backend, an);
      w.row_divisors = true;
      std::set<int> rowless_used;  // the weight chunks the current pass reads
      w.indent = "      ";
      if (registers) {
        w.chunk_value = [&](int id) {
          const int ci = an.chunk_of.at(id);
          if (!an.row_varying[ci]) rowless_used.insert(ci);
          return (an.row_varying[ci] ? "s.l" + std::to_string(ci) + "[i]" : "l" + std::to_string(ci)) + pick(id);
        };
        for (int id : an.kept) w.keep_state[id] = 0;
      } else {
        w.chunk_value = [&](int id) { return "l" + std::to_string(an.chunk_of.at(id)) + pick(id); };
      }
      w.out() += row_coords(k, w, "      ", true);
      if (registers && !an.kept.empty()) {
        w.line("// Values a later pass reads again, kept in registers when " + std::to_string(an.kept.size()) + " x VPT x W fit in 16 floats.");
        w.line("constexpr bool kKeep = " + std::to_string(an.kept.size()) + " * VPT * W <= 16;");
        for (int id : an.kept)
          w.line(compute_type(k.nodes[id].dtype) + " keep" + std::to_string(id) + "[kKeep ? VPT : 1][kKeep ? W : 1];");
      }
      const std::string open = registers ? "for (int i = 0; i < VPT; ++i) {\n" : "for (int chunk = r; chunk < nacc; chunk += gs) {\n";
      const std::string chunk_var = registers ? "chunk" : "chunk";
      std::set<int> done;
      const auto pass = [&](const std::function<void()>& inner_body, const std::function<void()>& after) {
        if (registers) w.line("#pragma unroll");
        w.line(open.substr(0, open.size() - 1));
        w.push();
        const std::string saved = w.indent;
        w.indent += "  ";
        if (registers) {
          w.line("const int chunk = r + i * gs;");
          w.line("if (chunk < nacc) {");
          w.indent += "  ";
        } else {
          chunk_loads(w, "chunk");
        }
        const std::size_t mark = w.out().size();
        rowless_used.clear();
        inner_body();
        if (registers) {
          // Chunks every row reads alike (weights) that this pass reads: this thread's, loaded once
          // before the rows when they fit (kHold), else here.
          const std::string body_text = w.out().substr(mark);
          w.out().resize(mark);
          for (int ci : rowless_used) {
            const std::string l = "l" + std::to_string(ci);
            w.line(chunk_type(ci) + " " + l + ";");
            w.line("if constexpr (kHold) " + l + " = hold." + l + "[i];");
            w.line("else " + l + load_fn(ci) + chunk_ptr(w, ci, "chunk") + ");");
          }
          w.out() += body_text;
        }
        if (registers) {
          w.indent = saved + "  ";
          w.line("}");
        }
        w.indent = saved;
        w.pop();
        w.line("}");
        w.end_pass();
        after();
      };
      for (int id : an.reduces) {
        const Node& n = k.nodes[id];
        const ReduceCode rc = reduce_code(k, id);
        w.hoist({n.args[0]}, done);
        const std::string acc = "acc" + std::to_string(id), idx = "idx" + std::to_string(id);
        w.line(rc.acc_type + " " + acc + " = " + rc.init + ";  // " + n.source);
        if (is_arg(n)) w.line("long long " + idx + " = 0;");
        pass(
            [&] {
              w.line("#pragma unroll");
              w.line("for (int j = 0; j < W; ++j) {");
              w.push();
              const std::string s2 = w.indent;
              w.indent += "  ";
              w.line("const long long c = static_cast<long long>(" + chunk_var + ") * W + j;");
              w.line("(void)c;");
              w.line("const auto x = " + w.value(n.args[0]) + ";");
              w.line(rc.combine);
              w.indent = s2;
              w.pop();
              w.line("}");
              if (registers && id == an.reduces.front() && !early_stores.empty()) {
                w.line("// Results no reduction feeds, written before the first barrier.");
                final_pass(w, chunk_var, early_stores);
              }
            },
            [&] {
              switch (n.reduce) {
                case ReduceKind::kSum: w.line(acc + " = kw_group_sum<kWarpRow, kCluster>(" + acc + ");"); break;
                case ReduceKind::kMax: w.line(acc + " = kw_group_max<kWarpRow, kCluster>(" + acc + ");"); break;
                case ReduceKind::kMin: w.line(acc + " = -kw_group_max<kWarpRow, kCluster>(-" + acc + ");"); break;
                default: w.line("kw_group_arg<kWarpRow, kCluster>(" + acc + ", " + idx + ", " + (n.reduce == ReduceKind::kArgMax ? "true" : "false") + ");"); break;
              }
              const std::string res = is_arg(n) ? idx : acc;
              w.line("const " + compute_type(n.dtype) + " r" + std::to_string(id) + " = static_cast<" + compute_type(n.dtype) + ">(" + res + ");");
            });
        done.insert(id);
      }
      std::vector<int> targets;
      for (const auto& s : k.stores) targets.push_back(s.node);
      w.hoist(targets, done);
      // Row-level results are written once, by the group's first thread.
      std::vector<int> row_stores;
      for (std::size_t i = 0; i < k.stores.size(); ++i)
        if (k.nodes[k.stores[i].node].level != Level::kElem && is_const(k, k.stores[i].access.inner, 0)) row_stores.push_back(static_cast<int>(i));
      for (int si : row_stores) {
        const Store& s = k.stores[si];
        const Buffer& b = k.buffers[s.access.buffer];
        const std::string v = w.value(stored_node(k, s));
        w.line("if (r == 0) { const long long c = 0; (void)c; " + w.buf(s.access.buffer) + "[" + w.offset(s.access) + "] = kw_from_c<" +
               storage_type(b.dtype, backend) + ">(" + v + "); }  // " + b.name);
      }
      // The final pass writes every other element result (the row-level ones were written above).
      std::set<int> rest;
      for (std::size_t i = 0; i < k.stores.size(); ++i) {
        const bool row_store = std::find(row_stores.begin(), row_stores.end(), static_cast<int>(i)) != row_stores.end();
        if (!row_store && !(registers && early_stores.count(static_cast<int>(i)))) rest.insert(static_cast<int>(i));
      }
      if (!rest.empty()) pass([&] { final_pass(w, chunk_var, rest); }, [] {});
      return w.out();
    };
    const std::string reg_body = body(true), loop_body = body(false);
    src += "/// Rows: one row per warp (short rows) or per block; with VPT > 0 this thread's chunks of the row are\n"
           "/// held in registers and the next row's are loaded while this one is reduced (a resident grid strides\n"
           "/// over the rows; launched one block a row, no prefetch); with VPT = 0 (rows too long for registers)\n"
           "/// each pass re-reads the row (from L2).\n";
    src += "/// kCluster > 1 (CUDA, VPT = 0): a cluster of kCluster blocks shares each row (kw_cluster_row).\n";
    src += "template <int W, int VPT, bool kWarpRow, int kCluster = 1>\nKWIKI_GLOBAL void __launch_bounds__(kwiki::row_block_bound(W, VPT)) kernel_rows(const Args a) {\n";
    src += "  using G = kw_row_group<kWarpRow, kCluster>;\n  const int r = G::rank();\n  const int gs = G::size();\n";
    src += "  const long long rows = " + rows_expr(k, probe) + ";\n  const int nacc = static_cast<int>(" + probe.size(k.inner) + " / W);\n";
    src += "  if constexpr (VPT > 0) {\n    struct Slice {\n";
    bool any_slice = false;
    for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci) {
      if (!an.row_varying[ci]) continue;
      any_slice = true;
      src += "      " + chunk_type(ci) + " l" + std::to_string(ci) + "[VPT];\n";
    }
    if (!any_slice) src += "      int unused;\n";
    src += "    };\n";
    {
      // This thread's chunks of what every row reads alike (weights, biases), loaded once before the
      // rows when they fit: a resident block then reads them once, not once a row.
      std::vector<std::size_t> rowless;
      for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci)
        if (!an.row_varying[ci]) rowless.push_back(ci);
      std::string bytes = "0";
      for (std::size_t ci : rowless) bytes += " + sizeof(" + chunk_type(ci) + ")";
      // Only on a resident grid (a block serves many rows), on the vector path, for a warp a row or two
      // chunks a thread and more (layer_norm.cuh loads its weights early from two on; ptxas spilled
      // 8 bytes at one chunk in a block of 1024, and 4 on the scalar path of a layer norm with weight
      // and bias as inputs at four, when they were held). The budget: half
      // the registers the launch bound leaves a thread, for this row's and the next row's chunks, the
      // kept values and the held chunks together.
      const std::string kept = std::to_string(an.kept.size());
      src += "    // Chunks every row reads alike, this thread's, held across the rows (a warp a row, or two chunks a thread\n"
             "    // and more) when they fit in half the registers beside this row's and the next row's chunks and the kept values.\n";
      if (rule.resident)
        src += "    constexpr int kKeptBytes = " + kept + " * VPT * W <= 16 ? " + kept + " * VPT * W * 4 : 0;\n"
               "    constexpr bool kHold = W > 1 && (kWarpRow || VPT >= 2) &&\n"
               "                           2 * sizeof(Slice) + (" + bytes + ") * VPT + kKeptBytes <= 131072 / kwiki::row_block_bound(W, VPT);\n";
      else
        src += "    constexpr bool kHold = false;  // one block a row: no row to share them with\n";
      src += "    struct Hold {\n";
      for (std::size_t ci : rowless) src += "      " + chunk_type(ci) + " l" + std::to_string(ci) + "[kHold ? VPT : 1];\n";
      if (rowless.empty()) src += "      int unused;\n";
      src += "    } hold;\n    (void)hold;\n";
      if (!rowless.empty()) {
        Writer w(k, backend, an);
        w.indent = "    ";
        w.line("if constexpr (kHold) {");
        w.line("#pragma unroll");
        w.line("  for (int i = 0; i < VPT; ++i) {");
        w.line("    const int chunk = r + i * gs;");
        w.line("    if (chunk < nacc) {");
        for (std::size_t ci : rowless) w.line("      hold.l" + std::to_string(ci) + "[i]" + load_fn(ci) + chunk_ptr(w, ci, "chunk") + ");");
        w.line("    }");
        w.line("  }");
        w.line("}");
        src += w.out();
      }
    }
    // A resident grid loads the next row while this one is reduced; one block a row has no next row,
    // and keeps no registers for one.
    src += std::string("    ") + (rule.resident ? "kwiki::for_each_row_prefetched" : "kw_for_each_row") +
           "<G, Slice>(\n        rows,\n        [&](long long row, Slice& s) {\n";
    {
      Writer w(k, backend, an);
      w.indent = "          ";
      w.out() += row_coords(k, w, "          ", true);
      w.line("#pragma unroll");
      w.line("for (int i = 0; i < VPT; ++i) {");
      w.line("  const int chunk = r + i * gs;");
      w.line("  if (chunk < nacc) {");
      for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci) {
        if (!an.row_varying[ci]) continue;
        w.line("    s.l" + std::to_string(ci) + "[i]" + load_fn(ci) + chunk_ptr(w, ci, "chunk") + ");");
      }
      w.line("  }");
      w.line("}");
      src += w.out();
    }
    src += "        },\n        [&](long long row, const Slice& s) {\n" + reg_body + "        });\n";
    src += "  } else {\n    for (long long row = G::first_row(); row < rows; row += G::row_stride()) {\n" + loop_body + "    }\n  }\n}\n\n";
    // The row chunk a thread's VPT counts (the first that moves with the row), for kMinVpt.
    std::string row_chunk = "kw_chunk<float, W>";
    for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci)
      if (an.row_varying[ci]) {
        row_chunk = chunk_type(ci);
        break;
      }
    src += "template <int W>\nint launch(const Args& a, long long rows, long long N, kwiki_stream_t stream) {\n"
           "#if KWIKI_PLATFORM_CUDA\n"
           "  // A few rows too long for registers: a cluster of blocks per row (Hopper clusters, vector path).\n"
           "  if constexpr (W > 1) {\n"
           "    if (N / W > kwiki::kRowRegElems / W * kwiki::kMaxBlock) {\n"
           "      const int c = kw_split_cluster(rows, N / W);\n"
           "      const int e = c == 16 ? kw_launch_clusters(kernel_rows<W, 0, false, 16>, 16, rows, stream, a)\n"
           "                  : c == 8 ? kw_launch_clusters(kernel_rows<W, 0, false, 8>, 8, rows, stream, a) : -1;\n"
           "      if (e >= 0) return e;\n"
           "      if (c == 16 && kw_launch_clusters(kernel_rows<W, 0, false, 8>, 8, rows, stream, a) == 0) return 0;\n"
           "    }\n"
           "  }\n"
           "#endif\n" +
           std::string("  // Launched as ") + rule.like + " is: " + rule.why + ".\n"
           "  constexpr int kMinVpt = W == 1 ? 1 : (" + std::to_string(rule.min_bytes) + " + static_cast<int>(sizeof(" + row_chunk + ")) - 1) / static_cast<int>(sizeof(" + row_chunk + "));\n"
           "  return kwiki::launch_rows<W, kMinVpt, " + (rule.resident ? "true" : "false") + ">(\n      N / W, rows, stream, [] { return kernel_rows<W, 0, false>; },\n"
           "      [](auto vpt, auto warp) { return kernel_rows<W, decltype(vpt)::value, decltype(warp)::value>; }, a);\n}\n\n";
  }
  src += "}  // namespace kwgen\n\n";

  // The launcher: sizes and floats into Args; the vector path when every chunk is aligned.
  src += "KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }\n\n";
  src += "KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,\n"
         "                              int num_params, void* stream) {\n";
  src += "  if (tensors == nullptr || dims == nullptr || num_tensors != " + std::to_string(k.buffers.size()) + " || num_dims != " +
         std::to_string(k.sizes.size()) + " || num_params != " + std::to_string(k.floats.size()) + ") return -1;\n";
  src += "  if (num_params > 0 && params == nullptr) return -1;\n  kwgen::Args a;\n";
  for (std::size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& b = k.buffers[i];
    const bool ro = b.role == "input" || b.role == "param";
    src += "  a.b" + std::to_string(i) + " = static_cast<" + (ro ? "const " : "") + storage_type(b.dtype, backend) + "*>(tensors[" + std::to_string(i) +
           "]);\n  if (a.b" + std::to_string(i) + " == nullptr) return -1;\n";
  }
  src += "  for (int i = 0; i < num_dims; ++i) a.s[i] = dims[i];\n  for (int i = 0; i < num_params; ++i) a.f[i] = static_cast<float>(params[i]);\n";
  if (k.outer.size() > 1) src += "  a.flat_rows = (" + flat_rows_test(k, probe) + ") ? 1 : 0;\n";
  src += "  const long long rows = " + rows_expr(k, probe) + ";\n  const long long N = " + probe.size(k.inner) + ";\n";
  src += "  if (rows < 0 || N < 0 || N > INT_MAX) return -1;\n  if (rows == 0 || N == 0) return 0;\n";
  src += "  const kwiki_stream_t st = static_cast<kwiki_stream_t>(stream);\n";
  src += "  constexpr int kW = " + std::to_string(vw) + ";\n";
  std::string cond = "kW > 1 && N % kW == 0";
  // A chunk of W * stride elements starts on its own size (up to 16 bytes): the buffer aligned so,
  // and every offset term a multiple of that many elements (of kW at least).
  const auto aligned = [&](const Access& acc, int stride, const std::string& base) {
    const int bytes = dtype_row(k.buffers[acc.buffer].dtype).bytes;
    const int align = std::min(16, vw * stride * bytes);
    const std::string m = std::to_string(std::max(vw, align / bytes));
    std::string c = " && kwgen::chunk_aligned(a.b" + std::to_string(acc.buffer) + ", " + std::to_string(align) + ")";
    c += " && (" + base + ") % " + m + " == 0";
    for (int o : acc.outer) c += " && (" + probe.size(o) + ") % " + m + " == 0";
    if (acc.index >= 0) c += " && (" + probe.size(acc.index) + ") % " + m + " == 0";
    return c;
  };
  for (std::size_t ci = 0; ci < an.chunk_node.size(); ++ci) {
    const Access& acc = k.nodes[an.chunk_node[ci]].access;
    const int st = an.chunk_stride[ci];
    cond += aligned(acc, st, st > 1 ? std::to_string(an.chunk_base[ci]) + "LL" : probe.size(acc.base));
  }
  for (int si : vec_stores) cond += aligned(k.stores[si].access, 1, probe.size(k.stores[si].access.base));
  if (sk == Skeleton::kElementwise && flat_eligible(k)) {
    // Flat when every element access is contiguous over the domain: inner stride 1, and each outer
    // stride the product of the sizes inside it (an axis of size 1 may have any stride).
    std::string contiguous = "true", flat_vec = "kW > 1 && (rows * N) % kW == 0";
    for (const Access* acc : element_accesses(k)) {
      contiguous += " && " + probe.size(acc->inner) + " == 1";
      std::string inside = "N";
      for (int x = static_cast<int>(acc->outer.size()) - 1; x >= 0; --x) {
        contiguous += " && (" + probe.size(k.outer[x]) + " == 1 || " + probe.size(acc->outer[x]) + " == " + inside + ")";
        inside += " * " + probe.size(k.outer[x]);
      }
      const int bytes = dtype_row(k.buffers[acc->buffer].dtype).bytes;
      flat_vec += " && kwgen::chunk_aligned(a.b" + std::to_string(acc->buffer) + ", " + std::to_string(std::min(16, vw * bytes)) + ") && (" +
                  probe.size(acc->base) + ") % kW == 0";
    }
    src += "  if (" + contiguous + ") {  // one flat index serves every access\n";
    src += "    if (" + flat_vec + ") return kwgen::launch<kW, true>(a, 1, rows * N, st);\n";
    src += "    return kwgen::launch<1, true>(a, 1, rows * N, st);\n  }\n";
  }
  src += "  if (" + cond + ") return kwgen::launch<kW>(a, rows, N, st);\n";
  src += "  return kwgen::launch<1>(a, rows, N, st);\n}\n";
  return src;
}

}  // namespace

Skeleton schedule(const Kernel& k) { return k.has_reduction() ? Skeleton::kRow : Skeleton::kElementwise; }
const char* skeleton_name(Skeleton s) { return s == Skeleton::kRow ? "row" : "elementwise"; }

std::string emit_source(const Kernel& k, Backend backend) {
  if (k.size_exprs.size() != k.sizes.size()) throw std::logic_error("emit_source needs fitted size expressions");
  return backend == Backend::kCpu ? emit_cpu(k) : emit_gpu(k, backend);
}

}  // namespace kwiki::gen
