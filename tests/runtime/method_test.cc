// Method (runtime/method.cc) and the buffers a caller hands it: outputs that overlap inputs or each
// other, ranks above the maximum, freed device memory, all refused with nothing written; outputs
// read after a failed Execute; in-place writes into the caller's buffer. Values that are not
// tensors: inputs fixed at their traced value, outputs read with typed accessors.
#include <memory>
#include <utility>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Two inputs and an output [2, 2]: out = a + b on the host.
struct AddMethod {
  AddMethod() {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId a = m.Input("a", DType::kFloat32, {2, 2});
    ValueId b = m.Input("b", DType::kFloat32, {2, 2});
    m.Output(m.Op("add", {a, b}, "sum"));
    m.Output(m.Op("mul", {a, b}, "product"));
    program = std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
    method = std::move(rt.LoadMethod(*program, "forward")).value();
  }
  Runtime rt;
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
};

TensorView View(std::vector<float>& v) { return TensorView::Host(DType::kFloat32, {2, 2}, v.data()); }

TEST(CallerBuffers, OutputBufferOverlappingAnInputIsRefusedAndNothingIsWritten) {
  AddMethod f;
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, other(4, 0.0f);
  ASSERT_OK(f.method->SetInput(0, View(a)));
  ASSERT_OK(f.method->SetInput(1, View(b)));
  ASSERT_OK(f.method->SetOutputBuffer(0, View(a)));  // binding in any order is allowed ...
  ASSERT_OK(f.method->SetOutputBuffer(1, View(other)));
  EXPECT_THAT(f.method->Execute(),  // ... but Execute refuses it before any step
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 0 (\"sum\")"), HasSubstr("input 0 (\"a\")"),
                             HasSubstr("Nothing was run"))));
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(other, std::vector<float>(4, 0.0f));
  // Two outputs into one buffer, partly overlapping.
  std::vector<float> shared(6, 0.0f);
  ASSERT_OK(f.method->SetOutputBuffer(0, TensorView::Host(DType::kFloat32, {2, 2}, shared.data())));
  ASSERT_OK(
      f.method->SetOutputBuffer(1, TensorView::Host(DType::kFloat32, {2, 2}, shared.data() + 2)));
  EXPECT_THAT(f.method->Execute(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 0 (\"sum\")"), HasSubstr("output 1 (\"product\")"))));
  // Rebinding to separate memory makes it run, with the right values.
  std::vector<float> sum(4), product(4);
  ASSERT_OK(f.method->SetOutputBuffer(0, View(sum)));
  ASSERT_OK(f.method->SetOutputBuffer(1, View(product)));
  ASSERT_OK(f.method->Execute());
  EXPECT_EQ(sum, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(product, (std::vector<float>{10, 40, 90, 160}));
}

TEST(CallerBuffers, OutputOutOfRangeIsAnEmptyView) {
  AddMethod f;
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  ASSERT_OK(f.method->SetInput(0, View(a)));
  ASSERT_OK(f.method->SetInput(1, View(b)));
  ASSERT_OK(f.method->Execute());
  EXPECT_NE(f.method->Output(1).data(), nullptr);
  for (size_t i : {size_t{2}, size_t{99}, SIZE_MAX}) {
    TensorView out = f.method->Output(i);
    EXPECT_EQ(out.data(), nullptr) << i;
    EXPECT_EQ(out.numel(), 1) << i;  // rank 0
    EXPECT_EQ(out.sizes().size(), 0u) << i;
  }
}

TEST(CallerBuffers, RankAboveTheMaximumIsRefused) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  const std::vector<int64_t> rank8(8, 1);
  m.Output(m.Op("relu", {m.Input("x", DType::kFloat32, rank8)}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  float x = 1.0f;
  EXPECT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, rank8, &x)));
  const std::vector<int64_t> rank9(9, 1);
  EXPECT_THAT(method->SetInput(0, TensorView::Host(DType::kFloat32, rank9, &x)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0 (\"x\")"), HasSubstr("rank 9"),
                             HasSubstr("maximum 8"))));
  EXPECT_THAT(method->SetOutputBuffer(0, TensorView::Host(DType::kFloat32, rank9, &x)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 9")));
}

// After a failed Execute, Output() gives nothing to read until a call succeeds; a caller's output
// buffer holds its old content when the failure came before the step that writes it.
TEST(CallerBuffers, FailedExecuteLeavesNoOutputToReadAndUnwrittenBuffersUnchanged) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId b = m.Input("b", DType::kFloat32, {2, 2});
  m.Output(Call(m, kD0, "on_device", {a, b}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> av = {1, 2, 3, 4}, bv = {1, 1, 1, 1}, out(4, -7.0f);
  ASSERT_OK(method->SetInput(0, View(av)));
  ASSERT_OK(method->SetInput(1, View(bv)));
  ASSERT_OK(method->SetOutputBuffer(0, View(out)));
  ASSERT_OK(method->Execute());
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 5}));
  ASSERT_EQ(method->Output(0).data(), out.data());
  // The first copy (h2d of a) fails: the output's d2h never runs.
  out.assign(4, -7.0f);
  auto* sim0 = static_cast<SimDevice*>(rt.devices().Find(Device::Sim(0)));
  sim0->set_copy_failure_after(0);
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInternal, HasSubstr("injected")));
  EXPECT_EQ(method->Output(0).data(), nullptr);
  EXPECT_EQ(out, std::vector<float>(4, -7.0f));
  ASSERT_OK(method->Execute());
  EXPECT_EQ(method->Output(0).data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 5}));
}

