// Writing Ferry programs from C++: for tests, examples and users.
//
//   ProgramBuilder pb;                         // infers host-op results with the built-in ops
//   MethodBuilder& m = pb.AddMethod("forward");
//   ValueId a = m.Input("a", DType::kFloat32, {2, 2});
//   ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
//   ValueId t = m.GraphDelegate(
//       "cuda:0", {a, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
//         return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
//       })[0];
//   m.Output(m.Op("relu", {t}));
//   FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, pb.Build());
//
// Errors are sticky: a builder call that fails (an unknown op, a shape mismatch, a bad value id)
// records the first error, returns an invalid id (-1) and makes Build() return that error, so
// test code can chain calls and check once.
// A failed call that returns a vector returns invalid ids, at least one, so `[0]` on it is safe;
// after the first error every call does nothing and returns invalid ids.
//
// The built-in graph backend ("graph") takes a payload that is itself a serialized program with one
// method "main": its inputs are the delegate's tensor arguments in order (scalar arguments are
// baked into the sub-graph as its own scalars), its outputs the delegate's results. GraphDelegate
// builds that payload, infers the results from it, declares the arguments the sub-graph writes in
// place, and sets compile spec "target_device" when a device is given. The sub-graph's inputs are
// named "argument N" after the call's argument positions, so two calls of one body on arguments
// of the same types and shapes carry the same payload (the backend reads it once).
//
// Names: a node without a name given is named after its op (or backend), and its results after
// the node; when that name is already a value's name in the method, "_1", "_2", ... is appended,
// so the builder alone never gives two values one name (the loader warns about values that share
// a name: copies and diagnostics that name them would be ambiguous). Names given explicitly are
// kept as they are.
//
// Thread safety: none; a builder is used by one thread.
#ifndef FERRY_LOADER_FERRY_PROGRAM_BUILDER_H_
#define FERRY_LOADER_FERRY_PROGRAM_BUILDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/model/method_def.h"

namespace ferry {

inline constexpr char kGraphBackendName[] = "graph";

struct DelegateOptions {
  std::string name;  // node name; default: the backend name
  // Per argument, the dim order the delegate was compiled for (empty: as stored).
  std::vector<std::vector<int32_t>> arg_dim_orders;
  // Arguments written in place (GraphDelegate adds those its sub-graph writes).
  std::vector<int32_t> written_args;
  // Extra compile specs (besides target_device).
  std::vector<std::pair<std::string, std::string>> compile_specs;
};

class ProgramBuilder;

class MethodBuilder {
 public:
  ValueId Input(std::string name, DType dtype, std::vector<int64_t> sizes);
  // A non-tensor input (an int, a double, a string, ...): `traced` is the value the program was
  // made with, and the only value a call may pass (Method::SetInput(size_t, const Scalar&)).
  ValueId ScalarInput(std::string name, ferry::Scalar traced);
  // `data` is dense in meta's dim order and exactly meta.ByteSize() bytes.
  ValueId Constant(std::string name, TensorMeta meta, std::vector<uint8_t> data);
  ValueId ConstantF32(std::string name, std::vector<int64_t> sizes, std::vector<float> data);
  ValueId ConstantI64(std::string name, std::vector<int64_t> sizes, std::vector<int64_t> data);
  ValueId State(std::string name, TensorMeta meta, std::vector<uint8_t> initial_data);
  ValueId StateF32(std::string name, std::vector<int64_t> sizes, std::vector<float> initial);
  // A state shared with the program's other methods that have a shared state of the same name
  // (see ValueDef::shared); they must agree on its dtype, shape and initial data.
  ValueId SharedStateF32(std::string name, std::vector<int64_t> sizes, std::vector<float> initial);

  ValueId Scalar(ferry::Scalar value);
  ValueId Int(int64_t v) { return Scalar(ferry::Scalar::Int(v)); }
  ValueId Double(double v) { return Scalar(ferry::Scalar::Double(v)); }
  ValueId IntList(std::vector<int64_t> v) { return Scalar(ferry::Scalar::IntList(std::move(v))); }

