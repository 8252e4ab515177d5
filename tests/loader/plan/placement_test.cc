// The placement planner as a pure function: literal graphs in, literal manifests out.
// Expectations follow docs/placement.md's rules (P1-P12); the end-to-end conformance cases with
// execution live in tests/conformance/.
#include "ferry/loader/plan/placement.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/graph_sketch.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::GraphSketch;
using ::ferry::testing::HostEffects;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Device kHost = Device::Host();
const Device kSim0 = Device::Sim(0);
const Device kSim1 = Device::Sim(1);

PlacementOptions SimOptions() {
  PlacementOptions o;
  o.present_devices = {kSim0, kSim1};
  o.device_map[Device::Cuda(0)] = kSim0;
  o.device_map[Device::Cuda(1)] = kSim1;
  return o;
}

// (timing, direction, value name, source device, destination device, bytes)
using Row = std::tuple<std::string, std::string, std::string, std::string, std::string, size_t>;

std::vector<Row> Manifest(const GraphSketch& g, const PlacementPlan& plan) {
  std::vector<Row> rows;
  for (const CopyStep& c : plan.copies) {
    rows.emplace_back(CopyTimingName(c.timing), CopyDirectionName(c.direction),
                      g.method().values[c.value].name, c.src_device.ToString(),
                      c.dst_device.ToString(), c.bytes);
  }
  return rows;
}

