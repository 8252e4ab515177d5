#include "ferry/loader/ferry/program_builder.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/ferry/internal/reader.h"
#include "ferry/loader/ferry/internal/writer.h"
#include "ferry/loader/model/checks.h"

// GCC 12 reports moves of an empty absl::InlinedVector (TensorMeta::sizes of a scalar value) as
// reads of uninitialized memory; the inline storage of an empty vector is never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ferry {
namespace {

bool ValidDType(DType dtype) { return IsKnownDType(dtype); }

// The same rules the loader applies to a tensor value; an empty string when `meta` is valid.
std::string MetaError(const TensorMeta& meta) {
  if (!ValidDType(meta.dtype)) {
    return absl::StrCat("dtype ", static_cast<int>(meta.dtype), " is not valid");
  }
  if (meta.sizes.size() > static_cast<size_t>(kMaxRank)) {
    return absl::StrCat("rank ", meta.sizes.size(), " exceeds the maximum rank ", kMaxRank);
  }
  for (size_t d = 0; d < meta.sizes.size(); ++d) {
    if (meta.sizes[d] < 0) {
      return absl::StrCat("size ", d, " is ", meta.sizes[d], "; sizes must be non-negative");
    }
  }
  // The model's rules (loader/model/checks.h), as the readers apply them.
  if (!CheckedByteSize(meta.dtype, meta.sizes).has_value()) {
    return absl::StrCat(DTypeName(meta.dtype), "[", absl::StrJoin(meta.sizes, ", "),
                        "] is too large: its byte size overflows");
  }
  if (!IsDimOrder(absl::MakeConstSpan(meta.dim_order), meta.sizes.size())) {
    return absl::StrCat("dim_order (", absl::StrJoin(meta.dim_order, ", "),
                        ") is not a permutation of 0..", meta.rank() - 1);
  }
  return "";
}

template <typename T>
std::vector<uint8_t> ToBytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// What a failed builder call returns: invalid ids, at least one so that `[0]` is safe.
std::vector<ValueId> Invalid(size_t count) {
  return std::vector<ValueId>(std::max<size_t>(count, 1), -1);
}

// Results are named after their node ("relu", or "split:0", "split:1" for several results), so
// manifests and diagnostics read like the program.
std::string ResultName(const std::string& node, size_t index, size_t count) {
  return count == 1 ? node : absl::StrCat(node, ":", index);
}

}  // namespace

MethodBuilder::MethodBuilder(ProgramBuilder* owner, std::string name) : owner_(owner) {
  def_.name = std::move(name);
}

void MethodBuilder::Fail(absl::Status status) {
  if (owner_->status_.ok()) owner_->status_ = std::move(status);
}

std::string MethodBuilder::Label() const { return absl::StrCat("method \"", def_.name, "\""); }

std::string MethodBuilder::NextNodeLabel(absl::string_view name) const {
  return absl::StrCat(Label(), ", node ", def_.nodes.size(), " (", name, ")");
}

bool MethodBuilder::CheckIds(absl::Span<const ValueId> ids, absl::string_view where,
                             const char* what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= def_.values.size()) {
      Fail(absl::InvalidArgumentError(absl::StrCat(where, ": ", what, " ", i, " is value ", ids[i],
                                                   ", but the method has ", def_.values.size(),
                                                   " values")));
      return false;
    }
  }
  return true;
}

ValueId MethodBuilder::AddValue(ValueDef value, std::vector<uint8_t> data) {
  const auto id = static_cast<ValueId>(def_.values.size());
  if (value.name.empty()) value.name = absl::StrCat("value ", id);
  value_names_.insert(value.name);
  if (value.kind == ValueKind::kConstant || value.kind == ValueKind::kState) {
    buffers_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(data)));
    value.data = absl::MakeConstSpan(*buffers_.back());
  }
  def_.values.push_back(std::move(value));
  return id;
}

