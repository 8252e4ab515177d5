// `ferry verify` (runtime/cli/verify.cc), and `run` and `plan` of a bundled program: a bundle of
// tests/testing/bundled_sample.h's program written to a file, with right and wrong cases; exit
// status, one line per case, the summary, and JSON that parses.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/runtime/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/bundle_builder.h"
#include "tests/testing/bundled_sample.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/json_check.h"
#include "tests/testing/trace_json.h"

namespace ferry::cli {
namespace {

using ::ferry::testing::BuildBundle;
using ::ferry::testing::BundleCase;
using ::ferry::testing::BundleSuite;
using ::ferry::testing::FloatValue;
using ::ferry::testing::IntScalar;
using ::ferry::testing::RightCount;
using ::ferry::testing::RightForward;
using ::ferry::testing::RightSize;
using ::ferry::testing::RunCli;
using ::ferry::testing::SampleBundlePte;
using ::ferry::testing::SampleForward;
using ::ferry::testing::SampleX;
using ::ferry::testing::SampleY;
using ::testing::HasSubstr;
using ::testing::Not;

class VerifyCliTest : public ::testing::Test {
 protected:
  // Writes a bundle of the sample program with `suites` to a file of this test's own.
  std::string Write(const std::vector<BundleSuite>& suites) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = absl::StrCat(::testing::TempDir(), "/", info->name(), ".bpte");
    const std::vector<uint8_t> bytes = BuildBundle(SampleBundlePte(), suites);
    std::ofstream f(path_, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  Options Verify(const std::string& path) {
    Options o;
    o.command = "verify";
    o.program = path;
    return o;
  }
  std::string path_;
};

BundleCase WrongForward() {
  BundleCase c = RightForward();
  std::vector<float> expected = SampleForward(SampleX(), SampleY());
  expected[2] += 1.0f;  // [0, 2]: 0.25 - 8 = -7.75, expected -6.75
  c.expected[0] = FloatValue({2, 3}, expected);
  return c;
}

TEST_F(VerifyCliTest, AllPassingCasesExitZero) {
  const std::string path =
      Write({{"forward", {RightForward()}}, {"count", {RightCount()}}, {"size", {RightSize()}}});
  testing::CliResult r = RunCli(Verify(path));
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("forward case 0: PASS"));
  EXPECT_THAT(r.out, HasSubstr("count case 0: PASS"));
  EXPECT_THAT(r.out, HasSubstr("size case 0: PASS"));
  EXPECT_THAT(r.out, HasSubstr("verify: 3 cases, 3 passed, 0 failed, 0 could not run"));
}

TEST_F(VerifyCliTest, AFailingCaseIsNamedAndExitsOne) {
  const std::string path =
      Write({{"forward", {RightForward(), WrongForward()}}, {"size", {{{}, {IntScalar(6)}}}}});
  testing::CliResult r = RunCli(Verify(path));
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.out, HasSubstr("forward case 0: PASS"));
  EXPECT_THAT(r.out, HasSubstr("forward case 1: FAIL (max abs error 1, max rel error 0.148; 1 "
                               "element differs; first: output 0 [0, 2]: -7.75, expected -6.75)"));
  EXPECT_THAT(r.out, HasSubstr("size case 0: FAIL"));
  EXPECT_THAT(r.out, HasSubstr("3 cases, 1 passed, 2 failed, 0 could not run"));
  // Only one method's suite.
  Options o = Verify(path);
  o.method = "forward";
  o.method_given = true;
  r = RunCli(o);
  EXPECT_THAT(r.out, Not(HasSubstr("size case")));
  // A tolerance wide enough passes the float case; never the int.
  o.tolerance.atol = 1.5;
  r = RunCli(o);
  EXPECT_EQ(r.code, kExitOk) << r.out;
}

TEST_F(VerifyCliTest, ACaseThatCannotRunExitsOneSayingWhy) {
  BundleCase short_case = RightForward();
  short_case.inputs.pop_back();
  const std::string path = Write({{"forward", {short_case}}});
  testing::CliResult r = RunCli(Verify(path));
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.out, HasSubstr("forward case 0: ERROR: the test case has 1 inputs"));
  EXPECT_THAT(r.out, HasSubstr("0 passed, 0 failed, 1 could not run"));
}

