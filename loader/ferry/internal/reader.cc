#include "ferry/loader/ferry/internal/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/text.h"
#include "ferry/loader/ferry/internal/table_verifier.h"
#include "ferry/loader/file_identifiers.h"
#include "ferry/loader/internal/untrusted_bytes.h"
#include "ferry/loader/internal/verifier_path.h"
#include "ferry/loader/model/checks.h"
#include "flatbuffers/flatbuffers.h"

namespace ferry::internal {
namespace {

// Fills `list` (fresh, empty) with n items. InlinedVector::assign takes a general path (about
// 50 instructions a call, three per node and value while reading); a list that fits inline
// fills faster one by one.
template <typename List, typename T>
void FillList(List& list, const T* items, size_t n) {
  if (n > list.capacity()) {
    list.assign(items, items + n);
    return;
  }
  for (size_t i = 0; i < n; ++i) list.push_back(items[i]);
}

// Vectors of scalars in the program are read in place (sizes, arguments, results), which is what
// FlatBuffers' accessors do too on a little-endian host.
static_assert(FLATBUFFERS_LITTLEENDIAN, "Ferry reads programs in place on little-endian hosts");

// Whether the elements of an 8-byte vector (absent counts as aligned) can be read as int64.
template <typename T>
bool Aligned8(const flatbuffers::Vector<T>* v) {
  static_assert(sizeof(T) == 8);
  return v == nullptr || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % 8 == 0;
}

// Why a binary from stock flatc is refused, and what to do instead.
constexpr char kFlatcAdvice[] =
    "A binary made by stock `flatc -b` is refused: flatc does not place data at multiples of 64 "
    "bytes (its force_align stops at 32). Load the JSON form instead (`ferry plan program.json`, "
    "or Program::Load on the .json file); Ferry re-packs it aligned";

absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->c_str(), s->size());
}

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

bool ValidDType(fbs::DType d) {
  return static_cast<int>(d) >= static_cast<int>(fbs::DType::MIN) &&
         static_cast<int>(d) <= static_cast<int>(fbs::DType::MAX);
}

bool ValidKind(fbs::ValueKind k) {
  return static_cast<int>(k) >= static_cast<int>(fbs::ValueKind::MIN) &&
         static_cast<int>(k) <= static_cast<int>(fbs::ValueKind::MAX);
}

ValueKind ToKind(fbs::ValueKind k) { return static_cast<ValueKind>(static_cast<int>(k)); }
// The file's numbers are DType's own (both lists are appended to in step).
static_assert(static_cast<int>(fbs::DType::Bool) == static_cast<int>(DType::kBool) &&
              static_cast<int>(fbs::DType::Int32) == static_cast<int>(DType::kInt32) &&
              static_cast<int>(fbs::DType::Int8) == static_cast<int>(DType::kInt8) &&
              static_cast<int>(fbs::DType::UInt8) == static_cast<int>(DType::kUInt8) &&
              static_cast<int>(fbs::DType::Int16) == static_cast<int>(DType::kInt16) &&
              static_cast<int>(fbs::DType::UInt16) == static_cast<int>(DType::kUInt16) &&
              static_cast<int>(fbs::DType::Float16) == static_cast<int>(DType::kFloat16) &&
              static_cast<int>(fbs::DType::BFloat16) == static_cast<int>(DType::kBFloat16) &&
              static_cast<int>(fbs::DType::Float64) == static_cast<int>(DType::kFloat64) &&
              static_cast<int>(fbs::DType::MAX) + 1 == kNumDTypes);
DType ToDType(fbs::DType d) { return static_cast<DType>(static_cast<int>(d)); }

std::string ValueLabel(size_t index, const fbs::Value* value) {
  absl::string_view name = View(value->name());
  if (name.empty()) return absl::StrCat("value ", index);
  return absl::StrCat("value ", index, " (\"", absl::CHexEscape(name), "\")");
}

// The name a node is reported under: its own, else its op or backend name.
absl::string_view NodeDisplayName(const fbs::Node* node) {
  absl::string_view name = View(node->name());
  if (!name.empty()) return name;
  if (const fbs::HostOp* op = node->op_as_HostOp()) return View(op->op());
  if (const fbs::DelegateCall* call = node->op_as_DelegateCall()) return View(call->backend());
  return {};
}

// The bytes of strings parsing copies for `node`: its display name, its op or backend name, and
// its compile specs' keys and values.
size_t CopiedStringBytes(const fbs::Node* node) {
  size_t bytes = NodeDisplayName(node).size();
  if (const fbs::HostOp* op = node->op_as_HostOp()) bytes += View(op->op()).size();
  if (const fbs::DelegateCall* call = node->op_as_DelegateCall()) {
    bytes += View(call->backend()).size();
    const auto* specs = call->compile_specs();
    for (size_t i = 0; i < Len(specs); ++i) {
      bytes += View(specs->Get(i)->key()).size() + View(specs->Get(i)->value()).size();
    }
  }
  return bytes;
}

