// What the loaders need to know of the nn ops' shape rules (kernels/nn_ops.cc) to declare their
// results.
//
//   // conv's second result, the im2col column buffer: float32 [elements]
//   int64_t n = ConvWorkspaceElements(in_channels / groups, kh * kw, unit_stride_unpadded,
//                                     out_h * out_w);
#ifndef FERRY_KERNELS_NN_OPS_H_
#define FERRY_KERNELS_NN_OPS_H_

#include <cstdint>

namespace ferry {

// The elements of conv's column buffer: 0 for a depthwise conv (one input channel per group) and
// a pointwise one (a 1x1 kernel, unit stride, no padding), which need none; otherwise a [channels
// per group x kernel elements, output positions] matrix for one image and group at a time.
int64_t ConvWorkspaceElements(int64_t channels_per_group, int64_t kernel_elements,
                              bool unit_stride_unpadded, int64_t out_spatial);

}  // namespace ferry

#endif  // FERRY_KERNELS_NN_OPS_H_
