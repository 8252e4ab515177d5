// Copy throughput per device pair against memcpy of the same bytes, both warm, in the same run:
// host -> sim:0 (h2d), sim:0 -> host (d2h), sim:0 -> sim:1 (d2d), and a strided (transposed)
// h2d. The sim device is unguarded here (guarding costs two mprotect calls per copy).
//
//   build/bench/ferry_bench --benchmark_filter=Copy
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_registry.h"

namespace ferry {
namespace {

enum Pair { kH2D, kD2H, kD2D };

// Page-aligned host memory, like the sim device's mappings, so that the memcpy baseline copies
// between buffers with the same alignment as the device copy does.
struct PageAligned {
  explicit PageAligned(size_t bytes, char fill)
      : data(static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096))) {
    std::memset(data, fill, bytes);
  }
  ~PageAligned() { std::free(data); }
  char* data;
};

void BM_CopyVsMemcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const Pair pair = static_cast<Pair>(state.range(1));
  // Small copies are timed in batches, so the clock's own cost (tens of ns here) stays out.
  const int batch = static_cast<int>(std::max<size_t>(1, (size_t{1} << 20) / bytes));
  DeviceRegistryOptions options;
  options.sim.guard = false;
  options.cuda.enabled = false;
  auto devices = DeviceRegistry::CreateDefault(options);
  DeviceRuntime* sim0 = devices->Find(Device::Sim(0));
  DeviceRuntime* sim1 = devices->Find(Device::Sim(1));
  PageAligned host(bytes, 1), host_dst(bytes, 0);
  auto a = std::move(DeviceBuffer::Allocate(*sim0, bytes, 64)).value();
  auto b = std::move(DeviceBuffer::Allocate(*sim1, bytes, 64)).value();
  (void)a.Touch();
  (void)b.Touch();
  double copy_ns = 0, memcpy_ns = 0;
  bool ok = true;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) {
      absl::Status s;
      switch (pair) {
        case kH2D:
          s = sim0->CopyHostToDevice(a.data(), host.data, bytes);
          break;
        case kD2H:
          s = sim0->CopyDeviceToHost(host_dst.data, a.data(), bytes);
          break;
        case kD2D:
          s = sim1->CopyFromPeer(b.data(), *sim0, a.data(), bytes);
          break;
      }
      ok = ok && s.ok();
    }
    benchmark::ClobberMemory();
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) {
      std::memcpy(host_dst.data, host.data, bytes);
      benchmark::ClobberMemory();
    }
    auto t2 = std::chrono::steady_clock::now();
    copy_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    memcpy_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  if (!ok) state.SkipWithError("a copy failed");
  const double total = static_cast<double>(state.iterations()) * batch * bytes;
  state.counters["copy_GBps"] = total / copy_ns;
  state.counters["memcpy_GBps"] = total / memcpy_ns;
  state.counters["ratio_vs_memcpy"] = memcpy_ns / copy_ns;
  state.counters["copy_ns"] = copy_ns / (static_cast<double>(state.iterations()) * batch);
  state.SetLabel(pair == kH2D ? "h2d host->sim:0" : pair == kD2H ? "d2h sim:0->host" : "d2d sim:0->sim:1");
}
BENCHMARK(BM_CopyVsMemcpy)
    ->ArgsProduct({{4 << 10, 256 << 10, 16 << 20}, {kH2D, kD2H, kD2D}});

// A transposed float32 [n, n] source gathered into dense device memory, against memcpy.
void BM_StridedCopy(benchmark::State& state) {
  const int64_t n = state.range(0);
  DeviceRegistryOptions options;
  options.sim.guard = false;
  options.cuda.enabled = false;
  auto devices = DeviceRegistry::CreateDefault(options);
  DeviceRuntime* sim0 = devices->Find(Device::Sim(0));
  const size_t bytes = static_cast<size_t>(n * n * 4);
  std::vector<float> host(n * n, 1.0f), dst(n * n);
  auto a = std::move(DeviceBuffer::Allocate(*sim0, bytes, 64)).value();
  (void)a.Touch();
  int64_t sizes[2] = {n, n}, strides[2] = {1, n};
  StridedLayout layout{2, sizes, strides, 4};
  double copy_ns = 0, memcpy_ns = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(sim0->CopyHostStridedToDevice(a.data(), host.data(), layout));
    auto t1 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), host.data(), bytes);
    benchmark::ClobberMemory();
    auto t2 = std::chrono::steady_clock::now();
    copy_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    memcpy_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  state.counters["ratio_vs_memcpy"] = memcpy_ns / copy_ns;
  state.counters["copy_GBps"] = static_cast<double>(state.iterations()) * bytes / copy_ns;
}
BENCHMARK(BM_StridedCopy)->Arg(256)->Arg(1024);

}  // namespace
}  // namespace ferry
