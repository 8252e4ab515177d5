// Load time (verify + placement + planning + materialization) for methods of N nodes, N = 100 to
// 100,000: a chain of host ops with a delegate on cuda:0 (sim:0) every 10 nodes, so placement and
// copies are exercised. Reported per node; Google Benchmark fits the complexity (the exponent).
//
//   build/bench/ferry_bench --benchmark_filter=Load
#include <sys/resource.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "loader/program.h"
#include "loader/program_builder.h"
#include "runtime/runtime.h"

namespace ferry {
namespace {

long MinorFaults() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

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

// The same load split into its parts, each reported in us per node: verify (Program::FromBytes),
// placement (op schemas, shape inference and placement), planning (arena offsets) and
// materialization (backend init, allocation, touching arenas, load-time copies, the step list).
void BM_LoadParts(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<uint8_t> bytes = ChainProgram(n);
  Runtime rt;
  double verify_us = 0, placement_us = 0, planning_us = 0, materialization_us = 0, teardown_us = 0;
  const long faults_before = MinorFaults();
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto program = Program::FromBytes(bytes);
    verify_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                     .count();
    if (!program.ok()) {
      state.SkipWithError(std::string(program.status().message()).c_str());
      break;
    }
    auto method = rt.LoadMethod(**program, "forward");
    if (!method.ok()) {
      state.SkipWithError(std::string(method.status().message()).c_str());
      break;
    }
    const LoadTimings& t = (*method)->plan().timings;
    placement_us += t.placement_us;
    planning_us += t.planning_us;
    materialization_us += t.materialization_us;
    auto t1 = std::chrono::steady_clock::now();
    method->reset();
    program->reset();
    teardown_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
  }
  state.counters["teardown_us_per_node"] = teardown_us / (static_cast<double>(state.iterations()) * n);
  const double per = static_cast<double>(state.iterations()) * n;
  state.counters["page_faults_per_node"] = static_cast<double>(MinorFaults() - faults_before) / per;
  state.counters["verify_us_per_node"] = verify_us / per;
  state.counters["placement_us_per_node"] = placement_us / per;
  state.counters["planning_us_per_node"] = planning_us / per;
  state.counters["materialization_us_per_node"] = materialization_us / per;
}
BENCHMARK(BM_LoadParts)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ferry
