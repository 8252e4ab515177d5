// CUDA kernels for the built-in ops, looked up by op name, for the graph backend on CUDA devices.
//
//   FERRY_RETURN_IF_ERROR(PrepareCudaKernels(0));  // at load, once per device used
//   KernelFn relu = FindCudaKernel("relu");   // at load; nullptr: the op has no CUDA kernel
//   SetCurrentCudaStream(stream);             // before running a sub-graph on the device
//   FERRY_RETURN_IF_ERROR(relu(args, results));
//
// Contract. A CUDA kernel has the host kernel's signature and calling convention
// (kernels/op_registry.h): tensor arguments and results point at memory of the current CUDA device,
// results that are views are already aliased by the executor, inputs and results may have any
// strides (0 for broadcast). Every kernel:
//  - launches only on the calling thread's current stream (SetCurrentCudaStream; the legacy default
//    stream until set) and returns without waiting for the work, except index_put_, which copies
//    its indices to the host and waits for them (an event recorded behind the copy) to check them
//    before writing anything;
//  - allocates nothing and sets no data pointers. index_put_ stages its indices in the device's
//    pinned buffer made by PrepareCudaKernels; on a device not prepared it allocates a small
//    pinned buffer per thread at its first call, kept for the thread's life, and waits for the
//    whole stream;
//  - matmul and linear call cuBLAS (cublasSgemm / cublasSgemmStridedBatched on the current stream,
//    CUBLAS_DEFAULT_MATH: no TF32, float32 accumulation) when PrepareCudaKernels has run for the
//    current device and the operands are layouts cuBLAS takes directly: each matrix operand
//    row-major or a transposed view of one (unit stride in one of its two dimensions), batch
//    dimensions that collapse to one uniform stride per operand, and a row-major contiguous
//    result. Anything else, and any device not prepared, takes the tiled kernel. cuBLAS sums in
//    its own order, so results differ from the host's by float32 rounding (within 1e-4 relative
//    on the tested shapes), where the tiled kernel sums in the host's order;
//  - returns InvalidArgument only for what is known at run time alone (an index out of range in
//    index_put_, checked before any element is written), Unimplemented for a dtype the op has no
//    CUDA kernel for (infer rejects these already), and Internal (ResourceExhausted for CUDA memory
//    errors) with the op, the CUDA kernel or call and CUDA's own error text when a launch or a CUDA
//    call fails; likewise for a failed cuBLAS call, with cuBLAS's status (ResourceExhausted for
//    CUBLAS_STATUS_ALLOC_FAILED). Errors of earlier asynchronous work may surface in a later
//    kernel's status.
// float32 throughout (the other dtypes are refused at load by CheckCudaKernelDTypes); int64 also
// for add, sub, mul, maximum, minimum, neg, abs, relu, copy_, clone, reshape, cat, fill_ and
// index_put_ (and their in-place forms).
//
// Thread safety: FindCudaKernel, HaveCudaKernels and PrepareCudaKernels may be called from any
// thread (handle creation is guarded by a mutex). The current stream is per thread. The only
// shared state is the cuBLAS handle of each prepared device, which matmul and linear bind to the
// current stream: kernels for one device must be launched from one thread at a time, as the
// DeviceRuntime contract already requires of the device's runtime. Work of two streams on one
// device that both use the handle is ordered by an event, so they never share its workspace.
//
// This header names no CUDA type, so code built without CUDA can include it; builds without CUDA
// link kernels/cuda/no_cuda_ops.cc instead, where HaveCudaKernels() is false and every lookup
// fails.
#ifndef FERRY_KERNELS_CUDA_CUDA_OPS_H_
#define FERRY_KERNELS_CUDA_CUDA_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/kernels/op_registry.h"

namespace ferry {

// True when Ferry was built with CUDA kernels.
bool HaveCudaKernels();

// The stream CUDA kernels launch on, for the calling thread (a cudaStream_t as void*; nullptr is
// the legacy default stream). The graph backend sets it before running a sub-graph on a CUDA
// device. The stream must belong to the device the calling thread has current.
void SetCurrentCudaStream(void* stream);

// Load-time preparation of the kernels for CUDA device `device_index`: opens cuBLAS (dlopen, at the
// first call in the process, so processes that never use a GPU never load it) and creates that
// device's cuBLAS handle (math mode CUBLAS_DEFAULT_MATH) and workspace and index_put_'s pinned
// staging buffer and event, once per process; later calls return OK at once. They live until the
// process exits. The
// calling thread's current device is left as it was. Never called by kernels, so nothing is
// created inside Execute. InvalidArgument for an index outside [0, 64); Internal when cuBLAS
// cannot be loaded (with the loader's text) and naming the failed CUDA or cuBLAS call otherwise
// (ResourceExhausted when device memory runs out); FailedPrecondition in builds without CUDA.
absl::Status PrepareCudaKernels(int device_index);

// How many matmul and linear calls on the calling thread went to cuBLAS and how many to the tiled
// kernel, since the thread started; for tests and benchmarks.
struct CudaGemmCounts {
  uint64_t cublas = 0;
  uint64_t tiled = 0;
};
CudaGemmCounts GetCudaGemmCounts();

// The CUDA kernel of a registered op, with the same KernelFn signature as host kernels
// (kernels/op_registry.h); nullptr when the op has no CUDA kernel. View ops (null host kernel)
// need none.
KernelFn FindCudaKernel(absl::string_view op);

// At load: OK when every tensor argument and result is float32 or int64, the only dtypes CUDA
// kernels take; else Unimplemented "<op>: no CUDA kernel for dtype bool". The host kernels of
// copies and views take every dtype on the host, so this is what refuses the others on a CUDA
// device.
absl::Status CheckCudaKernelDTypes(absl::string_view op, absl::Span<const OpArg> args,
                                   absl::Span<const TensorRef* const> results);

}  // namespace ferry

#endif  // FERRY_KERNELS_CUDA_CUDA_OPS_H_
