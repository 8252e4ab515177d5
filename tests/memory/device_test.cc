#include "ferry/memory/device.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ParseDeviceTest, AcceptsAnyCaseAndSurroundingSpaces) {
  ASSERT_OK_AND_ASSIGN(Device upper, ParseDevice("CUDA:0"));
  EXPECT_EQ(upper, Device::Cuda(0));
  ASSERT_OK_AND_ASSIGN(Device mixed, ParseDevice(" Cuda:1 "));
  EXPECT_EQ(mixed, Device::Cuda(1));
  ASSERT_OK_AND_ASSIGN(Device sim, ParseDevice("sim:3"));
  EXPECT_EQ(sim, Device::Sim(3));
}

TEST(ParseDeviceTest, MissingIndexMeansZero) {
  ASSERT_OK_AND_ASSIGN(Device cuda, ParseDevice("cuda"));
  EXPECT_EQ(cuda, Device::Cuda(0));
  ASSERT_OK_AND_ASSIGN(Device sim, ParseDevice("SIM"));
  EXPECT_EQ(sim, Device::Sim(0));
}

TEST(ParseDeviceTest, CpuAndHostNameTheHost) {
  ASSERT_OK_AND_ASSIGN(Device cpu, ParseDevice("cpu"));
  EXPECT_EQ(cpu, Device::Host());
  EXPECT_TRUE(cpu.is_host());
  ASSERT_OK_AND_ASSIGN(Device host, ParseDevice("Host"));
  EXPECT_EQ(host, Device::Host());
}

TEST(ParseDeviceTest, UnknownTypeListsTheValidTypes) {
  EXPECT_THAT(ParseDevice("tpu:0"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tpu:0"), HasSubstr("\"cpu\""), HasSubstr("\"host\""),
                             HasSubstr("\"sim\""), HasSubstr("\"cuda\""))));
  EXPECT_THAT(ParseDevice(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"cuda\"")));
}

TEST(ParseDeviceTest, MalformedIndexIsAnErrorNamingTheString) {
  for (const char* text : {"cuda:x", "cuda:-1", "cuda:", "cuda:1x", "cuda:99999999999"}) {
    EXPECT_THAT(ParseDevice(text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(text)))
        << text;
  }
}

TEST(DeviceTest, ToStringNamesTypeAndIndex) {
  EXPECT_EQ(Device::Host().ToString(), "host");
  EXPECT_EQ(Device::Sim(0).ToString(), "sim:0");
  EXPECT_EQ(Device::Cuda(12).ToString(), "cuda:12");
  EXPECT_EQ(DeviceTypeName(DeviceType::kSim), "sim");
}

TEST(DeviceTest, ToStringRoundTripsThroughParse) {
  for (Device d : {Device::Host(), Device::Sim(2), Device::Cuda(7)}) {
    ASSERT_OK_AND_ASSIGN(Device parsed, ParseDevice(d.ToString()));
    EXPECT_EQ(parsed, d);
  }
}

TEST(DeviceTest, OrdersByTypeThenIndex) {
  std::vector<Device> devices = {Device::Cuda(1), Device::Sim(1), Device::Host(), Device::Cuda(0),
                                 Device::Sim(0)};
  std::sort(devices.begin(), devices.end());
  EXPECT_EQ(devices, (std::vector<Device>{Device::Host(), Device::Sim(0), Device::Sim(1),
                                          Device::Cuda(0), Device::Cuda(1)}));
  EXPECT_LT(Device::Sim(5), Device::Cuda(0));
  EXPECT_NE(Device::Sim(0), Device::Cuda(0));
}

TEST(DeviceTest, HashesDistinguishDevices) {
  absl::flat_hash_set<Device> set = {Device::Host(), Device::Sim(0), Device::Cuda(0)};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_TRUE(set.contains(Device::Sim(0)));
  EXPECT_FALSE(set.contains(Device::Sim(1)));
}

}  // namespace
}  // namespace ferry
