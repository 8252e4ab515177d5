// CUDA kernels of the built-in ops (see kernels/cuda/cuda_ops.h for the contract).
//
// Each op mirrors its host kernel (kernels/*_ops.cc) element for element: same broadcasting, same
// int64 wrap-around, same NaN handling, the same accumulation order in matmul and linear, and
// rms_norm's sum of squares in double. Layout work happens on the host before a launch: operands
// are read under broadcast strides, size-1 dimensions are dropped and dimensions that are
// contiguous with each other in every operand are merged (as ForEachOffset does on the host), so a
// strided kernel decomposes its linear index over as few dimensions as the layouts allow. Operands
// that are all row-major contiguous over the result's shape take flat kernels with no index math.
//
// Kernel parameters are passed by value (the layouts are small PODs), so no launch needs device
// memory of its own. matmul and linear hand layouts cuBLAS takes directly to cuBLAS, through one
// handle per device created by PrepareCudaKernels at load.//
// This file holds the calling thread's stream and the kernel table; each op family's kernels are
// in kernels/cuda/<family>_ops.cu (elementwise, shape, index, linalg), the stems of the host's
// kernels/<family>_ops.cc, and what they share in kernels/cuda/internal/cuda_common.cuh.
#include "ferry/kernels/cuda/cuda_ops.h"

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ferry/kernels/cuda/internal/cuda_common.cuh"

namespace ferry {
namespace cuda_kernels {
namespace {

thread_local cudaStream_t t_stream = nullptr;

}  // namespace

cudaStream_t CurrentStream() { return t_stream; }

}  // namespace cuda_kernels

namespace {

const cuda_kernels::KernelTable& Table() {
  static const cuda_kernels::KernelTable* const table = [] {
    auto* t = new cuda_kernels::KernelTable();
    cuda_kernels::AddElementwiseKernels(*t);
    cuda_kernels::AddShapeKernels(*t);
    cuda_kernels::AddIndexKernels(*t);
    cuda_kernels::AddLinalgKernels(*t);
    return t;
  }();
  return *table;
}

}  // namespace

bool HaveCudaKernels() { return true; }

void SetCurrentCudaStream(void* stream) {
  cuda_kernels::t_stream = static_cast<cudaStream_t>(stream);
}

absl::Status PrepareCudaKernels(int device_index) {
  return cuda_kernels::PrepareDevice(device_index);
}

CudaGemmCounts GetCudaGemmCounts() { return cuda_kernels::GemmCounts(); }

absl::Status CheckCudaKernelDTypes(absl::string_view op, absl::Span<const OpArg> args,
                                   absl::Span<const TensorRef* const> results) {
  auto supported = [](DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kInt64; };
  for (const OpArg& arg : args) {
    if (arg.tensor != nullptr && !supported(arg.tensor->dtype)) {
      return cuda_kernels::UnsupportedDType(op, arg.tensor->dtype);
    }
  }
  for (const TensorRef* result : results) {
    if (!supported(result->dtype)) return cuda_kernels::UnsupportedDType(op, result->dtype);
  }
  return absl::OkStatus();
}

KernelFn FindCudaKernel(absl::string_view op) {
  const cuda_kernels::KernelTable& table = Table();
  auto it = table.find(op);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace ferry
