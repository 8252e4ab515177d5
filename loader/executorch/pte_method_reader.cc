// One method of a .pte program: values, operators, delegates, inputs and outputs, instructions,
// each checked as it is read (loader/executorch/pte_reader.cc reads the rest of the file).
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/pte_read.h"
#include "ferry/loader/model/checks.h"

namespace ferry::internal::pte {
namespace {

// ---------------------------------------------------------------------------------------------
// One method: values, operators, delegates, inputs and outputs, instructions.

// The longest operator name (with its overload) or backend id read: real ones are tens of bytes.
constexpr size_t kMaxNameBytes = 1024;

class MethodReader {
 public:
  MethodReader(const ProgramContext& context, const fb::ExecutionPlan& plan, std::string label,
               CopyBudget* budget)
      : context_(context), plan_(plan), label_(std::move(label)), budget_(budget) {}

  absl::StatusOr<EtMethod> Run() {
    FERRY_ASSIGN_OR_RETURN(method_.name, CopyString("its name", View(plan_.name())));
    FERRY_RETURN_IF_ERROR(ReadBufferSizes());
    FERRY_RETURN_IF_ERROR(ReadBufferDevices());
    FERRY_RETURN_IF_ERROR(ReadOperators());
    FERRY_RETURN_IF_ERROR(ReadDelegates());
    FERRY_RETURN_IF_ERROR(ReadValues());
    FERRY_RETURN_IF_ERROR(ReadInputsAndOutputs());
    FERRY_RETURN_IF_ERROR(ReadInstructions());
    return std::move(method_);
  }

 private:
  absl::Status Error(absl::string_view where, absl::string_view what) const {
    return Invalid(absl::StrCat(label_, ", ", where, ": ", what));
  }

  // Charges `n` list entries read at `where` to the program's copy budget.
  absl::Status SpendEntries(absl::string_view where, size_t n) const {
    if (budget_->SpendEntries(n)) return absl::OkStatus();
    return Error(where, OverCopyBudget(n, "entries"));
  }
  // `text`, charged to the budget's string bytes.
  absl::StatusOr<std::string> CopyString(absl::string_view where, absl::string_view text) const {
    if (!budget_->SpendBytes(text.size())) {
      return Error(where, OverCopyBudget(text.size(), "bytes"));
    }
    return std::string(text);
  }

  // A device annotation's type (one of the format's DeviceType values) and index (>= 0).
  absl::Status CheckDevice(absl::string_view where, absl::string_view subject, int type,
                           int index) const {
    if (type < static_cast<int>(fb::DeviceType::MIN) ||
        type > static_cast<int>(fb::DeviceType::MAX)) {
      return Error(where, absl::StrCat(subject, " has device type ", type,
                                       ", which is not one of 0 CPU, 1 CUDA"));
    }
    if (index < 0) {
      return Error(
          where, absl::StrCat(subject, " has device index ", index, "; an index is non-negative"));
    }
    return absl::OkStatus();
  }

  size_t num_values() const { return Len(plan_.values()); }

  // The kind tag a value has in the file (NONE or out of range for a bad one).
  fb::KernelTypes TagOf(size_t v) const { return plan_.values()->Get(v)->val_type(); }

  // "value 40, but the method has 38 values" when `id` is out of range.
  std::optional<std::string> OutOfRange(int64_t id) const {
    if (id >= 0 && static_cast<uint64_t>(id) < num_values()) return std::nullopt;
    return absl::StrCat("value ", id, ", but the method has ", num_values(), " values");
  }

  // Checks that `id` is a value index; `what` starts the message ("argument 2 is").
  absl::Status CheckValue(absl::string_view where, absl::string_view what, int64_t id) const {
    if (auto bad = OutOfRange(id)) return Error(where, absl::StrCat(what, " ", *bad));
    return absl::OkStatus();
  }

  absl::Status ReadBufferSizes() {
    const auto* sizes = plan_.non_const_buffer_sizes();
    if (!Aligned8(sizes)) return Error("non_const_buffer_sizes", "the list is not 8-byte aligned");
    FERRY_RETURN_IF_ERROR(SpendEntries("non_const_buffer_sizes", Len(sizes)));
    for (size_t i = 0; i < Len(sizes); ++i) {
      const int64_t size = sizes->Get(i);
      if (size < 0) {
        return Error(absl::StrCat("arena ", i),
                     absl::StrCat("its size is ", size, " bytes; sizes must be non-negative"));
      }
      method_.non_const_buffer_sizes.push_back(size);
    }
    return absl::OkStatus();
  }