ValueId MethodBuilder::Input(std::string name, DType dtype, std::vector<int64_t> sizes) {
  if (!owner_->status_.ok()) return -1;
  ValueDef value;
  value.name = std::move(name);
  value.kind = ValueKind::kInput;
  value.meta.dtype = dtype;
  value.meta.sizes.assign(sizes.begin(), sizes.end());
  if (std::string error = MetaError(value.meta); !error.empty()) {
    Fail(
        absl::InvalidArgumentError(absl::StrCat(Label(), ", input \"", value.name, "\": ", error)));
    return -1;
  }
  ValueId id = AddValue(std::move(value), {});
  def_.inputs.push_back(id);
  return id;
}

ValueId MethodBuilder::AddData(std::string name, ValueKind kind, TensorMeta meta,
                               std::vector<uint8_t> data) {
  if (!owner_->status_.ok()) return -1;
  const char* what = kind == ValueKind::kConstant ? "constant" : "state";
  const std::string where = absl::StrCat(Label(), ", ", what, " \"", name, "\"");
  if (std::string error = MetaError(meta); !error.empty()) {
    Fail(absl::InvalidArgumentError(absl::StrCat(where, ": ", error)));
    return -1;
  }
  const size_t expected = *meta.ByteSize();
  if (data.size() != expected) {
    Fail(absl::InvalidArgumentError(absl::StrCat(where, ": data is ", data.size(),
                                                 " bytes, expected ", expected, " for ",
                                                 meta.ToString())));
    return -1;
  }
  ValueDef value;
  value.name = std::move(name);
  value.kind = kind;
  value.meta = std::move(meta);
  return AddValue(std::move(value), std::move(data));
}

ValueId MethodBuilder::Constant(std::string name, TensorMeta meta, std::vector<uint8_t> data) {
  return AddData(std::move(name), ValueKind::kConstant, std::move(meta), std::move(data));
}

ValueId MethodBuilder::ConstantF32(std::string name, std::vector<int64_t> sizes,
                                   std::vector<float> data) {
  return Constant(std::move(name), TensorMeta{DType::kFloat32, {sizes.begin(), sizes.end()}, {}},
                  ToBytes(data));
}

ValueId MethodBuilder::ConstantI64(std::string name, std::vector<int64_t> sizes,
                                   std::vector<int64_t> data) {
  return Constant(std::move(name), TensorMeta{DType::kInt64, {sizes.begin(), sizes.end()}, {}}, ToBytes(data));
}

ValueId MethodBuilder::State(std::string name, TensorMeta meta, std::vector<uint8_t> initial_data) {
  return AddData(std::move(name), ValueKind::kState, std::move(meta), std::move(initial_data));
}

ValueId MethodBuilder::StateF32(std::string name, std::vector<int64_t> sizes,
                                std::vector<float> initial) {
  return State(std::move(name), TensorMeta{DType::kFloat32, {sizes.begin(), sizes.end()}, {}},
               ToBytes(initial));
}

ValueId MethodBuilder::SharedStateF32(std::string name, std::vector<int64_t> sizes,
                                      std::vector<float> initial) {
  const ValueId v = StateF32(std::move(name), std::move(sizes), std::move(initial));
  if (v >= 0) def_.values[v].shared = true;
  return v;
}

ValueId MethodBuilder::ScalarInput(std::string name, ferry::Scalar traced) {
  if (!owner_->status_.ok()) return -1;
  ValueDef def;
  def.name = std::move(name);
  def.kind = ValueKind::kScalar;
  def.scalar = std::move(traced);
  const ValueId id = AddValue(std::move(def), {});
  def_.inputs.push_back(id);
  return id;
}

ValueId MethodBuilder::Scalar(ferry::Scalar value) {
  if (!owner_->status_.ok()) return -1;
  ValueDef def;
  def.kind = ValueKind::kScalar;
  def.scalar = std::move(value);
  return AddValue(std::move(def), {});
}

