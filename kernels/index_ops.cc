// Ops whose indices are data (int64); the other tensors may have any dtype:
//   index_put_(self, indices, values): self[indices[i], ...] = values[i, ...], the KV-cache update.
//   embedding(weight, indices) -> out[i, ...] = weight[indices[i], ...], a token embedding lookup.
//
// The indices' range is known only at run time: each kernel checks every index before writing
// any element, so an out-of-range index leaves its output untouched and names the index.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/internal/op_util.h"

namespace ferry::internal {
namespace {

constexpr absl::string_view kOp = "index_put_";
constexpr absl::string_view kEmbedding = "embedding";

// Every index in [-size0, size0), or InvalidArgument naming the op and the first that is not.
absl::Status CheckIndices(absl::string_view op, const TensorRef& indices, int64_t size0) {
  const int64_t* idx = indices.data_as<const int64_t>();
  for (int64_t i = 0; i < indices.sizes[0]; ++i) {
    const int64_t v = idx[i * indices.strides[0]];
    if (v < -size0 || v >= size0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": index ", v, " is out of range for dimension 0 of size ", size0));
    }
  }
  return absl::OkStatus();
}

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
  FERRY_RETURN_IF_ERROR(CheckIndices(kOp, indices, size0));
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

absl::Status EmbeddingInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  FERRY_RETURN_IF_ERROR(CheckArity(kEmbedding, args, 2, 2, results, 1));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* weight, TensorArg(kEmbedding, args, 0));
  FERRY_ASSIGN_OR_RETURN(const TensorRef* indices, TensorArg(kEmbedding, args, 1));
  if (weight->rank < 1) {
    return OpError(kEmbedding, "argument 0 has shape ", ShapeString(*weight),
                   ", expected at least 1 dimension [rows, ...]");
  }
  FERRY_RETURN_IF_ERROR(CheckDType(kEmbedding, 1, *indices, DType::kInt64));
  if (indices->rank != 1) {
    return OpError(kEmbedding, "argument 1 has shape ", ShapeString(*indices),
                   ", expected 1 dimension [n]");
  }
  results[0].layout = ContiguousLayout(weight->dtype, RowShape(*weight, indices->sizes[0]));
  results[0].view_offset = 0;
  return absl::OkStatus();
}

absl::Status EmbeddingKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& weight = *args[0].tensor;
  const TensorRef& indices = *args[1].tensor;
  TensorRef& out = *results[0];
  FERRY_RETURN_IF_ERROR(CheckIndices(kEmbedding, indices, weight.sizes[0]));
  const int64_t elem = static_cast<int64_t>(weight.element_size());
  const int64_t* idx = indices.data_as<const int64_t>();
  // Row i of out is a TensorRef of weight's row shape; rows are copied with their strides.
  TensorRef dst_row;
  dst_row.dtype = weight.dtype;
  dst_row.rank = weight.rank - 1;
  TensorRef src_row = dst_row;
  for (int d = 1; d < weight.rank; ++d) {
    dst_row.sizes[d - 1] = out.sizes[d];
    dst_row.strides[d - 1] = out.strides[d];
    src_row.sizes[d - 1] = weight.sizes[d];
    src_row.strides[d - 1] = weight.strides[d];
  }
  for (int64_t i = 0; i < indices.sizes[0]; ++i) {
    int64_t row = idx[i * indices.strides[0]];
    if (row < 0) row += weight.sizes[0];
    dst_row.data = static_cast<char*>(out.data) + i * out.strides[0] * elem;
    src_row.data = static_cast<char*>(weight.data) + row * weight.strides[0] * elem;
    BroadcastCopy(dst_row, src_row);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterIndexOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(registry.Register(MakeSchema("index_put_", 3, 3, 1, &IndexPutInfer,
                                                     &IndexPutKernel, /*written_args=*/{0},
                                                     /*view_of=*/{0})));
  return registry.Register(MakeSchema("embedding", 2, 2, 1, &EmbeddingInfer, &EmbeddingKernel));
}

}  // namespace ferry::internal
