// A device type added by an application, with no change to Ferry: registered through
// memory/device_type.h, its devices are found by new Runtimes, programs that declare it parse,
// and the graph backend runs sub-graphs on it (its memory is host memory, so the host kernels
// serve it). Its runtime keeps its memory in a sim device's guarded mappings, so a host kernel
// that touched it outside its scope would fault.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/kernels/device_kernels.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_type.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "ferry/runtime/runtime.h"
#include "ferry/runtime/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A runtime of another type that forwards to a guarded sim device.
class TickTimer final : public DeviceTimer {
 public:
  explicit TickTimer(size_t markers) : at_(markers, -1) {}
  absl::Status Record(size_t marker) override {
    if (marker >= at_.size()) return absl::InvalidArgumentError("marker out of range");
    at_[marker] = 1000 * ++ticks_;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> ElapsedNs(size_t from, size_t to) override {
    if (from >= at_.size() || to >= at_.size() || at_[from] < 0 || at_[to] < 0) {
      return absl::UnavailableError("not recorded");
    }
    return at_[to] - at_[from];
  }

 private:
  std::vector<int64_t> at_;
  int64_t ticks_ = 0;
};

class ForwardingRuntime final : public DeviceRuntime {
 public:
  explicit ForwardingRuntime(Device device, bool timed = false)
      : device_(device), inner_(device.index), timed_(timed) {}
  // With `timed`, a timer whose device clock advances exactly 1 us per marker recorded, in the
  // order they are recorded: what a trace shows of the device is then known to the nanosecond.
  absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(size_t markers) override {
    if (!timed_) return std::unique_ptr<DeviceTimer>();
    return std::unique_ptr<DeviceTimer>(new TickTimer(markers));
  }
  Device device() const override { return device_; }
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override {
    return inner_.Allocate(bytes, alignment);
  }
  void Free(void* ptr) override { inner_.Free(ptr); }
  bool Owns(const void* ptr, size_t bytes) const override { return inner_.Owns(ptr, bytes); }
  bool uses_host_memory() const override { return true; }
  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override {
    return inner_.CopyHostToDevice(dst, src, bytes);
  }
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override {
    return inner_.CopyDeviceToHost(dst, src, bytes);
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override {
    return inner_.CopyDeviceToDevice(dst, src, bytes);
  }
  absl::Status CopyHostStridedToDevice(void* dst, const void* src,
                                       const StridedLayout& layout) override {
    return inner_.CopyHostStridedToDevice(dst, src, layout);
  }
  absl::Status CopyFromPeer(void* dst, DeviceRuntime& peer, const void* src,
                            size_t bytes) override {
    return inner_.CopyFromPeer(dst, peer, src, bytes);
  }
  absl::Status Zero(void* dst, size_t bytes) override { return inner_.Zero(dst, bytes); }
  absl::Status Synchronize() override { return inner_.Synchronize(); }
  void EnterScope() override { inner_.EnterScope(); }
  void ExitScope() override { inner_.ExitScope(); }
  bool guarded() const override { return inner_.guarded(); }
  DeviceCounters counters() const override { return inner_.counters(); }
  void ResetCounters() override { inner_.ResetCounters(); }

 private:
  Device device_;
  SimDevice inner_;
  bool timed_ = false;
};

// Registered once per process (types are never removed).
DeviceType TestType(const std::string& name, bool host_kernels, bool timed = false) {
  DeviceTypeInfo info;
  info.name = name;
  info.host_kernels_run_on_memory = host_kernels;
  info.discover = [name, timed](DeviceRegistry& registry, const DeviceRegistryOptions&) {
    const DeviceType type = FindDeviceTypeByName(name)->type;
    registry.Add(std::make_unique<ForwardingRuntime>(Device{type, 0}, timed)).IgnoreError();
  };
  absl::StatusOr<DeviceType> type = RegisterDeviceType(std::move(info));
  EXPECT_TRUE(type.ok()) << type.status();
  return *type;
}

// A method adding two float32[4] inputs in a graph delegate on `device`.
std::vector<uint8_t> AddProgram(const std::string& device) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {4});
  ValueId b = m.Input("b", DType::kFloat32, {4});
  m.Output(m.GraphDelegate(device, {a, b}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
  })[0]);
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

TEST(DevicePlugin, AnApplicationDeviceTypeRunsTheGraphBackend) {
  static const DeviceType type = TestType("testdev", /*host_kernels=*/true);
  ASSERT_OK_AND_ASSIGN(Device parsed, ParseDevice("TestDev:0"));
  EXPECT_EQ(parsed, (Device{type, 0}));
  EXPECT_EQ(parsed.ToString(), "testdev:0");

  Runtime rt;
  ASSERT_NE(rt.devices().Find(Device{type, 0}), nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(AddProgram("testdev:0")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  // Both inputs go to the device and the result comes back, on every call.
  int h2d = 0, d2h = 0;
  for (const CopyStep& c : method->plan().placement.copies) {
    if (c.direction == CopyDirection::kHostToDevice && c.dst_device == parsed) ++h2d;
    if (c.direction == CopyDirection::kDeviceToHost && c.src_device == parsed) ++d2h;
  }
  EXPECT_EQ(h2d, 2);
  EXPECT_EQ(d2h, 1);
  std::vector<float> a = {1, 2, 3, 4}, b = {0.5f, -2, 10, 100};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, a.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {4}, b.data())));
  ASSERT_OK(method->Execute());
  const TensorView out = method->Output(0);
  ASSERT_EQ(out.device(), Device::Host());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.data_as<float>()[i], a[i] + b[i]) << i;
  EXPECT_EQ(rt.devices().Find(parsed)->counters().h2d_copies, 2u);
}

