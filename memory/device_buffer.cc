#include "ferry/memory/device_buffer.h"

#include "ferry/base/sanitizers.h"
#include "ferry/base/status_macros.h"

namespace ferry {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(DeviceRuntime& runtime, size_t bytes,
                                                    size_t alignment) {
  DeviceBuffer buffer;
  buffer.runtime_ = &runtime;
  if (bytes == 0) return buffer;
  FERRY_ASSIGN_OR_RETURN(buffer.data_, runtime.Allocate(bytes, alignment));
  buffer.size_ = bytes;
  return buffer;
}

absl::Status DeviceBuffer::Touch() {
  if (data_ == nullptr) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(runtime_->Zero(data_, size_));
  return runtime_->Synchronize();
}

void DeviceBuffer::Reset() {
  if (runtime_ != nullptr && data_ != nullptr) {
    // Method loading poisons the gaps of a host-memory arena under ASan; the allocator may hand
    // the memory out again without going through ASan.
    if (runtime_->uses_host_memory()) UnpoisonMemory(data_, size_);
    runtime_->Free(data_);
  }
  runtime_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ferry
