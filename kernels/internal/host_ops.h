// Registration of the built-in host ops, one function per source file. RegisterBuiltInOps
// (kernels/host_ops.cc) calls them all; they are not API.
//
// Each returns the first Register error (AlreadyExists when a name is taken).
#ifndef FERRY_KERNELS_INTERNAL_HOST_OPS_H_
#define FERRY_KERNELS_INTERNAL_HOST_OPS_H_

#include "absl/status/status.h"
#include "ferry/kernels/op_registry.h"

namespace ferry::internal {

// add, sub, mul, div, maximum, minimum and their in-place forms; the unary activations and their
// in-place forms; fill_, copy_.
absl::Status RegisterElementwiseOps(OpRegistry& registry);
// matmul, linear, softmax, log_softmax, rms_norm.
absl::Status RegisterLinalgOps(OpRegistry& registry);
// view, transpose, permute, slice, unsqueeze, squeeze, expand, reshape, clone, cat, sym_size.
absl::Status RegisterShapeOps(OpRegistry& registry);
// index_put_.
absl::Status RegisterIndexOps(OpRegistry& registry);
// eq, ne, lt, le, gt, ge, where, to_dtype, quantize, dequantize.
absl::Status RegisterDTypeOps(OpRegistry& registry);
// mean.
absl::Status RegisterReduceOps(OpRegistry& registry);
// conv, batch_norm, layer_norm, max_pool2d, avg_pool2d, adaptive_avg_pool2d.
absl::Status RegisterNnOps(OpRegistry& registry);

}  // namespace ferry::internal

#endif  // FERRY_KERNELS_INTERNAL_HOST_OPS_H_
