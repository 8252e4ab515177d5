// The executor's contract: no allocation during Execute, the sim guard catches host code touching
// device memory, and errors leave the method usable. (What a load allocates, and a failure at
// every allocation of it, are tested in tests/runtime/load/allocate_test.cc.)
#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/busy_method.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

// The replacement operator new below counts allocations; its malloc/free pairing is deliberate.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// Ten calls of a warm method: all succeed and none allocates.
void ExpectExecuteAllocatesNothing(Method& method) {
  g_allocations = 0;
  g_counting = true;
  absl::Status s;
  for (int i = 0; i < 10; ++i) s.Update(method.Execute());
  g_counting = false;
  ASSERT_OK(s);
  EXPECT_EQ(g_allocations.load(), 0);
}

TEST(Executor, ExecuteAllocatesNothing) {
  ProgramBuilder pb;
  BuildBusyMethod(pb);
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  ASSERT_OK(h.BindInputs(*method));
  ASSERT_OK(method->Execute());  // warm
  ExpectExecuteAllocatesNothing(*method);
  // The counter does count: a load allocates.
  g_allocations = 0;
  g_counting = true;
  auto again = h.Load();
  g_counting = false;
  ASSERT_OK(again.status());
  EXPECT_GT(g_allocations.load(), 0);
  // The state persisted across the calls above; a fresh method matches the host from the start.
  ASSERT_OK_AND_ASSIGN(auto placed, h.Run(**again, 3));
  ASSERT_OK_AND_ASSIGN(auto host, h.RunAllHost(3));
  EXPECT_EQ(placed, host);
}

TEST(Executor, BindingAllocatesNothing) {
  ProgramBuilder pb;
  BuildBusyMethod(pb);
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  // Host buffers and views made before counting; sim memory exists, so the devices' address
  // span is not empty and host pointers are ruled out by it.
  std::vector<std::vector<float>> data;
  std::vector<TensorView> views;
  for (const IoInfo& in : method->plan().inputs) {
    data.emplace_back(in.bytes / sizeof(float), 1.0f);
    views.push_back(TensorView::Host(in.dtype, in.sizes, data.back().data()));
  }
  std::vector<float> out0(method->plan().outputs[0].bytes / sizeof(float));
  const TensorView out_view =
      TensorView::Host(method->plan().outputs[0].dtype, method->plan().outputs[0].sizes,
                       out0.data());
  g_allocations = 0;
  g_counting = true;
  absl::Status s;
  for (int i = 0; i < 10; ++i) {
    for (size_t k = 0; k < views.size(); ++k) s.Update(method->SetInput(k, views[k]));
    s.Update(method->SetOutputBuffer(0, out_view));
  }
  g_counting = false;
  ASSERT_OK(s);
  EXPECT_EQ(g_allocations.load(), 0);
  ASSERT_OK(method->Execute());
}

// With many outputs bound, Execute's overlap check sorts them in scratch reserved at load.
TEST(Executor, ExecuteWithManyBoundOutputsAllocatesNothing) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  const ValueId x = m.Input("x", DType::kFloat32, {4});
  for (int k = 0; k < 40; ++k) m.Output(m.Op("relu", {x}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> in = {-1, 2, -3, 4};
  std::vector<float> out(4 * 40, 0.0f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, in.data())));
  for (int k = 0; k < 40; ++k) {
    ASSERT_OK(
        method->SetOutputBuffer(k, TensorView::Host(DType::kFloat32, {4}, out.data() + 4 * k)));
  }
  ASSERT_OK(method->Execute());  // warm
  ExpectExecuteAllocatesNothing(*method);
  EXPECT_EQ(std::vector<float>(out.end() - 4, out.end()), (std::vector<float>{0, 2, 0, 4}));
}

