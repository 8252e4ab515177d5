// Deprecated: include "ferry/base/tensor.h" instead.
// This forwarding header is removed in the next release.
#ifndef FERRY_KERNELS_TENSOR_H_
#define FERRY_KERNELS_TENSOR_H_

#include "ferry/base/tensor.h"  // IWYU pragma: export

#endif  // FERRY_KERNELS_TENSOR_H_
