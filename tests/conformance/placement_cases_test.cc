// Conformance cases 1-14, 20-25, 37-40 and 45 of docs/placement.md: each checks the plan exactly
// (the copy manifest, devices, diagnostics) and then executes on the cases' devices
// (conformance_util.h: the GPU, or sim devices with the guard on) and compares the outputs with the
// all-host run of the same method (P14).
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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




Device NodeDevice(const Method& method, int node) { return method.plan().placement.nodes[node].device; }

// ---- Basics ------------------------------------------------------------------------------------

TEST(ConformanceBasics, Case01DelegateOnDevice) {
  Fixture f;
  f.m.Output(Call(f.m, kD0, "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  EXPECT_THAT(OnceCopies(*method), IsEmpty());
  EXPECT_EQ(NodeDevice(*method, 0), Dev(0));
  EXPECT_EQ(method->plan().outputs[0].device, Device::Host());
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceBasics, Case02And03HostDelegatesGetNoCopies) {
  for (const std::optional<std::string>& target : {kNone, kCpu}) {
    Fixture f;
    f.m.Output(Call(f.m, target, "t", {f.a, f.b}));
    ConformanceHarness h(f.pb);
    ASSERT_OK_AND_ASSIGN(auto method, h.Load());
    EXPECT_THAT(method->plan().placement.copies, IsEmpty());
    EXPECT_EQ(NodeDevice(*method, 0), Device::Host());
    ExpectSameAsHost(h, *method);
  }
}

TEST(ConformanceBasics, Case04DeviceStrings) {
  for (const auto& [text, device] :
       std::vector<std::pair<std::string, Device>>{{"CUDA:0", Dev(0)}, {" Cuda:1 ", Dev(1)}}) {
    Fixture f;
    f.m.Output(Call(f.m, text, "t", {f.a, f.b}));
    ConformanceHarness h(f.pb);
    ASSERT_OK_AND_ASSIGN(auto method, h.Load());
    EXPECT_EQ(NodeDevice(*method, 0), device) << text;
  }
  for (const std::string text : {"tpu:0", "cuda:x"}) {
    Fixture f;
    f.m.Output(Call(f.m, text, "t", {f.a, f.b}));
    ConformanceHarness h(f.pb);
    EXPECT_THAT(h.Load(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   AllOf(HasSubstr("node 0 (t)"), HasSubstr(text))))
        << text;
  }
  Fixture f;
  f.m.Output(Call(f.m, "tpu:0", "t", {f.a, f.b}));
  ConformanceHarness h(f.pb);
  EXPECT_THAT(h.Load(), StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("\"cpu\""), HasSubstr("\"cuda\""))));
}

