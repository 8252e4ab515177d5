// The `ferry` commands on the example program: plan (text and DOT), run, bench (table and JSON),
// and errors for bad input.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/example/decoder_block.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ferry/runtime/cli/commands.h"
#include "tests/testing/json_check.h"
#include "tests/testing/status_matchers.h"

namespace ferry::cli {
namespace {

using ::ferry::testing::IsValidJson;

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int code;
  std::string out, err;
};

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  return s;
}

Result RunCli(Options options) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  Result r;
  r.code = RunCommand(options, out, err);
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  std::fclose(out);
  std::fclose(err);
  return r;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs the tests of this suite in parallel processes, and rewriting a
    // program another process has mapped would pull its pages away (SIGBUS).
    path_ = new std::string(TempPath("cli_example.ferry"));
    absl::StatusOr<std::vector<uint8_t>> bytes = example::BuildDecoderProgram();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    std::ofstream f(*path_, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }
  static void TearDownTestSuite() {
    std::remove(path_->c_str());
    delete path_;
  }
  Options Base(const std::string& command) {
    Options o;
    o.command = command;
    o.program = *path_;
    o.calls = command == "bench" ? 20 : 2;
    o.warmup = 2;
    return o;
  }
  static std::string* path_;
};
std::string* CliTest::path_ = nullptr;

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

TEST_F(CliTest, RunPrintsOutputs) {
  Result r = RunCli(Base("run"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 calls"));
  EXPECT_THAT(r.out, HasSubstr("output 0"));
  EXPECT_THAT(r.out, HasSubstr("float32[1, 64]"));
}

TEST_F(CliTest, RunAcceptsGivenInputs) {
  Options o = Base("run");
  o.inputs["pos"] = {3};
  Result r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  o.inputs["pos"] = {99};  // out of the cache: a run-time error naming the node
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("index_put_"));
  o.inputs.clear();
  o.inputs["nope"] = {1};
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("\"nope\""));
}

TEST_F(CliTest, InputValuesMustFitTheInputsDtype) {
  Options o = Base("run");
  for (double bad : {1.5, 1e30, -1e19, std::nan("")}) {
    o.inputs["pos"] = {bad};
    Result r = RunCli(o);
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_THAT(r.err, HasSubstr("--input pos")) << bad;
    EXPECT_THAT(r.err, HasSubstr("not a whole number in the range of int64")) << bad;
  }
  o.inputs["pos"] = {-0.0};  // whole, and in range
  EXPECT_EQ(RunCli(o).code, 0);
  o.inputs.clear();
  o.inputs["x"] = {1e39};
  Result r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("out of the range of float32"));
}

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

TEST_F(CliTest, BadProgramIsAnErrorNotACrash) {
  std::string bad = TempPath("cli_bad.ferry");
  std::ofstream(bad) << "not a program";
  Options o = Base("plan");
  o.program = bad;
  Result r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("ferry: "));
  o.program = bad + ".missing";
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  std::remove(bad.c_str());
}

TEST_F(CliTest, StrictModeFailsTheLoadWithTheWarningText) {
  Options o = Base("plan");
  o.load.skip_h2d_for_method_inputs = true;
  o.load.error_on_per_call_copies = true;
  Result r = RunCli(o);
  // x is read on the host (rms_norm) and by nothing on the device; pos and mask go to the device
  // only: no boundary copies remain, so strict mode passes.
  EXPECT_EQ(r.code, 0) << r.err;
  o.load.skip_h2d_for_method_inputs = false;
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("error_on_per_call_copies"));
}

}  // namespace
}  // namespace ferry::cli
