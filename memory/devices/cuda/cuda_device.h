// A CUDA device as a DeviceRuntime.
//
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> gpu, CudaDevice::Open(0));
//   FERRY_ASSIGN_OR_RETURN(void* d, gpu->Allocate(bytes, 256));
//   FERRY_RETURN_IF_ERROR(gpu->CopyHostToDevice(d, pageable, bytes));  // `pageable` reusable now
//   FERRY_RETURN_IF_ERROR(gpu->Synchronize());                          // the DMA has landed
//
// Ordering. One non-blocking stream per device; every copy, memset and kernel of this device is
// issued on it, in order. The host waits through CUDA events created once when the device opens
// (cudaEventRecord on the stream, then cudaEventSynchronize), never by synchronizing the stream or
// the device. A copy from a CUDA peer waits on an event recorded on the peer's stream (no host
// wait), and the peer's later work waits for the copy, so neither side can overwrite what the
// other still reads.
//
// Copies. From or to pinned host memory (cudaHostAlloc, such as the host arena of a method that
// uses this device) a copy is one asynchronous DMA: CopyHostToDevice and CopyDeviceToHost return
// before it completes, and the host must not touch that memory until Synchronize(). From or to
// pageable memory, the bytes go through two pinned staging chunks of kStagingChunkBytes, each
// guarded by an event, so the host memcpy of one chunk overlaps the DMA of the other and host
// memory stays bounded whatever the copy's size. The memcpy of a chunk is split across the
// device's copy threads (ParallelMemcpy, started by Open()): one thread's memcpy is several
// times slower than the DMA engine.
//  - CopyHostToDevice from pageable memory returns once the whole source has been read into
//    staging (the caller may reuse or free it at once); the last DMAs may still be in flight.
//  - CopyDeviceToHost into pageable memory returns with the data in place.
// CopyHostStridedToDevice of a dense permutation (a transposed or channels-last constant) copies
// the source's raw bytes to a temporary device buffer the same way and gathers them into `dst`
// with a kernel (memory/devices/cuda/strided_copy.h), then waits and frees the temporary; other layouts
// are gathered on the host into a temporary pinned buffer. Either counts as one h2d copy.
//
// Memory. Device memory comes from cudaMalloc (one allocation per arena or constant region, sized
// at load). The staging chunks, the stream and the events are created by Open(), so no copy ever
// allocates, in particular none inside a planned Execute. Owns() asks the driver
// (cudaPointerGetAttributes), so a host pointer posing as device memory is refused (P13).
//
// Errors: every CUDA call goes through FERRY_CUDA_RETURN_IF_ERROR (Internal with the expression,
// CUDA's text and file:line; ResourceExhausted when CUDA is out of memory). Errors of earlier
// asynchronous work may surface in a later call.
//
// Built only when a CUDA compiler is found. Thread safety: one thread at a time (DeviceRuntime);
// a peer copy also uses the peer, so the peer must not be in use on another thread meanwhile.
#ifndef FERRY_MEMORY_DEVICES_CUDA_CUDA_DEVICE_H_
#define FERRY_MEMORY_DEVICES_CUDA_CUDA_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "ferry/memory/device_runtime.h"
#include "ferry/memory/parallel_memcpy.h"

namespace ferry {

class CudaDevice : public DeviceRuntime {
 public:
  // Size of each of the two pinned chunks that pageable copies are staged through.
  static constexpr size_t kStagingChunkBytes = size_t{4} << 20;

