// The decode-loop example (bench/example/decoder_block.h: a small language model with "prefill"
// and "decode") loaded as one program: logits against a reference written here and against the
// all-host run (P14), constants and KV caches on the device once for both methods, and no
// per-call copy of either, in the manifest and in the device's counters.
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/reference_decoder.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using namespace ::ferry::example;  // NOLINT
using ::ferry::testing::ReferenceModel;

// The inputs of a call taking `tokens` at positions start, start + 1, ...
struct Call {
  std::vector<int64_t> tokens, pos;
  std::vector<float> mask;
  Call(std::vector<int64_t> t, int64_t start) : tokens(std::move(t)) {
    for (size_t i = 0; i < tokens.size(); ++i) pos.push_back(start + static_cast<int64_t>(i));
    CausalMask(pos, kContext, &mask);
  }
};

absl::StatusOr<std::vector<float>> Execute(Method& method, Call& call) {
  const int64_t n = static_cast<int64_t>(call.tokens.size());
  FERRY_RETURN_IF_ERROR(
      method.SetInput(0, TensorView::Host(DType::kInt64, {n}, call.tokens.data())));
  FERRY_RETURN_IF_ERROR(method.SetInput(1, TensorView::Host(DType::kInt64, {n}, call.pos.data())));
  FERRY_RETURN_IF_ERROR(
      method.SetInput(2, TensorView::Host(DType::kFloat32, {n, kContext}, call.mask.data())));
  FERRY_RETURN_IF_ERROR(method.Execute());
  TensorView out = method.Output(0);
  if (!out.device().is_host() || out.numel() != n * kVocab) {
    return absl::InternalError("logits are not [n, kVocab] on the host");
  }
  return std::vector<float>(out.data_as<float>(), out.data_as<float>() + n * kVocab);
}

// The decode tokens fed after the prompt: fixed, so that every run sees the same inputs.
int64_t DecodeToken(int step) { return (53 * step + 7) % kVocab; }
constexpr int kDecodeSteps = 6;

// Prefill of the prompt and kDecodeSteps decode calls; the logits of every call, in order.
absl::StatusOr<std::vector<std::vector<float>>> RunLoop(const Program& program, const Runtime& rt) {
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(program);
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> prefill, loaded->LoadMethod("prefill"));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> decode, loaded->LoadMethod("decode"));
  std::vector<std::vector<float>> logits;
  Call first(LanguageModelPrompt(), 0);
  FERRY_ASSIGN_OR_RETURN(logits.emplace_back(), Execute(*prefill, first));
  for (int s = 0; s < kDecodeSteps; ++s) {
    Call call({DecodeToken(s)}, kPrompt + s);
    FERRY_ASSIGN_OR_RETURN(logits.emplace_back(), Execute(*decode, call));
  }
  return logits;
}

std::unique_ptr<Program> LoadExample(std::optional<std::string> device) {
  absl::StatusOr<std::vector<uint8_t>> bytes = BuildLanguageModelProgram(std::move(device));
  EXPECT_OK(bytes.status());
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*bytes);
  EXPECT_OK(program.status());
  return program.ok() ? *std::move(program) : nullptr;
}

TEST(LanguageModel, LogitsMatchTheReferenceOnTheHostAndOnTheDevice) {
  ReferenceModel reference;
  std::vector<std::vector<float>> expected;
  const std::vector<int64_t> prompt = LanguageModelPrompt();
  ASSERT_EQ(prompt.size(), static_cast<size_t>(kPrompt));
  expected.emplace_back();
  for (int64_t i = 0; i < kPrompt; ++i) {
    std::vector<float> row = reference.Step(prompt[i], i);
    expected.back().insert(expected.back().end(), row.begin(), row.end());
  }
  for (int s = 0; s < kDecodeSteps; ++s) expected.push_back(reference.Step(DecodeToken(s), kPrompt + s));

  Runtime rt;  // cuda:0 runs on sim:0, guarded
  std::unique_ptr<Program> host_program = LoadExample(std::nullopt);
  std::unique_ptr<Program> device_program = LoadExample("cuda:0");
  ASSERT_NE(host_program, nullptr);
  ASSERT_NE(device_program, nullptr);
  ASSERT_OK_AND_ASSIGN(auto host, RunLoop(*host_program, rt));
  ASSERT_OK_AND_ASSIGN(auto device, RunLoop(*device_program, rt));
  ASSERT_EQ(host.size(), expected.size());
  ASSERT_EQ(device.size(), expected.size());
  for (size_t c = 0; c < expected.size(); ++c) {
    ASSERT_EQ(host[c].size(), expected[c].size());
    ASSERT_EQ(device[c].size(), expected[c].size());
    for (size_t i = 0; i < expected[c].size(); ++i) {
      EXPECT_NEAR(host[c][i], expected[c][i], 1e-4) << "call " << c << " logit " << i;
      EXPECT_NEAR(device[c][i], host[c][i], 1e-4) << "call " << c << " logit " << i;  // P14
    }
  }
}

