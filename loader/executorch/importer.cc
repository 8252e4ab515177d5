#include "ferry/loader/executorch/importer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/text.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"
#include "ferry/loader/internal/untrusted_bytes.h"

namespace ferry::internal {
namespace {

constexpr size_t kConstantAlignment = 64;

bool IsIdentity(absl::Span<const uint8_t> dim_order) {
  for (size_t i = 0; i < dim_order.size(); ++i) {
    if (dim_order[i] != i) return false;
  }
  return true;
}

// What one call of delegate `d` copies into its node: the backend id twice (name and backend)
// and the compile specs.
size_t DelegateCallBytes(const EtDelegate& d) {
  size_t bytes = 2 * d.backend_id.size();
  for (const auto& [key, value] : d.compile_specs) bytes += key.size() + value.size();
  return bytes;
}

// et_copy::_h2d_copy.out and _d2h_copy.out, through MethodImporter::ImportExporterCopy.
template <bool kToDevice>
absl::Status ImportExporterCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return m.ImportExporterCopy(kToDevice, args, out);
}

}  // namespace

absl::Span<const EtOpMapping> ExporterCopyEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"et_copy::_h2d_copy.out", 1, &ImportExporterCopy<true>},
      {"et_copy::_d2h_copy.out", 1, &ImportExporterCopy<false>},
  };
  return kOps;
}

absl::Span<const absl::Span<const EtOpMapping>> AllEtOpTables() {
  static const absl::Span<const EtOpMapping> kTables[] = {
      ElementwiseEtOps(), LinalgEtOps(), ShapeEtOps(), DTypeEtOps(),
      ReduceEtOps(),      IndexEtOps(),  NnEtOps(),    ExporterCopyEtOps(),
  };
  return kTables;
}

const EtOpMapping* FindEtOp(absl::string_view et_name) {
  static const auto* const by_name = [] {
    auto* map = new absl::flat_hash_map<absl::string_view, const EtOpMapping*>();
    for (absl::Span<const EtOpMapping> table : AllEtOpTables()) {
      for (const EtOpMapping& m : table) map->try_emplace(m.et_name, &m);  // the first one wins
    }
    return map;
  }();
  auto it = by_name->find(et_name);
  return it == by_name->end() ? nullptr : it->second;
}

void PendingConstants::Add(const Key& key, PendingConstant c) {
  auto [it, inserted] = index_.try_emplace(key, static_cast<int32_t>(list_.size()));
  if (!inserted) {
    c.same_as = it->second;
    c.source = {};
    c.folded.clear();
  }
  list_.push_back(std::move(c));
  keys_.push_back(key);
}

void PendingConstants::Truncate(size_t n) {
  while (list_.size() > n) {
    // An entry that owns its key is the one the index names; a later one refers to an earlier
    // entry, which stays.
    if (list_.back().same_as < 0) index_.erase(keys_.back());
    list_.pop_back();
    keys_.pop_back();
  }
}

MethodImporter::MethodImporter(const EtMethod& et, size_t method_index, const EtDataFile* data,
                               PendingConstants* constants)
    : et_(et), method_index_(method_index), data_(data), constants_(*constants) {}

absl::StatusOr<MethodDef> MethodImporter::Run() {
  def_.name = SanitizeName(et_.name);
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
  WriteBackStates();
  return std::move(def_);
}

// ExecuTorch keeps what a call writes into a mutable buffer for the next call; Ferry gave each
// write its own value. A state whose last write went elsewhere gets that value copied back into
// it at the end of the method; one written in place (copy_, index_put_ on the state itself)
// already holds it.
void MethodImporter::WriteBackStates() {
  if (states_.empty()) return;
  absl::flat_hash_map<ValueId, size_t> producer;
  for (size_t n = 0; n < def_.nodes.size(); ++n) {
    for (ValueId r : def_.nodes[n].results) producer[r] = n;
  }
  for (const auto& [v, state] : states_) {
    ValueId last = latest_[v];
    // Through the in-place writes (Ferry's ops ending in '_' write their argument 0 and return
    // a view of it) to the memory the last value lives in.
    for (auto it = producer.find(last); it != producer.end(); it = producer.find(last)) {
      const NodeDef& node = def_.nodes[it->second];
      if (node.kind != NodeKind::kHostOp || !absl::EndsWith(node.op, "_")) break;
      last = node.args[0];
    }
    if (last == state) continue;
    ValueDef result;
    result.name = absl::StrCat(def_.values[state].name, " (written back)");
    result.kind = ValueKind::kIntermediate;
    result.meta = def_.values[state].meta;
    const ValueId r = Add(std::move(result));
    NodeDef node;
    node.op = "copy_";
    node.name = absl::StrCat("write back ", def_.values[state].name);
    node.args = {state, latest_[v]};
    node.results = {r};
    def_.nodes.push_back(std::move(node));
    if (!def_.node_instructions.empty()) def_.node_instructions.push_back(-1);
  }
}