  // Opens device `index`: its stream, its events, its pinned staging chunks and the threads that
  // fill and empty them (`copy_threads` in all, the copying thread included; 0:
  // ParallelMemcpy::DefaultThreads()). Internal when the device cannot be opened,
  // ResourceExhausted when the pinned memory cannot be had.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int32_t index, int copy_threads = 0);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  Device device() const override { return Device::Cuda(index_); }
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override;
  void Free(void* ptr) override;
  // Thread-safe (the allocation table is locked; the driver's pointer queries are thread-safe).
  bool Owns(const void* ptr, size_t bytes) const override;
  // Free device memory (cudaMemGetInfo). Thread-safe; leaves the calling thread's current device
  // as it was.
  size_t available_bytes() const override;
  bool has_pinned_host_memory() const override { return true; }
  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyHostStridedToDevice(void* dst, const void* src,
                                       const StridedLayout& layout) override;
  // From another CudaDevice, one peer DMA ordered against both streams; from the host, as
  // CopyHostToDevice; from a device of another type, that device reads into the staging chunks,
  // as a pageable CopyHostToDevice does.
  absl::Status CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                            size_t bytes) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status Synchronize() override;
  DeviceCounters counters() const override { return counters_; }
  void ResetCounters() override;

  void* native_stream() const override { return h_.stream; }
  // Timing events (cudaEventCreate with timing), recorded on the stream; ElapsedNs from
  // cudaEventElapsedTime (about half a microsecond of resolution).
  absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(size_t markers) override;
  // Page-locked host memory (cudaHostAlloc): copies from and to it go straight to the DMA engine.
  absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) override;
  void FreePinnedHost(void* ptr) override;
  // Makes this device current for the calling thread, so kernels launched inside the scope (on
  // native_stream()) run on it.
  void EnterScope() override;

  // Records this device's order event on its stream (a point after all work issued so far) and
  // returns it (a cudaEvent_t). Another stream, of any device, can wait for it with
  // cudaStreamWaitEvent without blocking the host. The event is re-recorded by the next call, which
  // does not affect waits already issued.
  absl::StatusOr<void*> RecordOrderEvent();
  // Makes this device's stream wait, without blocking the host, until `event` (a cudaEvent_t of
  // any device, already recorded) has completed.
  absl::Status WaitForEvent(void* event);

 private:
  // The CUDA objects Open() creates, as opaque pointers (this header names no CUDA type).
  struct Handles {
    void* stream = nullptr;       // cudaStream_t, non-blocking
    void* sync_event = nullptr;   // cudaEvent_t for WaitForStream()
    void* order_event = nullptr;  // cudaEvent_t for RecordOrderEvent()
    // Pinned staging chunks of kStagingChunkBytes; staging_event[i] is recorded after every DMA
    // that reads or writes staging[i], and the host waits for it before touching the chunk.
    char* staging[2] = {nullptr, nullptr};
    void* staging_event[2] = {nullptr, nullptr};
  };
  // Destroys whatever `h` holds (null members are skipped); errors are ignored.
  static void Destroy(const Handles& h);

  CudaDevice(int32_t index, const Handles& h, int copy_threads)
      : index_(index), h_(h), copier_(copy_threads) {}
  absl::Status Activate() const;
  bool IsPinned(const void* host) const;
  // Copies from host memory into device memory: one DMA from pinned memory, staged otherwise (see
  // the file comment). Not counted.
  absl::Status CopyIn(void* dst, const void* src, size_t bytes);
  absl::Status StageIn(void* dst, const void* src, size_t bytes);
  // The same, with each chunk's `n` bytes from `offset` on written into `chunk` by `fill`.
  absl::Status StageIn(void* dst, size_t bytes,
                       absl::FunctionRef<absl::Status(char* chunk, size_t offset, size_t n)> fill);
  absl::Status StageOut(void* dst, const void* src, size_t bytes);
  // Blocks the host until all work issued so far on the stream has completed (through an event).
  absl::Status WaitForStream();

  int32_t index_;
  Handles h_;
  int next_staging_ = 0;  // the chunk the next staged copy starts with
  ParallelMemcpy copier_;  // fills and empties the staging chunks
  mutable std::mutex mu_;  // guards allocations_ against Owns() from other threads
  std::map<uintptr_t, size_t> allocations_;
  DeviceCounters counters_;
};

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICES_CUDA_CUDA_DEVICE_H_
