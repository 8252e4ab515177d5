// Conformance cases 15-19, 26-36 and 41-44 of docs/placement.md: the method boundary (P8-P10, P13).
// Each checks the plan, the diagnostics' content and, where the method loads, execution on the
// cases' devices (conformance_util.h: the GPU, or sim devices with the guard on) against the
// all-host run (P14).
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ferry/memory/device_buffer.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;


LoadOptions SkipH2d() {
  LoadOptions o;
  o.skip_h2d_for_method_inputs = true;
  return o;
}
LoadOptions SkipD2h() {
  LoadOptions o;
  o.skip_d2h_for_method_outputs = true;
  return o;
}
LoadOptions SkipBoth() {
  LoadOptions o = SkipH2d();
  o.skip_d2h_for_method_outputs = true;
  return o;
}
LoadOptions Strict(LoadOptions o) {
  o.error_on_per_call_copies = true;
  return o;
}



// ---- Outputs (P8) ------------------------------------------------------------------------------

TEST(ConformanceOutputs, Case15OutputStaysOnTheDevice) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipD2h()));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16}));
  EXPECT_EQ(method->plan().outputs[0].device, Dev(0));
  EXPECT_THAT(Warnings(*method), IsEmpty());
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceOutputs, Case16ReturnedAndReadOnTheHost) {
  Fixture f;
  ValueId y = Call(f.m, kD0, "y", {f.a, f.b});
  f.m.Output(y);
  f.m.Output(f.m.Op("relu", {y}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipD2h()));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "y", DevName(0), kHostName, k16}));
  EXPECT_EQ(method->plan().outputs[0].device, Dev(0));
  EXPECT_EQ(method->plan().outputs[1].device, Device::Host());
  ExpectSameAsHost(h, *method);
}

void ExpectHostWrittenOutputWarning(MethodHarness& h, const char* value) {
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipD2h()));
  EXPECT_EQ(method->plan().outputs[0].device, Device::Host());
  ASSERT_THAT(Warnings(*method), SizeIs(1));
  const std::string warning = Warnings(*method)[0];
  EXPECT_THAT(warning, AllOf(HasSubstr("output 0"), HasSubstr(absl::StrCat("\"", value, "\"")),
                             HasSubstr("16 bytes"), HasSubstr("host memory")));
  ExpectSameAsHost(h, *method);
  EXPECT_THAT(h.Load(Strict(SkipD2h())),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(warning)));
}

TEST(ConformanceOutputs, Case17OutputWrittenOnTheHost) {
  Fixture f;
  ValueId y = Call(f.m, kD0, "y", {f.a, f.b});
  f.m.Op("add_", {y, f.m.Double(1.0)});
  f.m.Output(y);
  ConformanceHarness h(f.pb);
  ExpectHostWrittenOutputWarning(h, "y");
}

TEST(ConformanceOutputs, Case18OutputAliasingTheHostCopy) {
  Fixture f;
  ValueId y = Call(f.m, kD0, "y", {f.a, f.b});
  ValueId r = f.m.Op("add_", {y, f.m.Double(1.0)}, "r");
  f.m.Output(r);
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipD2h()));
  ASSERT_THAT(Warnings(*method), SizeIs(1));
  EXPECT_THAT(Warnings(*method)[0],
              AllOf(HasSubstr("output 0"), HasSubstr("16 bytes"), HasSubstr("host memory")));
  EXPECT_EQ(method->plan().outputs[0].device, Device::Host());
  ExpectSameAsHost(h, *method);
  EXPECT_THAT(h.Load(Strict(SkipD2h())), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                  HasSubstr(Warnings(*method)[0])));
}

TEST(ConformanceOutputs, Case19BothSkipFlagsNoCopies) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipBoth()));
  EXPECT_THAT(method->plan().placement.copies, IsEmpty());
  EXPECT_EQ(method->plan().inputs[0].device, Dev(0));
  EXPECT_EQ(method->plan().inputs[1].device, Dev(0));
  EXPECT_EQ(method->plan().outputs[0].device, Dev(0));
  ExpectSameAsHost(h, *method);
  EXPECT_EQ(h.Counters().h2d_copies + h.Counters().d2h_copies + h.Counters().d2d_copies, 0u);
}

// ---- Inputs (P9) -------------------------------------------------------------------------------

