// The command line (runtime/cli/args.cc): help, version, usage errors, and the options ParseArgs
// fills.
#include <cstdio>
#include <string>
#include <vector>

#include "ferry/runtime/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  return s;
}

// ParseArgs on `ferry <args>`, with `default_program` as the program used when none is named.
struct Parsed {
  int code;
  Options options;
  std::string out, err;
};

Parsed Parse(std::vector<const char*> args, const std::string& default_program = "p.ferry") {
  args.insert(args.begin(), "ferry");
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  Parsed p;
  p.options.program = default_program;
  p.code = ParseArgs(static_cast<int>(args.size()), args.data(), &p.options, out, err);
  p.out = ReadAll(out);
  p.err = ReadAll(err);
  std::fclose(out);
  std::fclose(err);
  return p;
}

TEST(ParseArgsTest, HelpGoesToStdoutAndExitsZero) {
  for (const char* help : {"--help", "-h", "help"}) {
    Parsed p = Parse({help});
    EXPECT_EQ(p.code, 0) << help;
    EXPECT_THAT(p.out, HasSubstr("usage: ferry <plan|run|bench|verify>")) << help;
    EXPECT_THAT(p.out, HasSubstr("exit status: 0 ok, 1 load or run error, 2 usage error")) << help;
    EXPECT_EQ(p.err, "") << help;
  }
}

TEST(ParseArgsTest, NoArgumentsIsAUsageErrorWithTheUsageOnStderr) {
  Parsed p = Parse({});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.out, "");
  EXPECT_THAT(p.err, HasSubstr("usage: ferry"));
}

TEST(ParseArgsTest, CommandHelpSaysWhatItDoesItsOptionsAndAnExample) {
  struct Case {
    const char* command;
    std::vector<const char*> own, foreign;
  };
  const Case cases[] = {
      {"plan", {"--dot", "--data"}, {"--json", "--input", "--calls", "--warmup"}},
      {"run", {"--calls", "--input", "--json", "--data"}, {"--dot", "--warmup"}},
      {"bench", {"--calls", "--warmup", "--json", "--data"}, {"--dot", "--input"}},
  };
  for (const Case& c : cases) {
    for (std::vector<const char*> args :
         {std::vector<const char*>{c.command, "--help"}, std::vector<const char*>{c.command, "-h"},
          std::vector<const char*>{"help", c.command}}) {
      Parsed p = Parse(args);
      const std::string what = std::string(args[0]) + " " + args[1];
      EXPECT_EQ(p.code, 0) << what;
      EXPECT_EQ(p.err, "") << what;
      EXPECT_THAT(p.out, HasSubstr(std::string("usage: ferry ") + c.command + " [PROGRAM]"))
          << what;
      EXPECT_THAT(p.out, HasSubstr(std::string("example:\n  ferry ") + c.command)) << what;
      for (const char* option : c.own) EXPECT_THAT(p.out, HasSubstr(option)) << what;
      for (const char* option : c.foreign) EXPECT_THAT(p.out, Not(HasSubstr(option))) << what;
      EXPECT_THAT(p.out, HasSubstr("--method NAME")) << what;  // shared options too
    }
  }
}

TEST(ParseArgsTest, VersionIsTheProjectVersion) {
  Parsed p = Parse({"--version"});
  EXPECT_EQ(p.code, 0);
  EXPECT_EQ(p.out, std::string("ferry ") + Version() + "\n");
  EXPECT_EQ(p.out, "ferry 0.1.0\n");
}

