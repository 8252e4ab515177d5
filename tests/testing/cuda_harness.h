// What the tests on real CUDA devices share (label `cuda`; tests/cuda/, tests/kernels/cuda/,
// tests/memory/devices/cuda/): the load options that keep cuda:N on the GPU, the skips for a
// machine without one, pinned memory, a fill kernel launched by hand, and the comparison of a
// GPU run with the all-host run.
#ifndef FERRY_TESTS_TESTING_CUDA_HARNESS_H_
#define FERRY_TESTS_TESTING_CUDA_HARNESS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/cuda/cuda_ops.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/memory/device_registry.h"
#include "gtest/gtest.h"
#include "tests/testing/method_harness.h"

namespace ferry::testing {

inline const std::string kCuda0 = "cuda:0";

inline LoadOptions OnCuda() {
  LoadOptions o;
  o.device_map = absl::flat_hash_map<Device, Device>{};
  return o;
}

#define FERRY_SKIP_WITHOUT_CUDA(h, n) FERRY_SKIP_WITHOUT_GPUS((h).runtime().devices(), n)

#define FERRY_SKIP_WITHOUT_GPUS(registry, n)                                                   \
  if (!(registry).Has(DeviceType::kCuda) || (registry).Find(Device::Cuda((n)-1)) == nullptr) {              \
    GTEST_SKIP() << "needs " << (n) << " CUDA device(s); not found (no GPU, no driver, or "    \
                 << "Ferry built without CUDA)";                                               \
  }

// The devices of this machine, for tests that drive a CUDA device directly.
inline std::unique_ptr<DeviceRegistry> Devices(int copy_threads = 0) {
  DeviceRegistryOptions options;
  options.sim.count = 0;
  options.cuda.copy_threads = copy_threads;
  return DeviceRegistry::CreateDefault(options);
}

// Pinned host memory of `gpu`, freed on destruction.
class Pinned {
 public:
  Pinned(DeviceRuntime& gpu, size_t bytes) : gpu_(gpu) {
    absl::StatusOr<void*> p = gpu.AllocatePinnedHost(bytes);
    if (p.ok()) data_ = *p;
  }
  ~Pinned() { gpu_.FreePinnedHost(data_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }

 private:
  DeviceRuntime& gpu_;
  void* data_ = nullptr;
};

// Launches the CUDA fill_ kernel over `count` floats at `data` (memory `gpu` can write) on the
// device's stream, without waiting for it.
inline absl::Status LaunchFill(DeviceRuntime& gpu, float* data, int64_t count, double value) {
  KernelFn fill = FindCudaKernel("fill_");
  if (fill == nullptr) return absl::InternalError("no CUDA fill_ kernel");
  TensorRef t = TensorRef::Contiguous(DType::kFloat32, {count}, data);
  const Scalar v = Scalar::Double(value);
  OpArg args[2];
  args[0].tensor = &t;
  args[1].scalar = &v;
  TensorRef* results[1] = {&t};
  DeviceScope scope(gpu);
  SetCurrentCudaStream(gpu.native_stream());
  absl::Status status = fill(absl::MakeConstSpan(args), absl::MakeConstSpan(results));
  SetCurrentCudaStream(nullptr);
  return status;
}

// |actual - expected| within 1e-4 of |expected| (of 1 near zero, where a relative bound means
// nothing for sums that cancel).
inline void ExpectNearRelative(const std::vector<std::vector<double>>& actual,
                        const std::vector<std::vector<double>>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t o = 0; o < expected.size(); ++o) {
    ASSERT_EQ(actual[o].size(), expected[o].size()) << "output " << o;
    for (size_t j = 0; j < expected[o].size(); ++j) {
      EXPECT_NEAR(actual[o][j], expected[o][j], 1e-4 * std::max(1.0, std::abs(expected[o][j])))
          << "output " << o << ", element " << j;
    }
  }
}

// Loads `pb`'s "forward" with cuda:N kept on the GPU (OnCuda), runs it `calls` times and compares
// every output with the all-host run (ExpectNearRelative); true. On a machine without cuda:0, the
// same with cuda:N run on the sim device the default map sends it to (the program and the graph
// delegate's path are checked, not the CUDA kernels); false.
inline bool RunOnCudaAndCompareWithHost(const ProgramBuilder& pb, int calls = 2) {
  MethodHarness h(pb);
  const DeviceRegistry& devices = h.runtime().devices();
  const bool gpu = devices.Has(DeviceType::kCuda) && devices.Find(Device::Cuda(0)) != nullptr;
  absl::StatusOr<std::unique_ptr<Method>> method = gpu ? h.Load(OnCuda()) : h.Load();
  EXPECT_TRUE(method.ok()) << method.status();
  if (!method.ok()) return gpu;
  absl::StatusOr<std::vector<std::vector<double>>> placed = h.Run(**method, calls);
  EXPECT_TRUE(placed.ok()) << placed.status();
  absl::StatusOr<std::vector<std::vector<double>>> host = h.RunAllHost(calls);
  EXPECT_TRUE(host.ok()) << host.status();
  if (placed.ok() && host.ok()) ExpectNearRelative(*placed, *host);
  return gpu;
}

#define FERRY_EXPECT_CUDA_MATCHES_HOST(pb)                                                      \
  if (!::ferry::testing::RunOnCudaAndCompareWithHost(pb)) {                                     \
    GTEST_SKIP() << "needs a CUDA device; not found (no GPU, no driver, or Ferry built without " \
                 << "CUDA): compared on a sim device instead";                                  \
  }

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_CUDA_HARNESS_H_