  // Sparse: an entry per arena the exporter put on a device; every field untrusted.
  absl::Status ReadBufferDevices() {
    const auto* devices = plan_.non_const_buffer_device();
    const size_t arenas = method_.non_const_buffer_sizes.size();
    // Per arena, the entry that names it, or -1; bounded by the arenas the file declares.
    std::vector<int64_t> named_by(arenas, -1);
    for (size_t i = 0; i < Len(devices); ++i) {
      const fb::NonConstBufferDevice* d = devices->Get(i);
      const int32_t id = d->buffer_idx();
      const std::string where = absl::StrCat("non_const_buffer_device entry ", i);
      if (id < 1 || static_cast<size_t>(id) >= arenas) {
        return Error(where,
                     absl::StrCat("it names buffer ", id, ", but the method ",
                                  arenas <= 1 ? std::string("plans no buffers")
                                              : absl::StrCat("has buffers 1..", arenas - 1)));
      }
      if (named_by[id] >= 0) {
        return Error(
            where, absl::StrCat("buffer ", id, " already has a device (entry ", named_by[id], ")"));
      }
      named_by[id] = static_cast<int64_t>(i);
      const int type = static_cast<int>(d->device_type());
      FERRY_RETURN_IF_ERROR(
          CheckDevice(where, absl::StrCat("buffer ", id), type, d->device_index()));
      method_.non_const_buffer_devices.push_back(
          {static_cast<uint32_t>(id), static_cast<int8_t>(type), d->device_index()});
    }
    return absl::OkStatus();
  }

  absl::Status ReadOperators() {
    const auto* ops = plan_.operators();
    for (size_t i = 0; i < Len(ops); ++i) {
      const fb::Operator* op = ops->Get(i);
      if (View(op->name()).empty()) return Error(absl::StrCat("operator ", i), "it has no name");
      // Each instruction's node is named after its operator (and each delegate call's after its
      // backend): a name of megabytes, used by a million instructions, would take terabytes.
      const size_t name_bytes = View(op->name()).size() + View(op->overload()).size();
      if (name_bytes > kMaxNameBytes) {
        return Error(absl::StrCat("operator ", i),
                     absl::StrCat("its name and overload are ", name_bytes, " bytes; at most ",
                                  kMaxNameBytes, " are read"));
      }
      const std::string where = absl::StrCat("operator ", i);
      EtOperator out;
      FERRY_ASSIGN_OR_RETURN(out.name, CopyString(where, View(op->name())));
      FERRY_ASSIGN_OR_RETURN(out.overload, CopyString(where, View(op->overload())));
      method_.operators.push_back(std::move(out));
    }
    return absl::OkStatus();
  }

  absl::Status ReadDelegates() {
    const auto* delegates = plan_.delegates();
    for (size_t i = 0; i < Len(delegates); ++i) {
      const fb::BackendDelegate* d = delegates->Get(i);
      EtDelegate out;
      if (View(d->id()).size() > kMaxNameBytes) {
        return Error(absl::StrCat("delegate ", i),
                     absl::StrCat("its backend id is ", View(d->id()).size(), " bytes; at most ",
                                  kMaxNameBytes, " are read"));
      }
      FERRY_ASSIGN_OR_RETURN(out.backend_id,
                             CopyString(absl::StrCat("delegate ", i), View(d->id())));
      const std::string where =
          out.backend_id.empty()
              ? absl::StrCat("delegate ", i)
              : absl::StrCat("delegate ", i, " (", absl::CHexEscape(out.backend_id), ")");
      if (out.backend_id.empty()) return Error(where, "it has no backend id");
      const auto* specs = d->compile_specs();
      for (size_t s = 0; s < Len(specs); ++s) {
        const fb::CompileSpec* spec = specs->Get(s);
        if (View(spec->key()).empty()) {
          return Error(where, absl::StrCat("compile spec ", s, " has no key"));
        }
        absl::string_view value;
        if (spec->value() != nullptr) {
          value = absl::string_view(reinterpret_cast<const char*>(spec->value()->data()),
                                    spec->value()->size());
        }
        const std::string spec_where = absl::StrCat(where, ", compile spec ", s);
        FERRY_ASSIGN_OR_RETURN(std::string key, CopyString(spec_where, View(spec->key())));
        FERRY_ASSIGN_OR_RETURN(std::string copied, CopyString(spec_where, value));
        out.compile_specs.emplace_back(std::move(key), std::move(copied));
      }
      FERRY_RETURN_IF_ERROR(ReadPayload(where, d->processed(), &out));
      method_.delegates.push_back(std::move(out));
    }
    return absl::OkStatus();
  }