// "method "forward", instruction 3 (aten::add.out)"
std::string MethodImporter::Where() const {
  std::string where = absl::StrCat("method \"", def_.name, "\"");
  if (instruction_ >= 0) {
    absl::StrAppend(&where, ", instruction ", instruction_);
    if (!op_name_.empty()) absl::StrAppend(&where, " (", op_name_, ")");
  }
  return where;
}

absl::Status MethodImporter::Unimplemented(absl::string_view what) const {
  return absl::UnimplementedError(absl::StrCat(Where(), ": ", what));
}

absl::Status MethodImporter::Invalid(absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(), ": ", what));
}

// Value `v` as a Scalar: any kind but a tensor or a tensor list (`what` names it in errors).
absl::StatusOr<Scalar> MethodImporter::NonTensor(int32_t v, absl::string_view what) {
  const EtValue& value = et_.values[v];
  switch (value.kind) {
    case EtValueKind::kNull:
      return Scalar::None();
    case EtValueKind::kInt:
    case EtValueKind::kDouble:
    case EtValueKind::kBool:
      return NumberValue(v, what);
    case EtValueKind::kString:
      return Scalar::String(value.string_value);
    case EtValueKind::kIntList: {
      FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> list, IntList(v, what));
      return Scalar::IntList(std::move(list));
    }
    case EtValueKind::kDoubleList:
      return Scalar::DoubleList(value.doubles);
    case EtValueKind::kBoolList:
      return Scalar::BoolList(value.bools);
    default:
      return Unimplemented(absl::StrCat(what, " is value ", v, ", ", EtValueKindArticle(value.kind),
                                        " ", EtValueKindName(value.kind),
                                        ", which is not supported"));
  }
}

// A non-tensor input or output: one Ferry value per ExecuTorch value, however often it is
// listed, so that what the import copies is bounded by the file.
absl::StatusOr<ValueId> MethodImporter::NonTensorIo(int32_t v, absl::string_view what) {
  if (latest_[v] >= 0) return latest_[v];
  FERRY_ASSIGN_OR_RETURN(Scalar s, NonTensor(v, what));
  latest_[v] = AddScalar(std::move(s), what);
  return latest_[v];
}

