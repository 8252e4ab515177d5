#include "ferry/loader/executorch/importer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/internal/untrusted_bytes.h"

namespace ferry {
namespace {

constexpr size_t kConstantAlignment = 64;

// A constant's bytes (or a delegate's payload), to be copied into the import's aligned storage
// once every method is done.
struct PendingConstant {
  size_t method = 0;
  ValueId value = 0;
  absl::Span<const uint8_t> source;  // in the file; empty when `folded` holds the bytes
  std::vector<uint8_t> folded;       // computed here (a cast)
  absl::Span<const uint8_t> folded_from;  // the bytes `folded` was computed from
  int32_t payload_of_node = -1;      // a delegate payload: the node's index, and `value` unused
  int32_t same_as = -1;              // the bytes are those of this earlier entry (not copied)
};

// The import's pending constants, each distinct source once: bytes of the files by their span
// (tensors sharing a constant buffer, calls of one delegate), casts by the span they were computed
// from and their dtype. A later entry with the same source shares the first one's copy.
class PendingConstants {
 public:
  using Key = std::tuple<const uint8_t*, size_t, int>;  // span; the cast's dtype, or -1
  static Key Bytes(absl::Span<const uint8_t> s) { return {s.data(), s.size(), -1}; }
  static Key Cast(absl::Span<const uint8_t> s, DType d) {
    return {s.data(), s.size(), static_cast<int>(d)};
  }

  bool Has(const Key& key) const { return index_.contains(key); }
  // Adds `c`, whose bytes are `key`'s: copied if they are new, else shared (`c`'s bytes unused).
  void Add(const Key& key, PendingConstant c) {
    auto [it, inserted] = index_.try_emplace(key, static_cast<int32_t>(list_.size()));
    if (!inserted) {
      c.same_as = it->second;
      c.source = {};
      c.folded.clear();
    }
    list_.push_back(std::move(c));
  }
  const std::vector<PendingConstant>& list() const { return list_; }

 private:
  std::vector<PendingConstant> list_;
  absl::flat_hash_map<Key, int32_t> index_;
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
                 PendingConstants* constants)
      : et_(et), method_index_(method_index), data_(data), constants_(*constants) {}