std::string NodeLabel(size_t index, const fbs::Node* node) {
  absl::string_view name = NodeDisplayName(node);
  if (name.empty()) return absl::StrCat("node ", index);
  return absl::StrCat("node ", index, " (", absl::CHexEscape(name), ")");
}

// The dims of a stored dim order (empty for none), for the model's check.
absl::Span<const int32_t> DimsOf(const flatbuffers::Vector<int32_t>* order) {
  if (order == nullptr || order->size() == 0) return {};
  return absl::MakeConstSpan(order->data(), order->size());
}

std::string DimOrderString(const flatbuffers::Vector<int32_t>* order) {
  std::vector<int32_t> v(order->begin(), order->end());
  return absl::StrCat("(", absl::StrJoin(v, ", "), ")");
}

std::string SizesString(const flatbuffers::Vector<int64_t>* sizes) {
  std::vector<int64_t> v;
  if (sizes != nullptr) v.assign(sizes->begin(), sizes->end());
  return absl::StrJoin(v, ", ");
}

TensorMeta MetaOf(const fbs::Value* value) {
  TensorMeta meta;
  meta.dtype = ToDType(value->dtype());
  // Vectors of scalars are read in place: FlatBuffers stores them little-endian, as this host does.
  if (value->sizes() != nullptr) {
    meta.sizes.assign(value->sizes()->data(), value->sizes()->data() + value->sizes()->size());
  }
  if (value->dim_order() != nullptr) {
    meta.dim_order.assign(value->dim_order()->begin(), value->dim_order()->end());
  }
  return meta;
}

class MethodVerifier {
 public:
  MethodVerifier(const fbs::Program& program, absl::Span<const uint8_t> bytes,
                 const VerifyOptions& options, const fbs::Method& method, std::string label,
                 CopyBudget& budget, MethodDef* out)
      : program_(program),
        bytes_(bytes),
        options_(options),
        method_(method),
        label_(std::move(label)),
        budget_(budget),
        out_(out),
        num_values_(Len(method.values())) {}

  absl::Status Verify() {
    FERRY_RETURN_IF_ERROR(VerifyValues());
    FERRY_RETURN_IF_ERROR(VerifyInputs());
    FERRY_RETURN_IF_ERROR(VerifyNodes());
    return VerifyOutputs();
  }