// An output that is the result of in-place writes (add_ of add_ of relu's result) shares the
// memory of the value they write: a caller's buffer bound to it becomes that memory, so every
// write lands there. An in-place result on the method's input is the input's memory and is
// refused as a destination.
TEST(CallerBuffers, OutputOfInPlaceWritesIsWrittenIntoTheCallersBuffer) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {0.5f, 0.5f, 0.5f, 0.5f});
  ValueId v = m.Op("relu", {x});
  for (int i = 0; i < 3; ++i) v = m.Op("add_", {v, w});
  m.Output(v);
  m.Output(m.Op("add_", {x, w}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  EXPECT_THAT(method->SetOutputBuffer(1, TensorView::Host(DType::kFloat32, {2, 2}, nullptr)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("output 1"), HasSubstr("memory of value \"x\""))));
  std::vector<float> xv = {-1, 2, -3, 4}, out(4, -7.0f);
  ASSERT_OK(method->SetInput(0, View(xv)));
  ASSERT_OK(method->SetOutputBuffer(0, View(out)));
  ASSERT_OK(method->Execute());
  // relu(x) + 3 * 0.5, computed here; then x itself was written in place by the second output.
  EXPECT_EQ(out, (std::vector<float>{1.5f, 3.5f, 1.5f, 5.5f}));
  EXPECT_EQ(method->Output(0).data(), out.data());
  EXPECT_EQ(xv, (std::vector<float>{-0.5f, 2.5f, -2.5f, 4.5f}));
}

// forward(x) with `n` outputs, output k = relu(x) for even k, neg(x) for odd k; x float32 [2, 2].
std::unique_ptr<Program> ManyOutputsProgram(int n) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  for (int k = 0; k < n; ++k) m.Output(m.Op(k % 2 == 0 ? "relu" : "neg", {x}));
  return std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
}

// With more inputs and outputs than are compared pairwise, overlaps are found by a sweep in
// address order: every kind of overlap is still refused, naming both, and separate buffers run.
TEST(CallerBuffers, OverlapsAmongManyOutputsAreFound) {
  constexpr int kOutputs = 24;
  std::unique_ptr<Program> program = ManyOutputsProgram(kOutputs);
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {-1, 2, -3, 4, 0, 0, 0, 0};  // the input is the first four
  std::vector<float> out(4 * kOutputs, 0.0f);
  ASSERT_OK(method->SetInput(0, View(x)));
  auto bind = [&](int k, float* data) {
    return method->SetOutputBuffer(k, TensorView::Host(DType::kFloat32, {2, 2}, data));
  };
  for (int k = 0; k < kOutputs; ++k) ASSERT_OK(bind(k, out.data() + 4 * k));
  ASSERT_OK(method->Execute());
  for (int k = 0; k < kOutputs; ++k) {
    const std::vector<float> expected =
        k % 2 == 0 ? std::vector<float>{0, 2, 0, 4} : std::vector<float>{1, -2, 3, -4};
    EXPECT_EQ(std::vector<float>(out.begin() + 4 * k, out.begin() + 4 * k + 4), expected) << k;
  }
  // Output 17 on the input, then starting inside it.
  ASSERT_OK(bind(17, x.data()));
  EXPECT_THAT(method->Execute(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 17"), HasSubstr("input 0 (\"x\")"))));
  ASSERT_OK(bind(17, x.data() + 2));
  EXPECT_THAT(method->Execute(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 17"), HasSubstr("input 0 (\"x\")"),
                             HasSubstr("Nothing was run"))));
  ASSERT_OK(bind(17, out.data() + 4 * 17));
  // Output 12 half over output 3 (and 3 over nothing else).
  ASSERT_OK(bind(12, out.data() + 4 * 3 + 2));
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("output 3"), HasSubstr("output 12"))));
  // Output 0 inside the furthest-reaching output range seen before it in address order: the last
  // output, made to span everything below the others' buffers.
  std::vector<float> wide(4 * kOutputs + 8, 0.0f);
  ASSERT_OK(bind(12, out.data() + 4 * 12));
  ASSERT_OK(method->SetOutputBuffer(kOutputs - 1,
                                    TensorView::Host(DType::kFloat32, {2, 2}, wide.data())));
  ASSERT_OK(bind(0, wide.data() + 2));
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("output 0"), HasSubstr("output 23"))));
  ASSERT_OK(bind(0, out.data()));
  ASSERT_OK(bind(kOutputs - 1, out.data() + 4 * (kOutputs - 1)));
  ASSERT_OK(method->Execute());
}