  absl::StatusOr<MethodDef> Run() {
    def_.name = et_.name;
    def_.exporter_arenas = EtExporterArenas(et_);
    latest_.assign(et_.values.size(), -1);
    // Each use of an int or tensor list copies it. A file may make one list serve many
    // instructions; a program needs each list a few times, and a shape list has at most a rank's
    // entries per use.
    size_t list_items = 0;
    for (const EtValue& value : et_.values) list_items += value.items.size();
    list_budget_ = 2 * list_items + 16 * et_.instructions.size() + 4096;
    // Each delegate call copies its delegate's backend id (into the node's name and backend) and
    // compile specs: a delegate with large specs called by every instruction would take the
    // specs' size times the instructions.
    size_t delegate_bytes = 0;
    for (const EtDelegate& d : et_.delegates) delegate_bytes += DelegateCallBytes(d);
    delegate_budget_ = 2 * delegate_bytes + 64 * et_.instructions.size() + (size_t{1} << 20);
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
    // An in-place op (copy_, index_put_): the call passes its arguments and the returned value
    // (argument 0, the written tensor), and `out` is argument 0.
    bool in_place = false;
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
        {"aten::expand_copy.out", 3, &MethodImporter::ImportExpandCopy},
        {"aten::cat.out", 2, &MethodImporter::ImportCat},
        {"aten::slice_copy.Tensor_out", 5, &MethodImporter::ImportSliceCopy},
        {"aten::squeeze_copy.dim_out", 2, &MethodImporter::ImportSqueezeCopy},
        {"aten::squeeze_copy.dims_out", 2, &MethodImporter::ImportSqueezeCopy},
        {"aten::unsqueeze_copy.out", 2, &MethodImporter::ImportUnsqueezeCopy},
        {"aten::_softmax.out", 3, &MethodImporter::ImportSoftmax},
        {"aten::mean.out", 4, &MethodImporter::ImportMean},
        {"aten::eq.Scalar_out", 2, &MethodImporter::ImportEqScalar},
        {"aten::where.self_out", 3, &MethodImporter::ImportWhere},
        {"aten::index_put.out", 4, &MethodImporter::ImportIndexPut},
        {"aten::index_put_", 4, &MethodImporter::ImportIndexPut, /*in_place=*/true},
        {"aten::copy.out", 3, &MethodImporter::ImportCopy},
        {"aten::copy_", 3, &MethodImporter::ImportCopy, /*in_place=*/true},
        {"et_copy::_h2d_copy.out", 1, &MethodImporter::ImportExporterCopy<true>},
        {"et_copy::_d2h_copy.out", 1, &MethodImporter::ImportExporterCopy<false>},
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
      Annotate(v, latest_[v]);
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
      case EtInstructionKind::kDelegateCall:
        return ImportDelegateCall(instruction);
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
    // The schema's arguments, then `out`, then the returned value (the same as `out`); an
    // in-place op has no `out` and returns its argument 0.
    const std::vector<int32_t>& args = instruction.args;
    const int extra = mapping->in_place ? 1 : 2;
    if (static_cast<int>(args.size()) != mapping->num_args + extra) {
      return Invalid(absl::StrCat("the call passes ", args.size(), " arguments, but ", op_name_,
                                  " takes ", mapping->num_args,
                                  mapping->in_place ? ", then the returned value"
                                                    : ", then `out` and the returned value"));
    }
    const int32_t out = mapping->in_place ? args[0] : args[mapping->num_args];
    if (args.back() != out) {
      return Invalid(absl::StrCat("the returned value is value ", args.back(), ", but ",
                                  mapping->in_place ? "the written argument 0" : "`out`",
                                  " is value ", out));
    }
    if (et_.values[out].kind != EtValueKind::kTensor) {
      return Invalid(absl::StrCat("`out` is value ", out, ", a ",
                                  EtValueKindName(et_.values[out].kind), ", not a tensor"));
    }
    return (this->*mapping->import)(absl::MakeConstSpan(args).first(mapping->num_args), out);
  }

