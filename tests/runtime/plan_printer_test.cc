// The DOT view of a plan: its legend explains every colour, vertex shape and edge style the
// picture uses, and names each device as declared with the device it runs on.
#include "ferry/runtime/plan_printer.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/method_harness.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/two_method_program.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The DOT text split into the legend cluster and the rest (the plan itself).
struct Dot {
  std::string legend, body;
};

Dot Split(const std::string& dot) {
  const std::string open = "  subgraph cluster_legend {";
  const size_t begin = dot.find(open);
  const size_t end = dot.find("\n  }\n", begin);
  if (begin == std::string::npos || end == std::string::npos) return {"", dot};
  return {dot.substr(begin, end - begin), dot.substr(0, begin) + dot.substr(end + 5)};
}

// Each distinct `key=...` attribute (up to the next ',' or ']') on a line of `text`, with the
// shape of that line, e.g. "shape=cds fillcolor=\"#fff5cc\"" for a vertex or "edge color=..."
// for an edge: the styles the text draws.
std::set<std::string> Styles(const std::string& text) {
  std::set<std::string> styles;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    // Statements that draw something: vertices and edges, not defaults or the cluster's label.
    if (line.find('[') == absl::string_view::npos || absl::StartsWith(line, "node [")) continue;
    const bool edge = line.find("->") != absl::string_view::npos;
    std::string style = edge ? "edge" : "vertex";
    for (const char* key : {"shape=", "fillcolor=", "color="}) {
      size_t at = line.find(key);
      // "color=" also matches inside "fillcolor=": take the one at a word start.
      while (at != absl::string_view::npos && at > 0 && line[at - 1] != ' ' &&
             line[at - 1] != '[') {
        at = line.find(key, at + 1);
      }
      if (at == absl::string_view::npos) continue;
      const size_t stop = line.find_first_of(",]", at);
      style += " " + std::string(line.substr(at, stop - at));
    }
    styles.insert(style);
  }
  return styles;
}

// The first line of `text` holding `part`, or "".
std::string LineWith(const std::string& text, const std::string& part) {
  const size_t at = text.find(part);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) + 1;  // npos + 1 == 0 on the first line
  return text.substr(begin, text.find('\n', at) - begin);
}

// The value of a line's fillcolor attribute.
std::string FillColor(const std::string& line) {
  const size_t at = line.find("fillcolor=\"");
  if (at == std::string::npos) return "";
  return line.substr(at + 11, line.find('"', at + 11) - at - 11);
}

// Every style the plan draws appears in the legend, and the legend shows nothing the plan does
// not use (the point and text that carry the legend's edges excepted).
void ExpectLegendExplainsEveryStyle(const std::string& dot) {
  const Dot d = Split(dot);
  ASSERT_FALSE(d.legend.empty()) << dot;
  const std::set<std::string> drawn = Styles(d.body);
  const std::set<std::string> explained = Styles(d.legend);
  for (const std::string& style : drawn) {
    EXPECT_TRUE(explained.count(style)) << "not in the legend: " << style << "\n" << dot;
  }
  for (const std::string& style : explained) {
    if (style == "vertex shape=point" || style == "vertex shape=plaintext") continue;
    EXPECT_TRUE(drawn.count(style)) << "in the legend but not drawn: " << style << "\n" << dot;
  }
}

// Delegates on two devices, host ops, a constant read on a device (copied once), state, copies
// per call in both directions.
void BuildTwoDeviceMethod(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  ValueId k = m.StateF32("k", {2, 2}, {0, 0, 0, 0});
  ValueId t = Call(m, "cuda:0", "t", {a, w});
  ValueId r = m.Op("relu", {t});
  m.Op("add_", {k, r});
  m.Output(Call(m, "cuda:1", "u", {r, k}));
}

