// Arena size against its lower bound (the peak of live bytes) for the example decoder block and
// for generated chains and diamonds, per device. The figure is the ratio; the time is the load.
//
//   build/bench/ferry_bench --benchmark_filter=Arena
#include <memory>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"
#include "benchmark/benchmark.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"

namespace ferry {
namespace {

void Report(benchmark::State& state, const std::vector<uint8_t>& bytes) {
  Runtime rt;
  auto program = std::move(Program::FromBytes(bytes)).value();
  std::unique_ptr<Method> method;
  for (auto _ : state) {
    auto loaded = rt.LoadMethod(*program, "forward");
    if (!loaded.ok()) {
      state.SkipWithError(std::string(loaded.status().message()).c_str());
      return;
    }
    method = *std::move(loaded);
  }
  double worst = 1.0;
  for (const ArenaInfo& a : method->plan().arenas) {
    if (a.lower_bound == 0) continue;
    const double ratio = static_cast<double>(a.arena_bytes) / static_cast<double>(a.lower_bound);
    worst = std::max(worst, ratio);
    state.counters[a.device.ToString() + "_arena_bytes"] = static_cast<double>(a.arena_bytes);
    state.counters[a.device.ToString() + "_lower_bound"] = static_cast<double>(a.lower_bound);
  }
  state.counters["worst_ratio"] = worst;
}

void BM_ArenaExample(benchmark::State& state) {
  Report(state, std::move(example::BuildDecoderProgram()).value());
}
BENCHMARK(BM_ArenaExample);

// A chain of n ops whose sizes vary (1x, 2x, 3x of 1 KiB), so buffers do not tile trivially.
void BM_ArenaChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {256});
  for (int i = 0; i < n; ++i) {
    int64_t width = 256 * (1 + i % 3);
    v = m.Op("expand", {m.Op("view", {v, m.IntList({-1})}), m.IntList({width / 256, 256})});
    v = m.Op("relu", {m.Op("clone", {v})});
    v = m.Op("slice", {m.Op("view", {v, m.IntList({width})}), m.Int(0), m.Int(0), m.Int(256), m.Int(1)});
    v = m.Op("neg", {v});
  }
  m.Output(v);
  Report(state, std::move(pb.Build()).value());
}
BENCHMARK(BM_ArenaChain)->Arg(10)->Arg(100);

// Diamonds: x -> (a, b) -> a + b, repeated; two branches live at once.
void BM_ArenaDiamond(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {1024});
  for (int i = 0; i < n; ++i) {
    ValueId a = m.Op("relu", {v});
    ValueId b = m.Op("sin", {v});
    ValueId c = i % 2 == 0 ? m.Op("neg", {b}) : b;
    v = m.Op("add", {a, c});
  }
  m.Output(v);
  Report(state, std::move(pb.Build()).value());
}
BENCHMARK(BM_ArenaDiamond)->Arg(10)->Arg(100);

}  // namespace
}  // namespace ferry
