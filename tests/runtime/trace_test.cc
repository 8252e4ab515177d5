// Timelines (LoadOptions::record_trace, runtime/trace.h) of the decoder-block example: every
// step a call runs is recorded once, on the lane of its device, in the plan's order; the load's
// phases and copies come with it; a failed call is recorded up to its failing step; and the
// Chrome trace and the profile carry exactly those, with counts checked against the manifest.
#include "ferry/runtime/trace.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/example/decoder_block.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/json_check.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/trace_json.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

struct Loaded {
  std::unique_ptr<Runtime> rt = std::make_unique<Runtime>();
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
  std::vector<float> x = std::vector<float>(example::kModel, 0.25f);
  std::vector<int64_t> pos = {3};
  std::vector<float> mask = std::vector<float>(example::kSeq, 0.0f);
};

// The example loaded with `record_trace`, its inputs bound.
std::unique_ptr<Loaded> LoadExample(bool record_trace) {
  auto l = std::make_unique<Loaded>();
  absl::StatusOr<std::vector<uint8_t>> bytes = example::BuildDecoderProgram();
  EXPECT_OK(bytes.status());
  l->program = std::move(Program::FromBytes(*bytes)).value();
  LoadOptions options;
  options.record_trace = record_trace;
  l->method = std::move(l->rt->LoadMethod(*l->program, "forward", options)).value();
  EXPECT_OK(
      l->method->SetInput(0, TensorView::Host(DType::kFloat32, {1, example::kModel}, l->x.data())));
  EXPECT_OK(l->method->SetInput(1, TensorView::Host(DType::kInt64, {1}, l->pos.data())));
  EXPECT_OK(l->method->SetInput(
      2, TensorView::Host(DType::kFloat32, {1, example::kSeq}, l->mask.data())));
  return l;
}

TEST(Trace, EveryNodeAndPerCallCopyIsAStepOnItsDevice) {
  auto l = LoadExample(true);
  const Method& m = *l->method;
  const PlacementPlan& p = m.plan().placement;
  std::vector<int> node_seen(m.def().nodes.size(), 0);
  std::vector<int> copy_seen(p.copies.size(), 0);
  for (const TraceStep& s : m.trace_steps()) {
    if (s.kind == TraceStep::Kind::kNode) {
      ++node_seen[s.node];
      EXPECT_EQ(s.device, p.nodes[s.node].device) << s.node;
      EXPECT_EQ(s.delegate, m.def().nodes[s.node].kind == NodeKind::kDelegate);
    } else if (s.kind == TraceStep::Kind::kCopy) {
      ++copy_seen[s.copy];
      const CopyStep& c = p.copies[s.copy];
      EXPECT_EQ(c.timing, CopyTiming::kPerCall);
      // The device side: the destination of h2d, the source of d2h.
      EXPECT_EQ(s.device,
                c.direction == CopyDirection::kDeviceToHost ? c.src_device : c.dst_device);
      EXPECT_FALSE(s.device.is_host());
    } else {
      EXPECT_FALSE(s.device.is_host());  // a synchronization waits for a device
    }
  }
  for (size_t n = 0; n < node_seen.size(); ++n) EXPECT_EQ(node_seen[n], 1) << "node " << n;
  int per_call = 0;
  for (size_t c = 0; c < p.copies.size(); ++c) {
    EXPECT_EQ(copy_seen[c], p.copies[c].timing == CopyTiming::kPerCall ? 1 : 0) << "copy " << c;
    per_call += copy_seen[c];
  }
  EXPECT_EQ(per_call, p.per_call_copies());
  EXPECT_GT(per_call, 0);  // the example moves its attention's inputs to sim:0 and back
}