TEST(CallerBuffers, FreedDeviceMemoryIsNamedAsFreed) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  m.Output(Call(m, kD0, "on_device", {a}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  LoadOptions options;
  options.skip_h2d_for_method_inputs = true;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward", options));
  DeviceRuntime* sim0 = rt.devices().Find(Device::Sim(0));
  void* freed = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*sim0, 16, 64));
    freed = buffer.data();
  }
  EXPECT_THAT(method->SetInput(0, TensorView(DType::kFloat32, {2, 2}, freed, Device::Sim(0))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0 (\"a\")"), HasSubstr("was freed"))));
  // A live allocation too short for the tensor is named as such.
  {
    ASSERT_OK_AND_ASSIGN(DeviceBuffer small, DeviceBuffer::Allocate(*sim0, 8, 64));
    EXPECT_THAT(
        method->SetInput(0, TensorView(DType::kFloat32, {2, 2}, small.data(), Device::Sim(0))),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr("memory of that device whose allocation ends before the tensor's "
                           "last byte")));
  }
  // Memory that was never the device's is not called freed.
  float host[4] = {};
  EXPECT_THAT(method->SetInput(0, TensorView(DType::kFloat32, {2, 2}, host, Device::Sim(0))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("not memory of that device"),
                             ::testing::Not(HasSubstr("freed")))));
  // Freed device memory passed as host memory is refused too (Execute would fault on it).
  ProgramBuilder host_pb;
  MethodBuilder& h = host_pb.AddMethod("forward");
  ValueId ha = h.Input("a", DType::kFloat32, {2, 2});
  h.Output(h.Op("relu", {ha}));
  ASSERT_OK_AND_ASSIGN(auto host_program, Program::FromBytes(std::move(host_pb.Build()).value()));
  ASSERT_OK_AND_ASSIGN(auto on_host, rt.LoadMethod(*host_program, "forward"));
  EXPECT_THAT(on_host->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, freed)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0 (\"a\") must be host memory"),
                             HasSubstr("memory of sim:0 that was freed"))));
}

// A program smaller than the mapping threshold is read, so the file may change after Load.

TEST(CallerBuffers, MisalignedPointersAreRefusedNamingTheAlignment) {
  AddMethod f;
  alignas(16) unsigned char bytes[64] = {};
  void* odd = bytes + 1;
  EXPECT_THAT(f.method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, odd)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0 (\"a\")"),
                             HasSubstr("is not aligned to 4 bytes, as float32 elements must be"))));
  EXPECT_THAT(f.method->SetOutputBuffer(1, odd, 16, Device::Host()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 1 (\"product\")"), HasSubstr("not aligned"))));
  // Aligned to the element, not more: +4 bytes is a valid float32 pointer.
  std::vector<float> b(4, 1.0f);
  EXPECT_OK(f.method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, bytes + 4)));
  ASSERT_OK(f.method->SetInput(1, View(b)));
  EXPECT_OK(f.method->Execute());
}

// y = a + a, with non-tensor inputs (an int, a double, a double list) and outputs (the int
// input, a string, a bool list).
struct ScalarIoMethod {
  ScalarIoMethod() {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId n = m.ScalarInput("n", Scalar::Int(4));
    ValueId a = m.Input("a", DType::kFloat32, {2, 2});
    m.ScalarInput("scale", Scalar::Double(0.5));
    m.ScalarInput("weights", Scalar::DoubleList({1.0, 200.0}));
    m.Output(m.Op("add", {a, a}, "y"));
    m.Output(n);
    m.Output(m.Scalar(Scalar::String("stories260k")));
    m.Output(m.Scalar(Scalar::BoolList({true, false})));
    program = std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
    method = std::move(rt.LoadMethod(*program, "forward")).value();
  }
  Runtime rt;
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
};

