// `ferry run` (runtime/cli/run.cc): outputs printed, inputs given by name, and values an input's
// dtype cannot hold refused; non-tensor inputs checked against their traced value, non-tensor
// outputs printed with their kind.
#include <cstdio>
#include <string>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/runtime/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/cli/example_cli.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/json_check.h"
#include "tests/testing/trace_json.h"

namespace ferry::cli {
namespace {

using ::testing::HasSubstr;
using Result = ::ferry::testing::CliResult;
using ::ferry::testing::RunCli;

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
  // By position, as for ExecuTorch inputs: input 1 is pos.
  o.inputs.clear();
  o.inputs["1"] = {99};
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("index_put_"));
  o.inputs.clear();
  o.inputs["1"] = {3};
  EXPECT_EQ(RunCli(o).code, 0);
  o.inputs.clear();
  o.inputs["3"] = {1};  // three inputs: 0, 1, 2
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no input \"3\" (name one, or give its position, 0 to 2)"));
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

// A metadata-style program: y = x + x beside an int input and outputs of several kinds.
class ScalarCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath("cli_scalars.ferry");
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId x = m.Input("x", DType::kFloat32, {2});
    ValueId n = m.ScalarInput("n", Scalar::Int(3));
    m.ScalarInput("eps", Scalar::Double(0.5));
    m.Output(m.Op("add", {x, x}, "y"));
    m.Output(n);
    m.Output(m.Scalar(Scalar::String("a\"b")));
    m.Output(m.Scalar(Scalar::IntList({1, 2, 3, 4, 5, 6, 7, 8})));
    m.Output(m.Scalar(Scalar::None()));
    ASSERT_TRUE(pb.WriteFile(path_).ok());
  }
  void TearDown() override { std::remove(path_.c_str()); }
  Options Run() {
    Options o;
    o.command = "run";
    o.program = path_;
    o.calls = 1;
    o.warmup = 0;
    return o;
  }
  std::string path_;
};

TEST_F(ScalarCliTest, OutputsArePrintedWithTheirKind) {
  Options o = Run();
  o.inputs["x"] = {1, 2};
  Result r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("output 0 \"y\" float32[2] on host: sum 6"));
  EXPECT_THAT(r.out, HasSubstr("output 1 \"n\" int: 3\n"));
  EXPECT_THAT(r.out, HasSubstr("output 2 \"value 4\" string: \"a\\\"b\"\n"));
  EXPECT_THAT(r.out, HasSubstr("int list: [1, 2, 3, 4, 5, 6, ...] (8 items)\n"));
  EXPECT_THAT(r.out, HasSubstr("None\n"));
  o.json = true;
  r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string error;
  EXPECT_TRUE(::ferry::testing::IsValidJson(r.out, &error)) << error << "\n" << r.out;
  EXPECT_THAT(r.out, HasSubstr("{\"index\": 1, \"name\": \"n\", \"kind\": \"int\", \"value\": 3}"));
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"string\", \"value\": \"a\\\"b\"}"));
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"int list\", \"value\": [1, 2, 3, 4, 5, 6, 7, 8]}"));
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"None\", \"value\": null}"));
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"tensor\", \"dtype\": \"float32\""));
}

TEST_F(ScalarCliTest, ScalarInputsTakeOnlyTheirTracedValue) {
  Options o = Run();
  o.inputs["n"] = {3};
  o.inputs["eps"] = {0.50001};
  Result r = RunCli(o);
  EXPECT_EQ(r.code, 0) << r.err;
  o.inputs["n"] = {5};
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("input 1 (\"n\") is fixed at 3, the value the program was traced "
                               "with; given 5"));
  o.inputs["n"] = {3.5};
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("--input n: 3.5 is not a whole number"));
  o.inputs["n"] = {3, 3};
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("input \"n\" is one int, but 2 values are given"));
  // By position too.
  o.inputs.clear();
  o.inputs["2"] = {0.7};
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("input 2 (\"eps\") is fixed at 0.5"));
}

TEST_F(ScalarCliTest, PlanListsScalarInputsAndOutputs) {
  Options o = Run();
  o.command = "plan";
  Result r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("n                int                  traced as 3\n"));
  EXPECT_THAT(r.out, HasSubstr("n                int                  = 3\n"));
}

// --trace: the load and every call, each step once per call on its device's lane.
TEST_F(CliTest, RunTraceWritesEveryCallsSteps) {
  Options o = Base("run");
  o.calls = 3;
  o.trace_path = TempPath("run_trace.json");
  o.load.record_trace = true;  // as ParseArgs sets it with --trace
  Result r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("ferry: trace: " + o.trace_path));
  const std::string json = ::ferry::testing::ReadTextFile(o.trace_path);
  ASSERT_FALSE(json.empty()) << o.trace_path;
  std::remove(o.trace_path.c_str());
  std::string where;
  ASSERT_TRUE(::ferry::testing::IsValidJson(json, &where)) << where;
  auto counts = ::ferry::testing::CountTraceEvents(json);
  // The example: 9 host nodes and the attention delegate on cuda:0, with 4 copies a call.
  EXPECT_EQ((counts[{"call", "calls"}]), 3);
  EXPECT_EQ((counts[{"node", "host"}]), 3 * 9);
  EXPECT_EQ((counts[{"delegate", "cuda:0 (as sim:0)"}]), 3);
  EXPECT_EQ((counts[{"copy", "cuda:0 (as sim:0)"}]), 3 * 4);
  EXPECT_EQ((counts[{"load phase", "load"}]), 13);
  // A file that cannot be written is an error naming it.
  o.trace_path = "/nonexistent-folder/trace.json";
  r = RunCli(o);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent-folder/trace.json"));
}

}  // namespace
}  // namespace ferry::cli