TEST(PlacementTest, DelegateOnDeviceCopiesInputsInAndResultOut) {
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b");
  g.Output(g.Delegate("D0", "cuda:0", {a, b})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_THAT(Manifest(g, plan),
              ElementsAre(Row{"per call", "h2d", "a", "host", "sim:0", 16},
                          Row{"per call", "h2d", "b", "host", "sim:0", 16},
                          Row{"per call", "d2h", "D0", "sim:0", "host", 16}));
  EXPECT_EQ(plan.nodes[0].device, kSim0);
  EXPECT_EQ(plan.output_device(0), kHost);
  EXPECT_EQ(plan.per_call_copies(), 3);
  EXPECT_EQ(plan.per_call_bytes(), 48u);
}

TEST(PlacementTest, HostDelegatesGetNoCopies) {
  for (std::optional<std::string> target : {std::optional<std::string>(), std::optional<std::string>("cpu"),
                                            std::optional<std::string>(" CPU ")}) {
    GraphSketch g;
    ValueId a = g.Input("a"), b = g.Input("b");
    g.Output(g.Delegate("D", target, {a, b})[0]);
    PlacementInput in = g.Build();
    ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
    EXPECT_TRUE(plan.copies.empty());
    EXPECT_EQ(plan.nodes[0].device, kHost);
  }
}

TEST(PlacementTest, ReadersOnOneDeviceShareOneCopy) {
  // Case 8: t=D0(a,b); u=D0(t,a); v=D0(t,b); D0(u,v).
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b");
  ValueId t = g.Delegate("t", "cuda:0", {a, b})[0];
  ValueId u = g.Delegate("u", "cuda:0", {t, a})[0];
  ValueId v = g.Delegate("v", "cuda:0", {t, b})[0];
  g.Output(g.Delegate("r", "cuda:0", {u, v})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_THAT(Manifest(g, plan),
              ElementsAre(Row{"per call", "h2d", "a", "host", "sim:0", 16},
                          Row{"per call", "h2d", "b", "host", "sim:0", 16},
                          Row{"per call", "d2h", "r", "sim:0", "host", 16}));
}

TEST(PlacementTest, DeviceToDeviceIsOneDirectCopy) {
  // Case 7: t=D0(a,b); u=D1(t,c).
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b"), c = g.Input("c");
  ValueId t = g.Delegate("t", "cuda:0", {a, b})[0];
  g.Output(g.Delegate("u", "cuda:1", {t, c})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_THAT(Manifest(g, plan),
              ElementsAre(Row{"per call", "h2d", "a", "host", "sim:0", 16},
                          Row{"per call", "h2d", "b", "host", "sim:0", 16},
                          Row{"per call", "d2d", "t", "sim:0", "sim:1", 16},
                          Row{"per call", "h2d", "c", "host", "sim:1", 16},
                          Row{"per call", "d2h", "u", "sim:1", "host", 16}));
}

TEST(PlacementTest, HostWriteMakesTheNextDeviceReaderCopyAgain) {
  // Case 11: y=D0(a,b); relu_(y); z=D0(y,c).
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b"), c = g.Input("c");
  ValueId y = g.Delegate("y", "cuda:0", {a, b})[0];
  g.Host("relu_", {y}, HostEffects{{0}, {0}, {}});
  g.Output(g.Delegate("z", "cuda:0", {y, c})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_THAT(Manifest(g, plan),
              ElementsAre(Row{"per call", "h2d", "a", "host", "sim:0", 16},
                          Row{"per call", "h2d", "b", "host", "sim:0", 16},
                          Row{"per call", "d2h", "y", "sim:0", "host", 16},
                          Row{"per call", "h2d", "y", "host", "sim:0", 16},
                          Row{"per call", "h2d", "c", "host", "sim:0", 16},
                          Row{"per call", "d2h", "z", "sim:0", "host", 16}));
  // The fresh copy of y is read by z's node: its source is the host copy that relu_ wrote.
  const CopyStep& fresh = plan.copies[3];
  EXPECT_EQ(fresh.src_buffer, plan.copies[2].dst_buffer);
  EXPECT_EQ(plan.nodes[2].arg_buffers[0], fresh.dst_buffer);
}

TEST(PlacementTest, WriteThroughAViewCountsAsAWriteOfTheBase) {
  // Case 12: y=D0(a,b); v=view(y); relu_(v); z=D0(y,c).
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b"), c = g.Input("c");
  ValueId y = g.Delegate("y", "cuda:0", {a, b})[0];
  ValueId v = g.Host("view", {y}, HostEffects{{}, {0}, {}});
  g.Host("relu_", {v}, HostEffects{{0}, {0}, {}});
  g.Output(g.Delegate("z", "cuda:0", {y, c})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_EQ(plan.per_call_copies(), 6);
  EXPECT_EQ(std::get<1>(Manifest(g, plan)[3]), "h2d");
  EXPECT_EQ(std::get<2>(Manifest(g, plan)[3]), "y");
}

TEST(PlacementTest, ShapeOnlyReadersNeverCopy) {
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b");
  ValueId t = g.Delegate("t", "cuda:0", {a, b})[0];
  g.Output(g.Host("sym_size", {t, g.Scalar(0)}, HostEffects{{}, {}, {0}}, std::vector<int64_t>{}));
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_THAT(Manifest(g, plan),
              ElementsAre(Row{"per call", "h2d", "a", "host", "sim:0", 16},
                          Row{"per call", "h2d", "b", "host", "sim:0", 16}));
}

TEST(PlacementTest, ConstantsGetOneReplicaPerDeviceAtLoad) {
  // Case 21: w read by D0, D1 and relu.
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId w = g.Constant("w");
  ValueId t = g.Delegate("t", "cuda:0", {a, w})[0];
  ValueId u = g.Delegate("u", "cuda:1", {a, w})[0];
  ValueId r = g.Host("relu", {w});
  g.Output(t);
  g.Output(u);
  g.Output(r);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  std::vector<Row> once;
  for (const Row& row : Manifest(g, plan)) {
    if (std::get<0>(row) == "once") once.push_back(row);
    if (std::get<0>(row) == "per call") {
      EXPECT_NE(std::get<2>(row), "w");
    }
  }
  EXPECT_THAT(once, ElementsAre(Row{"once", "h2d", "w", "host", "sim:0", 16},
                                Row{"once", "h2d", "w", "host", "sim:1", 16}));
  // relu reads the program's data in place.
  EXPECT_EQ(plan.buffers[plan.nodes[2].arg_buffers[0]].kind, BufferKind::kProgramData);
}

TEST(PlacementTest, TransposedConstantIsConvertedOnceWithOneWarning) {
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId w = g.Constant("w", {2, 2}, {1, 0});
  g.Output(g.Delegate("t", "cuda:0", {a, w}, 1, {}, {{}, {0, 1}})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  ASSERT_EQ(plan.diagnostics.size(), 1u);
  EXPECT_THAT(plan.diagnostics[0].message, HasSubstr("\"w\""));
  EXPECT_THAT(plan.diagnostics[0].message, HasSubstr("(1, 0)"));
  EXPECT_THAT(plan.diagnostics[0].message, HasSubstr("(0, 1)"));
  ASSERT_EQ(plan.load_copies.size(), 1u);
  const CopyStep& replica = plan.copies[plan.load_copies[0]];
  EXPECT_EQ(replica.value, w);
  EXPECT_TRUE(replica.converts_layout);
  EXPECT_EQ(replica.timing, CopyTiming::kOnce);
  EXPECT_EQ(plan.buffers[replica.dst_buffer].kind, BufferKind::kConstantReplica);
}

TEST(PlacementTest, NonDenseConstantOnADeviceIsAnError) {
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId w = g.Constant("w");
  ValueId e = g.Host("expand", {w}, HostEffects{{}, {0}, {}});
  g.SetLayout(e, ValueLayout{false, {}, {0, 1}});
  g.Output(g.Delegate("t", "cuda:0", {a, e})[0]);
  PlacementInput in = g.Build();
  EXPECT_THAT(PlaceMethod(in, SimOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("\"w\""), HasSubstr("(0, 1)"))));
}

TEST(PlacementTest, InputListsOutOfOrderOrOutOfRangeAreRefused) {
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId t = g.Host("relu", {a});
  ValueId u = g.Host("relu", {t});
  g.Output(g.Host("relu", {u}));
  const PlacementInput good = g.Build();
  ASSERT_TRUE(PlaceMethod(good, SimOptions()).ok());
  ValueLayout column_major;
  column_major.dim_order = {1, 0};

  PlacementInput in = good;
  in.effects = {{2, NodeEffects{}}, {1, NodeEffects{}}};  // decreasing
  EXPECT_THAT(PlaceMethod(in, SimOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("effects entry 1 is for node 1"),
                                        HasSubstr("increasing order"))));
  in.effects = {{1, NodeEffects{}}, {1, NodeEffects{}}};  // twice
  EXPECT_THAT(PlaceMethod(in, SimOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("effects entry 1")));
  in.effects = {{3, NodeEffects{}}};  // three nodes: 0 to 2
  EXPECT_THAT(
      PlaceMethod(in, SimOptions()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               ::testing::AllOf(HasSubstr("effects entry 0 is for node 3"), HasSubstr("(3)"))));

  in = good;
  in.layouts = {{t, column_major}, {a, column_major}};
  EXPECT_THAT(PlaceMethod(in, SimOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("layouts entry 1 is for value ", a))));
  in.layouts = {{-1, column_major}};
  EXPECT_THAT(
      PlaceMethod(in, SimOptions()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layouts entry 0 is for value -1")));
}

TEST(PlacementTest, AValueListedWithADimOrderKeepsItOnTheHostAndOnADevice) {
  // Values not listed are row-major; one listed in the middle of the values keeps its order
  // where a host op reads it and where a device delegate does.
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId t = g.Host("relu", {a});
  ValueId u = g.Host("neg", {t});
  g.Output(u);
  g.Output(g.Delegate("D", "cuda:0", {t})[0]);
  ValueLayout column_major;
  column_major.dim_order = {1, 0};
  g.SetLayout(t, column_major);
  PlacementInput in = g.Build();
  ASSERT_EQ(in.layouts.size(), 1u);
  EXPECT_EQ(in.LayoutOf(t).dim_order, (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(in.LayoutOf(u).dim_order.empty());
  EXPECT_TRUE(in.EffectsOf(0).written_args.empty());
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  const std::vector<int32_t> column = {1, 0};
  const NodePlacement& neg = plan.nodes[1];
  EXPECT_EQ(plan.buffers[neg.arg_buffers[0]].dim_order, column);
  EXPECT_TRUE(plan.buffers[neg.result_buffers[0]].dim_order.empty());
  const PlannedBuffer& on_device = plan.buffers[plan.nodes[2].arg_buffers[0]];
  EXPECT_EQ(on_device.device, kSim0);
  EXPECT_EQ(on_device.dim_order, column);
}

TEST(PlacementTest, WritingAConstantIsAnError) {
  GraphSketch g;
  ValueId w = g.Constant("w");
  g.Output(g.Host("add_", {w, g.Scalar(1)}, HostEffects{{0}, {0}, {}}));
  PlacementInput in = g.Build();
  EXPECT_THAT(PlaceMethod(in, SimOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("constant \"w\""), HasSubstr("add_"))));
}

TEST(PlacementTest, StateOwnedByDeviceDelegatesLivesThere) {
  // Case 38.
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId k = g.State("k");
  g.Delegate("update", "cuda:0", {k, a}, 1, {0});
  g.Output(g.Delegate("read", "cuda:0", {k, a})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_EQ(plan.value_homes[k], kSim0);
  EXPECT_THAT(Manifest(g, plan),
              ElementsAre(Row{"once", "h2d", "k", "host", "sim:0", 16},
                          Row{"per call", "h2d", "a", "host", "sim:0", 16},
                          Row{"per call", "d2h", "read", "sim:0", "host", 16}));
}

TEST(PlacementTest, StateWrittenOnTwoDevicesIsAnError) {
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId k = g.State("k");
  g.Delegate("update", "cuda:0", {k, a}, 1, {0});
  g.Output(g.Host("add_", {k, a}, HostEffects{{0}, {0}, {}}));
  PlacementInput in = g.Build();
  EXPECT_THAT(PlaceMethod(in, SimOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("\"k\""), HasSubstr("node 0 (update)"),
                                        HasSubstr("node 1 (add_)"))));
}

TEST(PlacementTest, DeviceStringsFollowP2) {
  for (const char* ok : {"CUDA:0", " Cuda:1 ", "sim:1"}) {
    GraphSketch g;
    ValueId a = g.Input("a");
    g.Output(g.Delegate("D", ok, {a})[0]);
    PlacementInput in = g.Build();
    EXPECT_OK(PlaceMethod(in, SimOptions())) << ok;
  }
  for (const char* bad : {"tpu:0", "cuda:x"}) {
    GraphSketch g;
    ValueId a = g.Input("a");
    g.Output(g.Delegate("D", bad, {a})[0]);
    PlacementInput in = g.Build();
    EXPECT_THAT(PlaceMethod(in, SimOptions()),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("node 0 (D)"), HasSubstr(bad))));
  }
}

TEST(PlacementTest, UnmappedMissingDeviceIsAnError) {
  GraphSketch g;
  ValueId a = g.Input("a");
  g.Output(g.Delegate("D", "cuda:3", {a})[0]);
  PlacementInput in = g.Build();
  PlacementOptions options;
  options.present_devices = {kSim0};
  EXPECT_THAT(PlaceMethod(in, options),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cuda:3")));
}

TEST(PlacementTest, LifetimesCoverEveryRead) {
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b");
  ValueId t = g.Delegate("t", "cuda:0", {a, b})[0];
  ValueId u = g.Delegate("u", "cuda:0", {t, a})[0];
  g.Output(u);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  // Schedule: h2d a, h2d b, t, u, d2h u.
  ASSERT_EQ(plan.schedule.size(), 5u);
  const PlannedBuffer& a_copy = plan.buffers[plan.copies[0].dst_buffer];
  EXPECT_EQ(a_copy.first_step, 0);
  EXPECT_EQ(a_copy.last_step, 3);  // read again by u
  const PlannedBuffer& t_home = plan.buffers[plan.nodes[0].result_buffers[0]];
  EXPECT_EQ(t_home.first_step, 2);
  EXPECT_EQ(t_home.last_step, 3);
  const PlannedBuffer& out = plan.buffers[plan.output_buffers[0]];
  EXPECT_EQ(out.last_step, 5);  // outputs live to the end of the call
}

// Diagnostics about names (not placement), as written by NameDiagnostics.
std::vector<Diagnostic> NameWarnings(const PlacementPlan& plan) {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : plan.diagnostics) {
    if (d.message.find("share a name") != std::string::npos) out.push_back(d);
  }
  return out;
}

TEST(PlacementTest, ValuesSharingANameWarnOncePerName) {
  GraphSketch g;
  ValueId x = g.Input("x");
  ValueId norm1 = g.Constant("norm1");
  ValueId h = g.Delegate("norm1", std::nullopt, {x, norm1})[0];  // result named "norm1" too
  ValueId t1 = g.Delegate("t", std::nullopt, {h})[0];
  ValueId t2 = g.Delegate("t", std::nullopt, {t1})[0];
  ValueId t3 = g.Delegate("t", std::nullopt, {t2})[0];
  g.Output(t3);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  ASSERT_EQ(plan.diagnostics.size(), 2u);
  EXPECT_EQ(plan.diagnostics[0].severity, Diagnostic::Severity::kWarning);
  EXPECT_EQ(plan.diagnostics[0].message,
            "method \"forward\": values 1 (\"norm1\", constant) and 2 (\"norm1\", intermediate) "
            "share a name; copies and diagnostics that name it are ambiguous");
  EXPECT_THAT(plan.diagnostics[0].values, ElementsAre(norm1, h));
  EXPECT_EQ(plan.diagnostics[1].message,
            "method \"forward\": values 3 (\"t\", intermediate), 4 (\"t\", intermediate) and 5 "
            "(\"t\", intermediate) share a name; copies and diagnostics that name it are "
            "ambiguous");
  EXPECT_THAT(plan.diagnostics[1].values, ElementsAre(t1, t2, t3));
}

TEST(PlacementTest, ManyValuesSharingANameAreCountedNotAllListed) {
  GraphSketch g;
  ValueId v = g.Input("x");
  std::vector<ValueId> relus;
  for (int i = 0; i < 10; ++i) relus.push_back(v = g.Host("relu", {v}));
  g.Output(v);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  const std::vector<Diagnostic> warnings = NameWarnings(plan);
  ASSERT_EQ(warnings.size(), 1u);
  const Diagnostic& d = warnings[0];
  EXPECT_EQ(d.message,
            "method \"forward\": values 1 (\"relu\", intermediate), 2 (\"relu\", intermediate), 3 "
            "(\"relu\", intermediate) and 7 more share a name; copies and diagnostics that name it "
            "are ambiguous");
  EXPECT_EQ(d.values, relus);
}

TEST(PlacementTest, SharedNamesAmongManyAreFoundExactlyInOrderOfTheirFirstValue) {
  // 20,000 values: far more names than the finder's bitmap tells apart, so many distinct names
  // land on one bit and must not be reported. Value 0 is the input; the relus are 1 to 20,000.
  // "a" is shared by values 100 and 19,000, "b" by 150 and 160: "a" is listed first, though
  // "b" is found shared first.
  GraphSketch g;
  ValueId v = g.Input("x");
  for (int i = 1; i <= 20000; ++i) {
    std::string name = absl::StrCat("relu_", i);
    if (i == 100 || i == 19000) name = "a";
    if (i == 150 || i == 160) name = "b";
    v = g.Host(name, {v});
  }
  g.Output(v);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  const std::vector<Diagnostic> warnings = NameWarnings(plan);
  ASSERT_EQ(warnings.size(), 2u) << FormatDiagnostics(plan.diagnostics);
  EXPECT_THAT(warnings[0].values, ElementsAre(100, 19000));
  EXPECT_THAT(warnings[0].message, HasSubstr("values 100 (\"a\", intermediate) and 19000"));
  EXPECT_THAT(warnings[1].values, ElementsAre(150, 160));
}

TEST(PlacementTest, UniqueNamesGiveNoNameWarning) {
  GraphSketch g;
  ValueId x = g.Input("x");
  ValueId w = g.Constant("norm1_weight");
  g.Output(g.Delegate("norm1", "cuda:0", {x, w})[0]);
  PlacementInput in = g.Build();
  ASSERT_OK_AND_ASSIGN(PlacementPlan plan, PlaceMethod(in, SimOptions()));
  EXPECT_TRUE(NameWarnings(plan).empty()) << FormatDiagnostics(plan.diagnostics);
}

}  // namespace
}  // namespace ferry