 private:
  absl::Status Error(absl::string_view where, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(label_, ", ", where, ": ", what));
  }
  // For sentences that start with the element: `method "forward", input 1 is value 0 ...`.
  absl::Status Sentence(absl::string_view where, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(label_, ", ", where, " ", what));
  }

  // What parsing copies out of the program is bounded by what its bytes can hold (CopyBudget): the
  // FlatBuffers verifier counts tables, and a file of a few megabytes whose nodes all share one
  // argument list of a million entries verifies. List entries are node arguments and results and
  // scalar int lists; string bytes are value, node, op and backend names and compile specs.
  absl::Status ListsTooLong(absl::string_view where) const {
    return Error(where, absl::StrCat("the program's lists hold more entries in all than its ",
                                     budget_.file_bytes(),
                                     " bytes can hold: lists are shared between tables, and "
                                     "parsing would copy each of them once per use"));
  }
  absl::Status StringsTooLong(absl::string_view where) const {
    return Error(where, absl::StrCat("the program's names hold more bytes in all than its ",
                                     budget_.file_bytes(),
                                     " bytes can hold: strings are shared between tables, and "
                                     "parsing would copy each of them once per use"));
  }

  const fbs::Value* value(size_t v) const { return method_.values()->Get(v); }
  size_t num_values() const { return num_values_; }
  bool IsTensor(size_t v) const { return value(v)->kind() != fbs::ValueKind::Scalar; }

  std::string KindArticle(size_t v) const {
    const char* name = ValueKindName(ToKind(value(v)->kind()));
    return absl::StrCat(value(v)->kind() == fbs::ValueKind::Input ? "an " : "a ", name);
  }

  bool InRange(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < num_values(); }
  // "value 40, but the method has 38 values", for an `id` out of range.
  std::string OutOfRange(int32_t id) const {
    return absl::StrCat("value ", id, ", but the method has ", num_values(), " values");
  }

  absl::Status VerifyValues() {
    if (num_values() > static_cast<size_t>(std::numeric_limits<ValueId>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(label_, ": too many values"));
    }
    const size_t num_segments = Len(program_.segments());
    // Each ValueDef is made as its value passes (BuildName, once per value in order): one pass
    // over the table's memory, not one to construct it and one to fill it.
    if (out_ != nullptr) out_->values.reserve(num_values());
    defs_.Reset(num_values());  // all but intermediates defined below, for VerifyNodes
    for (size_t v = 0; v < num_values(); ++v) {
      // Each field is read once, for the checks and for the ValueDef.
      const fbs::Value* val = value(v);
      const absl::string_view name = View(val->name());
      if (!budget_.SpendBytes(name.size())) {
        return StringsTooLong(absl::StrCat("value ", v));
      }
      const fbs::ValueKind kind = val->kind();
      if (!ValidKind(kind)) {
        return Error(ValueLabel(v, val),
                     absl::StrCat("kind ", static_cast<int>(kind),
                                  " is not a valid value kind (0 input, 1 constant, 2 state, 3 "
                                  "intermediate, 4 scalar)"));
      }
      if (kind != fbs::ValueKind::Intermediate) defs_.DefineAtStart(v);
      if (kind == fbs::ValueKind::Input) ++input_values_;
      if (kind == fbs::ValueKind::Scalar) {
        const fbs::ScalarValue* s = val->scalar();
        if (s == nullptr) return Error(ValueLabel(v, val), "a scalar value has no scalar");
        int k = static_cast<int>(s->kind());
        if (k < static_cast<int>(fbs::ScalarKind::MIN) ||
            k > static_cast<int>(fbs::ScalarKind::MAX)) {
          return Error(ValueLabel(v, val),
                       absl::StrCat("scalar kind ", k,
                                    " is not valid (0 int, 1 double, 2 bool, 3 int list, 4 None, "
                                    "5 string, 6 double list, 7 bool list)"));
        }
        // The FlatBuffers verifier checks a vector's length field, not the alignment of 8-byte
        // elements; reading a misaligned int64 or double is undefined.
        if (!Aligned8(s->int_list())) {
          return Error(ValueLabel(v, val), "the int list is not 8-byte aligned");
        }
        if (!Aligned8(s->double_list())) {
          return Error(ValueLabel(v, val), "the double list is not 8-byte aligned");
        }
        if (!budget_.SpendEntries(Len(s->int_list()) + Len(s->double_list()) +
                                  Len(s->bool_list()))) {
          return ListsTooLong(ValueLabel(v, val));
        }
        if (!budget_.SpendBytes(View(s->string_value()).size())) {
          return StringsTooLong(ValueLabel(v, val));
        }
        if (out_ != nullptr) BuildScalar(BuildName(v, name, kind), *s);
        continue;
      }
      const flatbuffers::Vector<int64_t>* sizes = val->sizes();
      if (!Aligned8(sizes)) {
        return Error(ValueLabel(v, val), "the sizes are not 8-byte aligned");
      }
      const fbs::DType dtype = val->dtype();
      if (!ValidDType(dtype)) {
        return Error(
            ValueLabel(v, val),
            absl::StrCat("dtype ", static_cast<int>(dtype),
                         " is not valid (0 float32, 1 int64, 2 bool, 3 int32, 4 int8, 5 uint8, 6 "
                         "int16, 7 uint16, 8 float16, 9 bfloat16, 10 float64)"));
      }
      const size_t rank = Len(sizes);
      if (rank > static_cast<size_t>(kMaxRank)) {
        return Error(ValueLabel(v, val),
                     absl::StrCat("rank ", rank, " exceeds the maximum rank ", kMaxRank));
      }
      const int64_t* dims = rank == 0 ? nullptr : sizes->data();
      for (size_t d = 0; d < rank; ++d) {
        if (dims[d] < 0) {
          return Error(ValueLabel(v, val),
                       absl::StrCat("size ", d, " is ", dims[d], "; sizes must be non-negative"));
        }
      }
      std::optional<size_t> byte_size =
          CheckedByteSize(ToDType(dtype), absl::MakeConstSpan(dims, rank));
      if (!byte_size.has_value()) {
        return Error(ValueLabel(v, val),
                     absl::StrCat(DTypeName(ToDType(dtype)), "[", SizesString(sizes),
                                  "] is too large: its byte size overflows"));
      }
      const flatbuffers::Vector<int32_t>* dim_order = val->dim_order();
      if (!IsDimOrder(DimsOf(dim_order), rank)) {
        return Error(ValueLabel(v, val),
                     absl::StrCat("dim_order ", DimOrderString(dim_order),
                                  " is not a permutation of 0..", rank - 1, " (rank ", rank, ")"));
      }
      const bool has_data = kind == fbs::ValueKind::Constant || kind == fbs::ValueKind::State;
      if (has_data) FERRY_RETURN_IF_ERROR(VerifyData(v, *byte_size, num_segments));
      const bool shared = val->shared();
      if (shared && kind != fbs::ValueKind::State) {
        return Error(ValueLabel(v, val), "is marked shared, which only a state can be");
      }
      if (out_ == nullptr) continue;
      ValueDef& out = BuildName(v, name, kind);
      out.meta.dtype = ToDType(dtype);
      FillList(out.meta.sizes, dims, rank);
      if (Len(dim_order) > 0) out.meta.dim_order.assign(dim_order->begin(), dim_order->end());
      out.shared = shared;
      if (has_data) {
        const flatbuffers::Vector<uint8_t>* data =
            program_.segments()->Get(val->data_segment())->data();
        if (data != nullptr) out.data = absl::MakeConstSpan(data->data(), data->size());
      }
    }
    return absl::OkStatus();
  }

  // The ValueDef of value v, the next in order, from fields its checks have passed: its name and
  // kind here, the rest by the caller.
  ValueDef& BuildName(size_t v, absl::string_view name, fbs::ValueKind kind) {
    ValueDef& out = out_->values.emplace_back();
    if (name.empty()) {
      out.name = absl::StrCat("value ", v);
    } else {
      AssignName(name, &out.name);
    }
    out.kind = ToKind(kind);
    return out;
  }
  static void BuildScalar(ValueDef& out, const fbs::ScalarValue& s) {
    switch (s.kind()) {
      case fbs::ScalarKind::Int:
        out.scalar = Scalar::Int(s.int_value());
        break;
      case fbs::ScalarKind::Double:
        out.scalar = Scalar::Double(s.double_value());
        break;
      case fbs::ScalarKind::Bool:
        out.scalar = Scalar::Bool(s.bool_value());
        break;
      case fbs::ScalarKind::IntList: {
        std::vector<int64_t> list;
        if (s.int_list() != nullptr) list.assign(s.int_list()->begin(), s.int_list()->end());
        out.scalar = Scalar::IntList(std::move(list));
        break;
      }
      case fbs::ScalarKind::None:
        out.scalar = Scalar::None();
        break;
      case fbs::ScalarKind::String:
        out.scalar = Scalar::String(std::string(View(s.string_value())));
        break;
      case fbs::ScalarKind::DoubleList: {
        std::vector<double> list;
        if (s.double_list() != nullptr) {
          list.assign(s.double_list()->begin(), s.double_list()->end());
        }
        out.scalar = Scalar::DoubleList(std::move(list));
        break;
      }
      case fbs::ScalarKind::BoolList: {
        std::vector<bool> list;
        if (s.bool_list() != nullptr) {
          for (uint8_t b : *s.bool_list()) list.push_back(b != 0);
        }
        out.scalar = Scalar::BoolList(list);
        break;
      }
    }
  }

  absl::Status VerifyData(size_t v, size_t byte_size, size_t num_segments) {
    const fbs::Value* val = value(v);
    const char* what = val->kind() == fbs::ValueKind::Constant ? "constant" : "state";
    const int32_t segment = val->data_segment();
    if (segment < 0) {
      return Error(ValueLabel(v, val), absl::StrCat("a ", what, " needs data, but it has none"));
    }
    if (static_cast<size_t>(segment) >= num_segments) {
      return Error(ValueLabel(v, val),
                   absl::StrCat(what, " data is segment ", segment, ", but the program has ",
                                num_segments, " segments"));
    }
    // The verifier has checked that the segment lies inside the buffer.
    const flatbuffers::Vector<uint8_t>* data = program_.segments()->Get(segment)->data();
    const size_t size = Len(data);
    if (size != byte_size) {
      return Error(ValueLabel(v, val), absl::StrCat(what, " data is ", size, " bytes, expected ",
                                                    byte_size, " for ", MetaOf(val).ToString()));
    }
    if (options_.check_alignment && size > 0) {
      const size_t offset = static_cast<size_t>(data->data() - bytes_.data());
      if (offset % kSegmentAlignment != 0) {
        return Error(ValueLabel(v, val),
                     absl::StrCat(what, " data is at byte ", offset,
                                  " of the program, which is not a multiple of ",
                                  kSegmentAlignment,
                                  ". Ferry's writer aligns constant and state data so that it "
                                  "can be used in place. ",
                                  kFlatcAdvice));
      }
    }
    return absl::OkStatus();
  }

  absl::Status VerifyInputs() {
    const auto* inputs = method_.inputs();
    absl::flat_hash_map<int32_t, int32_t> position;  // listed value -> its place in the list
    position.reserve(Len(inputs));
    size_t listed_input_values = 0;
    for (size_t i = 0; i < Len(inputs); ++i) {
      const int32_t id = inputs->Get(i);
      const std::string where = absl::StrCat("input ", i);
      if (!InRange(id)) return Sentence(where, absl::StrCat("is ", OutOfRange(id)));
      const fbs::ValueKind kind = value(id)->kind();
      if (kind != fbs::ValueKind::Input && kind != fbs::ValueKind::Scalar) {
        return Sentence(where, absl::StrCat("is ", ValueLabel(id, value(id)), ", ", KindArticle(id),
                                            "; method inputs must be input or scalar values"));
      }
      if (kind == fbs::ValueKind::Input) ++listed_input_values;
      if (auto [it, added] = position.try_emplace(id, static_cast<int32_t>(i)); !added) {
        return Sentence(where, absl::StrCat("is ", ValueLabel(id, value(id)),
                                            ", which is already input ", it->second));
      }
    }
    // The listed inputs are distinct: all input values are listed iff as many are as
    // VerifyValues counted. Only then is the value table walked, to name the first one missing.
    for (size_t v = 0; listed_input_values != input_values_ && v < num_values(); ++v) {
      if (value(v)->kind() == fbs::ValueKind::Input &&
          !position.contains(static_cast<int32_t>(v))) {
        return Error(ValueLabel(v, value(v)),
                     "an input value that is not listed in the method's inputs");
      }
    }
    if (out_ != nullptr && inputs != nullptr) out_->inputs.assign(inputs->begin(), inputs->end());
    return absl::OkStatus();
  }

  absl::Status VerifyNodes() {
    const auto* nodes = method_.nodes();
    if (out_ != nullptr) out_->nodes.reserve(Len(nodes));  // made in order, as the values are
    for (size_t n = 0; n < Len(nodes); ++n) {
      const fbs::Node* node = nodes->Get(n);
      // The label is built only for an error: this loop runs once per node of large methods.
      auto fail = [&](absl::string_view what) { return Error(NodeLabel(n, node), what); };
      // Each field is read once, for the checks and for the NodeDef.
      const fbs::HostOp* host = nullptr;
      const fbs::DelegateCall* call = nullptr;
      absl::string_view op_name;  // the host op's, or the delegate's backend
      switch (node->op_type()) {
        case fbs::NodeOp::HostOp: {
          host = static_cast<const fbs::HostOp*>(node->op());
          if (host == nullptr) return fail("the host op is missing");
          op_name = View(host->op());
          if (op_name.empty()) return fail("the host op has no op name");
          break;
        }
        case fbs::NodeOp::DelegateCall:
          call = static_cast<const fbs::DelegateCall*>(node->op());
          if (call == nullptr) return fail("the delegate call is missing");
          op_name = View(call->backend());
          break;
        default:
          return fail(absl::StrCat("operation type ", static_cast<int>(node->op_type()),
                                   " is neither a host op (1) nor a delegate call (2)"));
      }
      absl::string_view name = View(node->name());
      if (name.empty()) name = op_name;  // as NodeDisplayName
      const auto* args = node->args();
      const auto* results = node->results();
      const size_t num_args = Len(args);
      const size_t num_results = Len(results);
      if (!budget_.SpendEntries(num_args + num_results)) {
        return ListsTooLong(absl::StrCat("node ", n));
      }
      if (!budget_.SpendBytes(host != nullptr ? name.size() + op_name.size()
                                              : CopiedStringBytes(node))) {
        return StringsTooLong(absl::StrCat("node ", n));
      }
      const int32_t* arg_ids = num_args == 0 ? nullptr : args->data();
      for (size_t a = 0; a < num_args; ++a) {
        const int32_t id = arg_ids[a];
        if (!InRange(id)) return fail(absl::StrCat("argument ", a, " is ", OutOfRange(id)));
        if (!defs_.IsDefined(id)) {
          return fail(absl::StrCat("argument ", a, " is ", ValueLabel(id, value(id)),
                                   ", an intermediate that no earlier node produces"));
        }
      }
      const int32_t* result_ids = num_results == 0 ? nullptr : results->data();
      for (size_t r = 0; r < num_results; ++r) {
        const int32_t id = result_ids[r];
        if (!InRange(id)) return fail(absl::StrCat("result ", r, " is ", OutOfRange(id)));
        const int32_t earlier = defs_.producer(id);
        switch (defs_.Produce(id, static_cast<int32_t>(n))) {
          case DefinitionTracker::ProduceResult::kOk:
            break;
          case DefinitionTracker::ProduceResult::kNotIntermediate:
            return fail(absl::StrCat("result ", r, " is ", ValueLabel(id, value(id)), ", ",
                                     KindArticle(id), "; results must be intermediates"));
          case DefinitionTracker::ProduceResult::kAlreadyProduced:
            return fail(absl::StrCat("result ", r, " is ", ValueLabel(id, value(id)), ", which ",
                                     NodeLabel(earlier, nodes->Get(earlier)),
                                     " already produces"));
        }
      }
      if (call != nullptr) FERRY_RETURN_IF_ERROR(VerifyDelegate(n, *node, *call));
      if (out_ == nullptr) continue;
      NodeDef& out = out_->nodes.emplace_back();
      AssignName(name, &out.name);  // names reach messages: escaped (base/text.h)
      FillList(out.args, arg_ids, num_args);
      FillList(out.results, result_ids, num_results);
      if (host != nullptr) {
        out.kind = NodeKind::kHostOp;
        out.op.assign(op_name.data(), op_name.size());
      } else {
        BuildDelegate(out, *call);
      }
    }
    return absl::OkStatus();
  }

  // A delegate node's own fields, from a call its checks have passed.
  static void BuildDelegate(NodeDef& node, const fbs::DelegateCall& call) {
    node.kind = NodeKind::kDelegate;
    DelegateDef& out = node.mutable_delegate();
    out.backend = std::string(View(call.backend()));
    if (call.compile_specs() != nullptr) {
      for (const fbs::CompileSpec* spec : *call.compile_specs()) {
        out.compile_specs.emplace_back(std::string(View(spec->key())),
                                       std::string(View(spec->value())));
      }
    }
    if (call.payload() != nullptr) {
      out.payload = absl::MakeConstSpan(call.payload()->data(), call.payload()->size());
    }
    if (call.arg_dim_orders() != nullptr) {
      for (const fbs::DimOrder* order : *call.arg_dim_orders()) {
        std::vector<int32_t> dims;
        if (order->dims() != nullptr) dims.assign(order->dims()->begin(), order->dims()->end());
        out.arg_dim_orders.push_back(std::move(dims));
      }
    }
    if (call.written_args() != nullptr) {
      out.written_args.assign(call.written_args()->begin(), call.written_args()->end());
    }
  }

  absl::Status VerifyDelegate(size_t n, const fbs::Node& node, const fbs::DelegateCall& call) {
    auto fail = [&](absl::string_view what) { return Error(NodeLabel(n, &node), what); };
    if (View(call.backend()).empty()) return fail("the delegate call has no backend name");
    const auto* specs = call.compile_specs();
    absl::flat_hash_set<absl::string_view> keys;
    for (size_t s = 0; s < Len(specs); ++s) {
      absl::string_view key = View(specs->Get(s)->key());
      if (key.empty()) return fail(absl::StrCat("compile spec ", s, " has an empty key"));
      if (!keys.insert(key).second) {
        return fail(absl::StrCat("compile spec key \"", absl::CHexEscape(key),
                                 "\" appears more than once"));
      }
    }
    const size_t num_args = Len(node.args());
    const auto* orders = call.arg_dim_orders();
    if (Len(orders) != 0 && Len(orders) != num_args) {
      return fail(absl::StrCat("arg_dim_orders has ", Len(orders), " entries, but the call has ",
                               num_args, " arguments"));
    }
    for (size_t a = 0; a < Len(orders); ++a) {
      const flatbuffers::Vector<int32_t>* dims = orders->Get(a)->dims();
      if (Len(dims) == 0) continue;
      const int32_t id = node.args()->Get(a);
      if (!IsTensor(id)) {
        return fail(absl::StrCat("arg_dim_orders entry ", a, " is given for argument ", a,
                                 ", which is a scalar"));
      }
      const size_t rank = Len(value(id)->sizes());
      if (!IsDimOrder(DimsOf(dims), rank)) {
        return fail(absl::StrCat("the dim order ", DimOrderString(dims), " of argument ", a,
                                 " is not a permutation of 0..", rank - 1, " (",
                                 ValueLabel(id, value(id)), " has rank ", rank, ")"));
      }
    }
    const auto* written = call.written_args();
    std::vector<bool> seen(num_args, false);
    for (size_t w = 0; w < Len(written); ++w) {
      const int32_t a = written->Get(w);
      if (a < 0 || static_cast<size_t>(a) >= num_args) {
        return fail(absl::StrCat("written argument ", w, " is argument ", a, ", but the call has ",
                                 num_args, " arguments"));
      }
      if (seen[a]) {
        return fail(absl::StrCat("argument ", a, " is listed as written more than once"));
      }
      seen[a] = true;
      if (!IsTensor(node.args()->Get(a))) {
        return fail(absl::StrCat("written argument ", a, " is a scalar"));
      }
    }
    // The payload needs no check of its own: the verifier has put it inside the buffer, and its
    // content belongs to the backend, which verifies it at init.
    return absl::OkStatus();
  }

  absl::Status VerifyOutputs() {
    const auto* outputs = method_.outputs();
    for (size_t o = 0; o < Len(outputs); ++o) {
      const int32_t id = outputs->Get(o);
      const std::string where = absl::StrCat("output ", o);
      if (!InRange(id)) return Sentence(where, absl::StrCat("is ", OutOfRange(id)));
      if (!defs_.IsDefined(id)) {
        return Sentence(where, absl::StrCat("is ", ValueLabel(id, value(id)),
                                            ", an intermediate that no node produces"));
      }
    }
    if (out_ != nullptr && outputs != nullptr) {
      out_->outputs.assign(outputs->begin(), outputs->end());
    }
    return absl::OkStatus();
  }

  const fbs::Program& program_;
  absl::Span<const uint8_t> bytes_;
  const VerifyOptions& options_;
  const fbs::Method& method_;
  const std::string label_;
  CopyBudget& budget_;
  MethodDef* const out_;  // built as each element passes its checks; nullptr: verify only
  const size_t num_values_;
  // Which values are defined, and by which node, as the walk goes.
  DefinitionTracker defs_;
  size_t input_values_ = 0;  // values of kind Input (VerifyValues)
};