TEST(Trace, ACallRecordsEveryStepInOrder) {
  auto l = LoadExample(true);
  EXPECT_TRUE(l->method->last_trace().empty());  // before any call
  ASSERT_OK(l->method->Execute());
  const absl::Span<const TraceSpan> spans = l->method->last_trace();
  ASSERT_EQ(spans.size(), l->method->trace_steps().size());
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_LE(spans[i].start_ns, spans[i].end_ns) << i;
    if (i > 0) {
      EXPECT_LE(spans[i - 1].end_ns, spans[i].start_ns) << i;
    }
  }
  const int64_t first_end = spans.back().end_ns;
  ASSERT_OK(l->method->Execute());  // overwritten, later
  EXPECT_GT(l->method->last_trace().front().start_ns, first_end);
}

TEST(Trace, AFailedCallIsRecordedUpToItsFailingStep) {
  auto l = LoadExample(true);
  l->pos[0] = 99;  // outside the cache: the attention delegate refuses it
  absl::Status s = l->method->Execute();
  ASSERT_FALSE(s.ok());
  const absl::Span<const TraceSpan> spans = l->method->last_trace();
  ASSERT_FALSE(spans.empty());
  ASSERT_LT(spans.size(), l->method->trace_steps().size());
  const TraceStep& last = l->method->trace_steps()[spans.size() - 1];
  ASSERT_EQ(last.kind, TraceStep::Kind::kNode);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("node ", last.node, " (",
                                                  l->method->def().nodes[last.node].name, ")")));
}

TEST(Trace, LoadPhasesAndLoadTimeCopiesAreRecorded) {
  auto l = LoadExample(true);
  const MethodPlan& plan = l->method->plan();
  std::vector<std::string> phases;
  int copies = 0;
  for (const LoadEvent& e : plan.load_events) {
    EXPECT_LE(e.span.start_ns, e.span.end_ns) << e.name;
    if (e.copy >= 0) {
      ++copies;
      EXPECT_EQ(plan.placement.copies[e.copy].timing, CopyTiming::kOnce) << e.name;
      EXPECT_THAT(e.name,
                  HasSubstr(plan.placement.copies[e.copy].direction == CopyDirection::kHostToDevice
                                ? "copy h2d \""
                                : "copy "));
    } else {
      phases.push_back(e.name);
    }
  }
  EXPECT_EQ(copies, static_cast<int>(plan.placement.load_copies.size()));
  EXPECT_GT(copies, 0);  // the attention's weights go to sim:0 once
  EXPECT_THAT(phases, ::testing::Contains("phase: Place"));
  EXPECT_THAT(phases, ::testing::Contains("phase: Allocate (arenas and constant regions)"));
  EXPECT_THAT(phases, ::testing::Contains("phase: Materialize (load-time copies)"));
  EXPECT_EQ(phases.size(), 13u);
}

TEST(Trace, NothingIsRecordedWithoutTheOption) {
  auto l = LoadExample(false);
  ASSERT_OK(l->method->Execute());
  EXPECT_TRUE(l->method->trace_steps().empty());
  EXPECT_TRUE(l->method->last_trace().empty());
  EXPECT_TRUE(l->method->plan().load_events.empty());
  TraceRecorder trace;
  trace.AddLoad(*l->method);
  trace.AddCall(*l->method);
  EXPECT_EQ(trace.num_events(), 0u);
}

