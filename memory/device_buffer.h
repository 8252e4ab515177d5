// DeviceBuffer: RAII ownership of one allocation on a device.
//
//   FERRY_ASSIGN_OR_RETURN(DeviceBuffer arena, DeviceBuffer::Allocate(*sim, bytes, 64));
//   FERRY_RETURN_IF_ERROR(arena.Touch());   // fault the pages in now, never during a call
//   void* base = arena.data();
//
// Move-only; the destructor (or Reset) frees the memory through its runtime, which must outlive
// the buffer. Allocating 0 bytes gives an empty buffer: null data, size 0, OK status, nothing to
// free. Errors are the runtime's (ResourceExhausted, InvalidArgument for a bad alignment).
// Thread safety: as the runtime's (one thread at a time).
#ifndef FERRY_MEMORY_DEVICE_BUFFER_H_
#define FERRY_MEMORY_DEVICE_BUFFER_H_

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_runtime.h"

namespace ferry {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : runtime_(std::exchange(other.runtime_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      runtime_ = std::exchange(other.runtime_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  static absl::StatusOr<DeviceBuffer> Allocate(DeviceRuntime& runtime, size_t bytes,
                                               size_t alignment);

  // Writes zeros over the whole buffer through the device (DeviceRuntime::Zero, inside its scope
  // for guarded devices) and waits for it, so the pages are resident before any timed work.
  // OK for an empty buffer.
  absl::Status Touch();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return data_ == nullptr; }
  // The runtime it was allocated from; nullptr for a default-constructed or moved-from buffer.
  DeviceRuntime* runtime() const { return runtime_; }
  // Frees the memory now; the buffer becomes default-constructed.
  void Reset();

 private:
  DeviceRuntime* runtime_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICE_BUFFER_H_