// A device with timers: a trace times its copies and delegate calls on the device's clock (here
// one tick of 1 us per marker), placed on the host's clock at the call's start; host steps keep
// the host's.
TEST(DevicePlugin, ATraceTimesADevicesStepsWithItsTimer) {
  static const DeviceType type = TestType("timeddev", /*host_kernels=*/true, /*timed=*/true);
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(AddProgram("timeddev:0")));
  LoadOptions options;
  options.record_trace = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward", options));
  std::vector<float> a = {1, 2, 3, 4}, b = {0.5f, -2, 10, 100};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, a.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {4}, b.data())));
  for (int call = 0; call < 2; ++call) {  // the timer is re-anchored every call
    ASSERT_OK(method->Execute());
    const absl::Span<const TraceStep> steps = method->trace_steps();
    const absl::Span<const TraceSpan> spans = method->last_trace();
    ASSERT_EQ(spans.size(), steps.size());
    // Two copies in, the delegate, the copy out: marker 0 at tick 1, then each step from tick
    // 2k + 2 to 2k + 3, 1 us long, 1 us after the previous one.
    int device_steps = 0;
    int64_t previous_end = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const bool on_device =
          steps[i].device == Device{type, 0} && steps[i].kind != TraceStep::Kind::kSync;
      EXPECT_EQ(spans[i].device_clock, on_device) << i;
      if (!on_device) continue;
      EXPECT_EQ(spans[i].end_ns - spans[i].start_ns, 1000) << i;
      if (device_steps > 0) {
        EXPECT_EQ(spans[i].start_ns - previous_end, 1000) << i;
      }
      previous_end = spans[i].end_ns;
      ++device_steps;
    }
    EXPECT_EQ(device_steps, 4);
  }
  TraceRecorder trace;
  trace.AddCall(*method);
  EXPECT_THAT(trace.ToJson(), HasSubstr("\"clock\": \"device\""));
}

TEST(DevicePlugin, ATypeWithoutKernelsForTheGraphBackendIsRefusedAtLoad) {
  static const DeviceType type = TestType("kernelless", /*host_kernels=*/false);
  Runtime rt;
  ASSERT_NE(rt.devices().Find(Device{type, 0}), nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(AddProgram("kernelless:0")));
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("does not run on kernelless:0")));
}

// Kernels of a type whose memory host code may not run over: the host kernels, but float32 only,
// as CUDA's take fewer dtypes than the host's.
class Float32OnlyKernels final : public DeviceKernels {
 public:
  absl::Status Prepare(int32_t) const override { return absl::OkStatus(); }
  KernelFn Find(absl::string_view op) const override {
    const OpSchema* schema = ops_.Find(op);
    return schema == nullptr ? nullptr : schema->kernel;
  }
  void SetStream(void*) const override {}
  absl::Status CheckDTypes(absl::string_view op, absl::Span<const OpArg> args,
                           absl::Span<const TensorRef* const> results) const override {
    for (const OpArg& a : args) {
      if (a.tensor != nullptr && a.tensor->dtype != DType::kFloat32) {
        return absl::UnimplementedError(
            absl::StrCat(op, ": no kernel for dtype ", DTypeName(a.tensor->dtype)));
      }
    }
    for (const TensorRef* r : results) {
      if (r->dtype != DType::kFloat32) {
        return absl::UnimplementedError(
            absl::StrCat(op, ": no kernel for dtype ", DTypeName(r->dtype)));
      }
    }
    return absl::OkStatus();
  }

 private:
  OpRegistry ops_ = OpRegistry::WithBuiltIns();
};

// A method cloning one input of `dtype` [4] in a graph delegate on `device`.
std::vector<uint8_t> CloneProgram(const std::string& device, DType dtype) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", dtype, {4});
  m.Output(m.GraphDelegate(device, {a}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("clone", {in[0]})};
  })[0]);
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

TEST(DevicePlugin, DTypesTheDeviceKernelsDoNotTakeAreRefusedAtLoad) {
  static const DeviceType type = TestType("floatonly", /*host_kernels=*/false);
  static const Float32OnlyKernels kernels;
  static const absl::Status registered = RegisterDeviceKernels(type, &kernels);
  ASSERT_OK(registered);
  Runtime rt;
  // The host's clone takes int32; these kernels do not, and the load says so.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> int32_program,
                       Program::FromBytes(CloneProgram("floatonly:0", DType::kInt32)));
  EXPECT_THAT(rt.LoadMethod(*int32_program, "forward"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("on floatonly"),
                             HasSubstr("clone: no kernel for dtype int32"))));
  // float32 loads and runs.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> float_program,
                       Program::FromBytes(CloneProgram("floatonly:0", DType::kFloat32)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*float_program, "forward"));
  std::vector<float> a = {1.5f, -2, 3, 0.25f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, a.data())));
  ASSERT_OK(method->Execute());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(method->Output(0).data_as<float>()[i], a[i]) << i;
}

}  // namespace
}  // namespace ferry