TEST(ParseArgsTest, UnknownCommandListsTheCommands) {
  Parsed p = Parse({"plot"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.out, "");
  EXPECT_THAT(p.err,
              HasSubstr("unknown command \"plot\"; the commands are plan, run, bench and verify"));
  EXPECT_EQ(Parse({"help", "plot"}).code, 2);
}

TEST(ParseArgsTest, UnknownOptionIsAUsageError) {
  Parsed p = Parse({"run", "--fast"});
  EXPECT_EQ(p.code, 2);
  EXPECT_THAT(p.err, HasSubstr("unknown option \"--fast\""));
  EXPECT_THAT(p.err, HasSubstr("usage: ferry run"));
}

TEST(ParseArgsTest, OptionsThatDoNotApplyToTheCommandAreUsageErrorsNamingBoth) {
  const std::vector<std::vector<const char*>> cases = {
      {"run", "--dot"},         {"bench", "--dot"},         {"plan", "--json"},
      {"plan", "--input", "x=1"}, {"bench", "--input", "x=1"},
      {"plan", "--calls", "3"}, {"plan", "--warmup", "3"},  {"run", "--warmup", "3"},
  };
  for (const std::vector<const char*>& args : cases) {
    Parsed p = Parse(args);
    const std::string what = std::string(args[0]) + " " + args[1];
    EXPECT_EQ(p.code, 2) << what;
    EXPECT_THAT(p.err, HasSubstr(std::string(args[1]) + " does not apply to " + args[0])) << what;
  }
  EXPECT_THAT(Parse({"plan", "--calls", "3"}).err, HasSubstr("only to run and bench"));
}

TEST(ParseArgsTest, CallsMustBeAPositiveInt) {
  for (const char* bad : {"0", "-1", "x", "2.5", "", "99999999999", "2147483648"}) {
    for (const char* command : {"run", "bench"}) {
      Parsed p = Parse({command, "--calls", bad});
      EXPECT_EQ(p.code, 2) << command << " --calls " << bad;
      EXPECT_THAT(p.err, HasSubstr("--calls needs a positive integer")) << bad;
    }
  }
  EXPECT_EQ(Parse({"run", "--calls"}).code, 2);
  Parsed p = Parse({"bench", "--calls", "2147483647", "--warmup", "0"});
  EXPECT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.options.calls, 2147483647);
  EXPECT_EQ(p.options.warmup, 0);
  EXPECT_EQ(Parse({"bench", "--warmup", "-1"}).code, 2);
}