// Bytes of the constants the blocks and the head read (the embedding table stays on the host),
// and of the per-layer caches, from the model's dimensions.
constexpr size_t kDeviceConstantBytes =
    sizeof(float) * (kLayers * (2 * kModel + 4 * kModel * kModel + 3 * kHidden * kModel) +
                     kModel + kVocab * kModel);
constexpr size_t kCacheBytes = sizeof(float) * kLayers * 2 * kContext * kModel;

TEST(LanguageModel, ConstantsAndCachesAreOnTheDeviceOnceForBothMethods) {
  std::unique_ptr<Program> program = LoadExample("cuda:0");
  ASSERT_NE(program, nullptr);
  Runtime rt;
  DeviceRuntime& sim0 = *rt.devices().Find(Device::Sim(0));
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  const DeviceCounters start = sim0.counters();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> prefill, loaded->LoadMethod("prefill"));
  const DeviceCounters after_prefill = sim0.counters();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> decode, loaded->LoadMethod("decode"));
  const DeviceCounters after_decode = sim0.counters();

  EXPECT_THAT(loaded->replica_bytes(),
              ::testing::ElementsAre(::testing::Pair(Device::Sim(0), kDeviceConstantBytes)));
  EXPECT_THAT(loaded->shared_state_bytes(),
              ::testing::ElementsAre(::testing::Pair(Device::Sim(0), kCacheBytes)));
  // Prefill copied every constant and cache there; decode copied nothing and allocated only its
  // arena.
  EXPECT_EQ(after_prefill.h2d_bytes - start.h2d_bytes, kDeviceConstantBytes + kCacheBytes);
  EXPECT_EQ(after_decode.h2d_copies, after_prefill.h2d_copies);
  size_t decode_arena = 0;
  for (const ArenaInfo& a : decode->plan().arenas) {
    if (a.device == Device::Sim(0)) decode_arena += a.arena_bytes;
  }
  EXPECT_EQ(after_decode.allocated_bytes - after_prefill.allocated_bytes, decode_arena);

  // No copy of a constant or a cache per call, in either manifest.
  for (const Method* m : {prefill.get(), decode.get()}) {
    for (const CopyStep& c : m->plan().placement.copies) {
      const ValueKind kind = m->def().values[c.value].kind;
      if (kind == ValueKind::kConstant || kind == ValueKind::kState) {
        EXPECT_EQ(c.timing, CopyTiming::kOnce) << m->def().name << ": " << m->def().values[c.value].name;
      }
    }
  }
  // Per decode call: the embedded token, pos and mask go to the device, the logits come back.
  const PlacementPlan& plan = decode->plan().placement;
  EXPECT_EQ(plan.per_call_copies(), 4);
  EXPECT_EQ(plan.per_call_bytes(),
            sizeof(float) * kModel + sizeof(int64_t) + sizeof(float) * kContext +
                sizeof(float) * kVocab);

  // The counters agree: each decode call copies exactly the manifest's copies, and allocates
  // nothing.
  Call first(LanguageModelPrompt(), 0);
  ASSERT_OK(Execute(*prefill, first).status());
  for (int s = 0; s < 3; ++s) {
    const DeviceCounters before = sim0.counters();
    Call call({DecodeToken(s)}, kPrompt + s);
    ASSERT_OK(Execute(*decode, call).status());
    const DeviceCounters now = sim0.counters();
    EXPECT_EQ((now.h2d_copies - before.h2d_copies) + (now.d2h_copies - before.d2h_copies) +
                  (now.d2d_copies - before.d2d_copies),
              4u);
    EXPECT_EQ((now.h2d_bytes - before.h2d_bytes) + (now.d2h_bytes - before.d2h_bytes) +
                  (now.d2d_bytes - before.d2d_bytes),
              plan.per_call_bytes());
    EXPECT_EQ(now.allocations, before.allocations);
  }
}

TEST(LanguageModel, TwoSeparatelyLoadedMethodsHoldTwiceTheConstants) {
  std::unique_ptr<Program> program = LoadExample("cuda:0");
  ASSERT_NE(program, nullptr);
  Runtime rt;
  DeviceRuntime& sim0 = *rt.devices().Find(Device::Sim(0));
  const uint64_t baseline = sim0.counters().allocated_bytes;
  uint64_t together = 0, apart = 0;
  {
    std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
    ASSERT_OK_AND_ASSIGN(auto prefill, loaded->LoadMethod("prefill"));
    ASSERT_OK_AND_ASSIGN(auto decode, loaded->LoadMethod("decode"));
    together = sim0.counters().allocated_bytes - baseline;
  }
  {
    ASSERT_OK_AND_ASSIGN(auto prefill, rt.LoadMethod(*program, "prefill"));
    ASSERT_OK_AND_ASSIGN(auto decode, rt.LoadMethod(*program, "decode"));
    apart = sim0.counters().allocated_bytes - baseline;
  }
  // Apart, each method holds its own constants and caches: one more copy of both.
  EXPECT_GE(apart - together, kDeviceConstantBytes + kCacheBytes);
  EXPECT_EQ(sim0.counters().allocated_bytes, baseline);
}

}  // namespace
}  // namespace ferry