TEST_F(VerifyCliTest, JsonCarriesEveryCaseAndTheSummary) {
  const std::string path = Write({{"forward", {RightForward(), WrongForward()}}});
  Options o = Verify(path);
  o.json = true;
  testing::CliResult r = RunCli(o);
  EXPECT_EQ(r.code, kExitError);
  std::string where;
  EXPECT_TRUE(testing::IsValidJson(r.out, &where)) << where << "\n" << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"result\": \"pass\""));
  EXPECT_THAT(r.out, HasSubstr("\"result\": \"fail\""));
  EXPECT_THAT(r.out, HasSubstr("\"first_mismatch\": {\"output\": 0, \"element\": 2, \"index\": "
                               "[0, 2], \"actual\": -7.75, \"expected\": -6.75}"));
  EXPECT_THAT(r.out, HasSubstr("\"summary\": {\"cases\": 2, \"passed\": 1, \"failed\": 1, "
                               "\"errors\": 0}"));
}

TEST_F(VerifyCliTest, ProgramsWithoutCasesAndBrokenBundlesAreRefused) {
  Options o = Verify(Write({}));
  testing::CliResult r = RunCli(o);
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.err, HasSubstr("carries no test cases"));
  // A bundle cut short.
  std::vector<uint8_t> bytes = BuildBundle(SampleBundlePte(), {{"forward", {RightForward()}}});
  bytes.resize(bytes.size() / 2);
  {
    std::ofstream f(path_, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  }
  r = RunCli(o);
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.err, HasSubstr("bundled program: "));
}

TEST_F(VerifyCliTest, RunAndPlanTakeABundleLikeItsProgram) {
  const std::string path = Write({{"forward", {RightForward()}}});
  Options o = Verify(path);
  o.command = "run";
  o.calls = 1;
  testing::CliResult r = RunCli(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  // The first case's inputs: x + 2y = [2.5, 0, -7.75, 3.25, 14, 11.5], sum 23.5.
  EXPECT_THAT(r.out, HasSubstr("sum 23.5 min -7.75 max 14  [2.5, 0, -7.75, 3.25, 14, 11.5]"));
  // --input replaces them.
  o.inputs["0"] = {1};
  o.inputs["1"] = {1};
  r = RunCli(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sum 18 min 3 max 3"));
  o.inputs.clear();
  o.command = "plan";
  r = RunCli(o);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("forward"));
  // bench measures the program inside, like a .pte.
  o.command = "bench";
  o.method = "forward";
  o.method_given = true;
  o.calls = 5;
  o.warmup = 1;
  r = RunCli(o);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("method \"forward\""));
  EXPECT_THAT(r.out, HasSubstr("5 calls"));
}

TEST_F(VerifyCliTest, TheCommandLineParses) {
  Options o;
  const char* no_program[] = {"ferry", "verify"};
  std::FILE* sink = std::tmpfile();
  EXPECT_EQ(ParseArgs(2, no_program, &o, sink, sink), kExitUsage);
  const char* bad_rtol[] = {"ferry", "verify", "x.bpte", "--rtol", "abc"};
  EXPECT_EQ(ParseArgs(5, bad_rtol, &o, sink, sink), kExitUsage);
  const char* negative[] = {"ferry", "verify", "x.bpte", "--atol", "-1"};
  EXPECT_EQ(ParseArgs(5, negative, &o, sink, sink), kExitUsage);
  const char* not_for_run[] = {"ferry", "run", "x.bpte", "--rtol", "1"};
  EXPECT_EQ(ParseArgs(5, not_for_run, &o, sink, sink), kExitUsage);
  const char* good[] = {"ferry", "verify", "x.bpte", "--rtol", "1e-3", "--atol", "0", "--json"};
  Options parsed;
  EXPECT_EQ(ParseArgs(8, good, &parsed, sink, sink), -1);
  EXPECT_EQ(parsed.tolerance.rtol, 1e-3);
  EXPECT_EQ(parsed.tolerance.atol, 0);
  EXPECT_TRUE(parsed.json);
  EXPECT_EQ(parsed.command, "verify");
  std::fclose(sink);
}

// A .pte (here inside a bundle) traces like a Ferry program: its two add nodes once per call.
TEST_F(VerifyCliTest, RunTracesAnExecuTorchProgram) {
  Options o = Verify(Write({{"forward", {RightForward()}}}));
  o.command = "run";
  o.calls = 2;
  o.trace_path = path_ + ".json";
  o.load.record_trace = true;
  testing::CliResult r = RunCli(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const std::string json = ::ferry::testing::ReadTextFile(o.trace_path);
  ASSERT_FALSE(json.empty()) << o.trace_path;
  std::remove(o.trace_path.c_str());
  std::string where;
  ASSERT_TRUE(testing::IsValidJson(json, &where)) << where;
  auto counts = testing::CountTraceEvents(json);
  EXPECT_EQ((counts[{"node", "host"}]), 2 * 2);
  EXPECT_EQ((counts[{"call", "calls"}]), 2);
  EXPECT_THAT(json, HasSubstr("\"op\": \"add\""));
}

}  // namespace
}  // namespace ferry::cli
