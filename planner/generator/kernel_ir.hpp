// The generator's kernel IR: a loop over rows and one inner axis, pointwise ops, row reductions,
// strided loads and stores; the tables of its ops and element types; its one JSON encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kwiki::gen {

// ---- element types ----------------------------------------------------------------------------

/// The element types the IR computes and stores. Floating types below 32 bits are computed in
/// fp32 and rounded to their grid after every op whose result torch rounds (the "rounding
/// contract"); fp64 in double; integers in 64-bit; bool as bool.
enum class DType : std::uint8_t { kF32, kBF16, kF16, kF64, kE4M3FN, kE4M3FNUZ, kI8, kU8, kI16, kI32, kI64, kBool, kCount };

/// One element type: kwiki's trace name, its storage bytes, and how code holds and stores it.
struct DTypeRow {
  DType type;
  const char* trace_name;  ///< as graph.json spells it (bf16, fp8_e4m3fn, int32, ...)
  int bytes;
  const char* compute;     ///< the C type a value of it is computed in (float, double, long long, bool)
  int twin_code;           ///< kwiki_twin.h / kwiki_families.DTYPE_CODES code of the storage type (-1: none)
};
extern const DTypeRow kDTypes[];
static_assert(static_cast<int>(DType::kCount) == 12, "a new dtype is a row of kDTypes");

const DTypeRow& dtype_row(DType t);
std::optional<DType> dtype_from_trace(std::string_view name);
bool is_float(DType t);
/// Floating types stored narrower than fp32: a value of them is rounded to their grid.
bool is_narrow_float(DType t);

// ---- pointwise ops: one row each, its torch name and its three spellings -----------------------

/// How a pointwise op's result type follows from its operands.
enum class ResultType : std::uint8_t { kFloat, kSame, kBool };

/// One pointwise op. Spellings use $0, $1, $2 for the operands (already in the compute type).
/// Adding an op is one row here (and nothing else: the lowering maps torch names through this table).
/// The Python spelling serves both DSL backends (CuteDSL, FlyDSL): its kw_* helpers are defined by
/// each kernel.py's prelude (codegen_cutedsl.cpp, codegen_flydsl.cpp).
struct PointwiseOp {
  const char* name;       ///< the IR's name
  const char* torch;      ///< space-separated aten overload names it implements (aten.exp.default ...)
  int arity;
  ResultType result;
  const char* cpu;        ///< C++ for the CPU twin (float math through <cmath>)
  const char* cuda;       ///< CUDA C++
  const char* hip;        ///< HIP C++
  const char* dsl;        ///< Python for the DSL backends (operands are DSL scalars of the compute type)
  /// A division or a transcendental (a multi-function-unit instruction or a library call an element):
  /// a value it computes is worth registers to keep for a later pass; a cheap one is computed again.
  bool costly = false;
};
extern const PointwiseOp kPointwiseOps[];
extern const std::size_t kPointwiseOpCount;
const PointwiseOp* find_pointwise(std::string_view name);
/// The op implementing an aten overload ("aten.silu.default"), or nullptr.
const PointwiseOp* pointwise_for_torch(std::string_view aten);

// ---- reductions --------------------------------------------------------------------------------

/// Reductions along the inner axis (mean is sum scaled by 1/N; logsumexp is max then sum of exp).
enum class ReduceKind : std::uint8_t { kSum, kMax, kMin, kArgMax, kArgMin, kCount };
struct ReduceRow {
  ReduceKind kind;
  const char* name;
  const char* identity;  ///< the accumulator's start (in the compute type)
};
extern const ReduceRow kReductions[];
const ReduceRow& reduce_row(ReduceKind k);

// ---- sizes -------------------------------------------------------------------------------------

/// A size the kernel needs at run time, as the launcher computes it from the call's arguments:
/// const, or (product of dims [first, last) of one input tensor) * num / den, or an integer argument.
struct SizeExpr {
  enum class Kind : std::uint8_t { kConst, kDims, kScalar } kind = Kind::kConst;
  long long value = 0;     ///< kConst
  std::string tensor;      ///< kDims: the input's name (an input, or "param:NAME")
  int first = 0, last = 0; ///< kDims: dims [first, last) of it (negative: from the end)
  /// kDims: times a run of a second tensor's dims when not empty (an output's stride S * H, with
  /// S from the token ids and H from the embedding table).
  std::string tensor2;
  int first2 = 0, last2 = 0;
  long long num = 1, den = 1;
  std::string scalar;      ///< kScalar: ["input"|"init", name] joined as "input:NAME" / "init:NAME"
  std::string describe() const;
};

