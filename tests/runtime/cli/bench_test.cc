// `ferry bench` (runtime/cli/bench.cc): the table, the JSON (valid, escaped, its counters in
// agreement), and a program of several methods measured method by method.
#include <cstdio>
#include <string>
#include <vector>

#include "ferry/runtime/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/cli/example_cli.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/json_check.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/two_method_program.h"

namespace ferry::cli {
namespace {

using ::ferry::testing::IsValidJson;
using ::testing::HasSubstr;
using ::testing::Not;
using Result = ::ferry::testing::CliResult;
using ::ferry::testing::RunCli;

TEST_F(CliTest, BenchJsonHasTheFieldsAndCountersAgree) {
  Options o = Base("bench");
  o.json = true;
  Result r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* field :
       {"\"load_us\"", "\"verify\"", "\"placement\"", "\"planning\"", "\"materialization\"",
        "\"latency_us\"", "\"min\"", "\"median\"", "\"p99\"", "\"copies_per_call\"",
        "\"bytes_per_call\"", "\"constant_bytes_at_load\"", "\"arenas\"",
        "\"lower_bound_bytes\"", "\"sim_guard\""}) {
    EXPECT_THAT(r.out, HasSubstr(field));
  }
  std::string where;
  EXPECT_TRUE(IsValidJson(r.out, &where)) << where << "\n" << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"counters_agree\": true"));
  EXPECT_THAT(r.out, HasSubstr("\"manifest\": 4, \"counted\": 4.000"));
}

// A path is the user's text: quotes and backslashes in it are escaped in the JSON, for one method
// and for several.
TEST(CliBenchTest, JsonEscapesTheProgramPath) {
  ProgramBuilder pb;
  ::ferry::testing::AddTwoMethods(pb);
  const std::string path = TempPath("bench \"quoted\" \\ name.ferry");
  ASSERT_OK(pb.WriteFile(path));
  for (const bool one_method : {true, false}) {
    Options options;
    options.command = "bench";
    options.program = path;
    options.calls = 5;
    options.json = true;
    if (one_method) {
      options.method = "decode";
      options.method_given = true;
    }
    Result r = RunCli(options);
    ASSERT_EQ(r.code, 0) << r.err;
    std::string where;
    EXPECT_TRUE(IsValidJson(r.out, &where)) << where << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("bench \\\"quoted\\\" \\\\ name.ferry\""));
  }
  std::remove(path.c_str());
}

TEST(JsonCheckTest, AcceptsJsonAndRefusesWhatIsNot) {
  EXPECT_TRUE(IsValidJson(R"({"a": [1, -2.5e3, true, null, "x\"y"], "b": {}})"));
  EXPECT_FALSE(IsValidJson(R"({"a": 1,})"));      // trailing comma
  EXPECT_FALSE(IsValidJson(R"({"a": nan})"));     // not a number
  EXPECT_FALSE(IsValidJson(R"({"a": 01})"));      // leading zero
  EXPECT_FALSE(IsValidJson(R"({"a": "x)"));       // unterminated
  EXPECT_FALSE(IsValidJson(R"({"a": 1} {"b": 2})"));
}

TEST_F(CliTest, BenchTable) {
  Result r = RunCli(Base("bench"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("latency"));
  EXPECT_THAT(r.out, HasSubstr("copies per call"));
  EXPECT_THAT(r.out, Not(HasSubstr("MISMATCH")));
}

TEST(CliBenchTest, AProgramWithSeveralMethodsIsMeasuredMethodByMethodWithItsMemoryOnce) {
  ProgramBuilder pb;
  ::ferry::testing::AddTwoMethods(pb);
  const std::string path = TempPath("two_methods_bench.ferry");
  ASSERT_OK(pb.WriteFile(path));
  Options options;
  options.command = "bench";
  options.program = path;
  options.calls = 20;
  options.json = true;
  Result r = RunCli(options);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(IsValidJson(r.out)) << r.out;
  // w (16 bytes) made once, by the first method; acc (16 bytes) one buffer for both.
  EXPECT_THAT(r.out, HasSubstr("\"constant_bytes_at_load\": 16,"));
  EXPECT_THAT(r.out, HasSubstr("\"program_replica_bytes\": {\"sim:0\": 16}"));
  EXPECT_THAT(r.out, HasSubstr("\"program_shared_state_bytes\": {\"sim:0\": 16}"));
  const size_t prefill = r.out.find("{\"method\": \"prefill\"");
  const size_t decode = r.out.find("{\"method\": \"decode\"");
  ASSERT_NE(prefill, std::string::npos) << r.out;
  ASSERT_NE(decode, std::string::npos) << r.out;
  const std::string first = r.out.substr(prefill, decode - prefill);
  const std::string second = r.out.substr(decode);
  EXPECT_THAT(first, HasSubstr("\"constant_bytes_at_load\": 16,"));
  EXPECT_THAT(second, HasSubstr("\"constant_bytes_at_load\": 0,"));
  EXPECT_THAT(second, HasSubstr("\"shared_constant_bytes\": 16,"));
  // Per call: x goes to the device and the result comes back, in the manifest and counted; no
  // copy of w or acc.
  for (const std::string& m : {first, second}) {
    EXPECT_THAT(m, HasSubstr("\"copies_per_call\": {\"manifest\": 2, \"counted\": 2.000, "
                             "\"of_constants_and_state\": 0}"));
    EXPECT_THAT(m, HasSubstr("\"calls\": 20"));
  }
  // The table: each method, then the program.
  options.json = false;
  r = RunCli(options);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ferry bench: method \"prefill\""));
  EXPECT_THAT(r.out, HasSubstr("ferry bench: method \"decode\""));
  EXPECT_THAT(r.out, HasSubstr("program: 2 methods loaded together"));
  EXPECT_THAT(r.out, HasSubstr("constant replicas  sim:0 16 B, made once"));
  // --method: that one alone, with the program's memory beside it.
  options.json = true;
  options.method = "decode";
  options.method_given = true;
  r = RunCli(options);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(IsValidJson(r.out)) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("prefill")));
  EXPECT_THAT(r.out, HasSubstr("\"program_replica_bytes\": {\"sim:0\": 16}"));
  std::remove(path.c_str());
}

// --profile: every step of the measured calls, by total time, in the table and in JSON.
TEST_F(CliTest, BenchProfileListsEveryStepOncePerCall) {
  Options o = Base("bench");
  o.profile = true;
  o.load.record_trace = true;  // as ParseArgs sets it with --profile
  testing::CliResult r = testing::RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("profile: 20 calls"));
  EXPECT_THAT(r.out, HasSubstr("node 1 (attention)"));
  EXPECT_THAT(r.out, HasSubstr("copy 9 d2h \"attention\""));
  o.json = true;
  r = testing::RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string where;
  ASSERT_TRUE(testing::IsValidJson(r.out, &where)) << where << r.out;
  // 10 nodes, 4 per-call copies and 1 synchronization, each counted once per measured call.
  size_t rows = 0;
  for (size_t at = 0; (at = r.out.find("\"count\": 20,", at)) != std::string::npos; ++at) ++rows;
  EXPECT_EQ(rows, 15u);
  EXPECT_THAT(r.out, HasSubstr("\"profile\": {\"calls\": 20"));
  // Without --profile, no profile.
  o.profile = false;
  o.load.record_trace = false;
  r = testing::RunCli(o);
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("\"profile\"")));
}

}  // namespace
}  // namespace ferry::cli