TEST(ConformanceInputs, Case26InputsOnTheDevice) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  EXPECT_EQ(method->plan().inputs[0].device, Dev(0));
  EXPECT_EQ(method->plan().inputs[1].device, Dev(0));
  EXPECT_THAT(Warnings(*method), IsEmpty());
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case27OnlyDirectDeviceReadersMoveAnInput) {
  Fixture f;
  ValueId s = f.m.Op("sin", {f.a});
  f.m.Output(Call(f.m, kD0, "t", {s, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "sin", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  EXPECT_EQ(method->plan().inputs[0].device, Device::Host());
  EXPECT_EQ(method->plan().inputs[1].device, Dev(0));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case28HostReaderOfADeviceInputWarns) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  f.m.Output(f.m.Op("relu", {f.a}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  EXPECT_EQ(method->plan().inputs[0].device, Dev(0));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"d2h", "a", DevName(0), kHostName, k16},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  ASSERT_THAT(Warnings(*method), SizeIs(1));
  const std::string warning = Warnings(*method)[0];
  EXPECT_THAT(warning, AllOf(HasSubstr("\"a\""), HasSubstr("16 bytes"), HasSubstr("relu")));
  ExpectSameAsHost(h, *method);
  EXPECT_THAT(h.Load(Strict(SkipH2d())),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(warning)));
}

TEST(ConformanceInputs, Case29TwoDeviceReadersOneHostCopy) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  f.m.Output(Call(f.m, kD0, "u", {f.a, f.c}));
  f.m.Output(f.m.Op("relu", {f.a}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  const PlacementPlan& plan = method->plan().placement;
  // Both delegates read a's caller buffer directly.
  EXPECT_EQ(plan.nodes[0].arg_buffers[0], plan.input_buffers[0]);
  EXPECT_EQ(plan.nodes[1].arg_buffers[0], plan.input_buffers[0]);
  int d2h_of_a = 0;
  for (const CopyRow& row : PerCallCopies(*method)) {
    d2h_of_a += std::get<0>(row) == "d2h" && std::get<1>(row) == "a";
  }
  EXPECT_EQ(d2h_of_a, 1);
  EXPECT_THAT(Warnings(*method), SizeIs(1));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case30HostDelegatesShareOneCopyAndAnotherDeviceGetsOne) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  f.m.Output(Call(f.m, kNone, "n", {f.a}));
  f.m.Output(Call(f.m, kCpu, "p", {f.a}));
  f.m.Output(Call(f.m, kD1, "q", {f.a}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  EXPECT_EQ(method->plan().inputs[0].device, Dev(0));
  std::vector<CopyRow> copies_of_a;
  for (const CopyRow& row : PerCallCopies(*method)) {
    if (std::get<1>(row) == "a") copies_of_a.push_back(row);
  }
  // One d2h shared by Dnone and Dcpu; one copy to cuda:1 (from the host copy, per P4).
  EXPECT_THAT(copies_of_a, ElementsAre(CopyRow{"d2h", "a", DevName(0), kHostName, k16},
                                       CopyRow{"h2d", "a", kHostName, DevName(1), k16}));
  ASSERT_THAT(Warnings(*method), SizeIs(1));
  EXPECT_THAT(Warnings(*method)[0], AllOf(HasSubstr("\"a\""), HasSubstr("cuda:1")));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case31FirstDeviceReaderDecides) {
  Fixture f;
  f.m.Output(Call(f.m, kD1, "t", {f.a, f.b}));
  f.m.Output(Call(f.m, kD0, "u", {f.a, f.c}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  EXPECT_EQ(method->plan().inputs[0].device, Dev(1));
  std::vector<CopyRow> copies_of_a;
  for (const CopyRow& row : PerCallCopies(*method)) {
    if (std::get<1>(row) == "a") copies_of_a.push_back(row);
  }
  EXPECT_THAT(copies_of_a, ElementsAre(CopyRow{"d2d", "a", DevName(1), DevName(0), k16}));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case32ShapeOnlyReaderNeedsNoCopy) {
  Fixture f;
  ValueId size = f.m.Op("sym_size", {f.a, f.m.Int(0)});
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  f.m.Output(size);
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  EXPECT_THAT(Warnings(*method), IsEmpty());
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case33ReturnedInputWithBothFlags) {
  Fixture f;
  f.m.Output(f.a);
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipBoth()));
  EXPECT_EQ(method->plan().outputs[0].device, Dev(0));
  EXPECT_THAT(method->plan().placement.copies, IsEmpty());
  EXPECT_THAT(Warnings(*method), IsEmpty());
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case34ReturnedInputWithSkipH2dOnly) {
  Fixture f;
  f.m.Output(f.a);
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  EXPECT_EQ(method->plan().outputs[0].device, Device::Host());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"d2h", "a", DevName(0), kHostName, k16},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  ASSERT_THAT(Warnings(*method), SizeIs(1));
  EXPECT_THAT(Warnings(*method)[0],
              AllOf(HasSubstr("\"a\""), HasSubstr("output 0"),
                    HasSubstr("skip_d2h_for_method_outputs")));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case35HostWriteOfADeviceInputIsALoadError) {
  Fixture f;
  f.m.Op("add_", {f.a, f.m.Double(1.0)});
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  EXPECT_THAT(h.Load(SkipH2d()), StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("input \"a\""), HasSubstr("host copy"))));
  // Without the flag the same program is fine.
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceInputs, Case36StrictWithoutSkipFlagIsAConfigurationError) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  LoadOptions strict;
  strict.error_on_per_call_copies = true;
  EXPECT_THAT(h.Load(strict), StatusIs(absl::StatusCode::kFailedPrecondition,
                                       HasSubstr("error_on_per_call_copies")));
}

