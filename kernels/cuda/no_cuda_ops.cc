// Builds without CUDA have no CUDA kernels: the graph backend finds none and never sets a stream.
#include "kernels/cuda/cuda_ops.h"

namespace ferry {

bool HaveCudaKernels() { return false; }

void SetCurrentCudaStream(void*) {}

KernelFn FindCudaKernel(absl::string_view) { return nullptr; }

}  // namespace ferry
