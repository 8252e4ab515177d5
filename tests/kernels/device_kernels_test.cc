// Device kernels by device type (kernels/device_kernels.h): a type has none until its kernels are
// registered, a registration is found by its type, and a second one or a null one is refused.
#include "ferry/kernels/device_kernels.h"

#include "ferry/memory/device_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;

absl::Status Nothing(absl::Span<const OpArg>, absl::Span<TensorRef* const>) {
  return absl::OkStatus();
}

class OneKernel : public DeviceKernels {
 public:
  absl::Status Prepare(int32_t) const override { return absl::OkStatus(); }
  KernelFn Find(absl::string_view op) const override { return op == "relu" ? &Nothing : nullptr; }
  void SetStream(void*) const override {}
};

TEST(DeviceKernels, FoundByTheTypeTheyWereRegisteredFor) {
  DeviceTypeInfo info;
  info.name = "kernels_test_type";
  ASSERT_OK_AND_ASSIGN(DeviceType type, RegisterDeviceType(std::move(info)));
  EXPECT_EQ(FindDeviceKernels(type), nullptr);
  static const OneKernel kKernels;
  ASSERT_OK(RegisterDeviceKernels(type, &kKernels));
  const DeviceKernels* found = FindDeviceKernels(type);
  ASSERT_EQ(found, &kKernels);
  EXPECT_EQ(found->Find("relu"), &Nothing);
  EXPECT_EQ(found->Find("add"), nullptr);
  // The default dtype check accepts everything.
  EXPECT_OK(found->CheckDTypes("relu", {}, {}));
  static const OneKernel kOthers;
  EXPECT_THAT(RegisterDeviceKernels(type, &kOthers), StatusIs(absl::StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_EQ(FindDeviceKernels(type), &kKernels);
}

TEST(DeviceKernels, NullKernelsAreRefused) {
  DeviceTypeInfo info;
  info.name = "kernels_test_null";
  ASSERT_OK_AND_ASSIGN(DeviceType type, RegisterDeviceType(std::move(info)));
  EXPECT_THAT(RegisterDeviceKernels(type, nullptr), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_EQ(FindDeviceKernels(type), nullptr);
}

TEST(DeviceKernels, HostAndSimRegisterNone) {
  // Their memory is the host's: the op registry's host kernels run on it.
  EXPECT_EQ(FindDeviceKernels(DeviceType::kHost), nullptr);
  EXPECT_EQ(FindDeviceKernels(DeviceType::kSim), nullptr);
}

}  // namespace
}  // namespace ferry
