// CUDA kernels of the index family (kernels/index_ops.cc on the host): index_put_, which checks its
// indices on the host before it writes anything.
#include "ferry/kernels/cuda/internal/cuda_common.cuh"
#include <atomic>

namespace ferry::cuda_kernels {
namespace {

// ---- index_put_ -----------------------------------------------------------------------------

constexpr absl::string_view kIndexPut = "index_put_";
// Indices checked per round trip: 32 KiB of pinned memory per prepared device (and per thread that
// calls index_put_ on a device not prepared).
constexpr int64_t kIndexChunk = 4096;

// A prepared device's staging for index_put_: a pinned buffer and the event the host waits on
// for the indices copied into it. PrepareCudaKernels fills it and then sets `ready` (release);
// index_put_ reads it after an acquire load, without a lock (one thread per device at a time).
struct IndexStaging {
  std::atomic<bool> ready{false};
  int64_t* host = nullptr;
  cudaEvent_t copied = nullptr;
};

IndexStaging g_index_staging[kMaxCudaDevices];

absl::Status CreateIndexStaging(IndexStaging& staging) {
  void* host = nullptr;
  cudaEvent_t copied = nullptr;
  FERRY_CUDA_OP_RETURN_IF_ERROR(
      kIndexPut, cudaHostAlloc(&host, static_cast<size_t>(kIndexChunk) * sizeof(int64_t),
                               cudaHostAllocPortable));
  const cudaError_t event = cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
  if (event != cudaSuccess) {
    cudaFreeHost(host);
    FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, event);
  }
  staging.host = static_cast<int64_t*>(host);
  staging.copied = copied;
  staging.ready.store(true, std::memory_order_release);
  return absl::OkStatus();
}

// The calling thread's pinned staging buffer for indices, allocated at first use.
class PinnedIndexBuffer {
 public:
  PinnedIndexBuffer() = default;
  PinnedIndexBuffer(const PinnedIndexBuffer&) = delete;
  PinnedIndexBuffer& operator=(const PinnedIndexBuffer&) = delete;
  ~PinnedIndexBuffer() {
    // At process exit the CUDA runtime may already be gone; nothing useful to do with an error.
    if (data_ != nullptr) static_cast<void>(cudaFreeHost(data_));
  }

  absl::StatusOr<int64_t*> Get() {
    if (data_ == nullptr) {
      void* p = nullptr;
      FERRY_CUDA_OP_RETURN_IF_ERROR(
          kIndexPut, cudaHostAlloc(&p, static_cast<size_t>(kIndexChunk) * sizeof(int64_t),
                                   cudaHostAllocPortable));
      data_ = static_cast<int64_t*>(p);
    }
    return data_;
  }

 private:
  int64_t* data_ = nullptr;
};

thread_local PinnedIndexBuffer t_index_buffer;

// Copies indices [start, start + count) of a 1-D int64 device tensor (element stride `stride`,
// any sign) into `host`, on the current stream; the caller synchronizes.
absl::Status GatherIndices(const int64_t* idx, int64_t stride, int64_t start, int64_t count,
                           int64_t* host) {
  if (stride == 1) {
    FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut,
                                  cudaMemcpyAsync(host, idx + start, static_cast<size_t>(count) * 8,
                                                  cudaMemcpyDefault, CurrentStream()));
  } else if (stride == 0) {
    FERRY_CUDA_OP_RETURN_IF_ERROR(
        kIndexPut, cudaMemcpyAsync(host, idx, 8, cudaMemcpyDefault, CurrentStream()));
  } else {
    // One 8-byte column of `count` rows; a negative stride is read from its last element up.
    const int64_t pitch = stride > 0 ? stride : -stride;
    const int64_t* first = stride > 0 ? idx + start * stride : idx + (start + count - 1) * stride;
    FERRY_CUDA_OP_RETURN_IF_ERROR(
        kIndexPut,
        cudaMemcpy2DAsync(host, 8, first, static_cast<size_t>(pitch) * 8, 8,
                          static_cast<size_t>(count), cudaMemcpyDefault, CurrentStream()));
  }
  return absl::OkStatus();
}

