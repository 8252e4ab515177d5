// The exporter's placement audited against Ferry's (loader/plan/exporter_audit.h), on sketched
// methods placed by PlaceMethod with cuda:0 run as sim:0: each test gives the exporter's copies or
// annotations, and the findings expected follow from the copies docs/placement.md's rules make
// for the method. (Programs written as .pte files and run are audited end to end in
// tests/e2e/executorch_audit_test.cc.)
#include "ferry/loader/plan/exporter_audit.h"

#include <string>
#include <vector>

#include "ferry/loader/plan/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/graph_sketch.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::GraphSketch;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Kind = AuditFinding::Kind;

PlacementOptions Options() {
  PlacementOptions o;
  o.present_devices = {Device::Sim(0)};
  o.device_map[Device::Cuda(0)] = Device::Sim(0);
  return o;
}

std::vector<AuditFinding> Audit(const GraphSketch& g) {
  absl::StatusOr<PlacementPlan> plan = PlaceMethod(g.Build(), Options());
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  return AuditExporterPlacement(g.method(), *plan, Options().device_map);
}

auto Finding(Kind kind, ValueId value, const std::string& text) {
  return AllOf(Field(&AuditFinding::kind, kind), Field(&AuditFinding::value, value),
               Field(&AuditFinding::message, HasSubstr(text)));
}

ExporterCopy Copy(int32_t instruction, bool to_device, ValueId value) {
  ExporterCopy c;
  c.instruction = instruction;
  c.to_device = to_device;
  c.value = value;
  return c;
}

// D0(a, b) on cuda:0, returned: Ferry copies a and b to sim:0 and D0 back, per call.
TEST(ExporterAudit, TheSameCopiesAsFerrysFindNothing) {
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b");
  ValueId d = g.Delegate("D0", "cuda:0", {a, b})[0];
  g.Output(d);
  g.mutable_method().exporter_copies = {Copy(0, true, a), Copy(1, true, b), Copy(3, false, d)};
  EXPECT_THAT(Audit(g), IsEmpty());
}

TEST(ExporterAudit, CopiesTheExporterLeftOutAreFound) {
  GraphSketch g;
  ValueId a = g.Input("a"), b = g.Input("b");
  ValueId d = g.Delegate("D0", "cuda:0", {a, b})[0];
  g.Output(d);
  g.mutable_method().exporter_copies = {Copy(0, true, a)};
  EXPECT_THAT(Audit(g),
              ElementsAre(Finding(Kind::kMissingCopy, b,
                                  "Ferry copies value \"b\" from host to sim:0"),
                          Finding(Kind::kMissingResultCopy, d,
                                  "the only result value \"D0\" of node 0 (D0) on sim:0 has no "
                                  "device-to-host copy")));
}

TEST(ExporterAudit, ACopyFerryDoesNotMakeIsUnneeded) {
  // a is read on the host only: the exporter's copy of it to a device is one Ferry does not make.
  GraphSketch g;
  ValueId a = g.Input("a");
  g.Output(g.Host("relu", {a}));
  g.mutable_method().exporter_copies = {Copy(4, true, a)};
  EXPECT_THAT(Audit(g), ElementsAre(Finding(Kind::kUnneededCopy, a,
                                            "instruction 4: (et_copy::_h2d_copy.out) the "
                                            "exporter copies value \"a\" to a device; Ferry's "
                                            "plan does not copy it")));
}

TEST(ExporterAudit, ACopyIntoACpuDelegateIsNamedAsSuch) {
  GraphSketch g;
  ValueId a = g.Input("a");
  g.Output(g.Delegate("C", "cpu", {a})[0]);
  g.mutable_method().exporter_copies = {Copy(0, true, a)};
  EXPECT_THAT(Audit(g), ElementsAre(Finding(Kind::kCopyAroundHostDelegate, a,
                                            "a delegate whose target_device is cpu; Ferry "
                                            "copies nothing")));
}

TEST(ExporterAudit, AHostConstantHandedToADeviceDelegateIsNamed) {
  // w is copied to sim:0 once, at load; the exporter hands the delegate host memory.
  GraphSketch g;
  ValueId a = g.Input("a");
  ValueId w = g.Constant("w");
  ValueId d = g.Delegate("D0", "cuda:0", {a, w})[0];
  g.Output(d);
  g.mutable_method().exporter_copies = {Copy(0, true, a), Copy(2, false, d)};
  EXPECT_THAT(Audit(g), ElementsAre(Finding(Kind::kHostConstantToDevice, w,
                                            "the constant value \"w\" is handed to node 0 (D0) "
                                            "on sim:0 as host memory")));
}

TEST(ExporterAudit, AnAnnotatedTensorReadOnAnotherDeviceIsAMismatch) {
  GraphSketch g;
  ValueId a = g.Input("a");
  g.Output(g.Host("relu", {a}));
  g.mutable_method().exporter_devices = {ExporterDevice{a, Device::Cuda(0)}};
  EXPECT_THAT(Audit(g), ElementsAre(Finding(Kind::kDeviceMismatch, a,
                                            "value \"a\" is annotated on cuda:0 (as sim:0) but "
                                            "read by node 0 (relu) on host")));
}

TEST(ExporterAudit, KindNames) {
  EXPECT_STREQ(AuditFindingKindName(Kind::kUnneededCopy), "unneeded copy");
  EXPECT_STREQ(AuditFindingKindName(Kind::kMissingCopy), "missing copy");
  EXPECT_STREQ(AuditFindingKindName(Kind::kArenaDeviceMismatch), "arena device mismatch");
}

}  // namespace
}  // namespace ferry
