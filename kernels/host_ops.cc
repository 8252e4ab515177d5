// The built-in host op set. Names and argument conventions are a contract that programs, the
// program builder and the conformance cases rely on. "t" is a tensor argument; "int", "double",
// "intlist" are Scalar arguments; a number accepts kInt, kDouble or kBool. Dtypes are float32 and
// int64 unless noted. Functional results are row-major contiguous.
//
//   add|sub|mul|div|maximum|minimum(t a, t b | number)   NumPy broadcasting, same dtype; div float32
//   add_|sub_|mul_|div_|maximum_|minimum_(t a, t b | number)
//                                        writes a; result is a view of a; b broadcasts to a
//   relu|neg|abs(t)                      float32 and int64
//   exp|log|sin|cos|tanh|sigmoid|silu|gelu|gelu_tanh|sqrt|rsqrt|floor|ceil(t)
//                                        float32; gelu is the erf form, gelu_tanh ATen's tanh one
//   hardswish|hardsigmoid(t)             float32, ATen's (relu6(x + 3) / 6, times x for hardswish)
//   leaky_relu(t, number slope), elu(t, number alpha, number scale, number input_scale)   float32
//   <unary>_(t)                          in place: writes arg 0, result is a view of it
//   clamp(t, number min, number max)     float32, and int64 with whole-number bounds; NaN stays
//                                        NaN; min > max gives max
//   pow(t, number exponent)              float32; int64 to a non-negative int power (wraps)
//   fill_(t, number)                     in place
//   copy_(t dst, t src)                  in place; src same dtype, broadcasts to dst
//   matmul(t a, t b)                     float32; [..., m, k] x [..., k, n], batch broadcasting
//   linear(t x, t w[, t bias])           float32; x [..., in], w [out, in], bias [out]
//   softmax(t x, int dim)                float32; subtracts the row max
//   log_softmax(t x, int dim)            float32; x - max - log(sum(exp(x - max)))
//   rms_norm(t x, t weight, number eps)  float32; over the last dim
//   view(t, intlist)                     view; one -1; load error when the strides do not allow it
//   transpose(t, int, int), permute(t, intlist), unsqueeze(t, int), squeeze(t, int)     views
//   slice(t, int dim, int start, int end, int step)  view; PyTorch clamping, step >= 1
//   select(t, int dim, int index)        view without dim; index from the end when negative
//   expand(t, intlist)                   view with 0 strides; -1 keeps a size
//   reshape(t, intlist), clone(t)        copies (reshape always copies)
//   cat(int dim, t, t, ...)              same dtype, sizes equal except on dim
//   constant_pad(t x, intlist pad, number value)
//                                        ATen's constant_pad_nd: (before, after) pairs from the
//                                        last dim backwards, negative amounts crop; float32, int64
//   sym_size(t, int dim)                 reads only t's shape; int64 rank-0 result
//   index_put_(t self, t indices, t values)
//                                        writes self; indices int64 [n]; values broadcast to
//                                        [n, self.sizes[1:]...]; an out-of-range index is a
//                                        run-time InvalidArgument and nothing is written
//   embedding(t weight, t indices)       out[i, ...] = weight[indices[i], ...]; indices int64 [n];
//                                        an out-of-range index is a run-time InvalidArgument
//   mean(t x, intlist dims, bool keepdim) float32; [] reduces every dim; empty reductions NaN
//   sum(t x, intlist dims, bool keepdim)  float32; as mean, without the division; empty sums 0
//   eq|ne|lt|le|gt|ge(t, t | number)     bool result; any dtype; two tensors of one dtype,
//                                        broadcast
//   where(t cond, t a, t b)              cond bool; a, b one dtype (any); all three broadcast
//   to_dtype(t, int dtype)               cast to the DType numbered dtype (base/tensor.h)
//   quantize(t x, scale, zero_point, int qmin, int qmax, int dtype)
//                                        float32 to int8, uint8, int16, uint16 or int32 as
//                                        ExecuTorch's quantize_per_tensor; scale a number or a
//                                        one-element float tensor, zero_point a number or a
//                                        one-element int tensor
//   dequantize(t q, scale, zero_point, int qmin, int qmax)   to float32: (q - zero_point) * scale
//   conv(t x, t w, intlist stride, intlist padding, intlist dilation, int groups[, t bias])
//                                        float32; x [N, C, L] or [N, C, H, W], w [O, C/groups, k...];
//                                        lists of 1 or one entry per spatial dim; two results:
//                                        the output and the im2col buffer (kernels/nn_ops.h)
//   conv_transpose(t x, t w, intlist stride, intlist padding, intlist output_padding,
//                  intlist dilation, int groups[, t bias])
//                                        float32; ATen's transposed convolution, w [C, O/groups,
//                                        k...]; each element scatters its products (no BLAS)
//   batch_norm(t x, t|none w, t|none b, t mean, t var, number eps)   float32; x [N, C, ...]
//   layer_norm(t x, intlist shape, t|none w, t|none b, number eps)   float32; over x's last dims
//   max_pool2d(t x, intlist kernel, intlist stride, intlist padding, intlist dilation, bool ceil)
//   avg_pool2d(t x, intlist kernel, intlist stride, intlist padding, bool ceil,
//              bool count_include_pad, int|none divisor)
//   adaptive_avg_pool2d(t x, intlist output_size)
//                                        float32; x [N, C, H, W] or [C, H, W]; an empty stride is
//                                        the kernel; ATen's output sizes, NaN wins a max
//   upsample_bilinear2d(t x, intlist output_size, bool align_corners, number scale_h,
//                       number scale_w)  float32; ATen's, x [N, C, H, W] or [C, H, W]; a scale
//                                        <= 0 means from the sizes
// Views, copies (clone, reshape, cat, copy_), sym_size, embedding's weight and index_put_'s self
// and values take every dtype (base/tensor.h DType); the other ops refuse all but float32 and int64
// at load (Unimplemented).
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_ops.h"
#include "ferry/kernels/op_registry.h"

namespace ferry {

absl::Status RegisterBuiltInOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(internal::RegisterElementwiseOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterLinalgOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterShapeOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterIndexOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterDTypeOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterReduceOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterNnOps(registry));
  return absl::OkStatus();
}

}  // namespace ferry
