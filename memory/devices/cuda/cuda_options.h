// The CUDA device type's options: whether a registry (and so a Runtime) adds the CUDA devices it
// finds, and how each one copies (memory/devices/cuda/cuda_device.h). Builds without CUDA read
// them too and find no devices.
//
//   RuntimeOptions options;
//   options.cuda.enabled = false;  // cuda:N runs on sim:N even where a GPU is present
#ifndef FERRY_MEMORY_DEVICES_CUDA_CUDA_OPTIONS_H_
#define FERRY_MEMORY_DEVICES_CUDA_CUDA_OPTIONS_H_

namespace ferry {

struct CudaTypeOptions {
  // Add the CUDA devices found (when built with CUDA).
  bool enabled = true;
  // Threads (the copying thread included) that move a copy from or to pageable host memory
  // through its pinned staging chunks (memory/parallel_memcpy.h); 0: ParallelMemcpy's default
  // (half the hardware threads, 1 to 4). Copies from and to pinned memory use none.
  int copy_threads = 0;
};

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICES_CUDA_CUDA_OPTIONS_H_
