// The `ferry` command line (help, version, usage errors) and its commands on the example program:
// plan (text and DOT), run, bench (table and JSON), and errors for bad input.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/example/decoder_block.h"
#include "ferry/runtime/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/json_check.h"
#include "tests/testing/reference_decoder.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/two_method_program.h"

namespace ferry::cli {
namespace {

using ::ferry::testing::IsValidJson;

using ::testing::HasSubstr;
using ::testing::Not;

using Result = ::ferry::testing::CliResult;
using ::ferry::testing::RunCli;

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
    EXPECT_THAT(p.out, HasSubstr("usage: ferry <plan|run|bench>")) << help;
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
  EXPECT_THAT(p.err, HasSubstr("unknown command \"plot\"; the commands are plan, run and bench"));
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
      {{"run", "--input", "pos=1,a"}, "\"a\" is not a number"},
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

class CliTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath("decoder_lm.ferry");
    ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, example::BuildLanguageModelProgram());
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  void TearDown() override { std::remove(path_.c_str()); }
  Options TokensOptions(int tokens) const {
    Options o;
    o.command = "run";
    o.program = path_;
    o.method = "decode";
    o.tokens = tokens;
    return o;
  }
  std::string path_;
};

TEST_F(CliTokensTest, GeneratesTheReferenceTokensWithNoCopiesOfConstantsOrState) {
  using namespace ::ferry::example;  // NOLINT
  constexpr int kTokens = 5;
  // Greedy generation by the reference: the prompt (37 i + 11) mod kVocab, then the argmax of
  // each call's last logits, fed back.
  ::ferry::testing::ReferenceModel reference;
  std::vector<float> logits;
  for (int64_t i = 0; i < kPrompt; ++i) logits = reference.Step((37 * i + 11) % kVocab, i);
  std::vector<std::string> expected;
  for (int t = 0; t < kTokens; ++t) {
    const int64_t token = std::max_element(logits.begin(), logits.end()) - logits.begin();
    expected.push_back(std::to_string(token));
    logits = reference.Step(token, kPrompt + t);
  }
  Result r = RunCli(TokensOptions(kTokens));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("prefill: ", kPrompt, " tokens in ")));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("decode: ", kTokens, " tokens in ")));
  EXPECT_THAT(r.out, HasSubstr("tokens/s"));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("tokens: ", absl::StrJoin(expected, " "), "\n")));
  // Per token: the embedded token, pos and mask in, the logits out.
  const size_t per_token = sizeof(float) * kModel + sizeof(int64_t) + sizeof(float) * kContext +
                           sizeof(float) * kVocab;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("copies per token: 4.00 counted by devices, ",
                                            per_token, ".0 bytes")));
  EXPECT_THAT(r.out, HasSubstr("copies of constants and state per call: 0\n"));
  const size_t constants = sizeof(float) * (kLayers * (2 * kModel + 4 * kModel * kModel +
                                                       3 * kHidden * kModel) +
                                            kModel + kVocab * kModel);
  const size_t caches = sizeof(float) * kLayers * 2 * kContext * kModel;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("constant replicas sim:0 ", constants,
                                            " B (made once), shared states sim:0 ", caches, " B")));
  EXPECT_THAT(r.out, Not(HasSubstr("MISMATCH")));
}

TEST_F(CliTokensTest, RefusesMoreTokensThanTheCacheHoldsAndMethodsOffTheConvention) {
  Result r = RunCli(TokensOptions(200));
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.err, HasSubstr("--tokens 200: the cache holds 128 positions"));
  EXPECT_THAT(r.err, HasSubstr("at most 120 tokens"));
  EXPECT_EQ(r.out, "");
  Options o = TokensOptions(2);
  o.method = "prefill";
  r = RunCli(o);
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.err, HasSubstr("method \"prefill\" takes 8 tokens per call"));
  o.method = "nope";
  r = RunCli(o);
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.err, HasSubstr("nope"));
  // The decoder block's "forward" takes x, pos and mask: not a decode loop.
  ProgramBuilder pb;
  example::AddDecoderMethod(pb, std::nullopt);
  const std::string block = TempPath("block.ferry");
  ASSERT_OK(pb.WriteFile(block));
  o.program = block;
  o.method = "forward";
  r = RunCli(o);
  EXPECT_EQ(r.code, kExitError);
  EXPECT_THAT(r.err, HasSubstr("--tokens: method \"forward\" has input \"x\"; a decode loop needs"));
  std::remove(block.c_str());
}

}  // namespace
}  // namespace ferry::cli
