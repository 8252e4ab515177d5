// `ferry run --tokens N` (runtime/cli/decode_loop.cc): greedy generation with the language-model
// example, checked against a reference decoder written in the test, with no copies of constants
// or state per token; and the limits it refuses.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/example/decoder_block.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/cli/commands.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/cli/example_cli.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/json_check.h"
#include "tests/testing/reference_decoder.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/trace_json.h"

namespace ferry::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Result = ::ferry::testing::CliResult;
using ::ferry::testing::RunCli;

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

// --trace with --tokens: prefill once, then one decode call per token, each in its method's
// process, beside both loads.
TEST_F(CliTokensTest, TraceHasPrefillAndEveryTokensCall) {
  Options o = TokensOptions(4);
  o.trace_path = path_ + ".trace.json";
  o.load.record_trace = true;
  Result r = RunCli(o);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string json = ::ferry::testing::ReadTextFile(o.trace_path);
  ASSERT_FALSE(json.empty()) << o.trace_path;
  std::remove(o.trace_path.c_str());
  std::string where;
  ASSERT_TRUE(::ferry::testing::IsValidJson(json, &where)) << where;
  auto counts = ::ferry::testing::CountTraceEvents(json);
  EXPECT_EQ((counts[{"call", "calls"}]), 1 + 4);
  EXPECT_THAT(json, HasSubstr("\"name\": \"method \\\"prefill\\\"\""));
  EXPECT_THAT(json, HasSubstr("\"name\": \"method \\\"decode\\\"\""));
  // Every node and per-call copy of prefill once, and of decode once per token, on its lane:
  // the counts the two methods' plans give.
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::Load(path_));
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  int host_nodes = 0, device_nodes = 0, copies = 0;
  for (const auto& [name, calls] : {std::pair{"prefill", 1}, std::pair{"decode", 4}}) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> m, loaded->LoadMethod(name));
    for (const NodePlacement& n : m->plan().placement.nodes) {
      (n.device.is_host() ? host_nodes : device_nodes) += calls;
    }
    copies += calls * m->plan().placement.per_call_copies();
  }
  EXPECT_GT(device_nodes, 0);
  EXPECT_EQ((counts[{"node", "host"}]), host_nodes);
  EXPECT_EQ((counts[{"delegate", "cuda:0 (as sim:0)"}]), device_nodes);
  EXPECT_EQ((counts[{"copy", "cuda:0 (as sim:0)"}]), copies);
}

}  // namespace
}  // namespace ferry::cli