TEST(ParseArgsTest, FillsTheOptions) {
  Parsed p = Parse({"run", "prog.ferry", "--method", "step", "--skip-h2d", "--skip-d2h", "--strict",
                    "--no-guard", "--calls", "3", "--input", "pos=1,2"});
  ASSERT_EQ(p.code, -1) << p.err;
  const Options& o = p.options;
  EXPECT_EQ(o.command, "run");
  EXPECT_EQ(o.program, "prog.ferry");
  EXPECT_EQ(o.method, "step");
  EXPECT_TRUE(o.load.skip_h2d_for_method_inputs);
  EXPECT_TRUE(o.load.skip_d2h_for_method_outputs);
  EXPECT_TRUE(o.load.error_on_per_call_copies);
  EXPECT_FALSE(o.runtime.sim.guard);
  EXPECT_EQ(o.calls, 3);
  EXPECT_EQ(o.inputs.at("pos"), (std::vector<double>{1, 2}));
  EXPECT_EQ(p.out, "");
  EXPECT_EQ(p.err, "");
  // true and false stand for 1 and 0.
  Parsed flags = Parse({"run", "--input", "mask=true,false,1"});
  ASSERT_EQ(flags.code, -1) << flags.err;
  EXPECT_EQ(flags.options.inputs.at("mask"), (std::vector<double>{1, 0, 1}));

  // Defaults: the given default program, and each command's number of calls.
  p = Parse({"bench", "--json"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.options.program, "p.ferry");
  EXPECT_EQ(p.options.calls, 1000);
  EXPECT_TRUE(p.options.json);
  EXPECT_EQ(Parse({"run"}).options.calls, 1);
  p = Parse({"plan", "--dot"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_TRUE(p.options.dot);
  EXPECT_EQ(p.options.data, "");
  p = Parse({"run", "m.pte", "--data", "m.ptd", "--json"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.options.program, "m.pte");
  EXPECT_EQ(p.options.data, "m.ptd");
  EXPECT_TRUE(p.options.json);
  p = Parse({"plan", "m.pte", "--data"});
  EXPECT_EQ(p.code, 2);
  EXPECT_THAT(p.err, HasSubstr("--data needs a value"));
}

TEST(ParseArgsTest, ArgumentErrorsAreUsageErrors) {
  struct Case {
    std::vector<const char*> args;
    const char* message;
  };
  const Case cases[] = {
      {{"run", "a.ferry", "b.ferry"}, "unexpected argument \"b.ferry\""},
      {{"run", "--input", "pos"}, "--input expects NAME=V,V"},
      {{"run", "--input", "pos=1,a"}, "\"a\" is not a number (or true, false)"},
      {{"run", "--method"}, "--method needs a value"},
  };
  for (const Case& c : cases) {
    Parsed p = Parse(c.args);
    EXPECT_EQ(p.code, 2) << c.message;
    EXPECT_THAT(p.err, HasSubstr(c.message));
  }
  Parsed p = Parse({"plan"}, "");  // no PROGRAM, and no example built in
  EXPECT_EQ(p.code, 2);
  EXPECT_THAT(p.err, HasSubstr("no PROGRAM given"));
}

TEST(ParseArgsTest, TokensTakesTheDecodeLoopExampleAndRefusesCallsAndInputs) {
  Parsed p = Parse({"run", "--tokens", "12"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.options.tokens, 12);
  EXPECT_EQ(p.options.method, "decode");
  EXPECT_EQ(p.options.program, "p.ferry");  // no tokens_program set: the default program
  const char* argv[] = {"ferry", "run", "--tokens", "3", "--method", "step"};
  Options o;
  o.program = "block.ferry";
  o.tokens_program = "lm.ferry";
  std::FILE* sink = std::tmpfile();
  ASSERT_EQ(ParseArgs(6, argv, &o, sink, sink), -1);
  std::fclose(sink);
  EXPECT_EQ(o.program, "lm.ferry");
  EXPECT_EQ(o.method, "step");
  for (const char* bad : {"0", "-2", "x", "99999999999"}) {
    p = Parse({"run", "--tokens", bad});
    EXPECT_EQ(p.code, kExitUsage) << bad;
    EXPECT_THAT(p.err, HasSubstr("--tokens needs a positive integer")) << bad;
  }
  p = Parse({"run", "--tokens", "2", "--calls", "3"});
  EXPECT_EQ(p.code, kExitUsage);
  EXPECT_THAT(p.err, HasSubstr("does not go with --calls"));
  p = Parse({"run", "--tokens", "2", "--input", "pos=1"});
  EXPECT_EQ(p.code, kExitUsage);
  EXPECT_THAT(p.err, HasSubstr("does not go with --input"));
  p = Parse({"bench", "--tokens", "2"});
  EXPECT_EQ(p.code, kExitUsage);
  EXPECT_THAT(p.err, HasSubstr("--tokens does not apply to bench"));
}

TEST(ParseArgsTest, TraceAndProfileTurnOnRecording) {
  Parsed p = Parse({"run", "--trace", "t.json"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.options.trace_path, "t.json");
  EXPECT_TRUE(p.options.load.record_trace);
  p = Parse({"bench", "--profile"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_TRUE(p.options.profile);
  EXPECT_TRUE(p.options.load.record_trace);
  p = Parse({"run"});
  EXPECT_FALSE(p.options.load.record_trace);  // off unless asked for
  EXPECT_EQ(Parse({"run", "--profile"}).code, kExitUsage);
  EXPECT_EQ(Parse({"plan", "--trace", "t.json"}).code, kExitUsage);
  EXPECT_EQ(Parse({"run", "--trace"}).code, kExitUsage);  // needs FILE
}

}  // namespace
}  // namespace ferry::cli
