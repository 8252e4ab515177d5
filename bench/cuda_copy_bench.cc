// CUDA copy throughput (when a GPU is present). Each iteration times the same bytes four ways, so
// every ratio compares copies measured in the same run:
//   ferry_staged   CudaDevice h2d/d2h from ordinary (pageable) host memory, staged through its
//                  two pinned chunks (what a caller's pageable input or output costs)
//   ferry_pinned   CudaDevice h2d/d2h from pinned memory: one asynchronous DMA (the host arena)
//   cuda_pageable  plain cudaMemcpy from pageable memory (the driver's own staging)
//   cuda_pinned    plain cudaMemcpy from pinned memory: the DMA engine's peak
// The third argument is the device's copy threads (DeviceRegistryOptions::cuda.copy_threads), which
// fill and empty the staging chunks; 1 is a plain memcpy on the copying thread.
// Each is timed until its bytes have landed (Synchronize / cudaDeviceSynchronize). Counters give
// each in GB/s and the ratios: staged_vs_peak (ferry_staged / cuda_pinned, the DESIGN target
// >= 0.85), staged_vs_cuda_pageable and pinned_vs_peak.
//
//   build/bench/ferry_bench --benchmark_filter=CudaCopy
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "ferry/base/status_macros.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_registry.h"
#include "ferry/memory/devices/cuda/cuda_device.h"

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `copy` and returns its wall time in ns, or a negative value after reporting an error.
template <typename Copy>
double TimeCopy(benchmark::State& state, const char* what, Copy copy) {
  const auto start = Clock::now();
  const absl::Status status = copy();
  const auto end = Clock::now();
  if (!status.ok()) {
    state.SkipWithError(absl::StrCat(what, ": ", status.ToString()).c_str());
    return -1.0;
  }
  return std::chrono::duration<double, std::nano>(end - start).count();
}

absl::Status CudaCall(cudaError_t error, const char* expr) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(expr, " failed: ", cudaGetErrorString(error)));
}

// A plain cudaMemcpy, waited for: pageable-to-device cudaMemcpy may return before its DMA lands.
absl::Status PlainCopy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  FERRY_RETURN_IF_ERROR(CudaCall(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy"));
  return CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void BM_CudaCopy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const bool h2d = state.range(1) == 0;
  state.SetLabel(h2d ? "h2d" : "d2h");
  DeviceRegistryOptions options;
  options.sim.count = 0;
  options.cuda.copy_threads = static_cast<int>(state.range(2));
  std::unique_ptr<DeviceRegistry> devices = DeviceRegistry::CreateDefault(options);
  DeviceRuntime* gpu = devices->Find(Device::Cuda(0));
  if (gpu == nullptr) {
    state.SkipWithError("no CUDA device present");
    return;
  }
  absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Allocate(*gpu, bytes, 256);
  absl::StatusOr<void*> pinned = gpu->AllocatePinnedHost(bytes);
  if (!device.ok() || !pinned.ok()) {
    state.SkipWithError(!device.ok() ? device.status().ToString().c_str()
                                     : pinned.status().ToString().c_str());
    if (pinned.ok()) gpu->FreePinnedHost(*pinned);
    return;
  }
  std::vector<char> pageable(bytes, 1);  // touched: no page faults inside the timed copies
  std::memset(*pinned, 1, bytes);
  void* d = device->data();
  const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  DeviceScope scope(*gpu);  // makes cuda:0 current, for the plain cudaMemcpy calls too
  auto ferry_copy = [&](void* host) -> absl::Status {
    FERRY_RETURN_IF_ERROR(h2d ? gpu->CopyHostToDevice(d, host, bytes)
                              : gpu->CopyDeviceToHost(host, d, bytes));
    return gpu->Synchronize();
  };
  auto plain_copy = [&](void* host) {
    return h2d ? PlainCopy(d, host, bytes, kind) : PlainCopy(host, d, bytes, kind);
  };
  double staged_ns = 0, pinned_ns = 0, cuda_pageable_ns = 0, cuda_pinned_ns = 0;
  for (auto _ : state) {
    const double t0 = TimeCopy(state, "ferry staged", [&] { return ferry_copy(pageable.data()); });
    const double t1 = TimeCopy(state, "ferry pinned", [&] { return ferry_copy(*pinned); });
    const double t2 =
        TimeCopy(state, "cudaMemcpy pageable", [&] { return plain_copy(pageable.data()); });
    const double t3 = TimeCopy(state, "cudaMemcpy pinned", [&] { return plain_copy(*pinned); });
    if (t0 < 0 || t1 < 0 || t2 < 0 || t3 < 0) break;
    staged_ns += t0;
    pinned_ns += t1;
    cuda_pageable_ns += t2;
    cuda_pinned_ns += t3;
  }
  gpu->FreePinnedHost(*pinned);
  if (staged_ns <= 0 || pinned_ns <= 0 || cuda_pageable_ns <= 0 || cuda_pinned_ns <= 0) return;
  const double total = static_cast<double>(state.iterations()) * static_cast<double>(bytes);
  state.counters["ferry_staged_GBps"] = total / staged_ns;
  state.counters["ferry_pinned_GBps"] = total / pinned_ns;
  state.counters["cuda_pageable_GBps"] = total / cuda_pageable_ns;
  state.counters["cuda_pinned_GBps"] = total / cuda_pinned_ns;
  state.counters["staged_vs_peak"] = cuda_pinned_ns / staged_ns;
  state.counters["staged_vs_cuda_pageable"] = cuda_pageable_ns / staged_ns;
  state.counters["pinned_vs_peak"] = cuda_pinned_ns / pinned_ns;
}
BENCHMARK(BM_CudaCopy)
    ->ArgNames({"bytes", "d2h", "threads"})
    ->ArgsProduct({{1 << 20, 16 << 20, 64 << 20}, {0, 1}, {1, 2, 4, 8}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ferry
