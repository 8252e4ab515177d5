// RunCommand (runtime/cli/commands.cc): a bad or missing program is an error, not a crash, and
// strict mode fails the load with the warning's text. Each command has its own test beside this.
#include <cstdio>
#include <fstream>
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