  absl::Status ReadPayload(absl::string_view where, const fb::BackendDelegateDataReference* ref,
                           EtDelegate* out) const {
    if (ref == nullptr) return Error(where, "it does not say where its payload is");
    out->index = ref->index();
    switch (ref->location()) {
      case fb::DataLocation::INLINE: {
        const auto* inline_data = context_.root->backend_delegate_data();
        if (out->index >= Len(inline_data)) {
          return Error(where, absl::StrCat("its payload is inline data ", out->index,
                                           ", but the program has ", Len(inline_data)));
        }
        out->location = EtPayloadLocation::kInline;
        const auto* data = inline_data->Get(out->index)->data();
        if (data != nullptr) {
          out->payload = absl::MakeConstSpan(data->data(), data->size());
          out->file_offset = static_cast<uint64_t>(data->data() - context_.file.data());
        }
        return absl::OkStatus();
      }
      case fb::DataLocation::SEGMENT: {
        const auto& segments = context_.program->segments;
        if (out->index >= segments.size()) {
          return Error(where, absl::StrCat("its payload is segment ", out->index,
                                           ", but the program has ", segments.size(), " segments"));
        }
        out->location = EtPayloadLocation::kSegment;
        out->payload = segments[out->index].bytes;
        out->file_offset = segments[out->index].file_offset;
        return absl::OkStatus();
      }
    }
    return Error(where, absl::StrCat("payload location ", static_cast<int>(ref->location()),
                                     " is neither inline (0) nor a segment (1)"));
  }

  absl::Status ReadValues();
  absl::Status ReadValue(size_t v, const fb::EValue& value, EtValue* out);
  absl::Status ReadList(const std::string& where, const flatbuffers::Vector<int64_t>* items,
                        EtValue* out) const;
  absl::Status ReadList(const std::string& where, const flatbuffers::Vector<int32_t>* items,
                        bool optional, EtValue* out) const;
  absl::Status ReadTensor(const std::string& where, const fb::Tensor& t, EtTensor* out) const;
  absl::Status ReadAllocation(const std::string& where, const fb::AllocationDetails& a,
                              EtTensor* out) const;
  absl::Status ReadTensorData(const std::string& where, const fb::Tensor& t, EtTensor* out) const;
  absl::Status ReadConstantData(const std::string& where, uint32_t index, EtTensor* out) const;
  absl::Status ReadSubsegmentData(const std::string& where, const char* what,
                                  const EtSubsegments& sub, uint32_t index, EtTensor* out) const;
  // `where` is called only to name an error: a kernel or delegate call's label holds its
  // operator's or backend's name, escaped, and building it per instruction would cost the
  // name's length on every instruction of the method.
  absl::Status ReadArgs(absl::FunctionRef<std::string()> where,
                        const flatbuffers::Vector<int32_t>* args, EtInstruction* out) const;
  absl::Status ReadInputsAndOutputs();
  absl::Status ReadInstructions();
  absl::Status ReadInstruction(size_t i, size_t count, const fb::Instruction& instruction,
                               EtInstruction* out) const;
  absl::Status ReadKernelCall(const std::string& where, const fb::KernelCall& call,
                              EtInstruction* out) const;
  absl::Status ReadDelegateCall(const std::string& where, const fb::DelegateCall& call,
                                EtInstruction* out) const;
  absl::Status ReadMove(const std::string& where, const fb::MoveCall& move,
                        EtInstruction* out) const;
  absl::Status ReadJump(const std::string& where, size_t count, const fb::JumpFalseCall& jump,
                        EtInstruction* out) const;
  absl::Status ReadFree(const std::string& where, const fb::FreeCall& free_call,
                        EtInstruction* out) const;

