// Load time (verify + placement + planning + materialization) for methods of N nodes, N = 100 to
// 100,000: a chain of host ops with a delegate on cuda:0 (sim:0) every 10 nodes, so placement and
// copies are exercised. Reported per node; Google Benchmark fits the complexity (the exponent).
//
//   build/bench/ferry_bench --benchmark_filter=Load
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "loader/program.h"
#include "loader/program_builder.h"
#include "runtime/runtime.h"

namespace ferry {
namespace {

std::vector<uint8_t> ChainProgram(int n) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {16});
  ValueId w = m.ConstantF32("w", {16}, std::vector<float>(16, 0.5f));
  for (int i = 0; i < n; ++i) {
    if (i % 10 == 9) {
      v = m.GraphDelegate("cuda:0", {v, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("mul", {in[0], in[1]})};
      })[0];
    } else {
      v = m.Op(i % 2 == 0 ? "relu" : "neg", {v});
    }
  }
  m.Output(v);
  return std::move(pb.Build()).value();
}

void BM_Load(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<uint8_t> bytes = ChainProgram(n);
  Runtime rt;
  for (auto _ : state) {
    auto program = Program::FromBytes(bytes);
    auto method = rt.LoadMethod(**program, "forward");
    benchmark::DoNotOptimize(method);
    if (!method.ok()) state.SkipWithError(std::string(method.status().message()).c_str());
  }
  state.SetComplexityN(n);
  state.counters["us_per_node"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Load)
    ->RangeMultiplier(10)
    ->Range(100, 100000)
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

}  // namespace
}  // namespace ferry
