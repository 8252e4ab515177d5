// One suite for every device type: each registered type's first present device (host, sim and,
// with a GPU, CUDA; and any type an application registers) passes the same tests of the
// DeviceRuntime contract (memory/device_runtime.h): allocation, copies in every direction,
// strided-to-dense, ordering on the device's stream, pointer ownership and fault injection.
// Expected contents are written by the test itself and compared after a round trip through the
// device.
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_runtime.h"
#include "ferry/memory/device_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

DeviceRegistryOptions SuiteOptions() {
  DeviceRegistryOptions options;
  options.sim.count = 2;
  options.sim.guard = true;
  return options;
}

// The first present device of every registered type.
std::vector<Device> DevicesUnderTest() {
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::CreateDefault(SuiteOptions());
  std::vector<Device> out;
  for (const DeviceTypeInfo* type : DeviceTypes()) {
    for (const Device& d : registry->devices()) {
      if (d.type == type->type) {
        out.push_back(d);
        break;
      }
    }
  }
  return out;
}

std::vector<int32_t> Iota(size_t n, int32_t start) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Device memory freed at the end of the test.
class Allocation {
 public:
  Allocation(DeviceRuntime& runtime, size_t bytes) : runtime_(runtime) {
    absl::StatusOr<void*> p = runtime.Allocate(bytes, 64);
    EXPECT_TRUE(p.ok()) << p.status();
    ptr_ = p.ok() ? *p : nullptr;
  }
  ~Allocation() { runtime_.Free(ptr_); }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  void* get() const { return ptr_; }

 private:
  DeviceRuntime& runtime_;
  void* ptr_ = nullptr;
};

// What a device type leaves out of the suite: the test, by name, and why. Every other test runs on
// every type, and a type that lacks what a test needs must be listed here: the tests do not skip
// on their own.
struct SuiteSkip {
  const char* type;  // DeviceTypeInfo::name
  const char* test;
  const char* why;
};
constexpr SuiteSkip kSkipLists[] = {
    {"cuda", "InjectedAllocationFailuresAreResourceExhaustedNamingTheDevice",
     "the CUDA runtime offers no fault injection"},
    {"cuda", "AnInjectedCopyFailureFailsOneCopyAndLeavesItsDestination",
     "the CUDA runtime offers no fault injection"},
};

// The reason `type` skips `test`, or nullptr when it runs it.
const char* SkipReason(absl::string_view type, absl::string_view test) {
  for (const SuiteSkip& skip : kSkipLists) {
    if (type == skip.type && test == skip.test) return skip.why;
  }
  return nullptr;
}

class DeviceSuite : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    // "InjectedAllocation.../host": the suite's test name before the parameter.
    const std::string name = test.substr(0, test.find('/'));
    if (const char* why = SkipReason(DeviceTypeName(GetParam().type), name)) {
      GTEST_SKIP() << GetParam().ToString() << " skips " << name << ": " << why;
    }
    registry_ = DeviceRegistry::CreateDefault(SuiteOptions());
    runtime_ = registry_->Find(GetParam());
    ASSERT_NE(runtime_, nullptr) << GetParam().ToString();
  }

  // Reads `n` int32 of device memory back to the host.
  std::vector<int32_t> ReadBack(const void* src, size_t n) {
    std::vector<int32_t> out(n, -1);
    EXPECT_OK(runtime_->CopyDeviceToHost(out.data(), src, n * sizeof(int32_t)));
    EXPECT_OK(runtime_->Synchronize());
    return out;
  }

  std::unique_ptr<DeviceRegistry> registry_;
  DeviceRuntime* runtime_ = nullptr;
};

TEST_P(DeviceSuite, ReportsItsDevice) {
  EXPECT_EQ(runtime_->device(), GetParam());
  const DeviceTypeInfo* type = FindDeviceType(GetParam().type);
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->name, DeviceTypeName(GetParam().type));
  ASSERT_OK_AND_ASSIGN(Device parsed, ParseDevice(GetParam().ToString()));
  EXPECT_EQ(parsed, GetParam());
}