TEST(NonTensorValues, InputsHoldTheirTracedValueAndOnlyAcceptIt) {
  ScalarIoMethod f;
  const MethodPlan& plan = f.method->plan();
  ASSERT_EQ(plan.inputs.size(), 4u);
  ASSERT_FALSE(plan.inputs[0].is_tensor());
  EXPECT_EQ(*plan.inputs[0].value, Scalar::Int(4));
  EXPECT_TRUE(plan.inputs[1].is_tensor());
  EXPECT_EQ(plan.inputs[0].bytes, 0u);
  // Only the tensor must be set before a call.
  std::vector<float> a = {1, 2, 3, 4};
  ASSERT_OK(f.method->SetInput(1, View(a)));
  ASSERT_OK(f.method->Execute());
  // The traced value is accepted; another is refused naming both.
  EXPECT_OK(f.method->SetIntInput(0, 4));
  EXPECT_THAT(f.method->SetIntInput(0, 5),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("method \"forward\": input 0 (\"n\") is fixed at 4"),
                             HasSubstr("given 5"))));
  // Doubles match within 1e-4 + 1e-5 * |traced|: 0.5 +- 0.000105.
  EXPECT_OK(f.method->SetDoubleInput(2, 0.5001));
  EXPECT_OK(f.method->SetDoubleInput(2, 0.4999));
  EXPECT_THAT(
      f.method->SetDoubleInput(2, 0.5002),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("input 2 (\"scale\") is fixed at 0.5"), HasSubstr("given 0.5002"))));
  // Item by item for lists: 200 +- 0.0021.
  EXPECT_OK(f.method->SetInput(3, Scalar::DoubleList({1.00005, 200.002})));
  EXPECT_THAT(f.method->SetInput(3, Scalar::DoubleList({1.0, 200.003})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[1, 200]")));
  EXPECT_THAT(f.method->SetInput(3, Scalar::DoubleList({1.0})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("given [1]")));
  // Kinds must agree.
  EXPECT_THAT(f.method->SetDoubleInput(0, 4.0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 0 (\"n\") is an int, given a double (4)")));
  EXPECT_THAT(f.method->SetIntInput(1, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 1 (\"a\") is a tensor; set it with SetInput(1, "
                                 "TensorView), not an int")));
  EXPECT_THAT(f.method->SetInput(0, View(a)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 0 (\"n\") is an int, not a tensor")));
  EXPECT_THAT(f.method->SetInput(0, a.data(), 16, Device::Host()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a tensor")));
  EXPECT_THAT(f.method->SetIntInput(9, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
  // None of the refusals changed what the method computes.
  ASSERT_OK(f.method->Execute());
  EXPECT_EQ(f.method->Output(0).data_as<float>()[3], 8.0f);
}

TEST(NonTensorValues, OutputsAreReadByKind) {
  ScalarIoMethod f;
  EXPECT_THAT(f.method->OutputInt(1), StatusIs(absl::StatusCode::kFailedPrecondition,
                                               HasSubstr("has not run successfully")));
  std::vector<float> a = {1, 2, 3, 4};
  ASSERT_OK(f.method->SetInput(1, View(a)));
  ASSERT_OK(f.method->Execute());
  EXPECT_THAT(f.method->OutputInt(1), IsOkAndHolds(4));
  EXPECT_THAT(f.method->OutputString(2), IsOkAndHolds(absl::string_view("stories260k")));
  ASSERT_OK_AND_ASSIGN(const Scalar* bools, f.method->OutputValue(3));
  EXPECT_EQ(*bools, Scalar::BoolList({true, false}));
  EXPECT_THAT(f.method->OutputDouble(1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("output 1 (\"n\") is an int, not a double")));
  EXPECT_THAT(f.method->OutputBool(2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a string, not a bool")));
  EXPECT_THAT(f.method->OutputInt(0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("output 0 (\"y\") is a tensor; read it with Output(0)")));
  EXPECT_THAT(f.method->OutputValue(4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
  EXPECT_EQ(f.method->Output(1).data(), nullptr);
  std::vector<float> buffer(4);
  EXPECT_THAT(f.method->SetOutputBuffer(1, View(buffer)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("output 1 (\"n\") is an int, not a tensor, so it has no buffer")));
  // A failed call leaves nothing to read, scalars included.
  std::vector<float> other(4);
  ASSERT_OK(f.method->SetOutputBuffer(0, View(a)));  // overlaps input 1: Execute refuses
  EXPECT_FALSE(f.method->Execute().ok());
  EXPECT_THAT(f.method->OutputInt(1), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(f.method->SetOutputBuffer(0, View(other)));
  ASSERT_OK(f.method->Execute());
  EXPECT_THAT(f.method->OutputInt(1), IsOkAndHolds(4));
  EXPECT_EQ(other, (std::vector<float>{2, 4, 6, 8}));
}

}  // namespace
}  // namespace ferry::testing
