// Turning CUDA runtime errors into absl::Status. Every CUDA call in Ferry goes through
// FERRY_CUDA_RETURN_IF_ERROR, which returns Internal with the failing expression, CUDA's own
// error text and the file:line. Only memory/ and kernels/ include this header.
#ifndef FERRY_MEMORY_DEVICES_CUDA_CUDA_STATUS_H_
#define FERRY_MEMORY_DEVICES_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ferry::internal {

inline absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  absl::StatusCode code = error == cudaErrorMemoryAllocation ? absl::StatusCode::kResourceExhausted
                                                             : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(expr, " failed: ", cudaGetErrorName(error), " (",
                                         cudaGetErrorString(error), ") at ", file, ":", line));
}

}  // namespace ferry::internal

#define FERRY_CUDA_RETURN_IF_ERROR(expr)                                                   \
  do {                                                                                     \
    ::absl::Status ferry_cuda_status_ =                                                    \
        ::ferry::internal::CudaStatus((expr), #expr, __FILE__, __LINE__);                  \
    if (!ferry_cuda_status_.ok()) return ferry_cuda_status_;                               \
  } while (false)

#endif  // FERRY_MEMORY_DEVICES_CUDA_CUDA_STATUS_H_