std::string MethodBuilder::NodeName(std::string given, const std::string& base,
                                    size_t num_results) {
  if (!given.empty()) return given;
  auto unused = [&](const std::string& name) {
    for (size_t r = 0; r < num_results; ++r) {
      if (value_names_.contains(ResultName(name, r, num_results))) return false;
    }
    return true;
  };
  if (unused(base)) return base;
  int& suffix = next_suffix_.try_emplace(base, 1).first->second;
  std::string name;
  do {
    name = absl::StrCat(base, "_", suffix++);
  } while (!unused(name));
  return name;
}

std::vector<ValueId> MethodBuilder::HostOp(const std::string& op, std::vector<ValueId> args,
                                           std::string node_name) {
  if (!owner_->status_.ok()) return Invalid(1);
  const OpSchema* schema = owner_->registry().Find(op);
  const size_t num_results =
      schema == nullptr ? 1 : static_cast<size_t>(std::max(schema->num_results, 0));
  const std::string display = NodeName(std::move(node_name), op, num_results);
  const std::string where = NextNodeLabel(display);
  if (schema == nullptr || schema->infer == nullptr) {
    Fail(absl::InvalidArgumentError(
        absl::StrCat(where, ": op \"", op, "\" is not in the op registry")));
    return Invalid(1);
  }
  if (!CheckIds(args, where, "argument")) {
    return Invalid(num_results);
  }
  const int n = static_cast<int>(args.size());
  if (n < schema->min_args || (schema->max_args >= 0 && n > schema->max_args)) {
    std::string expected = schema->max_args < 0 ? absl::StrCat("at least ", schema->min_args)
                           : schema->min_args == schema->max_args
                               ? absl::StrCat(schema->min_args)
                               : absl::StrCat(schema->min_args, " to ", schema->max_args);
    Fail(absl::InvalidArgumentError(
        absl::StrCat(where, ": op \"", op, "\" takes ", expected, " arguments, got ", n)));
    return Invalid(num_results);
  }
  // At load the op sees metadata only. A value that is itself a view is described by the
  // row-major layout of its meta: the builder does not track view strides.
  std::vector<TensorRef> refs(args.size());
  std::vector<OpArg> op_args(args.size());
  for (size_t a = 0; a < args.size(); ++a) {
    const ValueDef& value = def_.values[args[a]];
    if (value.is_tensor()) {
      refs[a] = value.meta.ToRef(nullptr);
      op_args[a].tensor = &refs[a];
    } else {
      op_args[a].scalar = &value.scalar;
    }
  }
  std::vector<InferredResult> inferred(num_results);
  absl::Status status = schema->infer(op_args, absl::MakeSpan(inferred));
  if (!status.ok()) {
    Fail(absl::Status(status.code(), absl::StrCat(where, ": ", status.message())));
    return Invalid(num_results);
  }
  std::vector<TensorMeta> metas(num_results);
  for (size_t r = 0; r < num_results; ++r) {
    const TensorRef& layout = inferred[r].layout;
    if (layout.rank < 0 || layout.rank > kMaxRank) {
      Fail(absl::InternalError(
          absl::StrCat(where, ": op \"", op, "\" inferred rank ", layout.rank, " for result ", r)));
      return Invalid(num_results);
    }
    metas[r].dtype = layout.dtype;
    metas[r].sizes.assign(layout.sizes.begin(), layout.sizes.begin() + layout.rank);
    if (std::string error = MetaError(metas[r]); !error.empty()) {
      Fail(absl::InvalidArgumentError(absl::StrCat(where, ": result ", r, ": ", error)));
      return Invalid(num_results);
    }
  }
  NodeDef node;
  node.name = display;
  node.kind = NodeKind::kHostOp;
  node.op = op;
  node.args.assign(args.begin(), args.end());
  for (size_t r = 0; r < metas.size(); ++r) {
    ValueDef value;
    value.kind = ValueKind::kIntermediate;
    value.name = ResultName(display, r, metas.size());
    value.meta = std::move(metas[r]);
    node.results.push_back(AddValue(std::move(value), {}));
  }
  std::vector<ValueId> results(node.results.begin(), node.results.end());
  def_.nodes.push_back(std::move(node));
  return results;
}