std::string MethodLabel(size_t index, absl::string_view name) {
  if (name.empty()) return absl::StrCat("method ", index);
  return absl::StrCat("method \"", absl::CHexEscape(name), "\"");
}

}  // namespace

namespace {

using Where = VerifierPath::Where;

Where InScalar(const VerifierPath& at, const fbs::ScalarValue* scalar, std::string*) {
  using S = fbs::ScalarValue;
  Where where = at.Plain(scalar, S::VT_INT_LIST, "int_list", &S::int_list);
  if (!where) where = at.Plain(scalar, S::VT_STRING_VALUE, "string_value", &S::string_value);
  if (!where) where = at.Plain(scalar, S::VT_DOUBLE_LIST, "double_list", &S::double_list);
  if (!where) where = at.Plain(scalar, S::VT_BOOL_LIST, "bool_list", &S::bool_list);
  return where;
}

Where InValue(const VerifierPath& at, const fbs::Value* value, std::string*) {
  using V = fbs::Value;
  Where where = at.Plain(value, V::VT_NAME, "name", &V::name);
  if (!where) where = at.Plain(value, V::VT_SIZES, "sizes", &V::sizes);
  if (!where) where = at.Plain(value, V::VT_DIM_ORDER, "dim_order", &V::dim_order);
  if (!where) where = at.OneTable(value, V::VT_SCALAR, "scalar", &V::scalar, InScalar);
  return where;
}

Where InNode(const VerifierPath& at, const fbs::Node* node, std::string* label) {
  using N = fbs::Node;
  *label = at.UnionLabel(node, N::VT_OP_TYPE, &N::op_type, &fbs::EnumNameNodeOp);
  Where where = at.Plain(node, N::VT_NAME, "name", &N::name);
  if (where) return where;
  if (!at.ScalarField<uint8_t>(node, N::VT_OP_TYPE)) return "op_type";
  if (!at.Offset(node, N::VT_OP)) return "op (its offset)";
  if (const fbs::HostOp* op = node->op_as_HostOp(); op != nullptr && at.TableStart(op)) {
    where = at.Plain(op, fbs::HostOp::VT_OP, "op.op", &fbs::HostOp::op);
  } else if (const fbs::DelegateCall* call = node->op_as_DelegateCall();
             call != nullptr && at.TableStart(call)) {
    using D = fbs::DelegateCall;
    where = at.Plain(call, D::VT_BACKEND, "op.backend", &D::backend);
    if (!where) where = at.Tables(call, D::VT_COMPILE_SPECS, "op.compile_specs", &D::compile_specs);
    if (!where) where = at.Plain(call, D::VT_PAYLOAD, "op.payload", &D::payload);
    if (!where) {
      where = at.Tables(call, D::VT_ARG_DIM_ORDERS, "op.arg_dim_orders", &D::arg_dim_orders);
    }
    if (!where) where = at.Plain(call, D::VT_WRITTEN_ARGS, "op.written_args", &D::written_args);
  }
  if (!where) where = at.Plain(node, N::VT_ARGS, "args", &N::args);
  if (!where) where = at.Plain(node, N::VT_RESULTS, "results", &N::results);
  return where;
}

Where InMethod(const VerifierPath& at, const fbs::Method* method, std::string* label) {
  using M = fbs::Method;
  Where where = at.Plain(method, M::VT_NAME, "name", &M::name);
  if (where) return where;
  if (method->name() != nullptr) {
    *label = absl::StrCat(" (method \"", SanitizeName(View(method->name())), "\")");
  }
  where = at.Tables(method, M::VT_VALUES, "values", &M::values, InValue);
  if (!where) where = at.Tables(method, M::VT_NODES, "nodes", &M::nodes, InNode);
  if (!where) where = at.Plain(method, M::VT_INPUTS, "inputs", &M::inputs);
  if (!where) where = at.Plain(method, M::VT_OUTPUTS, "outputs", &M::outputs);
  return where;
}

// After the verifier rejected `bytes` (identifier checked): the first part of the program that
// fails on its own, or nullopt when each passes alone (the table limit was reached).
Where LocateFailure(absl::Span<const uint8_t> bytes, size_t max_tables) {
  const VerifierPath at(bytes, kSchemaDepth, max_tables);
  if (!at.RootOffset()) return "the root offset (bytes 0..3)";
  using P = fbs::Program;
  const P* root = fbs::GetProgram(bytes.data());
  if (!at.TableStart(root)) return "the Program table's header";
  if (!at.ScalarField<uint32_t>(root, P::VT_VERSION)) return "version";
  Where where = at.Tables(root, P::VT_METHODS, "methods", &P::methods, InMethod);
  if (!where) where = at.Tables(root, P::VT_SEGMENTS, "segments", &P::segments);
  return where;
}

// The checks before any accessor runs: size, file identifier, the FlatBuffers verifier, version.
absl::StatusOr<const fbs::Program*> VerifyStructure(absl::Span<const uint8_t> bytes,
                                                    const VerifyOptions& options) {
  constexpr size_t kHeader = sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength;
  if (bytes.empty()) return absl::InvalidArgumentError("the program is empty (0 bytes)");
  if (bytes.size() < kHeader) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program is ", bytes.size(), " bytes, too short for a Ferry program"));
  }
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), kProgramFileIdentifier)) {
    absl::string_view id(reinterpret_cast<const char*>(bytes.data()) + 4, 4);
    return absl::InvalidArgumentError(
        absl::StrCat("not a Ferry program: the file identifier (bytes 4..7) is \"",
                     absl::CHexEscape(id), "\", expected \"", kProgramFileIdentifier, "\""));
  }
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program is ", bytes.size(), " bytes; the format holds less than 2 GiB"));
  }
  const size_t max_tables = MaxTablesFor(bytes.size());
  // The verdict of the FlatBuffers verifier flatc generates for the schema (with max_tables),
  // reached by Ferry's verifier written for the schema (loader/ferry/internal/table_verifier.h).
  auto well_formed = [&] { return ProgramTablesWellFormed(bytes, max_tables); };
  if (options.check_alignment && bytes.size() % kSegmentAlignment != 0) {
    // Ferry's writer pads every program to a multiple of 64. A size that is not, in a buffer
    // that is otherwise well formed, is the mark of another writer: stock `flatc -b`.
    if (!well_formed()) {
      const Where at = LocateFailure(bytes, max_tables);
      return absl::InvalidArgumentError(absl::StrCat(
          "the program is ", bytes.size(), " bytes, not a multiple of ", kSegmentAlignment,
          ", and the FlatBuffers verifier rejects it", at.has_value() ? " at " : "",
          at.value_or(""), ": it is truncated or damaged"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the program is ", bytes.size(), " bytes, not a multiple of ", kSegmentAlignment,
        ", so it is not a program as Ferry's writer leaves it (it was written by another tool, "
        "or cut short or extended). ",
        kFlatcAdvice));
  }
  if (!well_formed()) {
    const Where at = LocateFailure(bytes, max_tables);
    if (!at.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the program is malformed: the FlatBuffers verifier rejected it, though each of its "
          "parts passes on its own: it holds more than ",
          max_tables, " tables (counting each use of a shared one)"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("the program is malformed: the FlatBuffers verifier rejected it at ", *at,
                     " (an offset or length there points outside the buffer, or a field is "
                     "misaligned)"));
  }
  const fbs::Program* program = fbs::GetProgram(bytes.data());
  if (program->version() != kProgramFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("program format version ", program->version(),
                                                   " is not supported (this runtime reads version ",
                                                   kProgramFormatVersion, ")"));
  }
  if (Len(program->methods()) == 0) return absl::InvalidArgumentError("the program has no methods");
  return program;
}

