// `ferry plan` (runtime/cli/plan.cc): the manifest and arenas as text, the DOT graph (rendered by
// Graphviz where it is installed), and a program of several methods shown method by method.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/runtime/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/cli/example_cli.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/two_method_program.h"

namespace ferry::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Result = ::ferry::testing::CliResult;
using ::ferry::testing::RunCli;

TEST_F(CliTest, PlanPrintsManifestAndArenas) {
  Result r = RunCli(Base("plan"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("copies: "));
  EXPECT_THAT(r.out, HasSubstr("once"));
  EXPECT_THAT(r.out, HasSubstr("per call"));
  EXPECT_THAT(r.out, HasSubstr("cuda:0 (as sim:0)"));
  EXPECT_THAT(r.out, HasSubstr("arenas:"));
  EXPECT_THAT(r.out, HasSubstr("lower bound"));
}

TEST_F(CliTest, PlanDotRendersWithGraphviz) {
  Options o = Base("plan");
  o.dot = true;
  Result r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("digraph"));
  EXPECT_THAT(r.out, HasSubstr("shape=cds"));  // copies are their own vertices
  EXPECT_THAT(r.out, HasSubstr("subgraph cluster_legend"));
  EXPECT_THAT(r.out, HasSubstr("label=\"node on cuda:0 (as sim:0)\""));  // as declared, and where
  if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "Graphviz dot not found";
  std::string dot_path = TempPath("cli_plan.dot");
  std::ofstream(dot_path) << r.out;
  std::string cmd = "dot -Tsvg " + dot_path + " -o " + dot_path + ".svg 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream svg(dot_path + ".svg");
  std::stringstream ss;
  ss << svg.rdbuf();
  EXPECT_THAT(ss.str(), HasSubstr("<svg"));
}

TEST(CliPlanTest, AProgramWithSeveralMethodsShowsEachAndWhatTheyShare) {
  ProgramBuilder pb;
  ::ferry::testing::AddTwoMethods(pb);
  const std::string path = TempPath("two_methods.ferry");
  ASSERT_OK(pb.WriteFile(path));
  Options options;
  options.command = "plan";
  options.program = path;
  Result r = RunCli(options);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("== method \"prefill\" =="));
  EXPECT_THAT(r.out, HasSubstr("== method \"decode\" =="));
  EXPECT_THAT(r.out, HasSubstr("== program: 2 methods loaded together =="));
  // w (16 bytes) once on the device, acc (16 bytes) one buffer there.
  EXPECT_THAT(r.out, HasSubstr("constant replicas, made once and shared by the methods: sim:0 16 B"));
  EXPECT_THAT(r.out, HasSubstr("shared states: sim:0 16 B"));
  EXPECT_THAT(r.out, HasSubstr("replicas made 0 B, shared 16 B, shared states 16 B"));
  // With --method, that method alone.
  options.method = "decode";
  options.method_given = true;
  r = RunCli(options);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("== program")));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ferry::cli