  // A host op; results are intermediates whose metadata the op's infer function gives.
  std::vector<ValueId> HostOp(const std::string& op, std::vector<ValueId> args,
                              std::string node_name = "");
  // HostOp for single-result ops: its result.
  ValueId Op(const std::string& op, std::vector<ValueId> args, std::string node_name = "");

  // A delegate call with explicit result metadata. `target_device` (if set) becomes compile spec
  // "target_device".
  std::vector<ValueId> Delegate(std::string backend, std::optional<std::string> target_device,
                                std::vector<uint8_t> payload, std::vector<ValueId> args,
                                std::vector<TensorMeta> results, DelegateOptions options = {});

  using SubgraphFn =
      absl::FunctionRef<std::vector<ValueId>(MethodBuilder& sub, absl::Span<const ValueId> inputs)>;
  // A call of the built-in graph backend; see the file comment.
  std::vector<ValueId> GraphDelegate(std::optional<std::string> target_device,
                                     std::vector<ValueId> args, SubgraphFn body,
                                     DelegateOptions options = {});

  // Appends `value` to the method's outputs: a tensor, or a scalar returned as it is.
  void Output(ValueId value);

  // Metadata of a tensor value (an empty meta for invalid ids).
  const TensorMeta& meta(ValueId value) const;
  const std::string& name() const { return def_.name; }
  // The method as plain data (spans into builder-owned buffers).
  const MethodDef& def() const { return def_; }

 private:
  friend class ProgramBuilder;
  MethodBuilder(ProgramBuilder* owner, std::string name);
  ValueId AddValue(ValueDef value, std::vector<uint8_t> data);
  // A constant or a state.
  ValueId AddData(std::string name, ValueKind kind, TensorMeta meta, std::vector<uint8_t> data);
  // Records an error naming `where` and the bad id unless every id is a value of this method.
  bool CheckIds(absl::Span<const ValueId> ids, absl::string_view where, const char* what);
  void Fail(absl::Status status);
  // `method "name"`, and `method "name", node N (display)` for the node about to be added.
  std::string Label() const;
  std::string NextNodeLabel(absl::string_view display) const;
  // Indices into def_.inputs of the inputs that a node writes in place, directly or through views.
  std::vector<int32_t> WrittenInputs() const;
  // `given` when not empty; otherwise `base`, or `base` with the first suffix "_N" whose
  // `num_results` result names no value of the method has yet.
  std::string NodeName(std::string given, const std::string& base, size_t num_results);

  ProgramBuilder* owner_;
  MethodDef def_;
  // Owned bytes behind def_.values[i].data and def_.nodes[i].payload.
  std::vector<std::unique_ptr<std::vector<uint8_t>>> buffers_;
  absl::flat_hash_set<std::string> value_names_;
  absl::flat_hash_map<std::string, int> next_suffix_;  // per default name: the next "_N" to try
};

class ProgramBuilder {
 public:
  // `registry` (not owned, must outlive the builder) infers host-op results; null: built-ins.
  explicit ProgramBuilder(const OpRegistry* registry = nullptr);
  ~ProgramBuilder();
  ProgramBuilder(const ProgramBuilder&) = delete;
  ProgramBuilder& operator=(const ProgramBuilder&) = delete;

  // The returned reference stays valid for the builder's lifetime.
  MethodBuilder& AddMethod(std::string name);

  // The first error recorded by any builder call, or OK.
  absl::Status status() const { return status_; }

  // The binary program (FlatBuffers, file identifier "FRRY").
  absl::StatusOr<std::vector<uint8_t>> Build() const;
  // Build() written to `path`.
  absl::Status WriteFile(const std::string& path) const;

  const OpRegistry& registry() const { return *registry_; }

 private:
  friend class MethodBuilder;
  const OpRegistry* registry_;
  std::unique_ptr<OpRegistry> owned_registry_;
  std::vector<std::unique_ptr<MethodBuilder>> methods_;
  absl::Status status_;
};

}  // namespace ferry

#endif  // FERRY_LOADER_FERRY_PROGRAM_BUILDER_H_
