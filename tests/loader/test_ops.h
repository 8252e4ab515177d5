// A small op registry for loader tests, independent of the built-in op set: the loader only needs
// each op's infer function and its schema flags (written arguments, views).
//
//   OpRegistry ops = ferry::testing::LoaderTestOps();
//   ProgramBuilder pb(&ops);
//
// Ops: add(a, b) and relu(a) (same dtype and sizes), add_(a, b) (writes a, returns a view of it),
// mul_scalar(a, s) (s an int or double scalar), view(a, sizes) (a view with new sizes, same
// element count), split2(a) (two halves along dimension 0).
#ifndef FERRY_TESTS_LOADER_TEST_OPS_H_
#define FERRY_TESTS_LOADER_TEST_OPS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/op_registry.h"

namespace ferry::testing {

inline absl::Status NoKernel(absl::Span<const OpArg>, absl::Span<TensorRef* const>) {
  return absl::UnimplementedError("loader tests do not run kernels");
}

inline std::vector<int64_t> SizesOf(const TensorRef& t) {
  return std::vector<int64_t>(t.sizes.begin(), t.sizes.begin() + t.rank);
}

// Every argument is a tensor with the first one's dtype and sizes; results repeat them.
inline absl::Status InferSame(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].tensor == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", a, " must be a tensor"));
    }
    if (args[a].tensor->dtype != args[0].tensor->dtype ||
        SizesOf(*args[a].tensor) != SizesOf(*args[0].tensor)) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument ", a, " does not match argument 0 in dtype and sizes"));
    }
  }
  for (InferredResult& r : results) {
    r.layout = TensorRef::Contiguous(args[0].tensor->dtype, SizesOf(*args[0].tensor));
  }
  return absl::OkStatus();
}

inline absl::Status InferMulScalar(absl::Span<const OpArg> args,
                                   absl::Span<InferredResult> results) {
  if (args[0].tensor == nullptr) return absl::InvalidArgumentError("argument 0 must be a tensor");
  if (args[1].scalar == nullptr || (args[1].scalar->kind != Scalar::Kind::kDouble &&
                                    args[1].scalar->kind != Scalar::Kind::kInt)) {
    return absl::InvalidArgumentError("argument 1 must be an int or double scalar");
  }
  results[0].layout = TensorRef::Contiguous(args[0].tensor->dtype, SizesOf(*args[0].tensor));
  return absl::OkStatus();
}

inline absl::Status InferView(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  if (args[0].tensor == nullptr) return absl::InvalidArgumentError("argument 0 must be a tensor");
  if (args[1].scalar == nullptr || args[1].scalar->kind != Scalar::Kind::kIntList) {
    return absl::InvalidArgumentError("argument 1 must be an int list");
  }
  const std::vector<int64_t>& sizes = args[1].scalar->list;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (n != args[0].tensor->numel()) {
    return absl::InvalidArgumentError("view: the element count changes");
  }
  results[0].layout = TensorRef::Contiguous(args[0].tensor->dtype, sizes);
  return absl::OkStatus();
}

inline absl::Status InferSplit2(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  const TensorRef* t = args[0].tensor;
  if (t == nullptr || t->rank < 1 || t->sizes[0] % 2 != 0) {
    return absl::InvalidArgumentError("split2: argument 0 needs an even first dimension");
  }
  std::vector<int64_t> half = SizesOf(*t);
  half[0] /= 2;
  results[0].layout = TensorRef::Contiguous(t->dtype, half);
  results[1].layout = TensorRef::Contiguous(t->dtype, half);
  return absl::OkStatus();
}

inline OpSchema TestOp(std::string name, int num_args, InferFn infer,
                       std::vector<int> written_args = {}, std::vector<int> view_of = {},
                       int num_results = 1) {
  OpSchema s;
  s.name = std::move(name);
  s.min_args = num_args;
  s.max_args = num_args;
  s.num_results = num_results;
  s.written_args = std::move(written_args);
  s.view_of = std::move(view_of);
  s.infer = infer;
  s.kernel = NoKernel;
  return s;
}

inline OpRegistry LoaderTestOps() {
  OpRegistry ops;
  for (OpSchema& s : std::vector<OpSchema>{
           TestOp("add", 2, InferSame), TestOp("relu", 1, InferSame),
           TestOp("add_", 2, InferSame, /*written_args=*/{0}, /*view_of=*/{0}),
           TestOp("mul_scalar", 2, InferMulScalar),
           TestOp("view", 2, InferView, /*written_args=*/{}, /*view_of=*/{0}),
           TestOp("split2", 1, InferSplit2, /*written_args=*/{}, /*view_of=*/{-1, -1},
                  /*num_results=*/2)}) {
    absl::Status status = ops.Register(std::move(s));
    (void)status;  // the names are distinct
  }
  return ops;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_LOADER_TEST_OPS_H_
