// The decode loop of the language-model example (bench/example/decoder_block.h): prefill and
// decode loaded as one program, the blocks and the head on cuda:0 (sim:0 here, unguarded).
//
//   BM_DecodeLoop         per-token latency of the decode method (bind, execute, read the logits,
//                         take the argmax), with copies and bytes per token counted by the
//                         devices, and the copies of constants and state per token (0 expected)
//   BM_DecodeLoopAllHost  the same model with everything on the host, in the same run
//   BM_ProgramMemory      device bytes of prefill and decode loaded as one program against the
//                         two loaded separately (second argument 1: together, 0: apart)
//
//   build/bench/ferry_bench --benchmark_filter='DecodeLoop|ProgramMemory'
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"
#include "benchmark/benchmark.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"

namespace ferry {
namespace {

using namespace ::ferry::example;  // NOLINT

// The example with its blocks on `device`; nullptr (and the benchmark skipped) when it fails.
std::unique_ptr<Program> LoadModel(std::optional<std::string> device, benchmark::State& state) {
  absl::StatusOr<std::vector<uint8_t>> bytes = BuildLanguageModelProgram(std::move(device));
  absl::StatusOr<std::unique_ptr<Program>> program =
      bytes.ok() ? Program::FromBytes(*bytes) : bytes.status();
  if (!program.ok()) {
    state.SkipWithError(std::string(program.status().message()).c_str());
    return nullptr;
  }
  return *std::move(program);
}

RuntimeOptions Unguarded() {
  RuntimeOptions options;
  options.sim.guard = false;
  return options;
}

// Inputs of a call taking `tokens.size()` tokens at positions start, start + 1, ...
struct Call {
  std::vector<int64_t> tokens, pos;
  std::vector<float> mask;
  void Set(int64_t start) {
    pos.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) pos[i] = start + static_cast<int64_t>(i);
    CausalMask(pos, kContext, &mask);
  }
  absl::Status Bind(Method& m) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (absl::Status s = m.SetInput(0, TensorView::Host(DType::kInt64, {n}, tokens.data()));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = m.SetInput(1, TensorView::Host(DType::kInt64, {n}, pos.data())); !s.ok()) {
      return s;
    }
    return m.SetInput(2, TensorView::Host(DType::kFloat32, {n, kContext}, mask.data()));
  }
};

int64_t Argmax(const Method& m) {
  TensorView out = m.Output(0);
  const float* last = out.data_as<float>() + (out.numel() - kVocab);
  return std::max_element(last, last + kVocab) - last;
}

DeviceCounters Counters(const Runtime& rt) {
  DeviceCounters total;
  for (const Device& d : rt.devices().devices()) total.AddCopies(rt.devices().Find(d)->counters());
  return total;
}

void RunDecodeLoop(benchmark::State& state, std::optional<std::string> device) {
  std::unique_ptr<Program> program = LoadModel(std::move(device), state);
  if (program == nullptr) return;
  Runtime rt(Unguarded());
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
  absl::StatusOr<std::unique_ptr<Method>> prefill = loaded->LoadMethod("prefill");
  absl::StatusOr<std::unique_ptr<Method>> decode = loaded->LoadMethod("decode");
  if (!prefill.ok() || !decode.ok()) {
    state.SkipWithError("cannot load the example");
    return;
  }
  Call first{LanguageModelPrompt(), {}, {}};
  Call step{{0}, {}, {}};
  int64_t position = kContext;  // the next decode position; kContext: prefill first
  int64_t tokens = 0;
  DeviceCounters before;
  uint64_t copies = 0, bytes = 0;
  for (auto _ : state) {
    if (position == kContext) {  // the cache is full: start over with the prompt, untimed
      state.PauseTiming();
      first.Set(0);
      if (!first.Bind(**prefill).ok() || !(*prefill)->Execute().ok()) {
        state.SkipWithError("prefill failed");
        break;
      }
      step.tokens[0] = Argmax(**prefill);
      position = kPrompt;
      state.ResumeTiming();
    }
    before = Counters(rt);
    step.Set(position);
    if (!step.Bind(**decode).ok() || !(*decode)->Execute().ok()) {
      state.SkipWithError("decode failed");
      break;
    }
    step.tokens[0] = Argmax(**decode);
    const DeviceCounters after = Counters(rt);
    copies += (after.h2d_copies - before.h2d_copies) + (after.d2h_copies - before.d2h_copies) +
              (after.d2d_copies - before.d2d_copies);
    bytes += (after.h2d_bytes - before.h2d_bytes) + (after.d2h_bytes - before.d2h_bytes) +
             (after.d2d_bytes - before.d2d_bytes);
    ++position;
    ++tokens;
  }
  int moved = 0;  // per-call copies of constants and state in the decode manifest
  for (const CopyStep& c : (*decode)->plan().placement.copies) {
    const ValueKind kind = (*decode)->def().values[c.value].kind;
    moved += c.timing == CopyTiming::kPerCall &&
             (kind == ValueKind::kConstant || kind == ValueKind::kState);
  }
  const double n = std::max<int64_t>(tokens, 1);
  state.counters["copies_per_token"] = copies / n;
  state.counters["bytes_per_token"] = bytes / n;
  state.counters["constant_state_copies_per_token"] = moved;
  state.counters["tokens_per_s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
}

void BM_DecodeLoop(benchmark::State& state) { RunDecodeLoop(state, "cuda:0"); }
void BM_DecodeLoopAllHost(benchmark::State& state) { RunDecodeLoop(state, std::nullopt); }
BENCHMARK(BM_DecodeLoop)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeLoopAllHost)->Unit(benchmark::kMicrosecond);

// Device bytes held once prefill and decode are loaded: as one program (state.range(0) == 1) or
// separately (0). Constants, caches and arenas together, from the device's own counter.
void BM_ProgramMemory(benchmark::State& state) {
  std::unique_ptr<Program> program = LoadModel("cuda:0", state);
  if (program == nullptr) return;
  Runtime rt(Unguarded());
  DeviceRuntime& sim0 = *rt.devices().Find(Device::Sim(0));
  const bool together = state.range(0) == 1;
  uint64_t held = 0, constants = 0;
  for (auto _ : state) {
    const uint64_t baseline = sim0.counters().allocated_bytes;
    std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(*program);
    absl::StatusOr<std::unique_ptr<Method>> prefill =
        together ? loaded->LoadMethod("prefill") : rt.LoadMethod(*program, "prefill");
    absl::StatusOr<std::unique_ptr<Method>> decode =
        together ? loaded->LoadMethod("decode") : rt.LoadMethod(*program, "decode");
    if (!prefill.ok() || !decode.ok()) {
      state.SkipWithError("cannot load the example");
      break;
    }
    held = sim0.counters().allocated_bytes - baseline;
    constants = 0;
    for (const Method* m : {prefill->get(), decode->get()}) {
      for (const ArenaInfo& a : m->plan().arenas) {
        if (a.device == Device::Sim(0)) constants += a.constant_bytes;
      }
    }
  }
  state.counters["device_bytes"] = static_cast<double>(held);
  state.counters["constant_bytes_made"] = static_cast<double>(constants);
}
BENCHMARK(BM_ProgramMemory)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ferry
