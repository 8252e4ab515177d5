// CUDA kernels for the built-in ops, looked up by op name, for the graph backend on CUDA devices.
//
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
//    its indices to the host and synchronizes the stream to check them before writing anything;
//  - allocates nothing and sets no data pointers; the one exception is index_put_'s small pinned
//    staging buffer, allocated once per thread at its first call and kept for the thread's life;
//  - returns InvalidArgument only for what is known at run time alone (an index out of range in
//    index_put_, checked before any element is written), Unimplemented for a dtype the op has no
//    CUDA kernel for (infer rejects these already), and Internal (ResourceExhausted for CUDA memory
//    errors) with the op, the CUDA kernel or call and CUDA's own error text when a launch or a CUDA
//    call fails. Errors of earlier asynchronous work may surface in a later kernel's status.
// float32 throughout; int64 also for add, sub, mul, maximum, minimum, neg, abs, relu, copy_,
// clone, reshape, cat, fill_ and index_put_ (and their in-place forms).
//
// Thread safety: FindCudaKernel and HaveCudaKernels may be called from any thread. The current
// stream is per thread. Kernels hold no shared state.
//
// This header names no CUDA type, so code built without CUDA can include it; builds without CUDA
// link kernels/cuda/no_cuda_ops.cc instead, where HaveCudaKernels() is false and every lookup
// fails.
#ifndef FERRY_KERNELS_CUDA_CUDA_OPS_H_
#define FERRY_KERNELS_CUDA_CUDA_OPS_H_

#include "absl/strings/string_view.h"
#include "kernels/op_registry.h"

namespace ferry {

// True when Ferry was built with CUDA kernels.
bool HaveCudaKernels();

// The stream CUDA kernels launch on, for the calling thread (a cudaStream_t as void*; nullptr is
// the legacy default stream). The graph backend sets it before running a sub-graph on a CUDA
// device. The stream must belong to the device the calling thread has current.
void SetCurrentCudaStream(void* stream);

// The CUDA kernel of a registered op, with the same KernelFn signature as host kernels
// (kernels/op_registry.h); nullptr when the op has no CUDA kernel. View ops (null host kernel)
// need none.
KernelFn FindCudaKernel(absl::string_view op);

}  // namespace ferry

#endif  // FERRY_KERNELS_CUDA_CUDA_OPS_H_
