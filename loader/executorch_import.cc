#include "ferry/loader/executorch_import.h"

#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/memory/status_macros.h"

namespace ferry {
namespace {

constexpr size_t kConstantAlignment = 64;

// A constant's bytes, to be copied into the import's aligned storage once every method is done.
struct PendingConstant {
  size_t method = 0;
  ValueId value = 0;
  absl::Span<const uint8_t> source;  // in the file; empty when `folded` holds the bytes
  std::vector<uint8_t> folded;       // computed here (a cast)
};

bool IsIdentity(absl::Span<const uint8_t> dim_order) {
  for (size_t i = 0; i < dim_order.size(); ++i) {
    if (dim_order[i] != i) return false;
  }
  return true;
}

// Maps one ExecuTorch method. Each Import* function handles one kernel call: `args` are the
// call's schema arguments (without `out` and the returned value), `out` the ExecuTorch value the
// call writes.
class MethodImporter {
 public:
  MethodImporter(const EtMethod& et, size_t method_index, const EtDataFile* data,
                 std::vector<PendingConstant>* constants)
      : et_(et), method_index_(method_index), data_(data), constants_(*constants) {}

  absl::StatusOr<MethodDef> Run() {
    def_.name = et_.name;
    latest_.assign(et_.values.size(), -1);
    FERRY_RETURN_IF_ERROR(AddInputs());
    for (size_t i = 0; i < et_.instructions.size(); ++i) {
      instruction_ = static_cast<int>(i);
      FERRY_RETURN_IF_ERROR(ImportInstruction(et_.instructions[i]));
    }
    instruction_ = -1;
    FERRY_RETURN_IF_ERROR(SetOutputs());
    return std::move(def_);
  }

 private:
  using ImportFn = absl::Status (MethodImporter::*)(absl::Span<const int32_t> args, int32_t out);
  struct OpMapping {
    const char* et_name;
    int num_args;  // the .out overload's schema arguments, without `out`
    ImportFn import;
  };
  static absl::Span<const OpMapping> Ops() {
    // ExecuTorch op (the .out overload) -> how it maps onto Ferry ops.
    static const OpMapping kOps[] = {
        {"aten::add.out", 3, &MethodImporter::ImportBinary<kAdd, true>},
        {"aten::sub.out", 3, &MethodImporter::ImportBinary<kSub, true>},
        {"aten::mul.out", 2, &MethodImporter::ImportBinary<kMul, false>},
        {"aten::div.out", 2, &MethodImporter::ImportBinary<kDiv, false>},
        {"aten::relu.out", 1, &MethodImporter::ImportUnary<kRelu>},
        {"aten::mm.out", 2, &MethodImporter::ImportBinary<kMatmul, false>},
        {"aten::addmm.out", 5, &MethodImporter::ImportAddmm},
        {"aten::linear.out", 3, &MethodImporter::ImportLinear},
        {"aten::permute_copy.out", 2, &MethodImporter::ImportPermuteCopy},
        {"aten::view_copy.out", 2, &MethodImporter::ImportViewCopy},
        {"aten::clone.out", 2, &MethodImporter::ImportUnary<kClone>},
        {"dim_order_ops::_to_dim_order_copy.out", 3, &MethodImporter::ImportDimOrderCopy},
        {"dim_order_ops::_clone_dim_order.out", 3, &MethodImporter::ImportDimOrderCopy},
    };
    return kOps;
  }

  // "method "forward", instruction 3 (aten::add.out)"
  std::string Where() const {
    std::string where = absl::StrCat("method \"", et_.name, "\"");
    if (instruction_ >= 0) {
      absl::StrAppend(&where, ", instruction ", instruction_);
      if (!op_name_.empty()) absl::StrAppend(&where, " (", op_name_, ")");
    }
    return where;
  }
  absl::Status Unimplemented(absl::string_view what) const {
    return absl::UnimplementedError(absl::StrCat(Where(), ": ", what));
  }
  absl::Status Invalid(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(), ": ", what));
  }