ValueId MethodBuilder::Op(const std::string& op, std::vector<ValueId> args, std::string node_name) {
  std::vector<ValueId> results = HostOp(op, std::move(args), std::move(node_name));
  if (results.size() != 1 || results[0] < 0) {
    if (results.size() != 1 && owner_->status_.ok()) {
      Fail(absl::InvalidArgumentError(absl::StrCat(Label(), ": op \"", op, "\" has ",
                                                   results.size(), " results; use HostOp for it")));
    }
    return -1;
  }
  return results[0];
}

std::vector<ValueId> MethodBuilder::Delegate(
    std::string backend, std::optional<std::string> target_device, std::vector<uint8_t> payload,
    std::vector<ValueId> args, std::vector<TensorMeta> results, DelegateOptions options) {
  if (!owner_->status_.ok()) return Invalid(results.size());
  const std::string display = NodeName(std::move(options.name), backend, results.size());
  const std::string where = NextNodeLabel(display);
  auto fail = [&](std::string message) {
    Fail(absl::InvalidArgumentError(absl::StrCat(where, ": ", message)));
    return Invalid(results.size());
  };
  if (backend.empty()) return fail("the delegate call has no backend name");
  if (!CheckIds(args, where, "argument")) {
    return Invalid(results.size());
  }
  for (size_t r = 0; r < results.size(); ++r) {
    if (std::string error = MetaError(results[r]); !error.empty()) {
      return fail(absl::StrCat("result ", r, ": ", error));
    }
  }
  if (!options.arg_dim_orders.empty() && options.arg_dim_orders.size() != args.size()) {
    return fail(absl::StrCat("arg_dim_orders has ", options.arg_dim_orders.size(),
                             " entries, but the call has ", args.size(), " arguments"));
  }
  for (size_t a = 0; a < options.arg_dim_orders.size(); ++a) {
    const std::vector<int32_t>& order = options.arg_dim_orders[a];
    if (order.empty()) continue;
    const ValueDef& value = def_.values[args[a]];
    if (!value.is_tensor())
      return fail(absl::StrCat("argument ", a, " is a scalar but has a dim order"));
    if (!IsDimOrder(absl::MakeConstSpan(order), value.meta.sizes.size())) {
      return fail(absl::StrCat("the dim order (", absl::StrJoin(order, ", "), ") of argument ", a,
                               " is not a permutation of 0..", value.meta.rank() - 1));
    }
  }
  std::vector<int32_t> written = options.written_args;
  std::sort(written.begin(), written.end());
  if (std::adjacent_find(written.begin(), written.end()) != written.end()) {
    return fail("an argument is listed as written more than once");
  }
  for (int32_t a : written) {
    if (a < 0 || static_cast<size_t>(a) >= args.size()) {
      return fail(absl::StrCat("written argument ", a, " is out of range; the call has ",
                               args.size(), " arguments"));
    }
    if (!def_.values[args[a]].is_tensor()) {
      return fail(absl::StrCat("written argument ", a, " is a scalar"));
    }
  }
  NodeDef node;
  node.name = display;
  node.kind = NodeKind::kDelegate;
  DelegateDef& call = node.mutable_delegate();
  call.backend = std::move(backend);
  if (target_device.has_value()) {
    call.compile_specs.emplace_back(std::string(kTargetDeviceSpec), std::move(*target_device));
  }
  for (auto& spec : options.compile_specs) {
    if (spec.first.empty()) return fail("a compile spec has an empty key");
    if (call.CompileSpec(spec.first).has_value()) {
      return fail(absl::StrCat("compile spec key \"", spec.first, "\" is given more than once"));
    }
    call.compile_specs.push_back(std::move(spec));
  }
  buffers_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(payload)));
  call.payload = absl::MakeConstSpan(*buffers_.back());
  call.arg_dim_orders = std::move(options.arg_dim_orders);
  call.written_args = std::move(written);
  node.args.assign(args.begin(), args.end());
  for (size_t r = 0; r < results.size(); ++r) {
    ValueDef value;
    value.kind = ValueKind::kIntermediate;
    value.name = ResultName(display, r, results.size());
    value.meta = std::move(results[r]);
    node.results.push_back(AddValue(std::move(value), {}));
  }
  std::vector<ValueId> ids(node.results.begin(), node.results.end());
  def_.nodes.push_back(std::move(node));
  return ids;
}

