// Host kernel steps shared by the method executor and the graph backend.
//
// A HostStepList is built at load: each step names a kernel, its arguments and results as pointers
// into TensorRef storage owned by the caller (which must not move afterwards), and the view
// fixups that set aliasing results' data pointers before the kernel runs. Running a step
// allocates nothing.
#ifndef FERRY_RUNTIME_INTERNAL_HOST_STEPS_H_
#define FERRY_RUNTIME_INTERNAL_HOST_STEPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ferry/base/huge_pages.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"

namespace ferry::internal {

struct ViewFixup {
  TensorRef* result = nullptr;
  const TensorRef* base = nullptr;
  int64_t byte_offset = 0;
};

struct HostStep {
  KernelFn kernel = nullptr;  // null for pure views
  const OpArg* args = nullptr;
  uint32_t num_args = 0;
  uint32_t num_results = 0;
  TensorRef* const* results = nullptr;
  const ViewFixup* views = nullptr;
  uint32_t num_views = 0;
};

inline void ApplyViews(const ViewFixup* views, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    views[i].result->data = static_cast<char*>(views[i].base->data) + views[i].byte_offset;
  }
}

inline absl::Status RunHostStep(const HostStep& s) {
  ApplyViews(s.views, s.num_views);
  if (s.kernel == nullptr) return absl::OkStatus();
  return s.kernel(absl::Span<const OpArg>(s.args, s.num_args),
                  absl::Span<TensorRef* const>(s.results, s.num_results));
}

// Storage for the arrays HostSteps point into. Add everything, then Finalize() once; after that
// the tables must not change.
class HostStepTables {
 public:
  // Room for `steps` steps with `args` arguments and `results` results in all, so that adding
  // them copies nothing and the tables take no more memory than they hold (views are rare).
  void Reserve(size_t steps, size_t args, size_t results) {
    steps_.reserve(steps);
    args_.reserve(args);
    results_.reserve(results);
  }

  // Appends a step; returns its index.
  // `kernel` replaces the schema's host kernel (a device kernel of the same op).
  size_t Add(const OpSchema& schema, absl::Span<const OpArg> args,
             absl::Span<TensorRef* const> results, absl::Span<const ViewFixup> views,
             KernelFn kernel) {
    const OpArg* step_args = Append(args_, args);
    TensorRef* const* step_results = Append(results_, results);
    const ViewFixup* step_views = Append(views_, views);
    // Filled in place: a step built on the stack and copied in is written by fields and read
    // back 16 bytes at a time, which stalls store forwarding.
    HostStep& s = steps_.emplace_back();
    s.kernel = kernel;
    s.args = step_args;
    s.num_args = static_cast<uint32_t>(args.size());
    s.results = step_results;
    s.num_results = static_cast<uint32_t>(results.size());
    s.views = step_views;
    s.num_views = static_cast<uint32_t>(views.size());
    return steps_.size() - 1;
  }

  // Makes every step's pointers valid; steps()[i] is the i-th step added. Called once, after the
  // last Add. Where no table grew after a step was added (Reserve sized them), there is nothing to
  // do.
  void Finalize() {
    if (!moved_) return;
    size_t arg = 0, result = 0, view = 0;
    for (HostStep& s : steps_) {
      s.args = args_.data() + arg;
      s.results = results_.data() + result;
      s.views = views_.data() + view;
      arg += s.num_args;
      result += s.num_results;
      view += s.num_views;
    }
    moved_ = false;
  }

  size_t Add(const OpSchema& schema, absl::Span<const OpArg> args,
             absl::Span<TensorRef* const> results, absl::Span<const ViewFixup> views) {
    return Add(schema, args, results, views, schema.kernel);
  }

  const LargeTable<HostStep>& steps() const { return steps_; }

 private:
  // Appends `items` to `table`; where they start. A table that moves leaves the pointers of
  // earlier steps behind, for Finalize to redo.
  template <typename T, typename U>
  const T* Append(LargeTable<T>& table, absl::Span<U> items) {
    const T* before = table.data();
    table.insert(table.end(), items.begin(), items.end());
    if (table.data() != before && !steps_.empty()) moved_ = true;
    return table.data() + (table.size() - items.size());
  }

  LargeTable<OpArg> args_;
  LargeTable<TensorRef*> results_;
  LargeTable<ViewFixup> views_;
  LargeTable<HostStep> steps_;
  bool moved_ = false;  // some table moved after a step pointing into it was added
};

// Whether two shapes are equal. An element loop: shapes have a few dims, where a call to memcmp
// (what comparing spans does) costs more than the comparison.
inline bool SameSizes(absl::Span<const int64_t> a, absl::Span<const int64_t> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// Runs schema.infer and checks the inferred results against the declared metadata of the result
// values (dtype and sizes). `results` is resized to the op's result count. `context` gives the
// prefix of messages ("method \"forward\", node 3 (add)"); it is called only on error.
absl::Status InferAndCheck(const OpSchema& schema, absl::Span<const OpArg> args,
                           absl::Span<const TensorMeta* const> declared,
                           std::vector<InferredResult>* results,
                           absl::FunctionRef<std::string()> context);

}  // namespace ferry::internal

#endif  // FERRY_RUNTIME_INTERNAL_HOST_STEPS_H_
