// `ferry run` (runtime/cli/run.cc): outputs printed, inputs given by name, and values an input's
// dtype cannot hold refused.
#include <string>

#include "ferry/runtime/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/cli/example_cli.h"
#include "tests/testing/cli_run.h"

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

}  // namespace
}  // namespace ferry::cli