TEST(Trace, TheChromeTraceHoldsEveryStepOfEveryCallOnItsLane) {
  auto l = LoadExample(true);
  TraceRecorder trace;
  trace.AddLoad(*l->method);
  constexpr int kCalls = 3;
  for (int c = 0; c < kCalls; ++c) {
    ASSERT_OK(l->method->Execute());
    trace.AddCall(*l->method);
  }
  const std::string json = trace.ToJson();
  std::string where;
  ASSERT_TRUE(testing::IsValidJson(json, &where)) << where;
  const Method& m = *l->method;
  const PlacementPlan& p = m.plan().placement;
  int host_nodes = 0, device_nodes = 0, syncs = 0;
  for (const TraceStep& s : m.trace_steps()) {
    if (s.kind == TraceStep::Kind::kNode) {
      (s.device.is_host() ? host_nodes : device_nodes)++;
    } else if (s.kind == TraceStep::Kind::kSync) {
      ++syncs;
    }
  }
  // The example: its attention on cuda:0 (sim:0 here), the rest on the host.
  const std::string device_lane = "cuda:0 (as sim:0)";
  auto counts = testing::CountTraceEvents(json);
  EXPECT_EQ((counts[{"node", "host"}]), kCalls * host_nodes);
  EXPECT_EQ((counts[{"delegate", device_lane}]), kCalls * device_nodes);
  EXPECT_EQ((counts[{"copy", device_lane}]), kCalls * p.per_call_copies());
  EXPECT_EQ((counts[{"sync", device_lane}]), kCalls * syncs);
  EXPECT_EQ((counts[{"call", "calls"}]), kCalls);
  EXPECT_EQ((counts[{"load copy", "load"}]), static_cast<int>(p.load_copies.size()));
  EXPECT_EQ((counts[{"load phase", "load"}]), 13);
  EXPECT_EQ(host_nodes + device_nodes, static_cast<int>(m.def().nodes.size()));
  // A copy carries its value, bytes and reason.
  const auto first_copy =
      std::find_if(m.trace_steps().begin(), m.trace_steps().end(),
                   [](const TraceStep& s) { return s.kind == TraceStep::Kind::kCopy; });
  ASSERT_NE(first_copy, m.trace_steps().end());
  const CopyStep& c = p.copies[first_copy->copy];
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"value\": \"", m.def().values[c.value].name,
                                           "\", \"bytes\": ", c.bytes)));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"reason\": \"", c.reason, "\"")));
  EXPECT_THAT(json, HasSubstr("\"clock\": \"host steady clock"));
}

TEST(Trace, TheRecorderStopsAtItsEventLimitAndSaysSo) {
  auto l = LoadExample(true);
  const size_t per_call = l->method->trace_steps().size() + 1;
  TraceRecorder trace(/*max_events=*/2 * per_call);
  for (int c = 0; c < 5; ++c) {
    ASSERT_OK(l->method->Execute());
    trace.AddCall(*l->method);
  }
  EXPECT_EQ(trace.num_events(), 2 * per_call);
  EXPECT_EQ(trace.calls_left_out(), 3u);
  EXPECT_THAT(trace.ToJson(), HasSubstr("\"truncated\": true, \"calls_left_out\": 3"));
}

TEST(Trace, WritingToAFolderThatIsNotThereNamesTheFile) {
  TraceRecorder trace;
  EXPECT_THAT(trace.WriteFile("/nonexistent-folder/trace.json"),
              testing::StatusIs(absl::StatusCode::kPermissionDenied,
                                HasSubstr("/nonexistent-folder/trace.json")));
}

TEST(StepProfile, EveryStepOnceACallSortedByTotal) {
  auto l = LoadExample(true);
  StepProfile profile;
  constexpr int kCalls = 4;
  for (int c = 0; c < kCalls; ++c) {
    ASSERT_OK(l->method->Execute());
    profile.Add(*l->method);
  }
  EXPECT_EQ(profile.calls(), kCalls);
  const std::vector<ProfileRow> rows = profile.Rows();
  ASSERT_EQ(rows.size(), l->method->trace_steps().size());
  double share = 0;
  int copies = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].count, kCalls) << rows[i].name;
    EXPECT_NEAR(rows[i].mean_us * kCalls, rows[i].total_us, 1e-6);
    if (i > 0) {
      EXPECT_GE(rows[i - 1].total_us, rows[i].total_us);
    }
    share += rows[i].share;
    copies += rows[i].kind == "copy";
  }
  EXPECT_EQ(copies, l->method->plan().placement.per_call_copies());
  EXPECT_LE(share, 1.0 + 1e-9);  // the steps' time is inside the calls'
  EXPECT_GT(share, 0.0);
}

}  // namespace
}  // namespace ferry
