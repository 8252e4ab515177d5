// Device types (memory/device_type.h): the built-in types in their order, names and aliases found,
// and registrations with a malformed or taken name refused naming it.
#include "ferry/memory/device_type.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

TEST(DeviceType, BuiltInTypesComeFirstInTheirOrder) {
  const std::vector<const DeviceTypeInfo*> types = DeviceTypes();
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(types[0]->type, DeviceType::kHost);
  EXPECT_EQ(types[0]->name, "host");
  EXPECT_EQ(types[1]->type, DeviceType::kSim);
  EXPECT_EQ(types[1]->name, "sim");
  EXPECT_EQ(types[2]->type, DeviceType::kCuda);
  EXPECT_EQ(types[2]->name, "cuda");
  EXPECT_TRUE(types[0]->host_kernels_run_on_memory);
  EXPECT_TRUE(types[1]->host_kernels_run_on_memory);
  EXPECT_FALSE(types[2]->host_kernels_run_on_memory);
}

TEST(DeviceType, FoundByNameAliasAndValue) {
  EXPECT_EQ(FindDeviceTypeByName("cuda")->type, DeviceType::kCuda);
  EXPECT_EQ(FindDeviceTypeByName("cpu")->type, DeviceType::kHost);  // the host's alias
  EXPECT_EQ(FindDeviceTypeByName("CUDA"), nullptr);                  // names are lower case
  EXPECT_EQ(FindDeviceTypeByName("nothing"), nullptr);
  EXPECT_EQ(FindDeviceType(DeviceType::kSim)->name, "sim");
  EXPECT_EQ(FindDeviceType(static_cast<DeviceType>(255)), nullptr);
}

TEST(DeviceType, ANewTypeGetsTheNextValueAndIsFound) {
  DeviceTypeInfo info;
  info.name = "type_test_npu";
  info.aliases = {"type_test_npu2"};
  ASSERT_OK_AND_ASSIGN(DeviceType type, RegisterDeviceType(std::move(info)));
  EXPECT_GT(static_cast<int>(type), static_cast<int>(DeviceType::kCuda));
  ASSERT_NE(FindDeviceType(type), nullptr);
  EXPECT_EQ(FindDeviceType(type)->type, type);
  EXPECT_EQ(FindDeviceTypeByName("type_test_npu"), FindDeviceType(type));
  EXPECT_EQ(FindDeviceTypeByName("type_test_npu2"), FindDeviceType(type));
  EXPECT_EQ(DeviceTypes().back(), FindDeviceType(type));
}

TEST(DeviceType, MalformedAndTakenNamesAreRefused) {
  for (const char* bad : {"", "Npu", "9npu", "n-pu", "n pu", "_npu"}) {
    DeviceTypeInfo info;
    info.name = bad;
    EXPECT_THAT(RegisterDeviceType(std::move(info)), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_))
        << '"' << bad << '"';
  }
  DeviceTypeInfo bad_alias;
  bad_alias.name = "type_test_ok";
  bad_alias.aliases = {"Bad"};
  EXPECT_THAT(RegisterDeviceType(std::move(bad_alias)),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_EQ(FindDeviceTypeByName("type_test_ok"), nullptr);  // nothing was registered
  DeviceTypeInfo taken;
  taken.name = "cuda";
  EXPECT_THAT(RegisterDeviceType(std::move(taken)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("cuda")));
  DeviceTypeInfo alias_taken;
  alias_taken.name = "type_test_other";
  alias_taken.aliases = {"cpu"};
  EXPECT_THAT(RegisterDeviceType(std::move(alias_taken)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("cpu")));
}

}  // namespace
}  // namespace ferry