// The semantic pass over every method of a program VerifyStructure accepted; with `out`, each
// method's MethodDef is built in the same pass, element by element as each passes its checks.
absl::Status VerifyMethods(const fbs::Program& program, absl::Span<const uint8_t> bytes,
                           const VerifyOptions& options, std::vector<MethodDef>* out) {
  const auto* methods = program.methods();
  absl::flat_hash_set<absl::string_view> names;
  CopyBudget budget(bytes.size());
  if (out != nullptr) out->reserve(methods->size());
  for (size_t m = 0; m < methods->size(); ++m) {
    const fbs::Method* method = methods->Get(m);
    absl::string_view name = View(method->name());
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("method ", m, " has no name"));
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(MethodLabel(m, name), " is defined more than once"));
    }
    MethodDef* def = nullptr;
    if (out != nullptr) {
      def = &out->emplace_back();
      def->name = SanitizeName(name);
    }
    FERRY_RETURN_IF_ERROR(
        MethodVerifier(program, bytes, options, *method, MethodLabel(m, name), budget, def)
            .Verify());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const fbs::Program*> VerifyProgram(absl::Span<const uint8_t> bytes,
                                                  const VerifyOptions& options) {
  FERRY_ASSIGN_OR_RETURN(const fbs::Program* program, VerifyStructure(bytes, options));
  FERRY_RETURN_IF_ERROR(VerifyMethods(*program, bytes, options, nullptr));
  return program;
}

ReadMemory ReadMemoryOf(const fbs::Program& program) {
  ReadMemory need;
  for (const fbs::Method* method : *program.methods()) {
    need.Add(Len(method->values()), sizeof(ValueDef), Len(method->nodes()), sizeof(NodeDef));
  }
  return need;
}

absl::StatusOr<std::vector<MethodDef>> ReadProgram(absl::Span<const uint8_t> bytes,
                                                   const VerifyOptions& options,
                                                   size_t memory_limit) {
  FERRY_ASSIGN_OR_RETURN(const fbs::Program* program, VerifyStructure(bytes, options));
  FERRY_RETURN_IF_ERROR(CheckReadMemory(ReadMemoryOf(*program), memory_limit));
  std::vector<MethodDef> methods;
  FERRY_RETURN_IF_ERROR(VerifyMethods(*program, bytes, options, &methods));
  return methods;
}

}  // namespace ferry::internal
