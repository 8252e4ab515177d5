// What the CUDA op families (kernels/cuda/<family>_ops.cu, the stems of kernels/<family>_ops.cc)
// share: launch sizes, the statuses of failed launches and calls, the collapsed layouts of strided
// operands, the calling thread's stream, and each family's registration into the kernel table
// (kernels/cuda/cuda_ops.cu). The contract every kernel keeps is in kernels/cuda/cuda_ops.h.
// Compiled by nvcc only.
#ifndef FERRY_KERNELS_CUDA_INTERNAL_CUDA_COMMON_CUH_
#define FERRY_KERNELS_CUDA_INTERNAL_CUDA_COMMON_CUH_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/cuda/cuda_ops.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/memory/devices/cuda/cuda_status.h"

namespace ferry::cuda_kernels {

using internal::BroadcastStrides;
using internal::IsContiguousFast;
using internal::SameSizes;
using internal::ScalarAs;

// The calling thread's stream (SetCurrentCudaStream; the legacy default stream until set).
cudaStream_t CurrentStream();

// Devices with per-device state (cuBLAS handles, index_put_'s staging).
constexpr int kMaxCudaDevices = 64;

constexpr int kThreads = 256;
// Grid-stride loops cover the rest; this many blocks keep every SM of current GPUs busy.
constexpr int64_t kMaxBlocks = 65536;
// gridDim.y and gridDim.z limit.
constexpr int64_t kMaxGridYZ = 65535;

inline int Blocks(int64_t n, int threads = kThreads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, kMaxBlocks));
}

// The status of the launch just made: Internal naming the op and the kernel with CUDA's text.
inline absl::Status LaunchStatus(absl::string_view op, const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(op, ": CUDA kernel ", kernel,
                                          " failed: ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

// A failed CUDA runtime call as FERRY_CUDA_RETURN_IF_ERROR reports it, prefixed with the op.
inline absl::Status WithOp(absl::string_view op, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(op, ": ", status.message()));
}

#define FERRY_CUDA_OP_RETURN_IF_ERROR(op, expr)                                 \
  FERRY_RETURN_IF_ERROR(::ferry::cuda_kernels::WithOp(                          \
      (op), ::ferry::internal::CudaStatus((expr), #expr, __FILE__, __LINE__)))

inline absl::Status UnsupportedDType(absl::string_view op, DType dtype) {
  return absl::UnimplementedError(
      absl::StrCat(op, ": no CUDA kernel for dtype ", DTypeName(dtype)));
}


inline int64_t IntScalar(const Scalar& s) { return s.kind == Scalar::Kind::kInt ? s.i : s.b; }

// ---- Layouts --------------------------------------------------------------------------------

// N operands iterated together over one shape: element i (row-major over `sizes`) of operand k is
// at offset sum(index[d] * strides[k][d]).
template <int N>
struct Offsets {
  int32_t rank = 0;
  int64_t sizes[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
};

// The collapsed layout of N operands over `sizes` (ForEachOffset's merging); *count receives the
// number of elements (0 when a dimension is empty).
template <int N>
Offsets<N> Collapse(int rank, const int64_t* sizes, const std::array<const int64_t*, N>& strides,
                    int64_t* count) {
  Offsets<N> l;
  int64_t n = 1;
  int r = 0;
  for (int d = 0; d < rank; ++d) {
    n *= sizes[d];
    if (sizes[d] == 1) continue;
    bool merge = r > 0;
    for (int k = 0; merge && k < N; ++k) merge = l.strides[k][r - 1] == strides[k][d] * sizes[d];
    if (merge) {
      l.sizes[r - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) l.strides[k][r - 1] = strides[k][d];
      continue;
    }
    l.sizes[r] = sizes[d];
    for (int k = 0; k < N; ++k) l.strides[k][r] = strides[k][d];
    ++r;
  }
  l.rank = r;
  *count = n;
  return l;
}

template <int N>
__device__ __forceinline__ void Decompose(const Offsets<N>& l, int64_t i, int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const int64_t size = l.sizes[d];
    const int64_t q = i / size;
    const int64_t r = i - q * size;
    i = q;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += r * l.strides[k][d];
  }
}

__device__ __forceinline__ int64_t GridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStep() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

// o[l's first offsets] = s[its second] over n elements: broadcast and strided copies, and
// linear's bias rows.
template <typename T>
__global__ void CopyStrided(T* o, const T* s, Offsets<2> l, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t off[2];
    Decompose(l, i, off);
    o[off[0]] = s[off[1]];
  }
}

// dst = src broadcast to dst's shape, any strides on both sides (kernels/cuda/elementwise_ops.cu);
// copy_, clone and cat are made of it.
absl::Status BroadcastCopy(absl::string_view op, const TensorRef& dst, const TensorRef& src);

// The kernel table, by op name, and each family's entries in it.
using KernelTable = absl::flat_hash_map<absl::string_view, KernelFn>;
void AddElementwiseKernels(KernelTable& table);
void AddShapeKernels(KernelTable& table);
void AddIndexKernels(KernelTable& table);
void AddLinalgKernels(KernelTable& table);

// PrepareCudaKernels' work (kernels/cuda/linalg_ops.cu, which holds the cuBLAS handles), and the
// part of it that belongs to index_put_ (kernels/cuda/index_ops.cu): its pinned staging on
// `device_index`, made once; called with the device current, under PrepareDevice's lock.
absl::Status PrepareDevice(int device_index);
absl::Status PrepareIndexStaging(int device_index);
// The calling thread's matmul and linear counts (GetCudaGemmCounts).
CudaGemmCounts GemmCounts();

}  // namespace ferry::cuda_kernels

#endif  // FERRY_KERNELS_CUDA_INTERNAL_CUDA_COMMON_CUH_
