// Host-side checks of the CUDA kernels' load-time entry point: they run with or without a GPU
// (not labelled `cuda`), in builds with CUDA.
#include "ferry/kernels/cuda/cuda_ops.h"
#include "ferry/memory/device_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(PrepareCudaKernels, RefusesADeviceIndexOutOfRange) {
  EXPECT_THAT(PrepareCudaKernels(-1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device index -1")));
  EXPECT_THAT(PrepareCudaKernels(64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device index 64")));
}

TEST(PrepareCudaKernels, LoadsCublasAndPreparesAPresentDeviceOrSaysWhyNot) {
  DeviceRegistryOptions options;
  options.sim.count = 0;
  const bool have_gpu = DeviceRegistry::CreateDefault(options)->Has(DeviceType::kCuda);
  const absl::Status status = PrepareCudaKernels(0);
  if (have_gpu) {
    EXPECT_OK(status);
    EXPECT_OK(PrepareCudaKernels(0));  // once per device; later calls return at once
    return;
  }
  // Without a GPU, cuBLAS itself still loads and resolves every entry point; what fails is the
  // device, and the status names the CUDA call.
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal,
                               AllOf(HasSubstr("preparing the CUDA kernels of cuda:0"),
                                     Not(HasSubstr("cuBLAS")), HasSubstr("failed"))));
}

}  // namespace
}  // namespace ferry::testing
