// Host ops: each registered op has a kernel and a schema that placement reads.
//
// The schema says which arguments the op writes in place, which results are views (aliases) of
// which argument, and which arguments it reads only for their shape. Placement (loader/) reads
// these flags and never special-cases op names. An application can register its own ops.
//
//   OpRegistry registry = OpRegistry::WithBuiltIns();
//   const OpSchema* relu = registry.Find("relu");
//   // at load: relu->infer(args, results) checks dtypes/shapes and gives each result's layout
//   // at execute: relu->kernel(args, results)
//
// Calling convention. An op receives its arguments as OpArg (a tensor or a scalar) and its results
// as TensorRefs whose metadata (dtype, sizes, strides) came from `infer` at load:
//  - a result that is not a view has `data` pointing at planned storage of the inferred size; the
//    kernel writes every element of it, honouring its strides;
//  - a result that is a view of argument j (view_of[i] == j) has its `data` set by the executor to
//    args[j].tensor->data + view_offset elements before the kernel runs; an op whose results are all
//    views and that writes nothing may have a null kernel (the executor does the aliasing).
// Inputs may be non-contiguous (any strides, including 0 for broadcast views); kernels honour
// strides. Kernels never allocate, never set data pointers and return a Status only for what is
// known at run time alone (an index out of range in index_put_); everything else is checked by
// `infer` at load.
//
// Thread safety: an OpRegistry is not synchronized; fill it before loading methods from it.
#ifndef FERRY_KERNELS_OP_REGISTRY_H_
#define FERRY_KERNELS_OP_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"

namespace ferry {

// One argument of an op call: exactly one of `tensor` and `scalar` is set.
struct OpArg {
  TensorRef* tensor = nullptr;
  const Scalar* scalar = nullptr;
};

// What `infer` returns per result: its layout (data unused at load) and, for a view, its offset in
// elements from the data of the argument it aliases.
struct InferredResult {
  TensorRef layout;
  int64_t view_offset = 0;
};

// Load time: validate argument kinds, dtypes, shapes and scalars; fill `results` (sized
// num_results). Returns InvalidArgument with a message naming the op and the offending argument.
// At load, tensor arguments carry metadata only (data == nullptr). It must be a function of the
// arguments' dtypes, sizes and strides and the scalars' values: loading calls it once for a run of
// nodes of one op whose arguments and declared results match the node before (a chain, the layers
// of a model), and gives them all its results.
using InferFn = absl::Status (*)(absl::Span<const OpArg> args, absl::Span<InferredResult> results);
// Execute time; see the file comment.
using KernelFn = absl::Status (*)(absl::Span<const OpArg> args,
                                  absl::Span<TensorRef* const> results);

struct OpSchema {
  std::string name;
  int min_args = 0;
  int max_args = 0;  // -1: variadic
  int num_results = 1;
  std::vector<int> written_args;     // arguments written in place
  std::vector<int> view_of;          // per result: index of the aliased argument, or -1
  std::vector<int> shape_only_args;  // arguments read only for their shape
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;

  bool Writes(int arg) const;
  bool ShapeOnly(int arg) const;
  // -1 when result `result` is not a view.
  int ViewOf(int result) const;
};

class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(OpRegistry&&) = default;
  OpRegistry& operator=(OpRegistry&&) = default;
  OpRegistry(const OpRegistry& other);
  OpRegistry& operator=(const OpRegistry& other);

  // A registry holding the built-in op set.
  static OpRegistry WithBuiltIns();

  // Adds an op. AlreadyExists if the name is taken; InvalidArgument if the schema is inconsistent
  // (no infer function, an index out of range, a view result without a matching argument, a null
  // kernel on an op that writes or has non-view results).
  absl::Status Register(OpSchema schema);

  // nullptr when absent. The pointer stays valid for the registry's lifetime.
  const OpSchema* Find(absl::string_view name) const;

  // Sorted op names.
  std::vector<std::string> Names() const;

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<OpSchema>> ops_;
};

// Registers the built-in op set (kernels/host_ops.cc) into `registry`.
absl::Status RegisterBuiltInOps(OpRegistry& registry);

}  // namespace ferry

#endif  // FERRY_KERNELS_OP_REGISTRY_H_