  // A delegate call becomes one delegate node named by its backend id. ExecuTorch lists the
  // call's arguments and results in one list; the results are the values nothing has written
  // before the call (not an input, a constant or an earlier result), and they must all come after
  // the arguments, be tensors and appear once.
  absl::Status ImportDelegateCall(const EtInstruction& instruction) {
    const EtDelegate& d = et_.delegates[instruction.delegate_index];
    op_name_ = absl::StrCat("delegate call to backend \"", d.backend_id, "\"");
    const size_t copied = DelegateCallBytes(d);
    if (!internal::Spend(&delegate_budget_, copied)) {
      return Invalid(absl::StrCat(
          "delegate ", instruction.delegate_index, " (", copied,
          " bytes of backend id and compile specs, copied into each call's node): the method's "
          "instructions call its delegates more often than a program needs"));
    }
    if (d.backend_id.empty()) return Invalid("the delegate has no backend id");
    const std::vector<int32_t>& list = instruction.args;
    size_t first_result = list.size();
    for (size_t i = 0; i < list.size(); ++i) {
      if (!Written(list[i])) {
        first_result = i;
        break;
      }
    }
    if (first_result == list.size()) {
      return Unimplemented(absl::StrCat(
          "every value it lists (", absl::StrJoin(list, ", "),
          ") is already written before the call (an input, a constant or an earlier result), so "
          "it has no result; a delegate that only writes its arguments in place is not "
          "supported"));
    }
    NodeDef node;
    node.name = absl::StrCat(d.backend_id, " (instruction ", instruction_, ")");
    node.kind = NodeKind::kDelegate;
    node.mutable_delegate().backend = d.backend_id;
    // Duplicates found through hash sets: the lists come from the file, whatever their length.
    absl::flat_hash_set<absl::string_view> keys;
    keys.reserve(d.compile_specs.size());
    for (const auto& spec : d.compile_specs) {
      if (spec.first.empty()) return Invalid("a compile spec has an empty key");
      if (!keys.insert(spec.first).second) {
        return Invalid(absl::StrCat("compile spec \"", absl::CHexEscape(spec.first),
                                    "\" is given more than once"));
      }
      node.mutable_delegate().compile_specs.push_back(spec);
    }
    for (size_t i = 0; i < first_result; ++i) {
      FERRY_ASSIGN_OR_RETURN(ValueId a, DelegateArgument(list[i], i));
      node.args.push_back(a);
    }
    std::vector<int32_t> results(list.begin() + first_result, list.end());
    absl::flat_hash_set<int32_t> listed;
    listed.reserve(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const int32_t v = results[i];
      const size_t position = first_result + i;
      if (et_.values[v].kind != EtValueKind::kTensor) {
        return Unimplemented(absl::StrCat(
            "value ", v, " (position ", position, " of ", list.size(),
            ") comes after value ", list[first_result], ", the first value the call writes, so it "
            "would be a result, but it is a ", EtValueKindName(et_.values[v].kind),
            "; only tensor results are supported"));
      }
      if (Written(v)) {
        return Unimplemented(absl::StrCat(
            "value ", v, " (position ", position, " of ", list.size(),
            ") is already written before the call, but it comes after value ", list[first_result],
            ", the first value the call writes: it could be an argument or a result written in "
            "place, so the call's results are ambiguous"));
      }
      if (!listed.insert(v).second) {
        return Invalid(absl::StrCat("value ", v, " is listed twice among the results"));
      }
    }
    for (int32_t v : results) {
      FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(v));
      node.results.push_back(r);
    }
    PendingConstant payload;
    payload.method = method_index_;
    payload.source = d.payload;
    payload.payload_of_node = static_cast<int32_t>(def_.nodes.size());
    constants_.Add(PendingConstants::Bytes(d.payload), std::move(payload));
    def_.nodes.push_back(std::move(node));
    def_.node_instructions.push_back(instruction_);
    return absl::OkStatus();
  }

  // et_copy::_h2d_copy.out(self, *, out) and _d2h_copy.out: the exporter's own copies between the
  // host and a device. Ferry decides its own copies: `out` becomes `self`, and the copy is kept
  // for the audit.
  template <bool kToDevice>
  absl::Status ImportExporterCopy(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(TensorMeta from, MetaOf(args[0]));
    FERRY_ASSIGN_OR_RETURN(TensorMeta to, MetaOf(out));
    if (from.dtype != to.dtype || from.sizes != to.sizes) {
      return Invalid(absl::StrCat("copies value ", args[0], " (", DTypeName(from.dtype), " [",
                                  absl::StrJoin(from.sizes, ", "), "]) into value ", out, " (",
                                  DTypeName(to.dtype), " [", absl::StrJoin(to.sizes, ", "),
                                  "]): a copy keeps the dtype and sizes"));
    }
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    latest_[out] = a;
    def_.exporter_copies.push_back({instruction_, kToDevice, a, out});
    return absl::OkStatus();
  }