/// A float the kernel needs at run time: a literal, or an argument's value (eps from init_kwargs).
struct FloatParam {
  double literal = 0;
  std::string source;  ///< "" for a literal, else "input:NAME" or "init:NAME"
  std::string fn;      ///< or derived from a size: "sqrt", "rsqrt", "recip" or "id" of `size` ("" when not)
  SizeExpr size;
};

// ---- the kernel --------------------------------------------------------------------------------

/// Where a value varies: not at all (scalar), per row, or per element of the domain.
enum class Level : std::uint8_t { kScalar, kRow, kElem };

/// A strided access to a buffer over the domain: element (o_0..o_{m-1}, c) is at
/// base + sum_k outer[k] * o_k + inner * c (slot indices into Kernel::sizes).
struct Access {
  int buffer = -1;
  int base = -1;            ///< slot of the element offset
  std::vector<int> outer;   ///< slot per outer axis (coefficient)
  int inner = -1;           ///< slot of the inner axis coefficient
  /// A gather (index_select, embedding, gather): slot of the stride that multiplies the load's
  /// one operand, an integer index value; -1 for a plain affine access.
  int index = -1;
};

/// IR operations.
enum class OpKind : std::uint8_t {
  kLoad,      ///< access -> value
  kConst,     ///< fparam (a literal or an argument)
  kIota,      ///< the domain coordinate of axis `axis` (-1: inner), as a value (arange)
  kSize,      ///< the value of size slot `slot` (the 1/N of a mean, a length)
  kPointwise, ///< pointwise op `pw` on args
  kCast,      ///< args[0] converted to dtype (rounded to its grid; float -> int truncates)
  kReduce,    ///< reduce kind over the inner axis of args[0] -> row value (argmax/argmin: the index)
  kSelect,    ///< concat: args[1 + i] where the coordinate args[0] lies in [bounds[i], bounds[i+1]) (bounds are slots)
};

/// One SSA value of the kernel, computed at a domain point.
struct Node {
  OpKind op = OpKind::kConst;
  DType dtype = DType::kF32;  ///< torch's result type (what it is rounded to)
  Level level = Level::kElem;
  std::vector<int> args;      ///< earlier nodes
  Access access;              ///< kLoad
  const PointwiseOp* pw = nullptr;
  ReduceKind reduce = ReduceKind::kSum;
  int fparam = -1;            ///< kConst: index into Kernel::floats
  int axis = -1;              ///< kIota: outer axis index, -1 for the inner axis
  int slot = -1;              ///< kSize: the size slot
  std::vector<int> bounds;    ///< kSelect: slots of the part boundaries (parts+1 of them), compared with the coordinate
  std::string source;         ///< the reference op it implements (aten overload and result name)
};

/// A kernel argument: an input tensor, a parameter, or an output the kernel writes.
struct Buffer {
  std::string name;        ///< the reference's name: input name, "param:NAME", or output name
  std::string role;        ///< input | param | output | updated (an input written in place)
  DType dtype = DType::kF32;
  std::vector<int> shape;  ///< slots of its sizes (outputs: what the launcher allocates)
};

/// A store of a node's value into an output buffer at an access.
struct Store {
  int node = -1;
  Access access;
};

/// What forward returns, by name: the buffer holding it (an output, or an input written in place).
struct Result {
  std::string name;
  int buffer = -1;
};

/// The whole kernel: domain = outer axes (row-major, flattened to rows) x inner axis.
struct Kernel {
  std::vector<int> outer;            ///< slots of the outer axis sizes
  int inner = -1;                    ///< slot of the inner axis size (the reduced one when any)
  std::vector<long long> sizes;      ///< slot values at the traced sizes (one sample)
  std::vector<SizeExpr> size_exprs;  ///< slot expressions (after fitting; empty before)
  std::vector<FloatParam> floats;
  std::vector<Buffer> buffers;
  std::vector<Node> nodes;
  std::vector<Store> stores;
  std::vector<Result> results;       ///< in forward's order
  bool has_reduction() const;
  /// Sets every node's level from its accesses and operands (by the fitted size expressions when
  /// there are, else by this sample's values).
  void assign_levels();

  /// The structure without the slot values: two samples of one task lower to equal signatures.
  std::string signature() const;
  nlohmann::ordered_json to_json() const;
  static Kernel from_json(const nlohmann::json& j);  ///< throws std::runtime_error on a malformed IR
};

}  // namespace kwiki::gen
