// Building MethodDefs and their node effects directly, for tests of the pure planners.
//
//   GraphSketch g;
//   ValueId a = g.Input("a"), b = g.Input("b");
//   ValueId t = g.Delegate("D0", "cuda:0", {a, b})[0];
//   g.Output(g.Host("relu", {t}));
//   PlacementInput input = g.Input();   // method, effects and row-major layouts
//
// Every tensor is float32 [2, 2] (16 bytes) unless sizes are given, as in docs/placement.md.
#ifndef FERRY_TESTS_TESTING_GRAPH_SKETCH_H_
#define FERRY_TESTS_TESTING_GRAPH_SKETCH_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/loader/model/method_def.h"
#include "ferry/loader/plan/placement.h"

namespace ferry::testing {

struct HostEffects {
  std::vector<int32_t> writes;
  std::vector<int32_t> view_of;  // per result
  std::vector<int32_t> shape_only;
};

class GraphSketch {
 public:
  GraphSketch() { method_.name = "forward"; }

  ValueId Input(const std::string& name, std::vector<int64_t> sizes = {2, 2}) {
    ValueId v = Add(name, ValueKind::kInput, std::move(sizes));
    method_.inputs.push_back(v);
    return v;
  }
  ValueId Constant(const std::string& name, std::vector<int64_t> sizes = {2, 2},
                   std::vector<int32_t> dim_order = {}) {
    ValueId v = Add(name, ValueKind::kConstant, std::move(sizes));
    method_.values[v].meta.dim_order = std::move(dim_order);
    AttachData(v);
    return v;
  }
  ValueId State(const std::string& name, std::vector<int64_t> sizes = {2, 2}) {
    ValueId v = Add(name, ValueKind::kState, std::move(sizes));
    AttachData(v);
    return v;
  }
  ValueId Scalar(int64_t value) {
    ValueId v = Add("scalar", ValueKind::kScalar, {});
    method_.values[v].scalar = ferry::Scalar::Int(value);
    return v;
  }

  // A host op with one result shaped like its first tensor argument (or `sizes`).
  ValueId Host(const std::string& op, std::vector<ValueId> args, HostEffects effects = {},
               std::optional<std::vector<int64_t>> sizes = std::nullopt) {
    NodeDef node;
    node.kind = NodeKind::kHostOp;
    node.op = op;
    node.name = op;
    const TensorSizes& first = method_.values[args[0]].meta.sizes;
    std::vector<int64_t> result_sizes =
        sizes.value_or(std::vector<int64_t>(first.begin(), first.end()));
    ValueId r = Add(op, ValueKind::kIntermediate, result_sizes);
    node.args.assign(args.begin(), args.end());
    node.results = {r};
    method_.nodes.push_back(std::move(node));
    NodeEffects e;
    e.written_args = effects.writes;
    e.view_of = effects.view_of.empty() ? std::vector<int32_t>{-1} : effects.view_of;
    e.shape_only_args = effects.shape_only;
    effects_.push_back(std::move(e));
    return r;
  }

  std::vector<ValueId> Delegate(const std::string& name, std::optional<std::string> target,
                                std::vector<ValueId> args, int num_results = 1,
                                std::vector<int32_t> written = {},
                                std::vector<std::vector<int32_t>> arg_dim_orders = {}) {
    NodeDef node;
    node.kind = NodeKind::kDelegate;
    DelegateDef& call = node.mutable_delegate();
    call.backend = "graph";
    node.name = name;
    if (target.has_value()) call.compile_specs.emplace_back("target_device", *target);
    std::vector<ValueId> results;
    for (int i = 0; i < num_results; ++i) {
      results.push_back(Add(num_results == 1 ? name : name + std::to_string(i),
                            ValueKind::kIntermediate, {2, 2}));
    }
    node.args.assign(args.begin(), args.end());
    node.results.assign(results.begin(), results.end());
    call.written_args = written;
    call.arg_dim_orders = std::move(arg_dim_orders);
    method_.nodes.push_back(std::move(node));
    NodeEffects e;
    e.written_args = std::move(written);
    e.view_of.assign(num_results, -1);
    effects_.push_back(std::move(e));
    return results;
  }

  void Output(ValueId v) { method_.outputs.push_back(v); }

  // Overrides the natural layout of a value (default: dense in its dim order).
  void SetLayout(ValueId v, ValueLayout layout) { layouts_[v] = std::move(layout); }

  const MethodDef& method() const { return method_; }
  // For what the sketch does not build itself (an exporter's copies and annotations).
  MethodDef& mutable_method() { return method_; }

  PlacementInput Build() const {
    PlacementInput in;
    in.method = &method_;
    for (size_t n = 0; n < effects_.size(); ++n) {
      if (!effects_[n].empty()) in.effects.emplace_back(static_cast<int32_t>(n), effects_[n]);
    }
    for (size_t v = 0; v < method_.values.size(); ++v) {
      const ValueId id = static_cast<ValueId>(v);
      if (auto it = layouts_.find(id); it != layouts_.end()) {
        in.layouts.emplace_back(id, it->second);
      } else if (!method_.values[v].meta.dim_order.empty()) {
        ValueLayout layout;
        layout.dim_order = method_.values[v].meta.dim_order;
        layout.strides = method_.values[v].meta.DenseStrides();
        in.layouts.emplace_back(id, std::move(layout));
      }
    }
    return in;
  }

 private:
  ValueId Add(const std::string& name, ValueKind kind, std::vector<int64_t> sizes) {
    ValueDef v;
    v.name = name;
    v.kind = kind;
    v.meta.dtype = DType::kFloat32;
    v.meta.sizes.assign(sizes.begin(), sizes.end());
    method_.values.push_back(std::move(v));
    return static_cast<ValueId>(method_.values.size() - 1);
  }
  void AttachData(ValueId v) {
    auto data = std::make_unique<std::vector<uint8_t>>(method_.values[v].meta.ByteSize().value());
    method_.values[v].data = absl::MakeConstSpan(*data);
    data_.push_back(std::move(data));
  }

  MethodDef method_;
  std::vector<NodeEffects> effects_;
  std::map<ValueId, ValueLayout> layouts_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> data_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_GRAPH_SKETCH_H_
