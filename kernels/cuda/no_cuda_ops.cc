// Builds without CUDA have no CUDA kernels: the graph backend finds none and never sets a stream.
#include "ferry/kernels/cuda/cuda_ops.h"

namespace ferry {

bool HaveCudaKernels() { return false; }

void SetCurrentCudaStream(void*) {}

absl::Status PrepareCudaKernels(int) {
  return absl::FailedPreconditionError("Ferry was built without CUDA kernels");
}

CudaGemmCounts GetCudaGemmCounts() { return {}; }

KernelFn FindCudaKernel(absl::string_view) { return nullptr; }

absl::Status CheckCudaKernelDTypes(absl::string_view, absl::Span<const OpArg>,
                                   absl::Span<const TensorRef* const>) {
  return absl::FailedPreconditionError("Ferry was built without CUDA kernels");
}

}  // namespace ferry
