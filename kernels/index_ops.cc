// index_put_: self[indices[i], ...] = values[i, ...], the KV-cache update; self and values of
// any dtype, indices int64.
//
// The indices are data, so their range is known only at run time: the kernel checks every index
// before writing any element, so an out-of-range index leaves `self` untouched.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/memory/status_macros.h"

namespace ferry::internal {
namespace {

constexpr absl::string_view kOp = "index_put_";

// The shape `values` must broadcast to: [n, self.sizes[1:]...].
std::vector<int64_t> RowShape(const TensorRef& self, int64_t n) {
  std::vector<int64_t> shape(Sizes(self).begin(), Sizes(self).end());
  shape[0] = n;
  return shape;
}

absl::Status IndexPutInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity(kOp, args, 3, 3, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* self, AnyTensorArg(kOp, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* indices, TensorArg(kOp, args, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* values, AnyTensorArg(kOp, args, 2));
  if (self->rank < 1) {
    return OpError(kOp, "argument 0 has shape ", ShapeString(*self),
                   ", expected at least 1 dimension");
  }
  FERRY_RETURN_IF_ERROR(CheckDType(kOp, 1, *indices, DType::kInt64));
  if (indices->rank != 1) {
    return OpError(kOp, "argument 1 has shape ", ShapeString(*indices),
                   ", expected 1 dimension [n]");
  }
  FERRY_RETURN_IF_ERROR(CheckSameDType(kOp, 2, *values, 0, *self));
  const std::vector<int64_t> target = RowShape(*self, indices->sizes[0]);
  if (!BroadcastsTo(Sizes(*values), target)) {
    return OpError(kOp, "argument 2 has shape ", ShapeString(*values),
                   ", which does not broadcast to ", ShapeString(target),
                   " ([number of indices] + shape of argument 0 after dimension 0)");
  }
  results[0] = ViewResult(*self);
  return absl::OkStatus();
}

absl::Status IndexPutKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& self = *results[0];  // aliases argument 0 with its layout
  const TensorRef& indices = *args[1].tensor;
  const TensorRef& values = *args[2].tensor;
  const int64_t n = indices.sizes[0];
  const int64_t size0 = self.sizes[0];
  const int64_t* idx = indices.data_as<const int64_t>();
  const int64_t istride = indices.strides[0];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = idx[i * istride];
    if (v < -size0 || v >= size0) {
      return absl::InvalidArgumentError(absl::StrCat(kOp, ": index ", v,
                                                     " is out of range for dimension 0 of size ",
                                                     size0));
    }
  }
  // values read as [n, self.sizes[1:]...]; row i is a TensorRef of self's row shape.
  TensorRef target = self;
  target.sizes[0] = n;
  int64_t vstrides[kMaxRank];
  BroadcastStrides(values, target.rank, target.sizes.data(), vstrides);
  const int64_t elem = static_cast<int64_t>(self.element_size());
  TensorRef dst_row;
  dst_row.dtype = self.dtype;
  dst_row.rank = self.rank - 1;
  TensorRef src_row = dst_row;
  for (int d = 1; d < self.rank; ++d) {
    dst_row.sizes[d - 1] = self.sizes[d];
    dst_row.strides[d - 1] = self.strides[d];
    src_row.sizes[d - 1] = self.sizes[d];
    src_row.strides[d - 1] = vstrides[d];
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t row = idx[i * istride];
    if (row < 0) row += size0;
    dst_row.data = static_cast<char*>(self.data) + row * self.strides[0] * elem;
    src_row.data = static_cast<char*>(values.data) + i * vstrides[0] * elem;
    // src_row already carries broadcast strides, so its own sizes equal dst_row's.
    BroadcastCopy(dst_row, src_row);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterIndexOps(OpRegistry& registry) {
  return registry.Register(MakeSchema("index_put_", 3, 3, 1, &IndexPutInfer, &IndexPutKernel,
                                      /*written_args=*/{0}, /*view_of=*/{0}));
}

}  // namespace ferry::internal
