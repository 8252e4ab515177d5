// CUDA copy throughput (when a GPU is present): host-to-device and device-to-host through the
// CudaDevice runtime from ordinary (pageable) host memory, which is staged through pinned memory,
// against the same copy from pinned memory (the DMA engine's peak, what cudaMemcpy of pinned
// memory reaches). Both in the same run; the ratio is staged / peak.
//
//   build/bench/ferry_bench --benchmark_filter=CudaCopy
#include <chrono>
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "memory/cuda/cuda_device.h"
#include "memory/device_buffer.h"
#include "memory/device_registry.h"

namespace ferry {
namespace {

void BM_CudaCopy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const bool h2d = state.range(1) == 0;
  DeviceRegistryOptions options;
  auto devices = DeviceRegistry::CreateDefault(options);
  auto* gpu = static_cast<CudaDevice*>(devices->Find(Device::Cuda(0)));
  if (gpu == nullptr) {
    state.SkipWithError("no CUDA device present");
    return;
  }
  auto device = std::move(DeviceBuffer::Allocate(*gpu, bytes, 256)).value();
  std::vector<char> pageable(bytes, 1);
  void* pinned = std::move(gpu->AllocatePinnedHost(bytes)).value();
  std::memset(pinned, 1, bytes);
  double staged_ns = 0, peak_ns = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    if (h2d) {
      (void)gpu->CopyHostToDevice(device.data(), pageable.data(), bytes);
    } else {
      (void)gpu->CopyDeviceToHost(pageable.data(), device.data(), bytes);
    }
    (void)gpu->Synchronize();
    auto t1 = std::chrono::steady_clock::now();
    if (h2d) {
      (void)gpu->CopyHostToDevice(device.data(), pinned, bytes);
    } else {
      (void)gpu->CopyDeviceToHost(pinned, device.data(), bytes);
    }
    (void)gpu->Synchronize();
    auto t2 = std::chrono::steady_clock::now();
    staged_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    peak_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  gpu->FreePinnedHost(pinned);
  const double total = static_cast<double>(state.iterations()) * bytes;
  state.counters["staged_GBps"] = total / staged_ns;
  state.counters["pinned_GBps"] = total / peak_ns;
  state.counters["ratio_vs_pinned"] = peak_ns / staged_ns;
  state.SetLabel(h2d ? "h2d" : "d2h");
}
BENCHMARK(BM_CudaCopy)->ArgsProduct({{1 << 20, 64 << 20}, {0, 1}});

}  // namespace
}  // namespace ferry