TEST(ExecutorDeathTest, HostKernelTouchingSimMemoryIsCaught) {
  Runtime rt;
  DeviceRuntime* sim0 = rt.devices().Find(Device::Sim(0));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*sim0, 64, 64));
  const OpSchema* relu = rt.ops().Find("relu");
  ASSERT_NE(relu, nullptr);
  TensorRef in = TensorRef::Contiguous(DType::kFloat32, {16}, buffer.data());
  std::vector<float> host(16);
  TensorRef out = TensorRef::Contiguous(DType::kFloat32, {16}, host.data());
  OpArg args[1];
  args[0].tensor = &in;
  TensorRef* results[1] = {&out};
  EXPECT_DEATH(relu->kernel(absl::MakeConstSpan(args), absl::MakeConstSpan(results)).IgnoreError(),
               "sim:0 memory touched outside a device scope");
  // Inside the device's scope the same kernel runs.
  {
    DeviceScope scope(*sim0);
    EXPECT_OK(relu->kernel(absl::MakeConstSpan(args), absl::MakeConstSpan(results)));
  }
}

TEST(Executor, DeviceDelegateHandedHostMemoryFails) {
  Runtime rt;
  const Backend* graph = rt.FindBackend("graph");
  ASSERT_NE(graph, nullptr);
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("main");
  ValueId x = m.Input("x", DType::kFloat32, {4});
  m.Output(m.Op("relu", {x}));
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> payload, pb.Build());
  DelegateInit init;
  init.node_name = "d";
  init.payload = payload;
  std::vector<std::pair<std::string, std::string>> specs;
  init.compile_specs = &specs;
  init.device = Device::Sim(0);
  init.device_runtime = rt.devices().Find(Device::Sim(0));
  init.args = {TensorRef::Contiguous(DType::kFloat32, {4})};
  init.scalar_args = {nullptr};
  init.results = {TensorRef::Contiguous(DType::kFloat32, {4})};
  init.ops = &rt.ops();
  ASSERT_OK_AND_ASSIGN(auto instance, graph->Init(init));
  std::vector<float> host_in(4, -1.0f), host_out(4, 5.0f);
  TensorRef in = TensorRef::Contiguous(DType::kFloat32, {4}, host_in.data());
  TensorRef out = TensorRef::Contiguous(DType::kFloat32, {4}, host_out.data());
  TensorRef* args[] = {&in};
  TensorRef* results[] = {&out};
  DeviceScope scope(*init.device_runtime);
  EXPECT_THAT(instance->Execute(args, results, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host memory")));
  EXPECT_EQ(host_out, std::vector<float>(4, 5.0f));
}

TEST(Executor, FailingCopyIsReportedAndTheMethodStaysUsable) {
  ProgramBuilder pb;
  BuildBusyMethod(pb);
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  ASSERT_OK(h.BindInputs(*method));
  auto* sim0 = static_cast<SimDevice*>(h.runtime().devices().Find(Device::Sim(0)));
  sim0->set_copy_failure_after(0);
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInternal,
                                          HasSubstr("method \"forward\", copy")));
  sim0->set_copy_failure_after(-1);
  EXPECT_OK(method->Execute());
}

TEST(Executor, RunTimeKernelErrorNamesTheNode) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId idx = m.Input("idx", DType::kInt64, {1});
  ValueId row = m.Input("row", DType::kFloat32, {1, 2});
  ValueId k = m.StateF32("k", {2, 2}, {1, 2, 3, 4});
  m.Op("index_put_", {k, idx, row}, "update");
  m.Output(m.Op("clone", {k}));
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  std::vector<int64_t> bad = {7};
  std::vector<float> values = {9, 9};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kInt64, {1}, bad.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {1, 2}, values.data())));
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("node 0 (update)")));
  std::vector<int64_t> good = {1};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kInt64, {1}, good.data())));
  ASSERT_OK(method->Execute());
  std::vector<float> out(method->Output(0).data_as<float>(), method->Output(0).data_as<float>() + 4);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 9, 9}));
}

TEST(Executor, UnknownOpAndBackendAreLoadErrors) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2});
  m.Output(m.Delegate("nowhere", "cuda:0", {}, {a}, {TensorMeta{DType::kFloat32, {2}, {}}})[0]);
  MethodHarness h(pb);
  EXPECT_THAT(h.Load(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"nowhere\"")));
}

}  // namespace
}  // namespace ferry::testing