  absl::Status AddInputs() {
    for (size_t i = 0; i < et_.inputs.size(); ++i) {
      const int32_t v = et_.inputs[i];
      if (et_.values[v].kind != EtValueKind::kTensor) {
        return Unimplemented(absl::StrCat("input ", i, " is value ", v, ", a ",
                                          EtValueKindName(et_.values[v].kind),
                                          "; only tensor inputs are supported"));
      }
      FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(v));
      ValueDef value;
      value.name = absl::StrCat("input ", i);
      value.kind = ValueKind::kInput;
      value.meta = std::move(meta);
      latest_[v] = Add(std::move(value));
      def_.inputs.push_back(latest_[v]);
    }
    return absl::OkStatus();
  }

  absl::Status SetOutputs() {
    for (size_t i = 0; i < et_.outputs.size(); ++i) {
      const int32_t v = et_.outputs[i];
      if (et_.values[v].kind != EtValueKind::kTensor) {
        return Unimplemented(absl::StrCat("output ", i, " is value ", v, ", a ",
                                          EtValueKindName(et_.values[v].kind),
                                          "; only tensor outputs are supported"));
      }
      FERRY_ASSIGN_OR_RETURN(ValueId id, ReadTensor(v));
      def_.outputs.push_back(id);
    }
    return absl::OkStatus();
  }

  absl::Status ImportInstruction(const EtInstruction& instruction) {
    op_name_.clear();
    switch (instruction.kind) {
      case EtInstructionKind::kKernelCall:
        break;
      case EtInstructionKind::kFree:
        return absl::OkStatus();  // memory bookkeeping; Ferry plans its own
      case EtInstructionKind::kDelegateCall: {
        const EtDelegate& d = et_.delegates[instruction.delegate_index];
        return Unimplemented(absl::StrCat("a delegate call to backend \"", d.backend_id,
                                          "\"; ExecuTorch delegates are not supported yet"));
      }
      default:
        return Unimplemented(absl::StrCat("a ", EtInstructionKindName(instruction.kind),
                                          " instruction; only kernel calls are supported"));
    }
    op_name_ = et_.operators[instruction.op_index].FullName();
    const OpMapping* mapping = nullptr;
    for (const OpMapping& m : Ops()) {
      if (op_name_ == m.et_name) mapping = &m;
    }
    if (mapping == nullptr) {
      return Unimplemented(absl::StrCat("op \"", op_name_, "\" is not supported"));
    }
    // The schema's arguments, then `out`, then the returned value (the same as `out`).
    const std::vector<int32_t>& args = instruction.args;
    if (static_cast<int>(args.size()) != mapping->num_args + 2) {
      return Invalid(absl::StrCat("the call passes ", args.size(), " arguments, but ", op_name_,
                                  " takes ", mapping->num_args,
                                  ", then `out` and the returned value"));
    }
    const int32_t out = args[mapping->num_args];
    if (args.back() != out) {
      return Invalid(
          absl::StrCat("the returned value is value ", args.back(), ", but `out` is value ", out));
    }
    if (et_.values[out].kind != EtValueKind::kTensor) {
      return Invalid(absl::StrCat("`out` is value ", out, ", a ",
                                  EtValueKindName(et_.values[out].kind), ", not a tensor"));
    }
    return (this->*mapping->import)(absl::MakeConstSpan(args).first(mapping->num_args), out);
  }

  // --- Values -----------------------------------------------------------------------------

  ValueId Add(ValueDef value) {
    def_.values.push_back(std::move(value));
    return static_cast<ValueId>(def_.values.size() - 1);
  }

  absl::StatusOr<TensorMeta> MetaOf(int32_t v) const {
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kTensor) {
      return Invalid(absl::StrCat("value ", v, " is a ", EtValueKindName(value.kind),
                                  ", where a tensor is expected"));
    }
    const EtTensor& t = value.tensor;
    if (!t.dtype.has_value()) {
      return Unimplemented(absl::StrCat("value ", v, " is ", EtScalarTypeName(t.scalar_type),
                                        ", a dtype Ferry does not support"));
    }
    if (t.dynamism != EtShapeDynamism::kStatic) {
      return Unimplemented(
          absl::StrCat("value ", v, " has a dynamic shape; only static shapes are supported"));
    }
    if (t.sizes.size() > static_cast<size_t>(kMaxRank)) {
      return Unimplemented(absl::StrCat("value ", v, " has rank ", t.sizes.size(),
                                        "; Ferry supports up to ", kMaxRank));
    }
    TensorMeta meta;
    meta.dtype = *t.dtype;
    meta.sizes.assign(t.sizes.begin(), t.sizes.end());
    if (!IsIdentity(t.dim_order)) meta.dim_order.assign(t.dim_order.begin(), t.dim_order.end());
    return meta;
  }

  // The Ferry value an instruction reads for ExecuTorch value `v`: its latest producer, an input,
  // or (on first use) a constant.
  absl::StatusOr<ValueId> ReadTensor(int32_t v) {
    if (latest_[v] >= 0) return latest_[v];
    FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(v));
    const EtTensor& t = et_.values[v].tensor;
    switch (t.data.kind) {
      case EtDataKind::kConstantBuffer:
      case EtDataKind::kConstantSegment:
        break;
      case EtDataKind::kExternal:
        break;
      case EtDataKind::kMutableSegment:
        return Unimplemented(absl::StrCat(
            "value ", v, " is mutable state with initial data; this is not supported yet"));
      case EtDataKind::kNone:
        return Invalid(absl::StrCat("value ", v,
                                    " is read before any instruction writes it, and it is "
                                    "neither an input nor a constant"));
    }
    ValueDef value;
    value.name =
        t.fully_qualified_name.empty() ? absl::StrCat("value ", v) : t.fully_qualified_name;
    value.kind = ValueKind::kConstant;
    value.meta = std::move(meta);
    absl::Span<const uint8_t> bytes = t.data.bytes;
    if (t.data.kind == EtDataKind::kExternal) {
      FERRY_ASSIGN_OR_RETURN(bytes, ExternalData(v));
    }
    latest_[v] = Add(std::move(value));
    constants_.push_back({method_index_, latest_[v], bytes, {}});
    return latest_[v];
  }

  // The bytes of external tensor `v`, from the data file's entry of the same name.
  absl::StatusOr<absl::Span<const uint8_t>> ExternalData(int32_t v) const {
    const EtTensor& t = et_.values[v].tensor;
    const std::string what = absl::StrCat("value ", v, " (\"", t.fully_qualified_name, "\")");
    if (data_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          Where(), ": ", what,
          " has its data in an external data file (.ptd), and none was given: load the program "
          "with its data file (ProgramLoadOptions::data_path, or --data FILE)"));
    }
    const EtDataEntry* entry = data_->Find(t.fully_qualified_name);
    if (entry == nullptr) {
      return absl::NotFoundError(absl::StrCat(Where(), ": ", what,
                                              " has its data in an external data file, but the "
                                              "data file has no entry named \"",
                                              t.fully_qualified_name, "\""));
    }
    if (entry->tensor.has_value()) {
      const EtDataTensorLayout& layout = *entry->tensor;
      if (layout.scalar_type != t.scalar_type || layout.sizes != t.sizes) {
        return Invalid(absl::StrCat(what, " is ", EtScalarTypeName(t.scalar_type), " [",
                                    absl::StrJoin(t.sizes, ", "), "], but the data file's entry is ",
                                    EtScalarTypeName(layout.scalar_type), " [",
                                    absl::StrJoin(layout.sizes, ", "), "]"));
      }
      if (!layout.dim_order.empty() && !t.dim_order.empty() && layout.dim_order != t.dim_order) {
        return Invalid(absl::StrCat(what, " has dim order [", absl::StrJoin(t.dim_order, ", "),
                                    "], but the data file's entry has [",
                                    absl::StrJoin(layout.dim_order, ", "), "]"));
      }
    }
    if (entry->bytes.size() != t.byte_size) {
      return Invalid(absl::StrCat(what, " is ", t.byte_size, " bytes, but the data file's entry is ",
                                  entry->bytes.size()));
    }
    return entry->bytes;
  }

  // A new intermediate with `meta`; `role` tells apart the helper values of one call.
  ValueId NewIntermediate(int32_t v, TensorMeta meta, absl::string_view role = "") {
    ValueDef value;
    value.name = absl::StrCat("value ", v);
    if (latest_[v] >= 0 || !role.empty()) {
      absl::StrAppend(&value.name, " (instruction ", instruction_, role.empty() ? "" : ", ", role,
                      ")");
    }
    value.kind = ValueKind::kIntermediate;
    value.meta = std::move(meta);
    return Add(std::move(value));
  }

  // The value that the call's result is written to: a new one per write of `out`.
  absl::StatusOr<ValueId> Produce(int32_t out) {
    FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(out));
    if (!meta.dim_order.empty()) {
      return Unimplemented(absl::StrCat("`out` (value ", out,
                                        ") is not row-major; only row-major results are "
                                        "supported"));
    }
    const ValueId id = NewIntermediate(out, std::move(meta));
    latest_[out] = id;
    return id;
  }

  ValueId AddScalar(Scalar s, absl::string_view name) {
    ValueDef value;
    value.name = std::string(name);
    value.kind = ValueKind::kScalar;
    value.scalar = std::move(s);
    return Add(std::move(value));
  }

  absl::StatusOr<std::vector<int64_t>> IntList(int32_t v, absl::string_view what) const {
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kIntList) {
      return Invalid(absl::StrCat(what, " is value ", v, ", a ", EtValueKindName(value.kind),
                                  ", not an int list"));
    }
    std::vector<int64_t> list;
    for (int32_t item : value.items) {
      if (item < 0 || et_.values[item].kind != EtValueKind::kInt) {
        return Invalid(
            absl::StrCat(what, " (value ", v, ") has item ", item, ", which is not an int"));
      }
      list.push_back(et_.values[item].int_value);
    }
    return list;
  }

  // Checks that a scalar argument (alpha, beta) is 1 or absent.
  absl::Status RequireOne(int32_t v, absl::string_view what) const {
    const EtValue& value = et_.values[v];
    switch (value.kind) {
      case EtValueKind::kNull:
        return absl::OkStatus();
      case EtValueKind::kInt:
        if (value.int_value == 1) return absl::OkStatus();
        return Unimplemented(
            absl::StrCat(what, " is ", value.int_value, "; only ", what, " = 1 is supported"));
      case EtValueKind::kDouble:
        if (value.double_value == 1.0) return absl::OkStatus();
        return Unimplemented(
            absl::StrCat(what, " is ", value.double_value, "; only ", what, " = 1 is supported"));
      case EtValueKind::kBool:
        if (value.bool_value) return absl::OkStatus();
        return Unimplemented(absl::StrCat(what, " is false; only ", what, " = 1 is supported"));
      default:
        return Invalid(absl::StrCat(what, " is value ", v, ", a ", EtValueKindName(value.kind),
                                    ", not a number"));
    }
  }

  void AddNode(absl::string_view op, ValueIds args, ValueId result) {
    NodeDef node;
    node.name = absl::StrCat(op_name_, " (instruction ", instruction_, ")");
    node.kind = NodeKind::kHostOp;
    node.op = std::string(op);
    node.args = std::move(args);
    node.results = {result};
    def_.nodes.push_back(std::move(node));
  }

  // --- Ops ----------------------------------------------------------------------------------

  // add/sub (self, other, alpha), mul/div (self, other).
  template <const char* kOp, bool kAlpha>
  absl::Status ImportBinary(absl::Span<const int32_t> args, int32_t out) {
    if constexpr (kAlpha) FERRY_RETURN_IF_ERROR(RequireOne(args[2], "alpha"));
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId b, ReadTensor(args[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode(kOp, {a, b}, r);
    return absl::OkStatus();
  }

  // relu, clone (self[, memory_format]).
  template <const char* kOp>
  absl::Status ImportUnary(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode(kOp, {a}, r);
    return absl::OkStatus();
  }

  // addmm(self, mat1, mat2, beta, alpha) = self + mat1 @ mat2: matmul, then add.
  absl::Status ImportAddmm(absl::Span<const int32_t> args, int32_t out) {
    FERRY_RETURN_IF_ERROR(RequireOne(args[3], "beta"));
    FERRY_RETURN_IF_ERROR(RequireOne(args[4], "alpha"));
    FERRY_ASSIGN_OR_RETURN(ValueId bias, ReadTensor(args[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId m1, ReadTensor(args[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId m2, ReadTensor(args[2]));
    FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(out));
    const ValueId product = NewIntermediate(out, meta, "mat1 @ mat2");
    AddNode("matmul", {m1, m2}, product);
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("add", {product, bias}, r);
    return absl::OkStatus();
  }

  // linear(input, weight, bias or None).
  absl::Status ImportLinear(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(ValueId x, ReadTensor(args[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId w, ReadTensor(args[1]));
    ValueIds node_args = {x, w};
    if (et_.values[args[2]].kind != EtValueKind::kNull) {
      FERRY_ASSIGN_OR_RETURN(ValueId b, ReadTensor(args[2]));
      node_args.push_back(b);
    }
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("linear", std::move(node_args), r);
    return absl::OkStatus();
  }

  // permute_copy(self, dims): Ferry's permute is a view, so a clone makes the copy.
  absl::Status ImportPermuteCopy(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntList(args[1], "dims"));
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(out));
    const ValueId d = AddScalar(Scalar::IntList(std::move(dims)), absl::StrCat("value ", args[1]));
    const ValueId view = NewIntermediate(out, meta, "permuted view");
    AddNode("permute", {a, d}, view);
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("clone", {view}, r);
    return absl::OkStatus();
  }

  // view_copy(self, size): Ferry's reshape copies.
  absl::Status ImportViewCopy(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> size, IntList(args[1], "size"));
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    const ValueId s = AddScalar(Scalar::IntList(std::move(size)), absl::StrCat("value ", args[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("reshape", {a, s}, r);
    return absl::OkStatus();
  }

  // _to_dim_order_copy(self, non_blocking, dim_order) and _clone_dim_order (the same without a
  // dtype change): a copy, a cast, or a layout change.
  absl::Status ImportDimOrderCopy(absl::Span<const int32_t> args, int32_t out) {
    const EtValue& dim_order = et_.values[args[2]];
    if (dim_order.kind != EtValueKind::kNull) {
      FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> order, IntList(args[2], "dim_order"));
      for (size_t i = 0; i < order.size(); ++i) {
        if (order[i] != static_cast<int64_t>(i)) {
          return Unimplemented(absl::StrCat("dim_order (", absl::StrJoin(order, ", "),
                                            ") is a layout change; only row-major is supported"));
        }
      }
    }
    FERRY_ASSIGN_OR_RETURN(TensorMeta from, MetaOf(args[0]));
    FERRY_ASSIGN_OR_RETURN(TensorMeta to, MetaOf(out));
    if (from.dtype == to.dtype) return ImportUnary<kClone>(args, out);
    const EtTensor& source = et_.values[args[0]].tensor;
    const bool constant =
        latest_[args[0]] < 0 && (source.data.kind == EtDataKind::kConstantBuffer ||
                                 source.data.kind == EtDataKind::kConstantSegment);
    if (!constant || !from.dim_order.empty() || from.sizes != to.sizes) {
      return Unimplemented(absl::StrCat("a cast from ", DTypeName(from.dtype), " to ",
                                        DTypeName(to.dtype),
                                        " of a tensor that is not a constant is not supported"));
    }
    // A constant: cast once, here, into a new constant.
    ValueDef value;
    value.name = absl::StrCat("value ", out, " (value ", args[0], " as ", DTypeName(to.dtype), ")");
    value.kind = ValueKind::kConstant;
    value.meta = std::move(to);
    const size_t n = source.numel;
    std::vector<uint8_t> bytes(n * DTypeSize(value.meta.dtype));
    for (size_t i = 0; i < n; ++i) {
      if (from.dtype == DType::kInt64) {
        int64_t x;
        std::memcpy(&x, source.data.bytes.data() + i * sizeof(x), sizeof(x));
        const float y = static_cast<float>(x);
        std::memcpy(bytes.data() + i * sizeof(y), &y, sizeof(y));
      } else {
        float x;
        std::memcpy(&x, source.data.bytes.data() + i * sizeof(x), sizeof(x));
        // PyTorch truncates toward zero; out-of-range values are undefined there, clamped here.
        int64_t y = 0;
        if (x >= 9.2233715e18f) {
          y = std::numeric_limits<int64_t>::max();
        } else if (x <= -9.2233715e18f) {
          y = std::numeric_limits<int64_t>::min();
        } else if (x == x) {
          y = static_cast<int64_t>(x);
        }
        std::memcpy(bytes.data() + i * sizeof(y), &y, sizeof(y));
      }
    }
    const ValueId id = Add(std::move(value));
    latest_[out] = id;
    constants_.push_back({method_index_, id, {}, std::move(bytes)});
    return absl::OkStatus();
  }

  static constexpr char kAdd[] = "add";
  static constexpr char kSub[] = "sub";
  static constexpr char kMul[] = "mul";
  static constexpr char kDiv[] = "div";
  static constexpr char kRelu[] = "relu";
  static constexpr char kMatmul[] = "matmul";
  static constexpr char kClone[] = "clone";

  const EtMethod& et_;
  const size_t method_index_;
  const EtDataFile* const data_;  // may be null
  std::vector<PendingConstant>& constants_;
  MethodDef def_;
  std::vector<ValueId> latest_;  // per ExecuTorch value: its Ferry value now, or -1
  int instruction_ = -1;
  std::string op_name_;
};

// Copies every pending constant to a multiple of 64 bytes in one aligned allocation.
absl::Status PlaceConstants(std::vector<PendingConstant>& pending, EtImport& import) {
  size_t total = 0;
  std::vector<size_t> offsets;
  for (const PendingConstant& c : pending) {
    const size_t size = c.folded.empty() ? c.source.size() : c.folded.size();
    offsets.push_back(total);
    total += (size + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment;
  }
  if (total == 0) return absl::OkStatus();
  import.constant_data.reset(static_cast<uint8_t*>(std::aligned_alloc(kConstantAlignment, total)));
  if (import.constant_data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", total, " bytes for the program's constants"));
  }
  import.constant_bytes = total;
  uint8_t* base = import.constant_data.get();
  for (size_t i = 0; i < pending.size(); ++i) {
    const PendingConstant& c = pending[i];
    const absl::Span<const uint8_t> bytes =
        c.folded.empty() ? c.source : absl::MakeConstSpan(c.folded);
    if (!bytes.empty()) std::memcpy(base + offsets[i], bytes.data(), bytes.size());
    import.methods[c.method].values[c.value].data =
        absl::MakeConstSpan(base + offsets[i], bytes.size());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EtImport> ImportExecuTorchProgram(const EtProgram& program,
                                                 const EtImportOptions& options) {
  EtImport import;
  std::vector<PendingConstant> constants;
  for (size_t i = 0; i < program.methods.size(); ++i) {
    MethodImporter importer(program.methods[i], i, options.data, &constants);
    FERRY_ASSIGN_OR_RETURN(MethodDef method, importer.Run());
    import.methods.push_back(std::move(method));
  }
  FERRY_RETURN_IF_ERROR(PlaceConstants(constants, import));
  return import;
}

}  // namespace ferry