  const ProgramContext& context_;
  const fb::ExecutionPlan& plan_;
  const std::string label_;
  CopyBudget* const budget_;  // the program's, shared by its methods
  EtMethod method_;
};

// The name of the kind a value is tagged with in the file.
std::string TagName(fb::KernelTypes tag) {
  const int t = static_cast<int>(tag);
  if (t < static_cast<int>(fb::KernelTypes::Null) ||
      t > static_cast<int>(fb::KernelTypes::OptionalTensorList)) {
    return absl::StrCat("value of unknown type ", t);
  }
  return EtValueKindName(static_cast<EtValueKind>(t - 1));
}

absl::Status MethodReader::ReadValues() {
  const auto* values = plan_.values();
  method_.values.resize(num_values());
  for (size_t v = 0; v < num_values(); ++v) {
    FERRY_RETURN_IF_ERROR(ReadValue(v, *values->Get(v), &method_.values[v]));
  }
  return absl::OkStatus();
}

absl::Status MethodReader::ReadValue(size_t v, const fb::EValue& value, EtValue* out) {
  const std::string where = absl::StrCat("value ", v);
  auto missing = [&](const char* kind) {
    return Error(where, absl::StrCat("it is tagged ", kind, ", but the ", kind, " is missing"));
  };
  switch (value.val_type()) {
    case fb::KernelTypes::NONE:
      return Error(where, "it has no type (an empty EValue)");
    case fb::KernelTypes::Null:
      if (value.val_as_Null() == nullptr) return missing("null");
      out->kind = EtValueKind::kNull;
      return absl::OkStatus();
    case fb::KernelTypes::Int:
      if (value.val_as_Int() == nullptr) return missing("int");
      out->kind = EtValueKind::kInt;
      out->int_value = value.val_as_Int()->int_val();
      return absl::OkStatus();
    case fb::KernelTypes::Bool:
      if (value.val_as_Bool() == nullptr) return missing("bool");
      out->kind = EtValueKind::kBool;
      out->bool_value = value.val_as_Bool()->bool_val();
      return absl::OkStatus();
    case fb::KernelTypes::Double:
      if (value.val_as_Double() == nullptr) return missing("double");
      out->kind = EtValueKind::kDouble;
      out->double_value = value.val_as_Double()->double_val();
      return absl::OkStatus();
    case fb::KernelTypes::Tensor:
      if (value.val_as_Tensor() == nullptr) return missing("tensor");
      out->kind = EtValueKind::kTensor;
      return ReadTensor(absl::StrCat(where, " (tensor)"), *value.val_as_Tensor(), &out->tensor);
    case fb::KernelTypes::String: {
      if (value.val_as_String() == nullptr) return missing("string");
      out->kind = EtValueKind::kString;
      FERRY_ASSIGN_OR_RETURN(out->string_value,
                             CopyString(where, View(value.val_as_String()->string_val())));
      return absl::OkStatus();
    }
    case fb::KernelTypes::IntList:
      if (value.val_as_IntList() == nullptr) return missing("int list");
      out->kind = EtValueKind::kIntList;
      return ReadList(absl::StrCat(where, " (int list)"), value.val_as_IntList()->items(), out);
    case fb::KernelTypes::DoubleList: {
      if (value.val_as_DoubleList() == nullptr) return missing("double list");
      out->kind = EtValueKind::kDoubleList;
      const auto* items = value.val_as_DoubleList()->items();
      if (!Aligned8(items)) return Error(where, "the double list is not 8-byte aligned");
      FERRY_RETURN_IF_ERROR(SpendEntries(where, Len(items)));
      if (items != nullptr) out->doubles.assign(items->begin(), items->end());
      return absl::OkStatus();
    }
    case fb::KernelTypes::BoolList: {
      if (value.val_as_BoolList() == nullptr) return missing("bool list");
      out->kind = EtValueKind::kBoolList;
      const auto* items = value.val_as_BoolList()->items();
      FERRY_RETURN_IF_ERROR(SpendEntries(where, Len(items)));
      for (size_t i = 0; i < Len(items); ++i) out->bools.push_back(items->Get(i) != 0);
      return absl::OkStatus();
    }
    case fb::KernelTypes::TensorList:
      if (value.val_as_TensorList() == nullptr) return missing("tensor list");
      out->kind = EtValueKind::kTensorList;
      return ReadList(absl::StrCat(where, " (tensor list)"), value.val_as_TensorList()->items(),
                      /*optional=*/false, out);
    case fb::KernelTypes::OptionalTensorList:
      if (value.val_as_OptionalTensorList() == nullptr) return missing("optional tensor list");
      out->kind = EtValueKind::kOptionalTensorList;
      return ReadList(absl::StrCat(where, " (optional tensor list)"),
                      value.val_as_OptionalTensorList()->items(), /*optional=*/true, out);
  }
  return Error(where, absl::StrCat("type tag ", static_cast<int>(value.val_type()),
                                   " is not an ExecuTorch value type (1 null .. 11 optional "
                                   "tensor list)"));
}

// An int list holds the indices of Int values (a boxed list), not the numbers.
absl::Status MethodReader::ReadList(const std::string& where,
                                    const flatbuffers::Vector<int64_t>* items, EtValue* out) const {
  if (!Aligned8(items)) return Error(where, "the items are not 8-byte aligned");
  FERRY_RETURN_IF_ERROR(SpendEntries(where, Len(items)));
  for (size_t i = 0; i < Len(items); ++i) {
    const int64_t id = items->Get(i);
    FERRY_RETURN_IF_ERROR(CheckValue(where, absl::StrCat("item ", i, " is"), id));
    if (TagOf(id) != fb::KernelTypes::Int) {
      return Error(where, absl::StrCat("item ", i, " is value ", id, ", a ", TagName(TagOf(id)),
                                       "; the items of an int list are int values"));
    }
    out->items.push_back(static_cast<int32_t>(id));
  }
  return absl::OkStatus();
}

// Tensor lists hold the indices of Tensor values; optional ones also Null values or -1 (None).
absl::Status MethodReader::ReadList(const std::string& where,
                                    const flatbuffers::Vector<int32_t>* items, bool optional,
                                    EtValue* out) const {
  FERRY_RETURN_IF_ERROR(SpendEntries(where, Len(items)));
  for (size_t i = 0; i < Len(items); ++i) {
    const int32_t id = items->Get(i);
    if (optional && id == -1) {
      out->items.push_back(id);
      continue;
    }
    FERRY_RETURN_IF_ERROR(CheckValue(where, absl::StrCat("item ", i, " is"), id));
    const fb::KernelTypes tag = TagOf(id);
    if (tag != fb::KernelTypes::Tensor && !(optional && tag == fb::KernelTypes::Null)) {
      return Error(where, absl::StrCat("item ", i, " is value ", id, ", a ", TagName(tag),
                                       optional ? "; the items of an optional tensor list are "
                                                  "tensor or null values"
                                                : "; the items of a tensor list are tensors"));
    }
    out->items.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status MethodReader::ReadTensor(const std::string& where, const fb::Tensor& t,
                                      EtTensor* out) const {
  out->scalar_type = static_cast<int8_t>(t.scalar_type());
  out->element_size = EtScalarTypeSize(out->scalar_type);
  if (out->element_size == 0) {
    return Error(
        where, absl::StrCat("scalar type ", out->scalar_type, " is not an ExecuTorch scalar type"));
  }
  out->dtype = EtFerryDType(static_cast<int8_t>(t.scalar_type()));
  if (t.storage_offset() != 0) {
    return Error(where, absl::StrCat("storage_offset is ", t.storage_offset(),
                                     "; ExecuTorch tensors start at their data (0)"));
  }
  const auto* sizes = t.sizes();
  const size_t rank = Len(sizes);
  if (rank > kMaxEtRank) {
    return Error(where, absl::StrCat("rank ", rank, " exceeds ExecuTorch's limit of ", kMaxEtRank,
                                     " dimensions"));
  }
  for (size_t d = 0; d < rank; ++d) {
    const int32_t s = sizes->Get(d);
    if (s < 0) {
      return Error(where, absl::StrCat("size ", d, " is ", s, "; sizes must be non-negative"));
    }
    out->sizes.push_back(s);
  }
  // numel * element size must fit in int64 (the model's rule, loader/model/checks.h).
  const std::optional<size_t> byte_size =
      CheckedByteSize<int64_t>(out->element_size, absl::MakeConstSpan(out->sizes));
  if (!byte_size.has_value()) {
    return Error(where,
                 absl::StrCat(EtScalarTypeName(out->scalar_type), "[", absl::StrJoin(*sizes, ", "),
                              "] is too large: its byte size overflows"));
  }
  out->byte_size = *byte_size;
  out->numel = out->byte_size / out->element_size;
  const auto* order = t.dim_order();
  if (Len(order) != 0) {
    if (!IsDimOrder(absl::MakeConstSpan(order->data(), order->size()), rank)) {
      std::vector<int> dims(order->begin(), order->end());
      return Error(where, absl::StrCat("dim_order (", absl::StrJoin(dims, ", "),
                                       ") is not a permutation of the ", rank, " dimensions"));
    }
    out->dim_order.assign(order->begin(), order->end());
  }
  const int dynamism = static_cast<int>(t.shape_dynamism());
  if (dynamism < 0 || dynamism > 2) {
    return Error(where, absl::StrCat("shape dynamism ", dynamism,
                                     " is not one of 0 static, 1 bounded, 2 unbounded"));
  }
  out->dynamism = static_cast<EtShapeDynamism>(dynamism);
  out->requires_grad = t.requires_grad();
  out->layout = t.layout();
  if (const fb::ExtraTensorInfo* extra = t.extra_tensor_info()) {
    FERRY_ASSIGN_OR_RETURN(out->fully_qualified_name,
                           CopyString(where, View(extra->fully_qualified_name())));
    FERRY_RETURN_IF_ERROR(CheckDevice(where, "the tensor", static_cast<int>(extra->device_type()),
                                      extra->device_index()));
    out->device_type = static_cast<int8_t>(extra->device_type());
    out->device_index = extra->device_index();
  }
  if (const fb::AllocationDetails* a = t.allocation_info()) {
    FERRY_RETURN_IF_ERROR(ReadAllocation(where, *a, out));
  }
  return ReadTensorData(where, t, out);
}

absl::Status MethodReader::ReadAllocation(const std::string& where, const fb::AllocationDetails& a,
                                          EtTensor* out) const {
  const std::vector<int64_t>& arenas = method_.non_const_buffer_sizes;
  const uint32_t id = a.memory_id();
  if (id == 0 || id >= arenas.size()) {
    return Error(where, absl::StrCat("it is planned in arena ", id, ", but the method ",
                                     arenas.size() <= 1
                                         ? std::string("plans no arenas")
                                         : absl::StrCat("has arenas 1..", arenas.size() - 1)));
  }
  const uint64_t offset = static_cast<uint64_t>(a.memory_offset_low()) |
                          (static_cast<uint64_t>(a.memory_offset_high()) << 32);
  // An unbounded dynamic tensor's sizes say nothing about the memory it will take.
  if (out->dynamism != EtShapeDynamism::kDynamicUnbound) {
    const std::optional<uint64_t> end = Add(offset, out->byte_size);
    if (!end.has_value() || *end > static_cast<uint64_t>(arenas[id])) {
      return Error(
          where, absl::StrCat("its ", out->byte_size, " bytes at offset ", offset, " of arena ", id,
                              " run past the arena's ", arenas[id], " bytes"));
    }
  }
  out->allocation = EtAllocation{id, offset};
  return absl::OkStatus();
}

absl::Status MethodReader::ReadSubsegmentData(const std::string& where, const char* what,
                                              const EtSubsegments& sub, uint32_t index,
                                              EtTensor* out) const {
  if (index >= sub.offsets.size()) {
    return Error(where, absl::StrCat("its data is entry ", index, " of the ", what, ", which has ",
                                     sub.offsets.size(), " entries"));
  }
  const EtSegment& segment = context_.program->segments[sub.segment_index];
  const uint64_t offset = sub.offsets[index];
  const std::optional<uint64_t> end = Add(offset, out->byte_size);
  if (!end.has_value() || *end > segment.size) {
    return Error(where, absl::StrCat("its ", out->byte_size, " bytes at offset ", offset,
                                     " of the ", what, " (segment ", sub.segment_index,
                                     ") run past the segment's ", segment.size, " bytes"));
  }
  out->data.segment = sub.segment_index;
  out->data.file_offset = segment.file_offset + offset;
  out->data.bytes = segment.bytes.subspan(static_cast<size_t>(offset), out->byte_size);
  return absl::OkStatus();
}

absl::Status MethodReader::ReadConstantData(const std::string& where, uint32_t index,
                                            EtTensor* out) const {
  if (context_.program->constant_segment.has_value()) {
    out->data.kind = EtDataKind::kConstantSegment;
    return ReadSubsegmentData(where, "constant segment", *context_.program->constant_segment, index,
                              out);
  }
  const auto* buffers = context_.root->constant_buffer();
  if (index >= Len(buffers)) {
    return Error(where, absl::StrCat("its data is constant ", index, ", but the program has ",
                                     Len(buffers), " constant buffers and no constant segment"));
  }
  const flatbuffers::Vector<uint8_t>* storage = buffers->Get(index)->storage();
  if (Len(storage) < out->byte_size) {
    return Error(where, absl::StrCat("its data, constant buffer ", index, ", is ", Len(storage),
                                     " bytes, but ", EtScalarTypeName(out->scalar_type), "[",
                                     absl::StrJoin(out->sizes, ", "), "] takes ", out->byte_size));
  }
  out->data.kind = EtDataKind::kConstantBuffer;
  if (storage != nullptr) {
    out->data.bytes = absl::MakeConstSpan(storage->data(), out->byte_size);
    out->data.file_offset = static_cast<uint64_t>(storage->data() - context_.file.data());
  }
  return absl::OkStatus();
}

// Where a tensor's data is, in the order ExecuTorch's runtime decides it: external by name;
// else no data (index 0); else constant (not planned) or initial data of a planned tensor.
absl::Status MethodReader::ReadTensorData(const std::string& where, const fb::Tensor& t,
                                          EtTensor* out) const {
  const fb::ExtraTensorInfo* extra = t.extra_tensor_info();
  if (extra != nullptr) {
    const int location = static_cast<int>(extra->location());
    if (location != 0 && location != 1) {
      return Error(where, absl::StrCat("data location ", location,
                                       " is neither in the program (0) nor external (1)"));
    }
    if (extra->location() == fb::TensorDataLocation::EXTERNAL) {
      if (out->fully_qualified_name.empty()) {
        return Error(where,
                     "its data is external, but it has no fully qualified name to find "
                     "it by");
      }
      out->data.kind = EtDataKind::kExternal;
      return absl::OkStatus();
    }
  }
  const uint32_t index = t.data_buffer_idx();
  if (index == 0) return absl::OkStatus();
  out->data.index = index;
  if (!out->allocation.has_value()) return ReadConstantData(where, index, out);
  const uint64_t k = extra != nullptr ? extra->mutable_data_segments_idx() : 0;
  const std::vector<EtSubsegments>& mutable_segments = context_.program->mutable_data_segments;
  if (k >= mutable_segments.size()) {
    return Error(where, absl::StrCat("its initial data is in mutable data segment ", k,
                                     ", but the program has ", mutable_segments.size()));
  }
  out->data.kind = EtDataKind::kMutableSegment;
  return ReadSubsegmentData(where, "mutable data segment", mutable_segments[k], index, out);
}

absl::Status MethodReader::ReadInputsAndOutputs() {
  const auto* inputs = plan_.inputs();
  for (size_t i = 0; i < Len(inputs); ++i) {
    FERRY_RETURN_IF_ERROR(CheckValue(absl::StrCat("input ", i), "it is", inputs->Get(i)));
    method_.inputs.push_back(inputs->Get(i));
  }
  const auto* outputs = plan_.outputs();
  for (size_t o = 0; o < Len(outputs); ++o) {
    FERRY_RETURN_IF_ERROR(CheckValue(absl::StrCat("output ", o), "it is", outputs->Get(o)));
    method_.outputs.push_back(outputs->Get(o));
  }
  return absl::OkStatus();
}

absl::Status MethodReader::ReadInstructions() {
  const auto* chains = plan_.chains();
  if (Len(chains) == 0) {
    return Invalid(absl::StrCat(label_,
                                " has no chain of instructions; ExecuTorch writes one "
                                "per method"));
  }
  if (Len(chains) > 1) {
    return absl::UnimplementedError(absl::StrCat(label_, " has ", Len(chains),
                                                 " chains; ExecuTorch writes one per method, and "
                                                 "Ferry reads one"));
  }
  const fb::Chain* chain = chains->Get(0);
  for (size_t i = 0; i < Len(chain->inputs()); ++i) {
    FERRY_RETURN_IF_ERROR(
        CheckValue("the chain", absl::StrCat("input ", i, " is"), chain->inputs()->Get(i)));
  }
  for (size_t i = 0; i < Len(chain->outputs()); ++i) {
    FERRY_RETURN_IF_ERROR(
        CheckValue("the chain", absl::StrCat("output ", i, " is"), chain->outputs()->Get(i)));
  }
  const auto* instructions = chain->instructions();
  const size_t count = Len(instructions);
  method_.instructions.resize(count);
  for (size_t i = 0; i < count; ++i) {
    FERRY_RETURN_IF_ERROR(
        ReadInstruction(i, count, *instructions->Get(i), &method_.instructions[i]));
  }
  return absl::OkStatus();
}

absl::Status MethodReader::ReadArgs(absl::FunctionRef<std::string()> where,
                                    const flatbuffers::Vector<int32_t>* args,
                                    EtInstruction* out) const {
  if (!budget_->SpendEntries(Len(args))) {
    return Error(where(), OverCopyBudget(Len(args), "arguments"));
  }
  out->args.reserve(out->args.size() + Len(args));
  for (size_t a = 0; a < Len(args); ++a) {
    const int32_t id = args->Get(a);
    if (OutOfRange(id)) return CheckValue(where(), absl::StrCat("argument ", a, " is"), id);
    out->args.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status MethodReader::ReadInstruction(size_t i, size_t count,
                                           const fb::Instruction& instruction,
                                           EtInstruction* out) const {
  const std::string where = absl::StrCat("instruction ", i);
  auto missing = [&](const char* kind) {
    return Error(where, absl::StrCat("a ", kind, " without its arguments"));
  };
  switch (instruction.instr_args_type()) {
    case fb::InstructionArguments::NONE:
      return Error(where, "it has no arguments (an empty instruction)");
    case fb::InstructionArguments::KernelCall:
      if (instruction.instr_args_as_KernelCall() == nullptr) return missing("kernel call");
      return ReadKernelCall(where, *instruction.instr_args_as_KernelCall(), out);
    case fb::InstructionArguments::DelegateCall:
      if (instruction.instr_args_as_DelegateCall() == nullptr) return missing("delegate call");
      return ReadDelegateCall(where, *instruction.instr_args_as_DelegateCall(), out);
    case fb::InstructionArguments::MoveCall:
      if (instruction.instr_args_as_MoveCall() == nullptr) return missing("move");
      return ReadMove(where, *instruction.instr_args_as_MoveCall(), out);
    case fb::InstructionArguments::JumpFalseCall:
      if (instruction.instr_args_as_JumpFalseCall() == nullptr) return missing("jump");
      return ReadJump(where, count, *instruction.instr_args_as_JumpFalseCall(), out);
    case fb::InstructionArguments::FreeCall:
      if (instruction.instr_args_as_FreeCall() == nullptr) return missing("free");
      return ReadFree(where, *instruction.instr_args_as_FreeCall(), out);
  }
  return Error(where,
               absl::StrCat("instruction type ", static_cast<int>(instruction.instr_args_type()),
                            " is not one of 1 kernel call, 2 delegate call, 3 move, "
                            "4 jump if false, 5 free"));
}

absl::Status MethodReader::ReadKernelCall(const std::string& where, const fb::KernelCall& call,
                                          EtInstruction* out) const {
  out->kind = EtInstructionKind::kKernelCall;
  const int32_t op = call.op_index();
  if (op < 0 || static_cast<size_t>(op) >= method_.operators.size()) {
    return Error(absl::StrCat(where, " (kernel call)"),
                 absl::StrCat("its operator is ", op, ", but the method has ",
                              method_.operators.size(), " operators"));
  }
  out->op_index = op;
  return ReadArgs(
      [&] {
        return absl::StrCat(where, " (kernel call ",
                            absl::CHexEscape(method_.operators[op].FullName()), ")");
      },
      call.args(), out);
}

absl::Status MethodReader::ReadDelegateCall(const std::string& where, const fb::DelegateCall& call,
                                            EtInstruction* out) const {
  out->kind = EtInstructionKind::kDelegateCall;
  const int32_t d = call.delegate_index();
  if (d < 0 || static_cast<size_t>(d) >= method_.delegates.size()) {
    return Error(absl::StrCat(where, " (delegate call)"),
                 absl::StrCat("its delegate is ", d, ", but the method has ",
                              method_.delegates.size(), " delegates"));
  }
  out->delegate_index = d;
  return ReadArgs(
      [&] {
        return absl::StrCat(where, " (delegate call ",
                            absl::CHexEscape(method_.delegates[d].backend_id), ")");
      },
      call.args(), out);
}

absl::Status MethodReader::ReadMove(const std::string& where, const fb::MoveCall& move,
                                    EtInstruction* out) const {
  out->kind = EtInstructionKind::kMove;
  const std::string label = absl::StrCat(where, " (move)");
  FERRY_RETURN_IF_ERROR(CheckValue(label, "its source is", move.move_from()));
  FERRY_RETURN_IF_ERROR(CheckValue(label, "its destination is", move.move_to()));
  out->move_from = move.move_from();
  out->move_to = move.move_to();
  return absl::OkStatus();
}

absl::Status MethodReader::ReadJump(const std::string& where, size_t count,
                                    const fb::JumpFalseCall& jump, EtInstruction* out) const {
  out->kind = EtInstructionKind::kJumpFalse;
  const std::string label = absl::StrCat(where, " (jump if false)");
  const int32_t cond = jump.cond_value_index();
  FERRY_RETURN_IF_ERROR(CheckValue(label, "its condition is", cond));
  if (TagOf(cond) != fb::KernelTypes::Bool && TagOf(cond) != fb::KernelTypes::Tensor) {
    return Error(label, absl::StrCat("its condition is value ", cond, ", a ", TagName(TagOf(cond)),
                                     "; a condition is a bool or a bool tensor"));
  }
  const int32_t to = jump.destination_instruction();
  if (to < 0 || static_cast<size_t>(to) >= count) {
    return Error(label, absl::StrCat("it jumps to instruction ", to, ", but the chain has ", count,
                                     " instructions"));
  }
  out->cond_value = cond;
  out->destination = to;
  return absl::OkStatus();
}

absl::Status MethodReader::ReadFree(const std::string& where, const fb::FreeCall& free_call,
                                    EtInstruction* out) const {
  out->kind = EtInstructionKind::kFree;
  const std::string label = absl::StrCat(where, " (free)");
  const int32_t v = free_call.value_index();
  FERRY_RETURN_IF_ERROR(CheckValue(label, "it frees", v));
  if (TagOf(v) != fb::KernelTypes::Tensor) {
    return Error(label, absl::StrCat("it frees value ", v, ", a ", TagName(TagOf(v)),
                                     "; only tensors are freed"));
  }
  out->free_value = v;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EtMethod> ReadMethod(const ProgramContext& context, const fb::ExecutionPlan& plan,
                                    std::string label, CopyBudget* budget) {
  return MethodReader(context, plan, std::move(label), budget).Run();
}

}  // namespace ferry::internal::pte