absl::Status MethodImporter::AddInputs() {
  for (size_t i = 0; i < et_.inputs.size(); ++i) {
    const int32_t v = et_.inputs[i];
    if (et_.values[v].kind != EtValueKind::kTensor) {
      // ExecuTorch fixes a non-tensor input at export: a call must pass the traced value.
      FERRY_ASSIGN_OR_RETURN(ValueId id, NonTensorIo(v, absl::StrCat("input ", i)));
      def_.inputs.push_back(id);
      continue;
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

absl::Status MethodImporter::SetOutputs() {
  for (size_t i = 0; i < et_.outputs.size(); ++i) {
    const int32_t v = et_.outputs[i];
    if (et_.values[v].kind != EtValueKind::kTensor) {
      FERRY_ASSIGN_OR_RETURN(ValueId id, NonTensorIo(v, absl::StrCat("output ", i)));
      def_.outputs.push_back(id);
      continue;
    }
    FERRY_ASSIGN_OR_RETURN(ValueId id, ReadTensor(v));
    def_.outputs.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status MethodImporter::ImportInstruction(const EtInstruction& instruction) {
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
  // Looked up by the file's name; named in messages and nodes escaped (base/text.h).
  const std::string full_name = et_.operators[instruction.op_index].FullName();
  op_name_ = SanitizeName(full_name);
  const EtOpMapping* mapping = FindEtOp(full_name);
  if (mapping == nullptr) {
    return Unimplemented(absl::StrCat("op \"", op_name_, "\" is not supported",
                                      OtherUnsupportedOps(instruction.op_index)));
  }
  // The schema's arguments, then `out`, then the returned value (the same as `out`); an
  // in-place op has no `out` and returns its argument 0.
  const std::vector<int32_t>& args = instruction.args;
  if (mapping->num_outs > 1) return ImportMultiOutput(*mapping, args);
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
  return mapping->import(*this, absl::MakeConstSpan(args).first(mapping->num_args), out);
}

// A call of several outputs: the schema's arguments, the outputs, then the tensor list the call
// returns, which holds exactly the outputs.
absl::Status MethodImporter::ImportMultiOutput(const EtOpMapping& mapping,
                                               const std::vector<int32_t>& args) {
  const int num_outs = mapping.num_outs;
  if (static_cast<int>(args.size()) != mapping.num_args + num_outs + 1) {
    return Invalid(absl::StrCat("the call passes ", args.size(), " arguments, but ", op_name_,
                                " takes ", mapping.num_args, ", then its ", num_outs,
                                " outputs and the list of them it returns"));
  }
  const absl::Span<const int32_t> outs =
      absl::MakeConstSpan(args).subspan(mapping.num_args, num_outs);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (et_.values[outs[i]].kind != EtValueKind::kTensor) {
      return Invalid(absl::StrCat("output ", i, " is value ", outs[i], ", a ",
                                  EtValueKindName(et_.values[outs[i]].kind), ", not a tensor"));
    }
  }
  const EtValue& returned = et_.values[args.back()];
  if (returned.kind != EtValueKind::kTensorList ||
      !std::equal(returned.items.begin(), returned.items.end(), outs.begin(), outs.end())) {
    return Invalid(absl::StrCat("the returned value is value ", args.back(),
                                ", not a tensor list of the outputs (values ",
                                absl::StrJoin(outs, ", "), ")"));
  }
  return mapping.import(*this, absl::MakeConstSpan(args).first(mapping.num_args + num_outs),
                        outs[0]);
}

// After the first unsupported op, the method's other unsupported ops, so that one attempt names
// everything missing: "; 2 more unsupported ops: a.out (instruction 7, 3 calls), b.out
// (instruction 9)". Empty when there is none. Built only on this error path.
std::string MethodImporter::OtherUnsupportedOps(int32_t named) const {
  struct Seen {
    int first = -1;
    int calls = 0;
  };
  absl::flat_hash_map<int32_t, Seen> by_operator;  // operator index -> its calls
  std::vector<int32_t> order;
  for (size_t i = static_cast<size_t>(instruction_) + 1; i < et_.instructions.size(); ++i) {
    const EtInstruction& call = et_.instructions[i];
    if (call.kind != EtInstructionKind::kKernelCall) continue;
    Seen& seen = by_operator[call.op_index];
    if (seen.first < 0) {
      if (call.op_index == named || FindEtOp(et_.operators[call.op_index].FullName()) != nullptr) {
        seen.first = -2;  // supported, or the one already named
        continue;
      }
      seen.first = static_cast<int>(i);
      order.push_back(call.op_index);
    }
    if (seen.first >= 0) ++seen.calls;
  }
  if (order.empty()) return "";
  std::string out =
      absl::StrCat("; ", order.size(), " more unsupported op", order.size() == 1 ? "" : "s", ": ");
  for (size_t k = 0; k < order.size(); ++k) {
    const Seen& seen = by_operator[order[k]];
    absl::StrAppend(&out, k == 0 ? "" : ", ", SanitizeName(et_.operators[order[k]].FullName()),
                    " (instruction ", seen.first,
                    seen.calls > 1 ? absl::StrCat(", ", seen.calls, " calls") : "", ")");
  }
  return out;
}

// A delegate call becomes one delegate node named by its backend id. ExecuTorch lists the
// call's arguments and results in one list; the results are the values nothing has written
// before the call (not an input, a constant or an earlier result), and they must all come after
// the arguments, be tensors and appear once.
absl::Status MethodImporter::ImportDelegateCall(const EtInstruction& instruction) {
  const EtDelegate& d = et_.delegates[instruction.delegate_index];
  op_name_ = absl::StrCat("delegate call to backend \"", SanitizeName(d.backend_id), "\"");
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
  node.name = absl::StrCat(SanitizeName(d.backend_id), " (instruction ", instruction_, ")");
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
      return Unimplemented(absl::StrCat("value ", v, " (position ", position, " of ", list.size(),
                                        ") comes after value ", list[first_result],
                                        ", the first value the call writes, so it "
                                        "would be a result, but it is ",
                                        EtValueKindArticle(et_.values[v].kind), " ",
                                        EtValueKindName(et_.values[v].kind),
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

// Records, for Ferry value `id` made from ExecuTorch value `v`, the exporter's device
// annotation (a device other than the host, of a type Ferry's device type plug-ins name) and
// the arena the exporter planned it in.
void MethodImporter::Annotate(int32_t v, ValueId id) {
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
bool MethodImporter::Written(int32_t v) const {
  if (latest_[v] >= 0) return true;
  const EtValue& value = et_.values[v];
  if (value.kind != EtValueKind::kTensor) return true;
  return value.tensor.data.kind != EtDataKind::kNone;
}

// Argument `position` of a delegate call: a tensor, or an Int, Double, Bool or IntList passed
// to the backend as a scalar.
absl::StatusOr<ValueId> MethodImporter::DelegateArgument(int32_t v, size_t position) {
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

ValueId MethodImporter::Add(ValueDef value) {
  def_.values.push_back(std::move(value));
  return static_cast<ValueId>(def_.values.size() - 1);
}

absl::StatusOr<TensorMeta> MethodImporter::MetaOf(int32_t v) const {
  const EtValue& value = et_.values[v];
  if (value.kind != EtValueKind::kTensor) {
    return Invalid(absl::StrCat("value ", v, " is ", EtValueKindArticle(value.kind), " ",
                                EtValueKindName(value.kind), ", where a tensor is expected"));
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
absl::StatusOr<ValueId> MethodImporter::ReadTensor(int32_t v) {
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
      break;
    case EtDataKind::kNone:
      return Invalid(absl::StrCat("value ", v,
                                  " is read before any instruction writes it, and it is "
                                  "neither an input nor a constant"));
  }
  ValueDef value;
  value.name = t.fully_qualified_name.empty() ? absl::StrCat("value ", v)
                                              : SanitizeName(t.fully_qualified_name);
  // Mutable state with initial data (a buffer the program updates, a weight a training step
  // writes) persists across calls, like Ferry's states; its initial data is copied like a
  // constant's.
  const bool state = t.data.kind == EtDataKind::kMutableSegment;
  value.kind = state ? ValueKind::kState : ValueKind::kConstant;
  value.meta = std::move(meta);
  absl::Span<const uint8_t> bytes = t.data.bytes;
  if (t.data.kind == EtDataKind::kExternal) {
    FERRY_ASSIGN_OR_RETURN(bytes, ExternalData(v));
  }
  latest_[v] = Add(std::move(value));
  if (state) states_.emplace_back(v, latest_[v]);
  PendingConstant constant;
  constant.method = method_index_;
  constant.value = latest_[v];
  constant.source = bytes;
  constants_.Add(PendingConstants::Bytes(bytes), std::move(constant));
  Annotate(v, latest_[v]);
  return latest_[v];
}

// The bytes of external tensor `v`, from the data file's entry of the same name.
absl::StatusOr<absl::Span<const uint8_t>> MethodImporter::ExternalData(int32_t v) const {
  const EtTensor& t = et_.values[v].tensor;
  const std::string what =
      absl::StrCat("value ", v, " (\"", SanitizeName(t.fully_qualified_name), "\")");
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
                                            SanitizeName(t.fully_qualified_name), "\""));
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
ValueId MethodImporter::NewIntermediate(int32_t v, TensorMeta meta, absl::string_view role) {
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
absl::StatusOr<ValueId> MethodImporter::Produce(int32_t out) {
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

ValueId MethodImporter::AddScalar(Scalar s, absl::string_view name) {
  ValueDef value;
  value.name = std::string(name);
  value.kind = ValueKind::kScalar;
  value.scalar = std::move(s);
  return Add(std::move(value));
}

// Charges the copy of list value `v` to the method's list budget.
absl::Status MethodImporter::SpendList(int32_t v, absl::string_view what) {
  const size_t n = et_.values[v].items.size();
  if (internal::Spend(&list_budget_, n)) return absl::OkStatus();
  const std::string value = absl::StrCat("value ", v);
  return Invalid(absl::StrCat(what == value ? value : absl::StrCat(what, " (", value, ")"),
                              " has ", n,
                              " items, one copy too many: the method's instructions use its "
                              "lists more often than a program needs (each use copies the "
                              "list)"));
}

absl::StatusOr<std::vector<int64_t>> MethodImporter::IntList(int32_t v, absl::string_view what) {
  const EtValue& value = et_.values[v];
  if (value.kind != EtValueKind::kIntList) {
    return Invalid(absl::StrCat(what, " is value ", v, ", ", EtValueKindArticle(value.kind), " ",
                                EtValueKindName(value.kind), ", not an int list"));
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
absl::Status MethodImporter::RequireOne(int32_t v, absl::string_view what) const {
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
      return Invalid(absl::StrCat(what, " is value ", v, ", ", EtValueKindArticle(value.kind), " ",
                                  EtValueKindName(value.kind), ", not a number"));
  }
}

// An Int value (`what` names it in errors).
absl::StatusOr<int64_t> MethodImporter::IntValue(int32_t v, absl::string_view what) const {
  const EtValue& value = et_.values[v];
  if (value.kind != EtValueKind::kInt) {
    return Invalid(absl::StrCat(what, " is value ", v, ", ", EtValueKindArticle(value.kind), " ",
                                EtValueKindName(value.kind), ", not an int"));
  }
  return value.int_value;
}

// An optional Int value: `absent` for None.
absl::StatusOr<int64_t> MethodImporter::OptionalIntValue(int32_t v, absl::string_view what,
                                         int64_t absent) const {
  if (et_.values[v].kind == EtValueKind::kNull) return absent;
  return IntValue(v, what);
}

absl::StatusOr<bool> MethodImporter::BoolValue(int32_t v, absl::string_view what) const {
  const EtValue& value = et_.values[v];
  if (value.kind != EtValueKind::kBool) {
    return Invalid(absl::StrCat(what, " is value ", v, ", ", EtValueKindArticle(value.kind), " ",
                                EtValueKindName(value.kind), ", not a bool"));
  }
  return value.bool_value;
}

// A Scalar argument (Int, Double or Bool) as a Ferry number.
absl::StatusOr<Scalar> MethodImporter::NumberValue(int32_t v, absl::string_view what) const {
  const EtValue& value = et_.values[v];
  switch (value.kind) {
    case EtValueKind::kInt:
      return Scalar::Int(value.int_value);
    case EtValueKind::kDouble:
      return Scalar::Double(value.double_value);
    case EtValueKind::kBool:
      return Scalar::Bool(value.bool_value);
    default:
      return Invalid(absl::StrCat(what, " is value ", v, ", ", EtValueKindArticle(value.kind), " ",
                                  EtValueKindName(value.kind), ", not a number"));
  }
}

// The tensors of a TensorList (or of an OptionalTensorList without None), in order.
absl::StatusOr<std::vector<int32_t>> MethodImporter::TensorListValue(int32_t v, absl::string_view what) {
  const EtValue& value = et_.values[v];
  if (value.kind != EtValueKind::kTensorList && value.kind != EtValueKind::kOptionalTensorList) {
    return Invalid(absl::StrCat(what, " is value ", v, ", ", EtValueKindArticle(value.kind), " ",
                                EtValueKindName(value.kind), ", not a tensor list"));
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

void MethodImporter::AddNode(absl::string_view op, ValueIds args, ValueId result) {
  AddNode(op, std::move(args), ValueIds{result});
}

void MethodImporter::AddNode(absl::string_view op, ValueIds args, ValueIds results) {
  NodeDef node;
  node.name = absl::StrCat(op_name_, " (instruction ", instruction_, ")");
  node.kind = NodeKind::kHostOp;
  node.op = std::string(op);
  node.args = std::move(args);
  node.results = std::move(results);
  def_.nodes.push_back(std::move(node));
  def_.node_instructions.push_back(instruction_);
}

// A *_copy op: the view `view_op(self, extra...)`, then a clone into `out`, so that the result
// is a fresh tensor as ExecuTorch's semantics require.
absl::Status MethodImporter::ViewThenClone(absl::string_view view_op, int32_t self, std::vector<Scalar> extra,
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

// The tensor that `out` starts from: for an in-place op, argument 0 itself (written in place);
// otherwise a clone of it, so that argument 0 keeps its contents.
absl::StatusOr<ValueId> MethodImporter::WriteTarget(int32_t self, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(self));
  if (self == out) return a;
  FERRY_ASSIGN_OR_RETURN(TensorMeta meta, MetaOf(self));
  meta.dim_order.clear();
  const ValueId copy = NewIntermediate(out, std::move(meta), "copy of self");
  AddNode("clone", {a}, copy);
  return copy;
}

// et_copy::_h2d_copy.out(self, *, out) and _d2h_copy.out: the exporter's own copies between the
// host and a device. Ferry decides its own copies: `out` becomes `self`, and the copy is kept
// for the audit.
absl::Status MethodImporter::ImportExporterCopy(bool to_device, absl::Span<const int32_t> args,
                                                int32_t out) {
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
  def_.exporter_copies.push_back({instruction_, to_device, a, out});
  return absl::OkStatus();
}

absl::Status MethodImporter::MapUnary(absl::string_view op, int32_t self, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(self));
  FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
  AddNode(op, {a}, r);
  return absl::OkStatus();
}

absl::Status MethodImporter::MapTensorNumber(absl::string_view op, int32_t self, int32_t number,
                                             absl::string_view what, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(Scalar n, NumberValue(number, what));
  FERRY_ASSIGN_OR_RETURN(ValueId a, ReadTensor(self));
  const ValueId b = AddScalar(std::move(n), absl::StrCat("value ", number));
  FERRY_ASSIGN_OR_RETURN(ValueId r, Produce(out));
  AddNode(op, {a, b}, r);
  return absl::OkStatus();
}

bool MethodImporter::IsUnwrittenConstant(int32_t v) const {
  const EtValue& value = et_.values[v];
  return latest_[v] < 0 && value.kind == EtValueKind::kTensor &&
         (value.tensor.data.kind == EtDataKind::kConstantBuffer ||
          value.tensor.data.kind == EtDataKind::kConstantSegment);
}

void MethodImporter::FoldConstantCast(int32_t self, int32_t out, TensorMeta to,
                                      ElementCast convert) {
  const EtTensor& source = et_.values[self].tensor;
  ValueDef value;
  value.name = absl::StrCat("value ", out, " (value ", self, " as ", DTypeName(to.dtype), ")");
  value.kind = ValueKind::kConstant;
  const DType to_dtype = to.dtype;
  value.meta = std::move(to);
  const PendingConstants::Key key = PendingConstants::Cast(source.data.bytes, to_dtype);
  PendingConstant folded;
  folded.method = method_index_;
  folded.folded_from = source.data.bytes;
  const size_t n = constants_.Has(key) ? 0 : source.numel;  // computed once
  folded.folded.resize(n * DTypeSize(to_dtype));
  for (size_t i = 0; i < n; ++i) convert(source.data.bytes.data(), i, folded.folded.data());
  folded.value = Add(std::move(value));
  latest_[out] = folded.value;
  constants_.Add(key, std::move(folded));
}


namespace {

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
}  // namespace ferry::internal

namespace ferry {

absl::StatusOr<EtImport> ImportExecuTorchProgram(const EtProgram& program,
                                                 const EtImportOptions& options) {
  EtImport import;
  internal::PendingConstants constants;
  for (const EtMethod& et : program.methods) {
    // Method names are escaped like every name from the file (base/text.h): what method_names()
    // lists is what method() finds.
    import.method_order.push_back(SanitizeName(et.name));
    const size_t pending = constants.size();
    internal::MethodImporter importer(et, import.methods.size(), options.data, &constants);
    absl::StatusOr<MethodDef> method = importer.Run();
    if (!method.ok()) {
      constants.Truncate(pending);  // nothing of a refused method is copied
      import.refused.push_back({import.method_order.back(), method.status()});
      continue;
    }
    import.methods.push_back(*std::move(method));
  }
  FERRY_RETURN_IF_ERROR(internal::PlaceConstants(constants, import));
  return import;
}

}  // namespace ferry