TEST(PlanDot, LegendNamesEveryDeviceAsDeclaredWithItsColour) {
  ProgramBuilder pb;
  BuildTwoDeviceMethod(pb);
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  const std::string dot = FormatPlanDot(*method);
  const Dot d = Split(dot);
  // Each device once, as the program declared it and as it runs, each with its own colour, which
  // is the colour of the nodes on it.
  const std::pair<const char*, const char*> devices_and_nodes[] = {
      {"host", "1: relu"}, {"cuda:0 (as sim:0)", "0: t"}, {"cuda:1 (as sim:1)", "3: u"}};
  std::set<std::string> colors;
  for (const auto& [label, node] : devices_and_nodes) {
    const std::string legend_line =
        LineWith(d.legend, std::string("label=\"node on ") + label + "\"");
    ASSERT_FALSE(legend_line.empty()) << label << "\n" << d.legend;
    const std::string color = FillColor(legend_line);
    colors.insert(color);
    EXPECT_EQ(FillColor(LineWith(d.body, std::string("label=\"") + node)), color) << node;
  }
  EXPECT_EQ(colors.size(), 3u);
  ExpectLegendExplainsEveryStyle(dot);
}

TEST(PlanDot, LegendListsOnlyWhatThePlanDraws) {
  // All on the host: no copies, so no copy vertices or copy edges in the legend.
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  m.Output(m.Op("add", {a, w}));
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  const std::string dot = FormatPlanDot(*method);
  const Dot d = Split(dot);
  EXPECT_THAT(d.legend, HasSubstr("node on host"));
  EXPECT_THAT(d.legend, HasSubstr("method input"));
  EXPECT_THAT(d.legend, HasSubstr("constant"));
  EXPECT_THAT(d.legend, HasSubstr("method output"));
  EXPECT_THAT(d.legend, Not(HasSubstr("copy")));
  EXPECT_THAT(d.legend, Not(HasSubstr("state")));
  ExpectLegendExplainsEveryStyle(dot);
}

TEST(PlanDot, NamesWithQuotesAndBackslashesAreEscaped) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a \"quoted\" \\n", DType::kFloat32, {2});
  m.Output(m.Op("relu", {a}));
  MethodHarness h(pb);
  ASSERT_OK_AND_ASSIGN(auto method, h.Load());
  EXPECT_THAT(FormatPlanDot(*method), HasSubstr("label=\"a \\\"quoted\\\" \\\\n\\n"));
}

TEST(ProgramDot, MethodsSideBySideWithTheValuesTheyShareDrawnOnce) {
  ProgramBuilder pb;
  AddTwoMethods(pb, /*own_constants=*/true);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, pb.Build());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  Runtime rt;
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  ASSERT_OK_AND_ASSIGN(auto prefill, loaded->LoadMethod("prefill"));
  ASSERT_OK_AND_ASSIGN(auto decode, loaded->LoadMethod("decode"));
  const std::string dot = FormatProgramDot({prefill.get(), decode.get()});
  const Dot d = Split(dot);
  // One cluster per method, named.
  EXPECT_THAT(d.body, HasSubstr("subgraph cluster_m0 {\n  label=\"method \\\"prefill\\\"\";"));
  EXPECT_THAT(d.body, HasSubstr("subgraph cluster_m1 {\n  label=\"method \\\"decode\\\"\";"));
  // w and acc once each, outside the clusters, with edges into both; each method's own bias in
  // its cluster.
  for (const char* shared : {"w\\nshared constant", "acc\\nshared state"}) {
    const std::string line = LineWith(d.body, shared);
    ASSERT_FALSE(line.empty()) << shared << "\n" << d.body;
    EXPECT_THAT(line, HasSubstr("style=bold"));
    const std::string id(absl::StripLeadingAsciiWhitespace(line).substr(
        0, absl::StripLeadingAsciiWhitespace(line).find(' ')));
    EXPECT_THAT(d.body, HasSubstr("  " + id + " -> m0_")) << shared;
    EXPECT_THAT(d.body, HasSubstr("  " + id + " -> m1_")) << shared;
    EXPECT_EQ(d.body.find(shared), d.body.rfind(shared)) << shared << " drawn twice";
  }
  EXPECT_THAT(d.body, HasSubstr("m0_v"));
  EXPECT_THAT(LineWith(d.body, "prefill_bias\\nconstant"), HasSubstr("m0_v"));
  EXPECT_THAT(LineWith(d.body, "decode_bias\\nconstant"), HasSubstr("m1_v"));
  EXPECT_THAT(d.legend, HasSubstr("shared by the methods"));
  // Braces balance: the clusters are closed.
  EXPECT_EQ(std::count(dot.begin(), dot.end(), '{'), std::count(dot.begin(), dot.end(), '}'));
  ExpectLegendExplainsEveryStyle(dot);
}

}  // namespace
}  // namespace ferry::testing
