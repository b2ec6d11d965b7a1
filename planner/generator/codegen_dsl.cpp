// The Python DSL backends' shared writer: the kernel IR as a DSL kernel (elementwise: one thread per
// element; rows: one block per row, each pass striding over the row, group then block reductions),
// its launcher, the launch recipe and the Model around them. Every statement names its reference op.
#include "codegen_dsl.hpp"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "codegen.hpp"

namespace kwiki::gen {
namespace {

constexpr int kThreads = 256;  // threads of a block, both skeletons

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

/// The DSL numeric type a value of `d` is stored as.
const char* storage_name(DType d) {
  switch (d) {
    case DType::kF32: return "Float32";
    case DType::kBF16: return "BFloat16";
    case DType::kF16: return "Float16";
    case DType::kF64: return "Float64";
    case DType::kE4M3FN: return "Float8E4M3FN";
    case DType::kE4M3FNUZ: return "Float8E4M3FNUZ";
    case DType::kI8: return "Int8";
    case DType::kU8: return "Uint8";
    case DType::kI16: return "Int16";
    case DType::kI32: return "Int32";
    case DType::kI64: return "Int64";
    case DType::kBool: return "Boolean";
    default: break;
  }
  return "Float32";
}

/// The DSL element type of a tensor of `d`: bool tensors travel as uint8 (0 / 1), since DLPack in
/// torch before 2.x refuses bool and the DSLs' bool tensors are not byte-addressed alike.
const char* tensor_name(DType d) { return d == DType::kBool ? "Uint8" : storage_name(d); }

/// The DSL numeric type a value of `d` is computed in (the IR's compute column).
const char* compute_name(DType d) {
  const std::string c = dtype_row(d).compute;
  return c == "float" ? "Float32" : c == "double" ? "Float64" : c == "bool" ? "Boolean" : "Int64";
}

const char* torch_dtype(DType d) {
  switch (d) {
    case DType::kF32: return "torch.float32";
    case DType::kBF16: return "torch.bfloat16";
    case DType::kF16: return "torch.float16";
    case DType::kF64: return "torch.float64";
    case DType::kE4M3FN: return "getattr(torch, 'float8_e4m3fn', None)";
    case DType::kE4M3FNUZ: return "getattr(torch, 'float8_e4m3fnuz', None)";
    case DType::kI8: return "torch.int8";
    case DType::kU8: return "torch.uint8";
    case DType::kI16: return "torch.int16";
    case DType::kI32: return "torch.int32";
    case DType::kI64: return "torch.int64";
    case DType::kBool: return "torch.bool";
    default: break;
  }
  return "torch.float32";
}

std::string py_float(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool is_const(const Kernel& k, int slot, long long v) {
  const SizeExpr& e = k.size_exprs[slot];
  return e.kind == SizeExpr::Kind::kConst && e.value == v;
}

/// Nodes the stores need, and those only a concat's branch reads (computed inside that branch).
struct Needs {
  std::set<int> needed, guarded;
  std::vector<int> reduces;
};

Needs find_needs(const Kernel& k) {
  Needs a;
  std::set<int> unguarded;
  std::function<void(int, bool)> walk = [&](int id, bool guarded) {
    if (a.needed.count(id) && (guarded || unguarded.count(id))) return;
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
  for (int id = 0; id < static_cast<int>(k.nodes.size()); ++id)
    if (k.nodes[id].op == OpKind::kReduce && a.needed.count(id)) a.reduces.push_back(id);
  return a;
}

/// The vector path's chunks: elementwise loads and stores along the contiguous inner axis, each
/// moved W elements at a time through a copy atom (the largest chunk is 16 bytes).
struct Chunks {
  std::map<int, int> chunk_of;   ///< load node -> chunk (loads of one access share it)
  std::vector<int> chunk_node;   ///< chunk -> its first load node
  std::vector<int> vec_stores;   ///< stores written W at a time
  int width = 1;                 ///< W; 1: no vector path
};

Chunks find_chunks(const Kernel& k, const Needs& needs) {
  Chunks ch;
  std::map<std::string, int> by_access;
  int max_bytes = 0;
  for (int id = 0; id < static_cast<int>(k.nodes.size()); ++id) {
    const Node& n = k.nodes[id];
    // Gathered loads stay scalar here (the CUDA/HIP backends chunk a row-level index; not yet this one).
    if (n.op != OpKind::kLoad || !needs.needed.count(id) || needs.guarded.count(id) || n.level != Level::kElem || !is_const(k, n.access.inner, 1) ||
        n.access.index >= 0)
      continue;
    std::string key = std::to_string(n.access.buffer) + "|" + k.size_exprs[n.access.base].describe();
    for (int s : n.access.outer) key += "|" + k.size_exprs[s].describe();
    const auto [it, fresh] = by_access.emplace(key, static_cast<int>(ch.chunk_node.size()));
    ch.chunk_of[id] = it->second;
    if (fresh) ch.chunk_node.push_back(id);
    max_bytes = std::max(max_bytes, dtype_row(k.buffers[n.access.buffer].dtype).bytes);
  }
  for (std::size_t i = 0; i < k.stores.size(); ++i) {
    const Store& s = k.stores[i];
    if (!is_const(k, s.access.inner, 1) || k.nodes[s.node].level != Level::kElem) continue;
    ch.vec_stores.push_back(static_cast<int>(i));
    max_bytes = std::max(max_bytes, dtype_row(k.buffers[s.access.buffer].dtype).bytes);
  }
  ch.width = max_bytes > 0 ? 16 / max_bytes : 1;
  if (ch.width < 2) ch = Chunks{};
  return ch;
}

/// Writes the IR's nodes as Python statements of the DSL, in nested scopes (loop and branch bodies).
class PyWriter {
 public:
  PyWriter(const Kernel& k, const DslDialect& d, const Needs& needs) : k_(k), d_(d), needs_(needs) {}

  std::string type(const char* name) const { return std::string(d_.types) + name; }
  std::string size(int slot) const {
    const SizeExpr& e = k_.size_exprs[slot];
    return e.kind == SizeExpr::Kind::kConst ? std::to_string(e.value) : "s" + std::to_string(slot);
  }
  std::string row_offset(const Access& acc) const {
    std::string s = size(acc.base);
    for (std::size_t x = 0; x < acc.outer.size(); ++x)
      if (!is_const(k_, acc.outer[x], 0)) s += " + " + size(acc.outer[x]) + " * o" + std::to_string(x);
    return s;
  }
  std::string offset(const Access& acc) const {
    std::string s = row_offset(acc);
    if (!is_const(k_, acc.inner, 0)) s += " + " + size(acc.inner) + " * c";
    return s;
  }

  /// On the vector path: a chunked load's element j of its fragment (unset: every load is scalar).
  std::function<std::string(int)> chunk_value;

  void line(const std::string& s) { out_ += indent_ + s + "\n"; }
  void open(const std::string& header) {
    line(header);
    indent_ += "    ";
    scopes_.emplace_back();
  }
  void close() {
    indent_.resize(indent_.size() - 4);
    scopes_.pop_back();
  }
  const std::string& out() const { return out_; }

  /// Emits every row-level node `targets` need (not under a concat's branch) in the current scope.
  void hoist(const std::vector<int>& targets, const std::set<int>& done_reduces) {
    std::set<int> seen;
    std::function<void(int)> walk = [&](int id) {
      if (seen.count(id) || needs_.guarded.count(id)) return;
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
    };
    for (int t : targets) walk(t);
  }

  /// The name holding node `id` in the current scope, emitting its statement (and its operands') first.
  std::string value(int id) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (const auto f = it->find(id); f != it->end()) return f->second;
    const Node& n = k_.nodes[id];
    const std::string v = "v" + std::to_string(id);
    const std::string ct = type(compute_name(n.dtype));
    std::string expr;
    switch (n.op) {
      case OpKind::kLoad: {
        // A gather (index_select, embedding, gather) adds its index value times the indexed dimension's stride.
        const std::string gather =
            n.access.index < 0 ? "" : " + " + size(n.access.index) + " * kw_cvt(" + value(n.args[0]) + ", " + type("Int32") + ")";
        const std::string element =
            chunk_value && chunk_value(id).size() ? chunk_value(id) : "b" + std::to_string(n.access.buffer) + "[" + offset(n.access) + gather + "]";
        expr = k_.buffers[n.access.buffer].dtype == DType::kBool ? "(" + element + " != 0)" : "kw_cvt(" + element + ", " + ct + ")";
        break;
      }
      case OpKind::kConst: {
        const FloatParam& f = k_.floats[n.fparam];
        expr = "kw_cvt(" + (f.source.empty() && f.fn.empty() ? py_float(f.literal) : "f" + std::to_string(n.fparam)) + ", " + ct + ")";
        break;
      }
      case OpKind::kSize: expr = "kw_cvt(" + size(n.slot) + ", " + ct + ")"; break;
      case OpKind::kIota: expr = "kw_cvt(" + (n.axis < 0 ? std::string("c") : "o" + std::to_string(n.axis)) + ", " + ct + ")"; break;
      case OpKind::kReduce: return "r" + std::to_string(id);
      case OpKind::kPointwise: {
        std::vector<std::string> xs;
        for (int x : n.args) xs.push_back(value(x));
        if (!n.pw->dsl || !*n.pw->dsl) throw std::logic_error(std::string("op ") + n.pw->name + " has no Python spelling for the DSL backends");
        std::string s = n.pw->dsl;
        for (int i = static_cast<int>(xs.size()) - 1; i >= 0; --i) s = replace_all(s, "$" + std::to_string(i), xs[i]);
        expr = round(n.dtype, "kw_cvt(" + s + ", " + ct + ")");
        break;
      }
      case OpKind::kCast: expr = cast(value(n.args[0]), n.dtype); break;
      case OpKind::kSelect: {
        // concat: only the chosen part is read (the others' loads may lie outside their tensors).
        const std::string coord = value(n.args[0]);
        line(v + " = kw_cvt(0, " + ct + ")  # " + n.source);
        const std::size_t parts = n.args.size() - 1;
        for (std::size_t p = 0; p < parts; ++p) {
          if (p == 0) open("if " + coord + " < " + size(n.bounds[1]) + ":");
          else if (p + 1 < parts) open("elif " + coord + " < " + size(n.bounds[p + 1]) + ":");
          else open("else:");
          line(v + " = kw_cvt(" + value(n.args[p + 1]) + ", " + ct + ")");
          close();
          if (parts == 1) break;
        }
        scopes_.back()[id] = v;
        return v;
      }
    }
    line(v + " = " + expr + (n.source.empty() ? "" : "  # " + n.source));
    scopes_.back()[id] = v;
    return v;
  }

  std::string round(DType d, const std::string& x) const {
    switch (d) {
      case DType::kBF16: return "kw_round(" + x + ", " + type("BFloat16") + ")";
      case DType::kF16: return "kw_round(" + x + ", " + type("Float16") + ")";
      case DType::kE4M3FN: return "kw_round_e4m3fn(" + x + ")";
      case DType::kE4M3FNUZ: return "kw_round_e4m3fnuz(" + x + ")";
      default: return x;
    }
  }
  std::string cast(const std::string& x, DType to) const {
    if (is_float(to)) return round(to, "kw_cvt(" + x + ", " + type(compute_name(to)) + ")");
    if (to == DType::kBool) return "(" + x + " != 0)";
    // Toward zero, then wrapped to the narrow integer, as torch casts.
    return "kw_cvt(kw_cvt(" + x + ", " + type(storage_name(to)) + "), " + type("Int64") + ")";
  }

 private:
  const Kernel& k_;
  const DslDialect& d_;
  const Needs& needs_;
  std::vector<std::map<int, std::string>> scopes_{1};
  std::string indent_ = "    ";
  std::string out_;
};

bool is_arg(const Node& n) { return n.reduce == ReduceKind::kArgMax || n.reduce == ReduceKind::kArgMin; }

/// The kernel's parameters after the tensors: the size slots, the floats, rows and N.
std::string scalar_params(const Kernel& k, const DslDialect& d) {
  std::string s;
  for (std::size_t i = 0; i < k.sizes.size(); ++i) s += ", s" + std::to_string(i) + ": " + d.types + "Int32";
  for (std::size_t i = 0; i < k.floats.size(); ++i) s += ", f" + std::to_string(i) + ": " + d.types + "Float32";
  return s + ", rows: " + d.types + "Int32, N: " + d.types + "Int32";
}
std::string scalar_args(const Kernel& k) {
  std::string s;
  for (std::size_t i = 0; i < k.sizes.size(); ++i) s += ", s" + std::to_string(i);
  for (std::size_t i = 0; i < k.floats.size(); ++i) s += ", f" + std::to_string(i);
  return s + ", rows, N";
}
std::string tensor_params(const Kernel& k, const DslDialect& d) {
  std::string s;
  for (std::size_t i = 0; i < k.buffers.size(); ++i) s += std::string(i ? ", " : "") + "b" + std::to_string(i) + ": " + d.tensor_type;
  return s;
}
std::string tensor_args(const Kernel& k) {
  std::string s;
  for (std::size_t i = 0; i < k.buffers.size(); ++i) s += std::string(i ? ", " : "") + "b" + std::to_string(i);
  return s;
}

void row_coords(const Kernel& k, PyWriter& w) {
  w.line("rem = row");
  for (int x = static_cast<int>(k.outer.size()) - 1; x >= 0; --x) {
    const std::string o = "o" + std::to_string(x);
    if (x == 0) {
      w.line(o + " = rem");
    } else {
      w.line(o + " = rem % " + w.size(k.outer[x]));
      w.line("rem = rem // " + w.size(k.outer[x]));
    }
  }
}

void store(const Kernel& k, PyWriter& w, const Store& s) {
  const Buffer& b = k.buffers[s.access.buffer];
  const std::string v = w.value(s.node);
  w.line("b" + std::to_string(s.access.buffer) + "[" + w.offset(s.access) + "] = kw_cvt(" + v + ", " + w.type(tensor_name(b.dtype)) + ")  # " + b.role +
         " " + b.name);
}

/// The stores `pick` selects; those written once per row (their inner coefficient is 0) under `c == 0`.
void store_all(const Kernel& k, PyWriter& w, const std::function<bool(const Store&)>& pick) {
  bool any_row = false;
  for (const auto& s : k.stores) {
    if (!pick(s)) continue;
    if (is_const(k, s.access.inner, 0)) any_row = true;
    else store(k, w, s);
  }
  if (!any_row) return;
  w.open("if c == 0:");
  for (const auto& s : k.stores)
    if (pick(s) && is_const(k, s.access.inner, 0)) store(k, w, s);
  w.close();
}

/// The vector path's pieces around one chunk `ch` of a row: fragments loaded before the element
/// loop, fragments of the stores written after it.
struct ChunkIo {
  const Kernel& k;
  const DslDialect& d;
  const Chunks& chunks;
  std::string type(DType t) const { return std::string(d.types) + tensor_name(t); }
  std::string bits(DType t) const { return std::to_string(chunks.width * dtype_row(t).bytes * 8); }
  /// Tiled views of every chunked buffer (W elements a tile), once per kernel.
  void tiles(PyWriter& w) const {
    std::set<int> done;
    const auto tile = [&](int b) {
      if (done.insert(b).second) w.line("t" + std::to_string(b) + " = kw_tiles(b" + std::to_string(b) + ", " + std::to_string(chunks.width) + ")");
    };
    for (int node : chunks.chunk_node) tile(k.nodes[node].access.buffer);
    for (int si : chunks.vec_stores) tile(k.stores[si].access.buffer);
  }
  std::string tile_of(PyWriter& w, const Access& acc) const {
    return "kw_tile(t" + std::to_string(acc.buffer) + ", (" + w.row_offset(acc) + ") // " + std::to_string(chunks.width) + " + ch)";
  }
  void load(PyWriter& w) const {
    for (std::size_t ci = 0; ci < chunks.chunk_node.size(); ++ci) {
      const Node& n = k.nodes[chunks.chunk_node[ci]];
      const DType t = k.buffers[n.access.buffer].dtype;
      const std::string l = "l" + std::to_string(ci);
      w.line(l + " = kw_fragment(" + type(t) + ", " + std::to_string(chunks.width) + ")  # " + n.source + ", " + std::to_string(chunks.width) + " elements");
      w.line("kw_copy(" + tile_of(w, n.access) + ", " + l + ", " + type(t) + ", " + bits(t) + ")");
    }
    for (int si : chunks.vec_stores) {
      const DType t = k.buffers[k.stores[si].access.buffer].dtype;
      w.line("st" + std::to_string(si) + " = kw_fragment(" + type(t) + ", " + std::to_string(chunks.width) + ")");
    }
  }
  void store(PyWriter& w) const {
    for (int si : chunks.vec_stores) {
      const Store& s = k.stores[si];
      const DType t = k.buffers[s.access.buffer].dtype;
      w.line("kw_copy(st" + std::to_string(si) + ", " + tile_of(w, s.access) + ", " + type(t) + ", " + bits(t) + ")  # " + k.buffers[s.access.buffer].name);
    }
  }
  bool is_vec_store(const Store& s) const {
    for (int si : chunks.vec_stores)
      if (&k.stores[si] == &s) return true;
    return false;
  }
  void set_chunk_values(PyWriter& w) const {
    w.chunk_value = [this](int id) {
      const auto it = chunks.chunk_of.find(id);
      return it == chunks.chunk_of.end() ? std::string() : "l" + std::to_string(it->second) + "[j]";
    };
  }
};

/// Inside the element loop of a chunk: the stores `pick` selects, those of the vector path into
/// their fragments, the rest scalar (per-row ones under c == 0).
void store_chunk(const Kernel& k, PyWriter& w, const ChunkIo& io, const std::function<bool(const Store&)>& pick) {
  for (const auto& s : k.stores)
    if (pick(s) && io.is_vec_store(s))
      w.line("st" + std::to_string(&s - k.stores.data()) + "[j] = kw_cvt(" + w.value(s.node) + ", " + io.type(k.buffers[s.access.buffer].dtype) + ")  # " +
             k.buffers[s.access.buffer].role + " " + k.buffers[s.access.buffer].name);
  store_all(k, w, [&](const Store& s) { return pick(s) && !io.is_vec_store(s); });
}

std::string emit_elementwise(const Kernel& k, const DslDialect& d, const Needs& needs, const Chunks& chunks, bool vec) {
  PyWriter w(k, d, needs);
  const ChunkIo io{k, d, chunks};
  const std::string wd = std::to_string(chunks.width);
  std::vector<int> targets;
  for (const auto& s : k.stores) targets.push_back(s.node);
  w.line("tid = " + std::string(d.thread_index));
  w.line("bid = " + std::string(d.block_index));
  w.line("v = bid * " + std::to_string(kThreads) + " + tid");
  if (!vec) {
    w.open("if v < rows * N:");
    w.line("row = v // N");
    w.line("c = v - row * N");
    row_coords(k, w);
    w.hoist(targets, {});
    store_all(k, w, [](const Store&) { return true; });
    w.close();
  } else {
    io.tiles(w);
    w.line("nch = N // " + wd + "  # chunks of " + wd + " elements a row");
    w.open("if v < rows * nch:");
    w.line("row = v // nch");
    w.line("ch = v - row * nch");
    row_coords(k, w);
    w.hoist(targets, {});
    io.load(w);
    io.set_chunk_values(w);
    w.open("for j in " + std::string(d.unroll) + "(" + wd + "):");
    w.line("c = ch * " + wd + " + j");
    store_chunk(k, w, io, [](const Store&) { return true; });
    w.close();
    io.store(w);
    w.close();
  }
  const std::string name = vec ? "kernel_elementwise_vec" : "kernel_elementwise";
  std::string src = vec ? "# Elementwise, vector path: one thread per chunk of " + wd + " elements, moved through copy atoms (16 bytes for the widest type).\n"
                        : "# Elementwise: one thread per element of rows x N (" + std::to_string(kThreads) + " a block), scalar accesses.\n";
  src += std::string(d.kernel_decorator) + "\ndef " + name + "(" + tensor_params(k, d) + scalar_params(k, d) + "):\n" + w.out();
  return src;
}

std::string emit_rows(const Kernel& k, const DslDialect& d, const Needs& needs, const Chunks& chunks, bool vec) {
  PyWriter w(k, d, needs);
  const ChunkIo io{k, d, chunks};
  const std::string wd = std::to_string(chunks.width), threads = std::to_string(kThreads);
  const std::string groups = std::to_string(kThreads / d.group);
  // A pass over the row: scalar, one element a step; vector, one chunk a step and its elements unrolled.
  const auto open_pass = [&] {
    if (!vec) {
      w.open("for c in range(tid, N, " + threads + "):");
      return;
    }
    w.open("for ch in range(tid, N // " + wd + ", " + threads + "):");
    io.load(w);
    w.open("for j in " + std::string(d.unroll) + "(" + wd + "):");
    w.line("c = ch * " + wd + " + j");
  };
  const auto close_pass = [&](bool stores) {
    if (vec) {
      w.close();
      if (stores) io.store(w);
    }
    w.close();
  };
  w.line("tid = " + std::string(d.thread_index));
  w.line("row = " + std::string(d.block_index));
  if (*d.shared_prologue) w.line(d.shared_prologue);
  if (vec) {
    io.tiles(w);
    io.set_chunk_values(w);
  }
  row_coords(k, w);
  std::set<int> done;
  for (int id : needs.reduces) {
    const Node& n = k.nodes[id];
    const DType in = k.nodes[n.args[0]].dtype;
    const std::string acc_t = w.type(compute_name(in) == std::string("Boolean") ? "Int64" : compute_name(in));
    const bool fp = acc_t == w.type("Float32") || acc_t == w.type("Float64");
    const std::string acc = "acc" + std::to_string(id), idx = "idx" + std::to_string(id);
    const std::string shared = replace_all(replace_all(d.shared_array, "{T}", acc_t), "{N}", groups);
    w.hoist({n.args[0]}, done);
    w.line("red" + std::to_string(id) + " = " + shared + "  # the groups' partials of " + n.source);
    std::string init;
    switch (n.reduce) {
      case ReduceKind::kSum: init = "0"; break;
      case ReduceKind::kMax:
      case ReduceKind::kArgMax: init = fp ? "float('-inf')" : "kw_lowest()"; break;
      default: init = fp ? "float('inf')" : "kw_highest()"; break;
    }
    w.line(acc + " = kw_cvt(" + init + ", " + acc_t + ")  # " + n.source);
    if (is_arg(n)) {
      w.line("redi" + std::to_string(id) + " = " + replace_all(replace_all(d.shared_array, "{T}", w.type("Int32")), "{N}", groups));
      w.line(idx + " = kw_cvt(0, " + w.type("Int32") + ")");
    }
    open_pass();
    const std::string x = "kw_cvt(" + w.value(n.args[0]) + ", " + acc_t + ")";
    switch (n.reduce) {
      case ReduceKind::kSum: w.line(acc + " = " + acc + " + " + x); break;
      case ReduceKind::kMax: w.line(acc + " = kw_max(" + acc + ", " + x + ")"); break;
      case ReduceKind::kMin: w.line(acc + " = kw_min(" + acc + ", " + x + ")"); break;
      default: {
        const std::string better = "kw_arg_better(" + x + ", c, " + acc + ", " + idx + ", " + (n.reduce == ReduceKind::kArgMax ? "True" : "False") + ")";
        w.line("take = " + better);
        w.line(acc + " = kw_where(take, " + x + ", " + acc + ")");
        w.line(idx + " = kw_where(take, c, " + idx + ")");
      }
    }
    close_pass(false);
    const std::string red = "red" + std::to_string(id);
    switch (n.reduce) {
      case ReduceKind::kSum: w.line(acc + " = kw_block_sum(" + acc + ", " + red + ", tid)"); break;
      case ReduceKind::kMax: w.line(acc + " = kw_block_max(" + acc + ", " + red + ", tid)"); break;
      case ReduceKind::kMin: w.line(acc + " = kw_block_min(" + acc + ", " + red + ", tid)"); break;
      default:
        w.line(acc + ", " + idx + " = kw_block_arg(" + acc + ", " + idx + ", " + red + ", redi" + std::to_string(id) + ", tid, " +
               (n.reduce == ReduceKind::kArgMax ? "True" : "False") + ")");
    }
    w.line("r" + std::to_string(id) + " = kw_cvt(" + (is_arg(n) ? idx : acc) + ", " + w.type(compute_name(n.dtype)) + ")");
    done.insert(id);
  }
  std::vector<int> targets;
  for (const auto& s : k.stores) targets.push_back(s.node);
  w.hoist(targets, done);
  // Row-level results are written once, by the block's first thread; the rest by the final pass.
  const auto row_level = [&](const Store& s) { return is_const(k, s.access.inner, 0) && k.nodes[s.node].level != Level::kElem; };
  bool row_stores = false, elem_stores = false;
  for (const auto& s : k.stores) (row_level(s) ? row_stores : elem_stores) = true;
  if (row_stores) {
    w.open("if tid == 0:");
    for (const auto& s : k.stores)
      if (row_level(s)) store(k, w, s);
    w.close();
  }
  if (elem_stores) {
    open_pass();
    if (vec) store_chunk(k, w, io, [&](const Store& s) { return !row_level(s); });
    else store_all(k, w, [&](const Store& s) { return !row_level(s); });
    close_pass(true);
  }
  const std::string name = vec ? "kernel_rows_vec" : "kernel_rows";
  std::string src = "# Rows" + std::string(vec ? ", vector path" : "") + ": one block of " + threads + " threads per row; each pass strides over the row " +
                    (vec ? "in chunks of " + wd + " elements moved through copy atoms" : std::string("one element a step")) + " (re-read from L2),\n" +
                    "# each reduction combines within a " + std::string(d.group == 64 ? "wavefront" : "warp") + " by shuffles, then across the " + groups +
                    " groups through shared memory.\n";
  src += std::string(d.kernel_decorator) + "\ndef " + name + "(" + tensor_params(k, d) + scalar_params(k, d) + "):\n" + w.out();
  return src;
}

std::string size_expr_py(const SizeExpr& e) {
  switch (e.kind) {
    case SizeExpr::Kind::kConst: return "(\"const\", " + std::to_string(e.value) + ")";
    case SizeExpr::Kind::kScalar: return "(\"scalar\", " + py_string(e.scalar) + ")";
    case SizeExpr::Kind::kDims: {
      std::string s = "(\"dims\", " + py_string(e.tensor) + ", " + std::to_string(e.first) + ", " + std::to_string(e.last) + ", " + std::to_string(e.num) +
                      ", " + std::to_string(e.den);
      if (!e.tensor2.empty()) s += ", " + py_string(e.tensor2) + ", " + std::to_string(e.first2) + ", " + std::to_string(e.last2);
      return s + ")";
    }
  }
  return "(\"const\", 0)";
}

std::string recipe(const Kernel& k, const std::string& returns, const std::string& target, bool rows_skeleton) {
  std::string s = "# ---- the launch recipe (plans/kernel_ir.json) ----\n\n";
  s += "# Buffers in launch order: (name, role, torch dtype, DSL element type name, shape as size slots).\n# An input or param is read, "
       "an output allocated here, an updated input written in place.\nBUFFERS = [\n";
  for (const auto& b : k.buffers) {
    std::string shape;
    for (std::size_t i = 0; i < b.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(b.shape[i]);
    s += "    (" + py_string(b.name) + ", " + py_string(b.role) + ", " + torch_dtype(b.dtype) + ", " + py_string(tensor_name(b.dtype)) + ", [" + shape + "]),\n";
  }
  s += "]\n# Size slots: (\"const\", v) | (\"scalar\", source) | (\"dims\", tensor, first, last, num, den[, tensor2, first2, last2]):\n"
       "# prod(tensor.shape[first:last]) [* prod(tensor2.shape[first2:last2])] * num / den.\nSIZES = [\n";
  for (const auto& e : k.size_exprs) s += "    " + size_expr_py(e) + ",  # " + e.describe() + "\n";
  s += "]\nSAMPLE_SIZES = [";
  for (std::size_t i = 0; i < k.sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(k.sizes[i]);
  s += "]  # the slots at the traced sample (compile_check's placeholders)\n";
  s += "# Floats: (\"literal\", v) | (\"arg\", source) | (\"size\", fn, size expression).\nFLOATS = [\n";
  for (const auto& f : k.floats) {
    if (!f.fn.empty()) s += "    (\"size\", " + py_string(f.fn) + ", " + size_expr_py(f.size) + "),\n";
    else if (!f.source.empty()) s += "    (\"arg\", " + py_string(f.source) + "),\n";
    else s += "    (\"literal\", " + py_float(f.literal) + "),\n";
  }
  s += "]\nOUTER_SLOTS = [";
  for (std::size_t i = 0; i < k.outer.size(); ++i) s += (i ? ", " : "") + std::to_string(k.outer[i]);
  s += "]  # rows = their product\nINNER_SLOT = " + std::to_string(k.inner) + "  # N\n";
  s += "RESULTS = [";
  for (std::size_t i = 0; i < k.results.size(); ++i) s += std::string(i ? ", " : "") + "(" + py_string(k.results[i].name) + ", " + std::to_string(k.results[i].buffer) + ")";
  s += "]  # what forward returns, in order: (name, buffer)\n";
  s += "RETURNS = " + py_string(returns) + "  # tensor | tuple | dict\n";
  s += "TARGET = " + py_string(target) + "\n";
  s += "SKELETON = " + py_string(rows_skeleton ? "rows" : "elementwise") + "\n";
  return s;
}


// The host side both DSLs share: sizes and floats from the call's arguments, buffers allocated or
// checked, the launch (each DSL's _launch), the results in the reference's form.
constexpr const char* kModelHost = R"PY(

# ---- the host side: torch only allocates, reshapes and launches ----

def _eval_size(e, tensor, scalar):
    """A size slot's value for this call (SIZES row)."""
    if e[0] == "const":
        return e[1]
    if e[0] == "scalar":
        return int(scalar(e[1]))

    def run(name, first, last):  # the product of a run of a tensor's dims (negative: from the end)
        t = tensor(name)
        rank = t.dim()
        lo = first + rank if first < 0 else first
        hi = last + rank if (last <= 0 and first < 0) else last
        p = 1
        for d in t.shape[lo:hi]:
            p *= int(d)
        return p

    name, first, last, num, den = e[1:6]
    p = run(name, first, last)
    if len(e) > 6:  # times a run of a second tensor's dims
        p *= run(*e[6:9])
    if (p * num) % den:
        raise RuntimeError("%s gives a size the kernel cannot use (%d / %d)" % (name, p * num, den))
    return p * num // den


def _eval_float(f, sizes_of, scalar):
    if f[0] == "literal":
        return f[1]
    if f[0] == "arg":
        return float(scalar(f[1]))
    d = float(sizes_of(f[2]))
    return {"sqrt": math.sqrt(d), "rsqrt": 1 / math.sqrt(d), "recip": 1 / d, "id": d}[f[1]]


def _vector_ok(tensors, sizes):
    """The vector path holds for this call: rows split into whole chunks, every chunk 16-byte aligned."""
    if VEC_W == 1 or sizes[INNER_SLOT] % VEC_W:
        return False
    for b, base, outer in VEC_ACCESSES:
        if sizes[base] % VEC_W or any(sizes[o] % VEC_W for o in outer):
            return False
        if tensors[b].data_ptr() % (VEC_W * tensors[b].element_size()):
            return False
    return True


class Model(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        import reference  # the task's reference.py beside this file: it owns the parameters
        self.ref = reference.Model(*args, **kwargs)
        self._signature = inspect.signature(reference.Model.forward)
        init = inspect.signature(reference.Model.__init__).bind(None, *args, **kwargs)
        init.apply_defaults()
        self._init = dict(init.arguments)

    def forward(self, *args, **kwargs):
        bound = self._signature.bind(self.ref, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        arguments.pop(next(iter(self._signature.parameters)))  # self
        held = dict(self.ref.named_parameters())
        held.update(dict(self.ref.named_buffers()))

        def tensor(name):  # an input "x", or a parameter "param:w"
            return held[name[6:]] if name.startswith("param:") else arguments[name]

        def scalar(source):  # "input:NAME" or "init:NAME"
            kind, name = source.split(":", 1)
            return (arguments if kind == "input" else self._init)[name]

        sizes = [_eval_size(e, tensor, scalar) for e in SIZES]
        floats = [_eval_float(f, lambda e: _eval_size(e, tensor, scalar), scalar) for f in FLOATS]
        device = next(tensor(b[0]).device for b in BUFFERS if b[1] != "output")
        if device.type != "cuda":
            raise RuntimeError("kernel.py launches a " + DSL + " kernel, which runs on the GPU; the CPU twin is kernel_cpu.cpp")
        tensors = []
        for name, role, dtype, _, shape in BUFFERS:
            dims = [sizes[i] for i in shape]
            if role == "output":
                t = torch.empty(dims, dtype=dtype, device=device)
            else:
                t = tensor(name)
                if list(t.shape) != dims:
                    raise RuntimeError("%s has shape %s; the kernel was written for %s" % (name, list(t.shape), dims))
                if role == "updated" and not t.is_contiguous():
                    raise RuntimeError("the kernel writes %s in place, which needs it contiguous" % name)
                t = t.contiguous()
            tensors.append(t)
        rows = 1
        for i in OUTER_SLOTS:
            rows *= sizes[i]
        n = sizes[INNER_SLOT]
        if rows * max(n, 1) >= 2**31 or any(t.numel() >= 2**31 for t in tensors):
            raise RuntimeError("the " + DSL + " V0 indexes with 32-bit integers; this call has 2^31 elements or more")
        if rows > 0 and (n > 0 or SKELETON == "rows"):
            _launch(tensors, sizes, floats, rows, n, _vector_ok(tensors, sizes))
        outs = [tensors[b] for _, b in RESULTS]
        if RETURNS == "tuple":
            return tuple(outs)
        if RETURNS == "dict":
            return {name: t for (name, _), t in zip(RESULTS, outs)}
        return outs[0]


if __name__ == "__main__":
    # python kernel.py --compile-check OUT_DIR: compile for TARGET without a device; one JSON line.
    import json
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--compile-check":
        sys.exit("usage: python kernel.py --compile-check OUT_DIR")
    print("KWIKI_DSL_CHECK=" + json.dumps(compile_check(sys.argv[2]), sort_keys=True))
)PY";

// Helpers both DSLs spell alike (torch's NaN rules for max/min, relu, sign, logic, integer limits),
// in terms of each prelude's kw_where and kw_cvt; {T} is the dialect's type prefix.
constexpr const char* kCommonHelpers = R"PY(


def kw_max(a, b):
    # torch.maximum: NaN wins
    return kw_where(a != a, a, kw_where(b != b, b, kw_where(a > b, a, b)))


def kw_min(a, b):
    return kw_where(a != a, a, kw_where(b != b, b, kw_where(a < b, a, b)))


def kw_fmax(a, b):
    # fmaxf: a NaN operand loses
    return kw_where(b != b, a, kw_where(a > b, a, b))


def kw_fmin(a, b):
    return kw_where(b != b, a, kw_where(a < b, a, b))


def kw_relu(x):
    return kw_where(x < 0, kw_cvt(0, type(x)), x)


def kw_sign(x):
    t = type(x)
    return kw_where(x != x, x, kw_where(x > 0, kw_cvt(1, t), kw_where(x < 0, kw_cvt(-1, t), kw_cvt(0, t))))


def kw_not(x):
    return kw_where(x, {T}Boolean(False), {T}Boolean(True))


def kw_bitnot(x):
    return kw_not(x) if isinstance(x, {T}Boolean) else ~x


def kw_and(a, b):
    return kw_where(a, b, {T}Boolean(False))


def kw_or(a, b):
    return kw_where(a, {T}Boolean(True), b)


def kw_lowest():
    return {T}Int64(-(2**63))


def kw_highest():
    return {T}Int64(2**63 - 1)
)PY";

}  // namespace

std::string emit_dsl_model(const Kernel& k, const DslDialect& d, const std::string& returns, const std::string& target) {
  if (k.size_exprs.size() != k.sizes.size()) throw std::logic_error("emit_dsl_model needs fitted size expressions");
  const Needs needs = find_needs(k);
  const bool rows = schedule(k) == Skeleton::kRow;
  std::string src = std::string("# kernel.py: kwiki's V0 in ") + d.name + ", written by its generator from plans/kernel_ir.json (" + skeleton_name(schedule(k)) +
                    " skeleton).\n# Model(**init_kwargs)(**inputs) returns what reference.Model does; forward only allocates, reshapes and\n"
                    "# launches the kernel below (torch computes nothing). compile_check() compiles it for " + target + " without a device.\n";
  src += d.prelude;
  for (std::string common = kCommonHelpers;;) {  // {T} -> the dialect's type prefix
    const auto at = common.find("{T}");
    if (at == std::string::npos) {
      src += common;
      break;
    }
    common.replace(at, 3, d.types);
  }
  src += "\n\n# ---- the kernel ----\n\n";
  src += "KTHREADS = " + std::to_string(kThreads) + "\n\n\n";
  const Chunks chunks = find_chunks(k, needs);
  const auto launcher = [&](bool vec) {
    const std::string kname = std::string(rows ? "kernel_rows" : "kernel_elementwise") + (vec ? "_vec" : "");
    std::string out = rows ? emit_rows(k, d, needs, chunks, vec) : emit_elementwise(k, d, needs, chunks, vec);
    out += "\n\n" + std::string(d.jit_decorator) + "\ndef launch" + (vec ? "_vec" : "") + "(" + tensor_params(k, d) + scalar_params(k, d) + d.launch_params + "):\n";
    const std::string call = kname + "(" + tensor_args(k) + scalar_args(k) + ")";
    const std::string per_row = vec ? "(N // " + std::to_string(chunks.width) + ")" : "N";
    const std::string grid = rows ? "rows" : "(rows * " + per_row + " + " + std::to_string(kThreads - 1) + ") // " + std::to_string(kThreads);
    out += "    " + replace_all(replace_all(replace_all(d.launch_call, "{CALL}", call), "{GRID}", grid), "{BLOCK}", std::to_string(kThreads)) + "\n\n\n";
    return out;
  };
  src += launcher(false);
  if (chunks.width > 1) src += launcher(true);
  src += recipe(k, returns, target, rows);
  // The vector path's preconditions, checked per call by _vector_ok.
  src += "VEC_W = " + std::to_string(chunks.width) + "  # elements a chunk on the vector path (1: no vector path)\n";
  src += "VEC_ACCESSES = [  # (buffer, base slot, outer slots): each must start chunks on a multiple of VEC_W\n";
  std::set<std::string> seen;
  const auto access = [&](const Access& a) {
    std::string outer;
    for (std::size_t i = 0; i < a.outer.size(); ++i) outer += (i ? ", " : "") + std::to_string(a.outer[i]);
    const std::string row = "    (" + std::to_string(a.buffer) + ", " + std::to_string(a.base) + ", [" + outer + "]),\n";
    if (seen.insert(row).second) src += row;
  };
  for (int node : chunks.chunk_node) access(k.nodes[node].access);
  for (int si : chunks.vec_stores) access(k.stores[si].access);
  src += "]\n";
  src += "DSL = " + py_string(d.name) + "\n";
  src += d.host;
  src += kModelHost;
  return src;
}

}  // namespace kwiki::gen