std::vector<int32_t> MethodBuilder::WrittenInputs() const {
  const OpRegistry& registry = owner_->registry();
  // root[v]: the value whose memory v aliases (v itself when it is not a view).
  std::vector<ValueId> root(def_.values.size());
  std::iota(root.begin(), root.end(), 0);
  std::vector<bool> written(def_.values.size(), false);
  for (const NodeDef& node : def_.nodes) {
    if (node.kind == NodeKind::kDelegate) {
      for (int32_t a : node.delegate().written_args) written[root[node.args[a]]] = true;
      continue;
    }
    const OpSchema* schema = registry.Find(node.op);
    if (schema == nullptr) continue;  // HostOp refused it already
    for (int a : schema->written_args) {
      if (a >= 0 && static_cast<size_t>(a) < node.args.size()) written[root[node.args[a]]] = true;
    }
    for (size_t r = 0; r < node.results.size(); ++r) {
      const int base = schema->ViewOf(static_cast<int>(r));
      if (base >= 0 && static_cast<size_t>(base) < node.args.size()) {
        root[node.results[r]] = root[node.args[base]];
      }
    }
  }
  std::vector<int32_t> inputs;
  for (size_t i = 0; i < def_.inputs.size(); ++i) {
    if (written[def_.inputs[i]]) inputs.push_back(static_cast<int32_t>(i));
  }
  return inputs;
}

std::vector<ValueId> MethodBuilder::GraphDelegate(std::optional<std::string> target_device,
                                                  std::vector<ValueId> args, SubgraphFn body,
                                                  DelegateOptions options) {
  if (!owner_->status_.ok()) return Invalid(1);
  const std::string display = options.name.empty() ? kGraphBackendName : options.name;
  const std::string where = NextNodeLabel(display);
  if (!CheckIds(args, where, "argument")) {
    return Invalid(1);
  }
  if (!options.arg_dim_orders.empty() && options.arg_dim_orders.size() != args.size()) {
    Fail(absl::InvalidArgumentError(
        absl::StrCat(where, ": arg_dim_orders has ", options.arg_dim_orders.size(),
                     " entries, but the call has ", args.size(), " arguments")));
    return Invalid(1);
  }
  // The sub-graph: tensor arguments become the inputs of "main" in order (as the graph backend
  // binds them), scalar arguments are baked in as scalars of the sub-graph. Inputs are named
  // after their argument position, not after the values passed in, so that calls of one body on
  // like arguments (the layers of a model) carry the same payload, which the graph backend reads
  // and verifies once.
  ProgramBuilder sub_program(&owner_->registry());
  MethodBuilder& sub = sub_program.AddMethod("main");
  std::vector<ValueId> sub_args;
  std::vector<int32_t> arg_of_input;
  for (size_t a = 0; a < args.size(); ++a) {
    const ValueDef& value = def_.values[args[a]];
    if (!value.is_tensor()) {
      sub_args.push_back(sub.Scalar(value.scalar));
      continue;
    }
    ValueId in = sub.Input(absl::StrCat("argument ", a), value.meta.dtype,
                           {value.meta.sizes.begin(), value.meta.sizes.end()});
    if (in >= 0) {
      sub.def_.values[in].meta.dim_order = value.meta.dim_order;
      if (!options.arg_dim_orders.empty() && !options.arg_dim_orders[a].empty()) {
        sub.def_.values[in].meta.dim_order = options.arg_dim_orders[a];
      }
    }
    sub_args.push_back(in);
    arg_of_input.push_back(static_cast<int32_t>(a));
  }
  std::vector<ValueId> outputs = body(sub, sub_args);
  for (ValueId out : outputs) sub.Output(out);
  absl::StatusOr<std::vector<uint8_t>> payload = sub_program.Build();
  if (!payload.ok()) {
    Fail(absl::Status(payload.status().code(),
                      absl::StrCat(where, ": in the sub-graph: ", payload.status().message())));
    return Invalid(outputs.size());
  }
  std::vector<TensorMeta> result_metas;
  for (ValueId out : outputs) {
    const TensorMeta& meta = sub.meta(out);
    result_metas.push_back(TensorMeta{meta.dtype, meta.sizes, {}});
  }
  for (int32_t input : sub.WrittenInputs()) {
    const int32_t a = arg_of_input[input];
    if (std::find(options.written_args.begin(), options.written_args.end(), a) ==
        options.written_args.end()) {
      options.written_args.push_back(a);
    }
  }
  return Delegate(kGraphBackendName, std::move(target_device), *std::move(payload), std::move(args),
                  std::move(result_metas), std::move(options));
}