TEST(ConformanceBasics, Case05HostOpAfterDelegate) {
  Fixture f;
  ValueId t = Call(f.m, kD0, "t", {f.a, f.b});
  f.m.Output(f.m.Op("sin", {t}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  EXPECT_EQ(NodeDevice(*method, 1), Device::Host());
  EXPECT_EQ(method->plan().outputs[0].device, Device::Host());
  ExpectSameAsHost(h, *method);
}

// ---- Chains and sharing ------------------------------------------------------------------------

TEST(ConformanceChains, Case06ChainOnOneDevice) {
  Fixture f;
  ValueId t = Call(f.m, kD0, "t", {f.a, f.b});
  f.m.Output(Call(f.m, kD0, "u", {t, f.c}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "c", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "u", DevName(0), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceChains, Case07TwoDevices) {
  Fixture f;
  ValueId t = Call(f.m, kD0, "t", {f.a, f.b});
  f.m.Output(Call(f.m, kD1, "u", {t, f.c}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2d", "t", DevName(0), DevName(1), k16},
                                                  CopyRow{"h2d", "c", kHostName, DevName(1), k16},
                                                  CopyRow{"d2h", "u", DevName(1), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceChains, Case08CopiesAreSharedByReaders) {
  Fixture f;
  ValueId t = Call(f.m, kD0, "t", {f.a, f.b});
  ValueId u = Call(f.m, kD0, "u", {t, f.a});
  ValueId v = Call(f.m, kD0, "v", {t, f.b});
  f.m.Output(Call(f.m, kD0, "r", {u, v}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "r", DevName(0), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceChains, Case09HostReaderOfADeviceResult) {
  Fixture f;
  ValueId t = Call(f.m, kD0, "t", {f.a, f.b});
  ValueId u = Call(f.m, kD0, "u", {t, f.a});
  ValueId w = f.m.Op("relu", {t});
  f.m.Output(u);
  f.m.Output(w);
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, k16},
                                                  CopyRow{"d2h", "u", DevName(0), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceChains, Case10ReadersOnTwoDevices) {
  Fixture f;
  ValueId t = Call(f.m, kD0, "t", {f.a, f.b});
  ValueId u = Call(f.m, kD0, "u", {t, f.a});
  ValueId w = Call(f.m, kD1, "w", {t, f.b});
  f.m.Output(u);
  f.m.Output(w);
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2d", "t", DevName(0), DevName(1), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(1), k16},
                                                  CopyRow{"d2h", "u", DevName(0), kHostName, k16},
                                                  CopyRow{"d2h", "w", DevName(1), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

// ---- Host writes between delegates (P5, P6) ----------------------------------------------------

TEST(ConformanceHostWrites, Case11InPlaceHostWriteOfADeviceResult) {
  Fixture f;
  ValueId y = Call(f.m, kD0, "y", {f.a, f.b});
  f.m.Op("relu_", {y});
  f.m.Output(Call(f.m, kD0, "z", {y, f.c}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "y", DevName(0), kHostName, k16},
                                                  CopyRow{"h2d", "y", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "c", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "z", DevName(0), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceHostWrites, Case12WriteThroughAView) {
  Fixture f;
  ValueId y = Call(f.m, kD0, "y", {f.a, f.b});
  ValueId v = f.m.Op("view", {y, f.m.IntList({4})});
  f.m.Op("relu_", {v});
  f.m.Output(Call(f.m, kD0, "z", {y, f.c}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "y", DevName(0), kHostName, k16},
                                                  CopyRow{"h2d", "y", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "c", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "z", DevName(0), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceHostWrites, Case13OneCopyPerVersion) {
  Fixture f;
  ValueId hv = f.m.Op("relu", {f.a});
  ValueId x = Call(f.m, kD0, "x", {hv, f.b});
  f.m.Op("add_", {hv, f.m.Double(1.0)});
  ValueId y = Call(f.m, kD0, "y", {hv, f.b});
  f.m.Output(x);
  f.m.Output(y);
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method),
              ElementsAre(CopyRow{"h2d", "relu", kHostName, DevName(0), k16},
                          CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                          CopyRow{"h2d", "relu", kHostName, DevName(0), k16},
                          CopyRow{"d2h", "x", DevName(0), kHostName, k16},
                          CopyRow{"d2h", "y", DevName(0), kHostName, k16}));
  ExpectSameAsHost(h, *method);
}

// ---- One result (P4) ---------------------------------------------------------------------------

TEST(ConformanceOneResult, Case14SingleResultReadOnHostAndReturned) {
  Fixture f;
  ValueId y = Call(f.m, kD0, "y", {f.a, f.b});
  f.m.Output(y);
  f.m.Output(f.m.Op("neg", {y}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"h2d", "b", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "y", DevName(0), kHostName, k16}));
  EXPECT_EQ(method->plan().outputs[0].device, Device::Host());
  EXPECT_EQ(method->plan().outputs[1].device, Device::Host());
  ExpectSameAsHost(h, *method);
}

// ---- Constants (P7) ----------------------------------------------------------------------------

std::vector<float> Iota(int n, float start = 1.0f) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST(ConformanceConstants, Case20ConstantReachesTheDeviceOnce) {
  Fixture f;
  ValueId w = f.m.ConstantF32("w", {2, 2}, Iota(4));
  f.m.Output(Call(f.m, kD0, "t", {f.a, w}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(OnceCopies(*method), ElementsAre(CopyRow{"h2d", "w", kHostName, DevName(0), k16}));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "a", kHostName, DevName(0), k16},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
  ExpectSameAsHost(h, *method, 2);
  // Two calls copied a and t twice each and w never again.
  ASSERT_OK(h.Run(*method, 2).status());
  DeviceCounters counters = h.Counters();
  EXPECT_EQ(counters.h2d_copies, 2u);
  EXPECT_EQ(counters.d2h_copies, 2u);

  LoadOptions skip;
  skip.skip_h2d_for_method_inputs = true;
  ASSERT_OK_AND_ASSIGN(auto skipped, h.Load(skip));
  EXPECT_THAT(OnceCopies(*skipped), ElementsAre(CopyRow{"h2d", "w", kHostName, DevName(0), k16}));
  EXPECT_THAT(PerCallCopies(*skipped),
              ElementsAre(CopyRow{"d2h", "t", DevName(0), kHostName, k16}));
}

TEST(ConformanceConstants, Case21OneReplicaPerDevice) {
  Fixture f;
  ValueId w = f.m.ConstantF32("w", {2, 2}, Iota(4));
  f.m.Output(Call(f.m, kD0, "t", {f.a, w}));
  f.m.Output(Call(f.m, kD1, "u", {f.b, w}));
  f.m.Output(f.m.Op("relu", {w}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(OnceCopies(*method), ElementsAre(CopyRow{"h2d", "w", kHostName, DevName(0), k16},
                                               CopyRow{"h2d", "w", kHostName, DevName(1), k16}));
  for (const CopyRow& row : PerCallCopies(*method)) EXPECT_NE(std::get<1>(row), "w");
  const PlacementPlan& plan = method->plan().placement;
  EXPECT_EQ(plan.buffers[plan.nodes[2].arg_buffers[0]].kind, BufferKind::kProgramData);
  ExpectSameAsHost(h, *method);
}

TEST(ConformanceConstants, Case22TransposedConstantIsConvertedAtLoad) {
  Fixture f;
  // w = [[1, 2], [3, 4]] stored column-major: bytes 1, 3, 2, 4.
  std::vector<float> column_major = {1, 3, 2, 4};
  std::vector<uint8_t> bytes(16);
  std::memcpy(bytes.data(), column_major.data(), 16);
  ValueId w = f.m.Constant("w", TensorMeta{DType::kFloat32, {2, 2}, {1, 0}}, bytes);
  DelegateOptions options;
  options.arg_dim_orders = {{}, {0, 1}};
  f.m.Output(Call(f.m, kD0, "t", {f.a, w}, options));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(OnceCopies(*method), ElementsAre(CopyRow{"h2d", "w", kHostName, DevName(0), k16}));
  ASSERT_THAT(Warnings(*method), SizeIs(1));
  EXPECT_THAT(Warnings(*method)[0],
              AllOf(HasSubstr("\"w\""), HasSubstr("(1, 0)"), HasSubstr("(0, 1)")));
  ExpectSameAsHost(h, *method);
  // And the values are those of w read logically: t = a + w.
  ASSERT_OK_AND_ASSIGN(auto out, h.Run(*method));
  for (int j = 0; j < 4; ++j) {
    EXPECT_FLOAT_EQ(out[0][j], static_cast<float>(InputValue(0, j, DType::kFloat32)) + (j + 1));
  }
}

// Case 22 through a view: the delegate reads transpose(w), a host view of the constant stored
// in dim order (1, 0) as read. The replica is converted from the constant's data, and the warning
// names the constant as P7 asks, and the view it is read through.
TEST(ConformanceConstants, Case22ConstantReadThroughAViewNamesTheConstantAndTheView) {
  Fixture f;
  ValueId w = f.m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  ValueId wt = f.m.Op("transpose", {w, f.m.Int(0), f.m.Int(1)}, "wt");
  DelegateOptions options;
  options.arg_dim_orders = {{}, {0, 1}};
  f.m.Output(Call(f.m, kD0, "t", {f.a, wt}, options));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  ASSERT_THAT(Warnings(*method), SizeIs(1));
  EXPECT_THAT(Warnings(*method)[0],
              AllOf(HasSubstr("constant \"w\""), HasSubstr("view \"wt\""), HasSubstr("(1, 0)"),
                    HasSubstr("(0, 1)")));
  ExpectSameAsHost(h, *method);
  // t = a + transpose(w): w read logically through the view.
  ASSERT_OK_AND_ASSIGN(auto out, h.Run(*method));
  const float wt_values[4] = {1, 3, 2, 4};
  for (int j = 0; j < 4; ++j) {
    EXPECT_FLOAT_EQ(out[0][j], static_cast<float>(InputValue(0, j, DType::kFloat32)) + wt_values[j]);
  }
}

TEST(ConformanceConstants, Case23ChannelsLast) {
  for (bool compiled_channels_last : {true, false}) {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId a = m.Input("a", DType::kFloat32, {1, 2, 2, 3});
    std::vector<float> values = Iota(12);
    std::vector<uint8_t> bytes(48);
    std::memcpy(bytes.data(), values.data(), 48);
    ValueId w = m.Constant("w", TensorMeta{DType::kFloat32, {1, 2, 2, 3}, {0, 2, 3, 1}}, bytes);
    DelegateOptions options;
    options.arg_dim_orders = {{}, compiled_channels_last ? std::vector<int32_t>{0, 2, 3, 1}
                                                         : std::vector<int32_t>{0, 1, 2, 3}};
    m.Output(Call(m, kD0, "t", {a, w}, options));
    ConformanceHarness h(pb);
    ASSERT_OK_AND_ASSIGN(auto method, h.Load());
    ASSERT_THAT(OnceCopies(*method), SizeIs(1));
    EXPECT_EQ(method->plan().placement.copies[method->plan().placement.load_copies[0]].converts_layout,
              !compiled_channels_last);
    EXPECT_THAT(Warnings(*method), SizeIs(compiled_channels_last ? 0 : 1));
    ExpectSameAsHost(h, *method);
  }
}

TEST(ConformanceConstants, Case24NonDenseConstantIsALoadError) {
  Fixture f;
  ValueId w = f.m.ConstantF32("w", {1, 2}, {1, 2});
  ValueId wide = f.m.Op("expand", {w, f.m.IntList({2, 2})});
  f.m.Output(Call(f.m, kD0, "t", {f.a, wide}));
  ConformanceHarness h(f.pb);
  EXPECT_THAT(h.Load(), StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("constant \"w\""), HasSubstr("(0, 1)"))));
}

TEST(ConformanceConstants, Case25WritingAConstantIsALoadError) {
  Fixture f;
  ValueId w = f.m.ConstantF32("w", {2, 2}, Iota(4));
  f.m.Output(f.m.Op("add_", {w, f.m.Double(1.0)}));
  ConformanceHarness h(f.pb);
  EXPECT_THAT(h.Load(), StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("constant \"w\""), HasSubstr("add_"))));
}

// ---- State (P11) -------------------------------------------------------------------------------

TEST(ConformanceState, Case37HostUpdatedStateIsCopiedAfterEachUpdate) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId idx = m.Input("idx", DType::kInt64, {1});
  ValueId row = m.Input("row", DType::kFloat32, {1, 2});
  ValueId x = m.Input("x", DType::kFloat32, {4, 2});
  ValueId k = m.StateF32("k", {4, 2}, Iota(8));
  m.Op("index_put_", {k, idx, row});
  m.Output(Call(m, kD0, "t", {k, x}));
  ConformanceHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_EQ(method->plan().placement.value_homes[k], Device::Host());
  EXPECT_THAT(OnceCopies(*method), ElementsAre(CopyRow{"h2h", "k", kHostName, kHostName, 32}));
  EXPECT_THAT(PerCallCopies(*method), ElementsAre(CopyRow{"h2d", "k", kHostName, DevName(0), 32},
                                                  CopyRow{"h2d", "x", kHostName, DevName(0), 32},
                                                  CopyRow{"d2h", "t", DevName(0), kHostName, 32}));
  ExpectSameAsHost(h, *method, 2);
}

TEST(ConformanceState, Case38StateOwnedByDeviceDelegates) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  ValueId k = m.StateF32("k", {2, 2}, Iota(4));
  DelegateOptions update;
  update.name = "update";
  m.GraphDelegate(kD0, {k, x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("add_", {in[0], in[1]})};
  }, update);
  m.Output(Call(m, kD0, "read", {k, x}));
  ConformanceHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_EQ(method->plan().placement.value_homes[k], Dev(0));
  EXPECT_THAT(OnceCopies(*method), ElementsAre(CopyRow{"h2d", "k", kHostName, DevName(0), k16}));
  EXPECT_THAT(PerCallCopies(*method),
              ElementsAre(CopyRow{"h2d", "x", kHostName, DevName(0), k16},
                          CopyRow{"d2h", "read", DevName(0), kHostName, k16}));
  // Content persists between calls: three calls differ from one, and match the host's three.
  ASSERT_OK_AND_ASSIGN(auto one, h.Run(*method, 1));
  ASSERT_OK_AND_ASSIGN(auto more, h.Run(*method, 2));
  EXPECT_NE(one, more);
  ASSERT_OK_AND_ASSIGN(auto host, h.RunAllHost(3));
  EXPECT_EQ(more, host);
}

TEST(ConformanceState, Case39StateWrittenOnTwoDevicesIsALoadError) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  ValueId k = m.StateF32("k", {2, 2}, Iota(4));
  DelegateOptions update;
  update.name = "update";
  m.GraphDelegate(kD0, {k, x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("add_", {in[0], in[1]})};
  }, update);
  m.Output(m.Op("mul_", {k, m.Double(2.0)}));
  ConformanceHarness h(pb);
  EXPECT_THAT(h.Load(), StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("state \"k\""), HasSubstr("node 0 (update)"),
                                       HasSubstr("node 1 (mul_)"))));
}

// ---- Memory (P12) ------------------------------------------------------------------------------

TEST(ConformanceMemory, Case40ReplicasInTheConstantRegionCopiesInArenas) {
  Fixture f;
  ValueId w = f.m.ConstantF32("w", {2, 2}, Iota(4));
  f.m.Output(Call(f.m, kD0, "t", {f.a, w}));
  ConformanceHarness h(f.pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  const PlacementPlan& plan = method->plan().placement;
  for (const CopyStep& c : plan.copies) {
    const PlannedBuffer& dst = plan.buffers[c.dst_buffer];
    if (c.timing == CopyTiming::kOnce) {
      EXPECT_EQ(dst.kind, BufferKind::kConstantReplica);
    } else {
      EXPECT_EQ(dst.kind, BufferKind::kArena) << c.reason;
    }
  }
  ASSERT_THAT(method->plan().arenas, SizeIs(2));
  const ArenaInfo& host = method->plan().arenas[0];
  const ArenaInfo& on_device = method->plan().arenas[1];
  EXPECT_EQ(host.device, Device::Host());
  EXPECT_EQ(on_device.device, Dev(0));
  EXPECT_EQ(on_device.constant_bytes, 16u);
  EXPECT_GE(on_device.arena_bytes, on_device.lower_bound);
  EXPECT_GE(host.arena_bytes, host.lower_bound);
  EXPECT_GE(on_device.lower_bound, 32u);  // a's copy and t live together
  // The replica is device memory outside its arena; host and device memory are disjoint.
  DeviceRuntime* device = h.runtime().devices().Find(Dev(0));
  const void* replica = method->buffer_data(plan.copies[plan.load_copies[0]].dst_buffer);
  EXPECT_TRUE(device->Owns(replica, 16));
  const void* output = method->buffer_data(plan.output_buffers[0]);
  EXPECT_FALSE(device->Owns(output, 1));
  EXPECT_TRUE(h.runtime().devices().Find(Device::Host())->Owns(output, 16));
  ExpectSameAsHost(h, *method);
}

// ---- Devices -----------------------------------------------------------------------------------

TEST(ConformanceDevices, Case45MissingDeviceWithoutMappingIsALoadError) {
  Fixture f;
  f.m.Output(Call(f.m, "cuda:3", "t", {f.a, f.b}));
  if (MachineHasCuda(3)) GTEST_SKIP() << "this machine has cuda:3";
  ConformanceHarness h(f.pb);
  LoadOptions no_map;
  no_map.device_map = absl::flat_hash_map<Device, Device>{};
  EXPECT_THAT(h.Load(no_map), StatusIs(absl::StatusCode::kNotFound, HasSubstr("cuda:3")));
  // The runtime's default map stands sim:3 in for it on a machine without a GPU; on a machine with
  // GPUs it maps nothing, so a program that names a GPU the machine lacks fails to load.
  MethodHarness plain(f.pb);
  if (MachineHasCuda(0)) {
    EXPECT_THAT(plain.Load(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("cuda:3")));
  } else {
    ASSERT_OK_AND_ASSIGN(auto stand_in, plain.Load());
    EXPECT_EQ(NodeDevice(*stand_in, 0), Device::Sim(3));
  }
  // The cases' map sends it to sim:3.
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_EQ(NodeDevice(*method, 0), Dev(3));
  ExpectSameAsHost(h, *method);
}

}  // namespace
}  // namespace ferry::testing