// self[wrap(idx[i]), rest...] = values[i, rest...] (values under broadcast strides). Rows run in
// parallel, so with duplicate indices which value lands is unspecified (the host kernel keeps the
// last; PyTorch leaves it undefined).
template <typename T>
__global__ void IndexPutRows(T* self, const T* values, const int64_t* idx, int64_t istride,
                             int64_t size0, int64_t self_stride0, int64_t values_stride0,
                             Offsets<2> row, int64_t row_numel, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t r = i / row_numel;
    int64_t off[2];
    Decompose(row, i - r * row_numel, off);
    int64_t target = idx[r * istride];
    if (target < 0) target += size0;
    self[target * self_stride0 + off[0]] = values[r * values_stride0 + off[1]];
  }
}

template <typename T>
absl::Status RunIndexPut(const TensorRef& self, const TensorRef& indices, const TensorRef& values) {
  const int64_t n = indices.sizes[0];
  const int64_t size0 = self.sizes[0];
  const int64_t* idx = indices.data_as<const int64_t>();
  const int64_t istride = indices.strides[0];
  if (n > 0) {
    // A prepared device's staging (no allocation, an event to wait on), else the thread's own.
    int device = -1;
    FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaGetDevice(&device));
    IndexStaging* staging = device >= 0 && device < kMaxCudaDevices &&
                                    g_index_staging[device].ready.load(std::memory_order_acquire)
                                ? &g_index_staging[device]
                                : nullptr;
    int64_t* host = nullptr;
    if (staging != nullptr) {
      host = staging->host;
    } else {
      FERRY_ASSIGN_OR_RETURN(host, t_index_buffer.Get());
    }
    for (int64_t start = 0; start < n; start += kIndexChunk) {
      const int64_t count = std::min(kIndexChunk, n - start);
      FERRY_RETURN_IF_ERROR(GatherIndices(idx, istride, start, count, host));
      if (staging != nullptr) {
        FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaEventRecord(staging->copied, CurrentStream()));
        FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaEventSynchronize(staging->copied));
      } else {
        FERRY_CUDA_OP_RETURN_IF_ERROR(kIndexPut, cudaStreamSynchronize(CurrentStream()));
      }
      if (istride == 0) std::fill(host + 1, host + count, host[0]);
      if (istride < 0) std::reverse(host, host + count);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t v = host[i];
        if (v < -size0 || v >= size0) {
          return absl::InvalidArgumentError(absl::StrCat(
              kIndexPut, ": index ", v, " is out of range for dimension 0 of size ", size0));
        }
      }
    }
  }
  // values read as [n, self.sizes[1:]...].
  TensorRef target = self;
  target.sizes[0] = n;
  int64_t vstrides[kMaxRank];
  BroadcastStrides(values, target.rank, target.sizes.data(), vstrides);
  int64_t row_numel = 0;
  const Offsets<2> row = Collapse<2>(self.rank - 1, self.sizes.data() + 1,
                                     {self.strides.data() + 1, vstrides + 1}, &row_numel);
  const int64_t total = n * row_numel;
  if (total == 0) return absl::OkStatus();
  IndexPutRows<T><<<Blocks(total), kThreads, 0, CurrentStream()>>>(
      self.data_as<T>(), values.data_as<const T>(), idx, istride, size0, self.strides[0],
      vstrides[0], row, row_numel, total);
  return LaunchStatus(kIndexPut, "IndexPutRows");
}

absl::Status IndexPutKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const TensorRef& self = *results[0];  // aliases argument 0 with its layout
  if (self.dtype == DType::kFloat32) {
    return RunIndexPut<float>(self, *args[1].tensor, *args[2].tensor);
  }
  if (self.dtype == DType::kInt64) {
    return RunIndexPut<int64_t>(self, *args[1].tensor, *args[2].tensor);
  }
  return UnsupportedDType(kIndexPut, self.dtype);
}

}  // namespace

absl::Status PrepareIndexStaging(int device_index) {
  IndexStaging& staging = g_index_staging[device_index];
  if (staging.ready.load(std::memory_order_relaxed)) return absl::OkStatus();
  return CreateIndexStaging(staging);
}

void AddIndexKernels(KernelTable& t) { t.emplace("index_put_", &IndexPutKernel); }

}  // namespace ferry::cuda_kernels