  // Records, for Ferry value `id` made from ExecuTorch value `v`, the exporter's device
  // annotation (a device other than the host, of a type Ferry's device type plug-ins name) and
  // the arena the exporter planned it in.
  void Annotate(int32_t v, ValueId id) {
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kTensor) return;
    if (value.tensor.allocation.has_value()) {
      def_.exporter_allocations.push_back({id, value.tensor.allocation->memory_id});
    }
    const std::optional<Device> device =
        EtDevice(value.tensor.device_type, value.tensor.device_index);
    if (!device.has_value() || device->is_host()) return;
    def_.exporter_devices.push_back({id, *device});
  }

  // Whether a value holds something before the current instruction: an input, an earlier
  // result, a constant (data in the program or a data file) or a non-tensor value (all of which
  // ExecuTorch fixes at export).
  bool Written(int32_t v) const {
    if (latest_[v] >= 0) return true;
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kTensor) return true;
    return value.tensor.data.kind != EtDataKind::kNone;
  }

  // Argument `position` of a delegate call: a tensor, or an Int, Double, Bool or IntList passed
  // to the backend as a scalar.
  absl::StatusOr<ValueId> DelegateArgument(int32_t v, size_t position) {
    const EtValue& value = et_.values[v];
    const std::string name = absl::StrCat("value ", v);
    switch (value.kind) {
      case EtValueKind::kTensor:
        return ReadTensor(v);
      case EtValueKind::kInt:
        return AddScalar(Scalar::Int(value.int_value), name);
      case EtValueKind::kDouble:
        return AddScalar(Scalar::Double(value.double_value), name);
      case EtValueKind::kBool:
        return AddScalar(Scalar::Bool(value.bool_value), name);
      case EtValueKind::kIntList: {
        FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> list, IntList(v, name));
        return AddScalar(Scalar::IntList(std::move(list)), name);
      }
      default:
        return Unimplemented(absl::StrCat("argument ", position, " is value ", v, ", a ",
                                          EtValueKindName(value.kind),
                                          "; delegate arguments are tensors, ints, doubles, "
                                          "bools or int lists"));
    }
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
    PendingConstant constant;
    constant.method = method_index_;
    constant.value = latest_[v];
    constant.source = bytes;
    constants_.Add(PendingConstants::Bytes(bytes), std::move(constant));
    Annotate(v, latest_[v]);
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
    Annotate(out, id);
    return id;
  }

  ValueId AddScalar(Scalar s, absl::string_view name) {
    ValueDef value;
    value.name = std::string(name);
    value.kind = ValueKind::kScalar;
    value.scalar = std::move(s);
    return Add(std::move(value));
  }

  // What one call of delegate `d` copies into its node: the backend id twice (name and backend)
  // and the compile specs.
  static size_t DelegateCallBytes(const EtDelegate& d) {
    size_t bytes = 2 * d.backend_id.size();
    for (const auto& [key, value] : d.compile_specs) bytes += key.size() + value.size();
    return bytes;
  }

  // Charges the copy of list value `v` to the method's list budget.
  absl::Status SpendList(int32_t v, absl::string_view what) {
    const size_t n = et_.values[v].items.size();
    if (internal::Spend(&list_budget_, n)) return absl::OkStatus();
    const std::string value = absl::StrCat("value ", v);
    return Invalid(absl::StrCat(what == value ? value : absl::StrCat(what, " (", value, ")"),
                                " has ", n,
                                " items, one copy too many: the method's instructions use its "
                                "lists more often than a program needs (each use copies the "
                                "list)"));
  }

  absl::StatusOr<std::vector<int64_t>> IntList(int32_t v, absl::string_view what) {
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kIntList) {
      return Invalid(absl::StrCat(what, " is value ", v, ", a ", EtValueKindName(value.kind),
                                  ", not an int list"));
    }
    FERRY_RETURN_IF_ERROR(SpendList(v, what));
    std::vector<int64_t> list;
    list.reserve(value.items.size());
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

  // An Int value (`what` names it in errors).
  absl::StatusOr<int64_t> IntValue(int32_t v, absl::string_view what) const {
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kInt) {
      return Invalid(absl::StrCat(what, " is value ", v, ", a ", EtValueKindName(value.kind),
                                  ", not an int"));
    }
    return value.int_value;
  }

  // An optional Int value: `absent` for None.
  absl::StatusOr<int64_t> OptionalIntValue(int32_t v, absl::string_view what,
                                           int64_t absent) const {
    if (et_.values[v].kind == EtValueKind::kNull) return absent;
    return IntValue(v, what);
  }

  absl::StatusOr<bool> BoolValue(int32_t v, absl::string_view what) const {
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kBool) {
      return Invalid(absl::StrCat(what, " is value ", v, ", a ", EtValueKindName(value.kind),
                                  ", not a bool"));
    }
    return value.bool_value;
  }

  // A Scalar argument (Int, Double or Bool) as a Ferry number.
  absl::StatusOr<Scalar> NumberValue(int32_t v, absl::string_view what) const {
    const EtValue& value = et_.values[v];
    switch (value.kind) {
      case EtValueKind::kInt:
        return Scalar::Int(value.int_value);
      case EtValueKind::kDouble:
        return Scalar::Double(value.double_value);
      case EtValueKind::kBool:
        return Scalar::Bool(value.bool_value);
      default:
        return Invalid(absl::StrCat(what, " is value ", v, ", a ", EtValueKindName(value.kind),
                                    ", not a number"));
    }
  }

  // The tensors of a TensorList (or of an OptionalTensorList without None), in order.
  absl::StatusOr<std::vector<int32_t>> TensorListValue(int32_t v, absl::string_view what) {
    const EtValue& value = et_.values[v];
    if (value.kind != EtValueKind::kTensorList && value.kind != EtValueKind::kOptionalTensorList) {
      return Invalid(absl::StrCat(what, " is value ", v, ", a ", EtValueKindName(value.kind),
                                  ", not a tensor list"));
    }
    FERRY_RETURN_IF_ERROR(SpendList(v, what));
    for (int32_t item : value.items) {
      if (item < 0 || et_.values[item].kind != EtValueKind::kTensor) {
        return Unimplemented(absl::StrCat(what, " (value ", v, ") has item ", item,
                                          ", which is not a tensor; None indices are not "
                                          "supported"));
      }
    }
    return value.items;
  }

  void AddNode(absl::string_view op, ValueIds args, ValueId result) {
    NodeDef node;
    node.name = absl::StrCat(op_name_, " (instruction ", instruction_, ")");
    node.kind = NodeKind::kHostOp;
    node.op = std::string(op);
    node.args = std::move(args);
    node.results = {result};
    def_.nodes.push_back(std::move(node));
    def_.node_instructions.push_back(instruction_);
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
    if (!from.dim_order.empty() || from.sizes != to.sizes) {
      return Unimplemented(absl::StrCat("a cast from ", DTypeName(from.dtype), " to ",
                                        DTypeName(to.dtype),
                                        " that also changes the layout or shape is not supported"));
    }
    const bool foldable = (from.dtype == DType::kInt64 && to.dtype == DType::kFloat32) ||
                          (from.dtype == DType::kFloat32 && to.dtype == DType::kInt64);
    if (!constant || !foldable) {
      // A cast at run time.
      FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
      const ValueId code = AddScalar(Scalar::Int(static_cast<int64_t>(to.dtype)),
                                     absl::StrCat("dtype ", DTypeName(to.dtype)));
      FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
      AddNode("to_dtype", {a, code}, r);
      return absl::OkStatus();
    }
    // A constant: cast once, here, into a new constant. A constant cast to one dtype again
    // shares the first cast's bytes.
    ValueDef value;
    value.name = absl::StrCat("value ", out, " (value ", args[0], " as ", DTypeName(to.dtype), ")");
    value.kind = ValueKind::kConstant;
    const DType to_dtype = to.dtype;
    value.meta = std::move(to);
    const PendingConstants::Key key = PendingConstants::Cast(source.data.bytes, to_dtype);
    PendingConstant folded;
    folded.method = method_index_;
    folded.folded_from = source.data.bytes;
    const size_t n = constants_.Has(key) ? 0 : source.numel;  // computed once
    std::vector<uint8_t>& bytes = folded.folded;
    bytes.resize(n * DTypeSize(value.meta.dtype));
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
    folded.value = Add(std::move(value));
    latest_[out] = folded.value;
    constants_.Add(key, std::move(folded));
    return absl::OkStatus();
  }

  // A *_copy op: the view `view_op(self, extra...)`, then a clone into `out`, so that the result
  // is a fresh tensor as ExecuTorch's semantics require.
  absl::Status ViewThenClone(absl::string_view view_op, int32_t self, std::vector<Scalar> extra,
                             int32_t out) {
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(self));
    FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(out));
    ValueIds node_args = {a};
    for (size_t i = 0; i < extra.size(); ++i) {
      node_args.push_back(
          AddScalar(std::move(extra[i]), absl::StrCat("instruction ", instruction_, " ", view_op,
                                                      " argument ", i + 1)));
    }
    const ValueId view = NewIntermediate(out, meta, absl::StrCat(view_op, " view"));
    AddNode(view_op, std::move(node_args), view);
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("clone", {view}, r);
    return absl::OkStatus();
  }

  // expand_copy(self, size, implicit).
  absl::Status ImportExpandCopy(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> size, IntList(args[1], "size"));
    return ViewThenClone("expand", args[0], {Scalar::IntList(std::move(size))}, out);
  }

  // slice_copy.Tensor(self, dim, start or None, end or None, step).
  absl::Status ImportSliceCopy(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(int64_t dim, IntValue(args[1], "dim"));
    FERRY_ASSIGN_OR_RETURN(int64_t start, OptionalIntValue(args[2], "start", 0));
    FERRY_ASSIGN_OR_RETURN(int64_t end, OptionalIntValue(args[3], "end",
                                                         std::numeric_limits<int64_t>::max()));
    FERRY_ASSIGN_OR_RETURN(int64_t step, IntValue(args[4], "step"));
    return ViewThenClone("slice", args[0],
                         {Scalar::Int(dim), Scalar::Int(start), Scalar::Int(end), Scalar::Int(step)},
                         out);
  }

  // unsqueeze_copy(self, dim).
  absl::Status ImportUnsqueezeCopy(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(int64_t dim, IntValue(args[1], "dim"));
    return ViewThenClone("unsqueeze", args[0], {Scalar::Int(dim)}, out);
  }

  // squeeze_copy.dim(self, dim) and squeeze_copy.dims(self, dims): one squeeze view per dim,
  // highest first so that the lower ones keep their numbers, then a clone.
  absl::Status ImportSqueezeCopy(absl::Span<const int32_t> args, int32_t out) {
    std::vector<int64_t> dims;
    if (et_.values[args[1]].kind == EtValueKind::kIntList) {
      FERRY_ASSIGN_OR_RETURN(dims, IntList(args[1], "dims"));
    } else {
      FERRY_ASSIGN_OR_RETURN(int64_t dim, IntValue(args[1], "dim"));
      dims.push_back(dim);
    }
    FERRY_ASSIGN_OR_RETURN(TensorMeta in, MetaOf(args[0]));
    const int64_t rank = in.rank();
    // A rank-0 tensor takes dim 0 or -1 and stays as it is.
    const int64_t bound = std::max<int64_t>(rank, 1);
    for (int64_t& d : dims) {
      if (d < -bound || d >= bound) {
        return Invalid(absl::StrCat("dim ", d, " is out of range for a tensor of rank ", rank));
      }
      if (d < 0) d += bound;
    }
    std::sort(dims.begin(), dims.end(), std::greater<int64_t>());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    if (rank == 0) dims.clear();
    FERRY_ASSIGN_OR_RETURN(ValueId current, ReadTensor(args[0]));
    TensorMeta meta = in;
    for (int64_t d : dims) {
      if (meta.sizes[d] != 1) continue;  // as in PyTorch, a dim whose size is not 1 stays
      meta.sizes.erase(meta.sizes.begin() + d);
      meta.dim_order.clear();
      const ValueId dim_value = AddScalar(
          Scalar::Int(d), absl::StrCat("instruction ", instruction_, " squeeze dim ", d));
      const ValueId view =
          NewIntermediate(out, meta, absl::StrCat("squeeze view of dim ", d));
      AddNode("squeeze", {current, dim_value}, view);
      current = view;
    }
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("clone", {current}, r);
    return absl::OkStatus();
  }

  // cat(tensors, dim).
  absl::Status ImportCat(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int32_t> tensors, TensorListValue(args[0], "tensors"));
    FERRY_ASSIGN_OR_RETURN(int64_t dim, IntValue(args[1], "dim"));
    if (tensors.empty()) return Invalid(absl::StrCat("tensors (value ", args[0], ") is empty"));
    ValueIds node_args = {AddScalar(Scalar::Int(dim), absl::StrCat("value ", args[1]))};
    for (int32_t t : tensors) {
      FERRY_ASSIGN_OR_RETURN(ValueId id, ReadTensor(t));
      node_args.push_back(id);
    }
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("cat", std::move(node_args), r);
    return absl::OkStatus();
  }

  // _softmax(self, dim, half_to_float): half_to_float must be false.
  absl::Status ImportSoftmax(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(int64_t dim, IntValue(args[1], "dim"));
    FERRY_ASSIGN_OR_RETURN(bool half_to_float, BoolValue(args[2], "half_to_float"));
    if (half_to_float) {
      return Unimplemented("half_to_float is true; only half_to_float = false is supported");
    }
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    const ValueId d = AddScalar(Scalar::Int(dim), absl::StrCat("value ", args[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("softmax", {a, d}, r);
    return absl::OkStatus();
  }

  // mean.out(self, dim or None, keepdim, dtype or None): None dims reduce every dim; dtype must
  // be None or float32.
  absl::Status ImportMean(absl::Span<const int32_t> args, int32_t out) {
    std::vector<int64_t> dims;
    if (et_.values[args[1]].kind != EtValueKind::kNull) {
      FERRY_ASSIGN_OR_RETURN(dims, IntList(args[1], "dim"));
    }
    FERRY_ASSIGN_OR_RETURN(bool keepdim, BoolValue(args[2], "keepdim"));
    if (et_.values[args[3]].kind != EtValueKind::kNull) {
      FERRY_ASSIGN_OR_RETURN(int64_t dtype, IntValue(args[3], "dtype"));
      if (dtype != kEtFloat) {
        return Unimplemented(absl::StrCat("dtype is ",
                                          EtScalarTypeName(static_cast<int8_t>(dtype)),
                                          "; only a float32 mean is supported"));
      }
    }
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    const ValueId d = AddScalar(Scalar::IntList(std::move(dims)),
                                absl::StrCat("instruction ", instruction_, " dims"));
    const ValueId k = AddScalar(Scalar::Bool(keepdim), absl::StrCat("value ", args[2]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("mean", {a, d, k}, r);
    return absl::OkStatus();
  }

  // eq.Scalar(self, other).
  absl::Status ImportEqScalar(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(Scalar other, NumberValue(args[1], "other"));
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[0]));
    const ValueId o = AddScalar(std::move(other), absl::StrCat("value ", args[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("eq", {a, o}, r);
    return absl::OkStatus();
  }

  // where.self(condition, self, other).
  absl::Status ImportWhere(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(ValueId c, ReadTensor(args[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(args[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId b, ReadTensor(args[2]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("where", {c, a, b}, r);
    return absl::OkStatus();
  }

  // The tensor that `out` starts from: for an in-place op, argument 0 itself (written in place);
  // otherwise a clone of it, so that argument 0 keeps its contents.
  absl::StatusOr<ValueId> WriteTarget(int32_t self, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(self));
    if (self == out) return a;
    FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(self));
    meta.dim_order.clear();
    const ValueId copy = NewIntermediate(out, std::move(meta), "copy of self");
    AddNode("clone", {a}, copy);
    return copy;
  }

  // index_put(self, indices, values, accumulate) and index_put_: one index tensor, over dim 0;
  // accumulate must be false.
  absl::Status ImportIndexPut(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int32_t> indices, TensorListValue(args[1], "indices"));
    if (indices.size() != 1) {
      return Unimplemented(absl::StrCat("indices (value ", args[1], ") has ", indices.size(),
                                        " tensors; only one index tensor (over dim 0) is "
                                        "supported"));
    }
    FERRY_ASSIGN_OR_RETURN(bool accumulate, BoolValue(args[3], "accumulate"));
    if (accumulate) {
      return Unimplemented("accumulate is true; only accumulate = false is supported");
    }
    FERRY_ASSIGN_OR_RETURN(ValueId target, WriteTarget(args[0], out));
    FERRY_ASSIGN_OR_RETURN(ValueId index, ReadTensor(indices[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId values, ReadTensor(args[2]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("index_put_", {target, index, values}, r);
    return absl::OkStatus();
  }

  // copy(self, src, non_blocking) and copy_: src broadcast into (a copy of) self.
  absl::Status ImportCopy(absl::Span<const int32_t> args, int32_t out) {
    FERRY_ASSIGN_OR_RETURN(ValueId target, WriteTarget(args[0], out));
    FERRY_ASSIGN_OR_RETURN(ValueId src, ReadTensor(args[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
    AddNode("copy_", {target, src}, r);
    return absl::OkStatus();
  }

  static constexpr int64_t kEtFloat = 6;  // ExecuTorch's ScalarType for float32
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
  PendingConstants& constants_;
  MethodDef def_;
  std::vector<ValueId> latest_;  // per ExecuTorch value: its Ferry value now, or -1
  size_t list_budget_ = 0;       // list items the method's instructions may still copy
  size_t delegate_budget_ = 0;   // bytes the method's delegate calls may still copy
  int instruction_ = -1;
  std::string op_name_;
};

// Copies every pending constant that is not shared with an earlier one to a multiple of 64
// bytes in one aligned allocation. Sources that overlap only in part would each be copied: more
// than twice the bytes the file's constants and payloads span, plus 1 MiB, is refused, so a small
// file cannot make the import copy its bytes many times over.
absl::Status PlaceConstants(const PendingConstants& constants, EtImport& import) {
  using Span = absl::Span<const uint8_t>;
  const std::vector<PendingConstant>& pending = constants.list();
  std::vector<size_t> offsets(pending.size(), 0);
  std::vector<size_t> placed_as(pending.size());       // the entry whose copy each one uses
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;  // what the files' sources span
  size_t total = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    const PendingConstant& c = pending[i];
    placed_as[i] = c.same_as >= 0 ? static_cast<size_t>(c.same_as) : i;
    if (c.same_as >= 0) continue;
    const Span from = c.folded.empty() ? c.source : c.folded_from;
    if (!from.empty()) {
      const uintptr_t begin = reinterpret_cast<uintptr_t>(from.data());
      spans.emplace_back(begin, begin + from.size());
    }
    const size_t size = c.folded.empty() ? c.source.size() : c.folded.size();
    offsets[i] = total;
    if (__builtin_add_overflow(total, size, &total) ||
        __builtin_add_overflow(total, kConstantAlignment - 1, &total)) {
      return absl::ResourceExhaustedError("the program's constants overflow size_t");
    }
    total &= ~(kConstantAlignment - 1);
  }
  std::sort(spans.begin(), spans.end());
  size_t spanned = 0;
  uintptr_t covered = 0;
  for (const auto& [begin, end] : spans) {
    const uintptr_t from = std::max(begin, covered);
    if (end > from) spanned += end - from;
    covered = std::max(covered, end);
  }
  if (total / 2 > spanned + (size_t{1} << 19)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the program's constants and delegate payloads would take ", total,
        " bytes once copied, more than twice the ", spanned,
        " bytes they span in the file: they overlap in the file and would be copied many times "
        "over"));
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
    const PendingConstant& holder = pending[placed_as[i]];
    const Span bytes = holder.folded.empty() ? holder.source : absl::MakeConstSpan(holder.folded);
    if (placed_as[i] == i && !bytes.empty()) {
      std::memcpy(base + offsets[i], bytes.data(), bytes.size());
    }
    const Span placed = absl::MakeConstSpan(base + offsets[placed_as[i]], bytes.size());
    if (c.payload_of_node >= 0) {
      import.methods[c.method].nodes[c.payload_of_node].mutable_delegate().payload = placed;
    } else {
      import.methods[c.method].values[c.value].data = placed;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EtImport> ImportExecuTorchProgram(const EtProgram& program,
                                                 const EtImportOptions& options) {
  EtImport import;
  PendingConstants constants;
  for (size_t i = 0; i < program.methods.size(); ++i) {
    MethodImporter importer(program.methods[i], i, options.data, &constants);
    FERRY_ASSIGN_OR_RETURN(MethodDef method, importer.Run());
    import.methods.push_back(std::move(method));
  }
  FERRY_RETURN_IF_ERROR(PlaceConstants(constants, import));
  return import;
}

}  // namespace ferry