// ---- Caller buffers (P13) ----------------------------------------------------------------------

TEST(ConformanceCallerBuffers, Case41HostBufferForADeviceOutput) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipD2h()));
  std::vector<float> host(4, 42.0f);
  EXPECT_THAT(method->SetOutputBuffer(0, TensorView::Host(DType::kFloat32, {2, 2}, host.data())),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 0"), HasSubstr("cuda:0"), HasSubstr("host"))));
  // Claiming cuda:0's device for host memory is caught by the pointer check.
  EXPECT_THAT(method->SetOutputBuffer(0, TensorView(DType::kFloat32, {2, 2}, host.data(), Dev(0))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output 0")));
  EXPECT_EQ(host, std::vector<float>(4, 42.0f));
  // The method is still usable, and a real device buffer is accepted and written.
  DeviceRuntime* device = h.runtime().devices().Find(Dev(0));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*device, 16, 64));
  ASSERT_OK(method->SetOutputBuffer(0, TensorView(DType::kFloat32, {2, 2}, buffer.data(), Dev(0))));
  ASSERT_OK_AND_ASSIGN(auto placed, h.Run(*method));
  EXPECT_EQ(method->Output(0).data(), buffer.data());
  ASSERT_OK_AND_ASSIGN(auto host_run, h.RunAllHost());
  EXPECT_EQ(placed, host_run);
}

TEST(ConformanceCallerBuffers, Case42HostPointerClaimingDeviceMemory) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load(SkipH2d()));
  std::vector<float> host(4, 1.0f);
  EXPECT_THAT(method->SetInput(0, TensorView(DType::kFloat32, {2, 2}, host.data(), Dev(0))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0"), HasSubstr("\"a\""), HasSubstr("cuda:0"))));
  EXPECT_THAT(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, host.data())),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0"), HasSubstr("cuda:0"), HasSubstr("host"))));
  EXPECT_EQ(host, std::vector<float>(4, 1.0f));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceCallerBuffers, Case43ExecuteWithoutAnInput) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  std::vector<float> a(4, 1.0f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, a.data())));
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          AllOf(HasSubstr("input 1"), HasSubstr("\"b\""))));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceCallerBuffers, Case44OutputBufferOneByteTooSmall) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  std::vector<uint8_t> small(15, 7);
  EXPECT_THAT(method->SetOutputBuffer(0, small.data(), small.size(), Device::Host()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 0"), HasSubstr("15 bytes"), HasSubstr("16"))));
  // Described as a tensor, a smaller buffer is refused by shape and a wrong dtype by dtype.
  EXPECT_THAT(method->SetOutputBuffer(0, TensorView::Host(DType::kFloat32, {3}, small.data())),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 0"), HasSubstr("[2, 2]"))));
  EXPECT_THAT(method->SetOutputBuffer(0, TensorView::Host(DType::kInt64, {2, 2}, small.data())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("float32")));
  EXPECT_EQ(small, std::vector<uint8_t>(15, 7));
  // A buffer of the right size works.
  std::vector<float> right(4);
  ASSERT_OK(method->SetOutputBuffer(0, TensorView::Host(DType::kFloat32, {2, 2}, right.data())));
  ASSERT_OK_AND_ASSIGN(auto out, h.Run(*method));
  for (int j = 0; j < 4; ++j) EXPECT_EQ(right[j], out[0][j]);
}

}  // namespace
}  // namespace ferry::testing