TEST_P(DeviceSuite, AllocatesAlignedMemoryItOwns) {
  for (size_t alignment : {size_t{1}, size_t{64}, size_t{256}}) {
    ASSERT_OK_AND_ASSIGN(void* p, runtime_->Allocate(1000, alignment));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u) << alignment;
    const char* c = static_cast<const char*>(p);
    EXPECT_TRUE(runtime_->Owns(p, 1000));
    EXPECT_TRUE(runtime_->Owns(c + 999, 1));
    EXPECT_FALSE(runtime_->Owns(p, 1001));
    EXPECT_FALSE(runtime_->Owns(c + 1000, 1));
    EXPECT_FALSE(runtime_->WasFreed(p));
    EXPECT_GE(runtime_->counters().allocated_bytes, 1000u);
    runtime_->Free(p);
    EXPECT_FALSE(runtime_->Owns(p, 1));
  }
  int32_t on_stack = 0;
  EXPECT_FALSE(runtime_->Owns(&on_stack, sizeof(on_stack)));
  runtime_->Free(nullptr);  // ignored
}

TEST_P(DeviceSuite, RefusesMalformedAllocations) {
  EXPECT_THAT(runtime_->Allocate(0, 64), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(runtime_->Allocate(64, 3), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(runtime_->Allocate(64, 0), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST_P(DeviceSuite, CopiesInEveryDirectionAndCountsThem) {
  constexpr size_t kN = 1024;
  constexpr size_t kBytes = kN * sizeof(int32_t);
  Allocation a(*runtime_, kBytes), b(*runtime_, kBytes);
  const std::vector<int32_t> data = Iota(kN, 7);
  runtime_->ResetCounters();
  ASSERT_OK(runtime_->CopyHostToDevice(a.get(), data.data(), kBytes));
  ASSERT_OK(runtime_->CopyDeviceToDevice(b.get(), a.get(), kBytes));
  EXPECT_EQ(ReadBack(b.get(), kN), data);
  const DeviceCounters c = runtime_->counters();
  EXPECT_EQ(c.h2d_copies, 1u);
  EXPECT_EQ(c.h2d_bytes, kBytes);
  EXPECT_EQ(c.d2d_copies, 1u);
  EXPECT_EQ(c.d2d_bytes, kBytes);
  EXPECT_EQ(c.d2h_copies, 1u);
  EXPECT_EQ(c.d2h_bytes, kBytes);
  runtime_->ResetCounters();
  EXPECT_EQ(runtime_->counters().h2d_copies, 0u);
  // A zero-byte copy does nothing and succeeds.
  EXPECT_OK(runtime_->CopyHostToDevice(a.get(), data.data(), 0));
}

TEST_P(DeviceSuite, CopiesFromEveryOtherDevice) {
  constexpr size_t kN = 256;
  constexpr size_t kBytes = kN * sizeof(int32_t);
  for (const Device& other : registry_->devices()) {
    if (other == GetParam()) continue;
    SCOPED_TRACE(other.ToString());
    DeviceRuntime& peer = *registry_->Find(other);
    Allocation src(peer, kBytes), dst(*runtime_, kBytes);
    const std::vector<int32_t> data = Iota(kN, 100 * (other.index + 1));
    ASSERT_OK(peer.CopyHostToDevice(src.get(), data.data(), kBytes));
    ASSERT_OK(peer.Synchronize());
    ASSERT_OK(runtime_->CopyFromPeer(dst.get(), peer, src.get(), kBytes));
    ASSERT_OK(runtime_->Synchronize());
    EXPECT_EQ(ReadBack(dst.get(), kN), data);
  }
}

TEST_P(DeviceSuite, GathersStridedHostTensorsIntoDenseMemory) {
  // A 3x4 row-major matrix read as its 4x3 transpose, and a row broadcast over 3 rows.
  const std::vector<int32_t> m = Iota(12, 0);
  const int64_t sizes[] = {4, 3};
  const int64_t transposed[] = {1, 4};
  Allocation dst(*runtime_, 12 * sizeof(int32_t));
  ASSERT_OK(runtime_->CopyHostStridedToDevice(
      dst.get(), m.data(), StridedLayout{2, sizes, transposed, sizeof(int32_t)}));
  EXPECT_EQ(ReadBack(dst.get(), 12),
            (std::vector<int32_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  const int64_t row_sizes[] = {3, 4};
  const int64_t broadcast[] = {0, 1};
  ASSERT_OK(runtime_->CopyHostStridedToDevice(
      dst.get(), m.data(), StridedLayout{2, row_sizes, broadcast, sizeof(int32_t)}));
  EXPECT_EQ(ReadBack(dst.get(), 12),
            (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST_P(DeviceSuite, RunsCopiesInIssueOrder) {
  // Each copy reads what the one before it wrote; only the final Synchronize waits.
  constexpr size_t kN = 1 << 16;
  constexpr size_t kBytes = kN * sizeof(int32_t);
  Allocation a(*runtime_, kBytes), b(*runtime_, kBytes), c(*runtime_, kBytes);
  const std::vector<int32_t> first = Iota(kN, 1), second = Iota(kN, -5);
  std::vector<int32_t> out_b(kN, 0), out_c(kN, 0);
  ASSERT_OK(runtime_->CopyHostToDevice(a.get(), first.data(), kBytes));
  ASSERT_OK(runtime_->CopyDeviceToDevice(b.get(), a.get(), kBytes));
  ASSERT_OK(runtime_->CopyHostToDevice(a.get(), second.data(), kBytes));
  ASSERT_OK(runtime_->CopyDeviceToDevice(c.get(), a.get(), kBytes));
  ASSERT_OK(runtime_->Zero(a.get(), kBytes));
  ASSERT_OK(runtime_->CopyDeviceToHost(out_b.data(), b.get(), kBytes));
  ASSERT_OK(runtime_->CopyDeviceToHost(out_c.data(), c.get(), kBytes));
  ASSERT_OK(runtime_->Synchronize());
  EXPECT_EQ(out_b, first);
  EXPECT_EQ(out_c, second);
  EXPECT_EQ(ReadBack(a.get(), kN), std::vector<int32_t>(kN, 0));
}

TEST_P(DeviceSuite, ScopesNestAndLeaveMemoryUsable) {
  Allocation a(*runtime_, 64);
  {
    DeviceScope outer(*runtime_);
    DeviceScope inner(*runtime_);
  }
  const std::vector<int32_t> data = Iota(16, 3);
  ASSERT_OK(runtime_->CopyHostToDevice(a.get(), data.data(), 64));
  EXPECT_EQ(ReadBack(a.get(), 16), data);
}

TEST_P(DeviceSuite, InjectedAllocationFailuresAreResourceExhaustedNamingTheDevice) {
  ASSERT_TRUE(runtime_->InjectAllocationFailures(1))
      << GetParam().ToString() << " offers no fault injection: list the test in its skip list";
  ASSERT_OK_AND_ASSIGN(void* first, runtime_->Allocate(64, 64));
  EXPECT_THAT(runtime_->Allocate(64, 64),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr(GetParam().ToString())));
  runtime_->Free(first);
  ASSERT_TRUE(runtime_->InjectAllocationFailures(-1));
  ASSERT_OK_AND_ASSIGN(void* again, runtime_->Allocate(64, 64));
  runtime_->Free(again);
}

TEST_P(DeviceSuite, AnInjectedCopyFailureFailsOneCopyAndLeavesItsDestination) {
  Allocation a(*runtime_, 64);
  const std::vector<int32_t> data = Iota(16, 1), other = Iota(16, 50);
  ASSERT_OK(runtime_->CopyHostToDevice(a.get(), data.data(), 64));
  ASSERT_OK(runtime_->Synchronize());
  ASSERT_TRUE(runtime_->InjectCopyFailure(0))
      << GetParam().ToString() << " offers no fault injection: list the test in its skip list";
  EXPECT_THAT(runtime_->CopyHostToDevice(a.get(), other.data(), 64),
              StatusIs(absl::StatusCode::kInternal, HasSubstr(GetParam().ToString())));
  // Once: the next copies succeed, and the failed one wrote nothing.
  EXPECT_EQ(ReadBack(a.get(), 16), data);
}

// Every skip names a registered type and a test of the suite, so that a renamed test cannot leave
// a skip that skips nothing.
TEST(DeviceSuiteSkipLists, NameRegisteredTypesAndTestsOfTheSuite) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (const SuiteSkip& skip : kSkipLists) {
    EXPECT_NE(FindDeviceTypeByName(skip.type), nullptr) << skip.type;
    bool found = false;
    for (int s = 0; s < unit.total_test_suite_count(); ++s) {
      const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
      if (std::string(suite.name()).find("DeviceSuite") == std::string::npos) continue;
      for (int t = 0; t < suite.total_test_count(); ++t) {
        const std::string name = suite.GetTestInfo(t)->name();
        if (name.substr(0, name.find('/')) == skip.test) found = true;
      }
    }
    EXPECT_TRUE(found) << skip.test << " is not a test of DeviceSuite";
  }
}

std::string DeviceName(const ::testing::TestParamInfo<Device>& info) {
  std::string name = info.param.ToString();
  for (char& c : name) {
    if (c == ':') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(EveryDeviceType, DeviceSuite, ::testing::ValuesIn(DevicesUnderTest()),
                         DeviceName);

// The sim device is a plug-in like any other: its type is found by name, its devices come from
// its discover function, and without CUDA the cuda type's plug-in maps cuda:N onto them.
TEST(DeviceTypes, BuiltInTypesAreRegisteredPlugIns) {
  std::vector<std::string> names;
  for (const DeviceTypeInfo* type : DeviceTypes()) names.push_back(type->name);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"host", "sim", "cuda"}));
  const DeviceTypeInfo* sim = FindDeviceTypeByName("sim");
  ASSERT_NE(sim, nullptr);
  EXPECT_TRUE(sim->host_kernels_run_on_memory);
  ASSERT_TRUE(sim->discover);
  DeviceRegistry registry;
  DeviceRegistryOptions options;
  options.sim.count = 3;
  sim->discover(registry, options);
  EXPECT_EQ(registry.devices(),
            (std::vector<Device>{Device::Sim(0), Device::Sim(1), Device::Sim(2)}));
  const DeviceTypeInfo* cuda = FindDeviceTypeByName("cuda");
  ASSERT_NE(cuda, nullptr);
  ASSERT_TRUE(cuda->stand_ins);
  EXPECT_EQ(cuda->stand_ins(registry),
            (std::vector<std::pair<Device, Device>>{{Device::Cuda(0), Device::Sim(0)},
                                                    {Device::Cuda(1), Device::Sim(1)},
                                                    {Device::Cuda(2), Device::Sim(2)}}));
  EXPECT_EQ(FindDeviceTypeByName("cpu"), FindDeviceType(DeviceType::kHost));
}

TEST(DeviceTypes, RegistrationRefusesTakenAndMalformedNames) {
  DeviceTypeInfo taken;
  taken.name = "sim";
  EXPECT_THAT(RegisterDeviceType(taken), StatusIs(absl::StatusCode::kAlreadyExists,
                                                  HasSubstr("\"sim\"")));
  DeviceTypeInfo alias_taken;
  alias_taken.name = "gpu_x";
  alias_taken.aliases = {"cpu"};
  EXPECT_THAT(RegisterDeviceType(alias_taken), StatusIs(absl::StatusCode::kAlreadyExists,
                                                        HasSubstr("\"cpu\"")));
  for (const char* bad : {"", "Npu", "9x", "n:pu", "n pu"}) {
    DeviceTypeInfo info;
    info.name = bad;
    EXPECT_THAT(RegisterDeviceType(info), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_))
        << "\"" << bad << "\"";
  }
  EXPECT_EQ(FindDeviceTypeByName("gpu_x"), nullptr);
}

}  // namespace
}  // namespace ferry