void MethodBuilder::Output(ValueId value) {
  if (!owner_->status_.ok()) return;
  if (value < 0 || static_cast<size_t>(value) >= def_.values.size()) {
    Fail(absl::InvalidArgumentError(absl::StrCat(Label(), ": output ", def_.outputs.size(),
                                                 " is value ", value, ", but the method has ",
                                                 def_.values.size(), " values")));
    return;
  }
  def_.outputs.push_back(value);
}

const TensorMeta& MethodBuilder::meta(ValueId value) const {
  static const TensorMeta* const kEmpty = new TensorMeta();
  if (value < 0 || static_cast<size_t>(value) >= def_.values.size()) return *kEmpty;
  return def_.values[value].meta;
}

ProgramBuilder::ProgramBuilder(const OpRegistry* registry) : registry_(registry) {
  if (registry_ == nullptr) {
    owned_registry_ = std::make_unique<OpRegistry>(OpRegistry::WithBuiltIns());
    registry_ = owned_registry_.get();
  }
}

ProgramBuilder::~ProgramBuilder() = default;

MethodBuilder& ProgramBuilder::AddMethod(std::string name) {
  if (status_.ok()) {
    if (name.empty()) {
      status_ = absl::InvalidArgumentError("a method needs a non-empty name");
    }
    for (const auto& m : methods_) {
      if (m->name() == name && status_.ok()) {
        status_ = absl::InvalidArgumentError(
            absl::StrCat("method \"", name, "\" is defined more than once"));
      }
    }
  }
  methods_.push_back(std::unique_ptr<MethodBuilder>(new MethodBuilder(this, std::move(name))));
  return *methods_.back();
}

absl::StatusOr<std::vector<uint8_t>> ProgramBuilder::Build() const {
  if (!status_.ok()) return status_;
  std::vector<const MethodDef*> defs;
  for (const auto& m : methods_) defs.push_back(&m->def());
  FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, internal::SerializeProgram(defs));
  // What the builder could not check call by call (no methods, an intermediate output that a
  // sub-graph body took from another builder) is refused here, with the loader's message.
  FERRY_RETURN_IF_ERROR(internal::VerifyProgram(bytes, {}).status());
  return bytes;
}

absl::Status ProgramBuilder::WriteFile(const std::string& path) const {
  FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Build());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    const int err = errno;
    std::string message = absl::StrCat("cannot write program \"", path, "\": ", std::strerror(err));
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed) {
    return absl::InternalError(
        absl::StrCat("cannot write program \"", path, "\": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace ferry
