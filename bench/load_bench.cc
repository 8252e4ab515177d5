// Load time (verify + placement + planning + materialization) for methods of N nodes, N = 100 to
// 100,000: a chain of host ops with a delegate on cuda:0 (sim:0) every 10 nodes, so placement and
// copies are exercised. Reported per node.
//
//  - BM_Load: the steady state, after one untimed load; Google Benchmark fits the complexity (the
//    exponent). The minor page faults per node say whether the allocator kept the memory a load
//    needs or gave it back to the system between loads (glibc's choice, by the process's history).
//  - BM_LoadAddChain: the same for a chain of adds of one constant (the peers harness's graph);
//    BM_ReadAddChain and BM_LoadMethodAddChain: its two halves alone, Program::FromBytes and
//    Runtime::LoadMethod of a program kept between loads.
//  - BM_LoadInPlaceChain: a chain of in-place adds to one input (one alias group of N buffers).
//  - BM_LoadManyOutputs: N results of one input, all returned (N buffers live at once).
//  - BM_LoadParts: the same split into verify, placement, planning, materialization and teardown,
//    with the minor page faults per node.
//  - BM_LoadColdStart: the first load in a process (a child forked per iteration) of the add chain
//    and of the delegate chain, where every
//    page the load's structures use is touched for the first time; on a machine where page faults
//    are expensive this is most of the time.
//  - BM_LoadPeakMemory: the host memory reading and loading take at their peak, per node (the
//    figures behind the load's own memory check, runtime/internal/load_util.h), for the add chain,
//    the delegate chain and nodes of 1,000 arguments each (host cats, graph delegates).
//
//   build/bench/ferry_bench --benchmark_filter=Load
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "bench/example/load_programs.h"
#include "benchmark/benchmark.h"
#include "ferry/base/huge_pages.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"

namespace ferry {
namespace {

using example::AddChainProgram;
using example::DelegateChainProgram;
using example::LongArgumentListsProgram;

using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

long MinorFaults() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// N results of one input, each returned: N buffers live at once to the end of the call.
std::vector<uint8_t> ManyOutputsProgram(int n) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {16});
  for (int i = 0; i < n; ++i) m.Output(m.Op(i % 2 == 0 ? "relu" : "neg", {x}));
  return std::move(pb.Build()).value();
}

// One graph delegate on cuda:0 whose sub-graph is a chain of N adds of a constant, each result
// also returned: the delegate's own planning (scratch lifetimes, returned values) at scale.
std::vector<uint8_t> GraphDelegateProgram(int n) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {16});
  ValueId w = m.ConstantF32("w", {16}, std::vector<float>(16, 0.5f));
  std::vector<ValueId> outs =
      m.GraphDelegate("cuda:0", {x, w}, [n](MethodBuilder& g, absl::Span<const ValueId> in) {
        std::vector<ValueId> results;
        ValueId v = in[0];
        for (int i = 0; i < n; ++i) {
          v = g.Op("add", {v, in[1]});
          if (i % 100 == 99) results.push_back(v);
        }
        results.push_back(v);
        return results;
      });
  for (ValueId o : outs) m.Output(o);
  return std::move(pb.Build()).value();
}

// Loads the program once; the status of the load.
absl::Status LoadOnce(const Runtime& rt, const std::vector<uint8_t>& bytes) {
  auto program = Program::FromBytes(bytes);
  if (!program.ok()) return program.status();
  return rt.LoadMethod(**program, "forward").status();
}

// Reports time and minor page faults per node of a benchmark over a method of `n` nodes.
void ReportPerNode(benchmark::State& state, int n, long faults_before) {
  state.counters["page_faults_per_node"] = static_cast<double>(MinorFaults() - faults_before) /
                                           (static_cast<double>(state.iterations()) * n);
  state.SetComplexityN(n);
  state.counters["us_per_node"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The steady-state load of `bytes`, a method of `n` nodes.
void TimeLoads(benchmark::State& state, int n, const std::vector<uint8_t>& bytes) {
  Runtime rt;
  if (absl::Status s = LoadOnce(rt, bytes); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  const long faults_before = MinorFaults();
  double teardown_us = 0;
  for (auto _ : state) {
    auto program = Program::FromBytes(bytes);
    auto method = rt.LoadMethod(**program, "forward");
    benchmark::DoNotOptimize(method);
    if (!method.ok()) state.SkipWithError(std::string(method.status().message()).c_str());
    // The loaded objects are destroyed outside the timed load, as the peers harness does.
    state.PauseTiming();
    const auto t0 = Clock::now();
    if (method.ok()) method->reset();
    if (program.ok()) program->reset();
    teardown_us += MicrosSince(t0);
    state.ResumeTiming();
  }
  ReportPerNode(state, n, faults_before);
  state.counters["teardown_us_per_node"] =
      teardown_us / (static_cast<double>(state.iterations()) * n);
}

void BM_Load(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  TimeLoads(state, n, DelegateChainProgram(n));
}
BENCHMARK(BM_Load)
    ->RangeMultiplier(10)
    ->Range(100, 100000)
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

void BM_LoadAddChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  TimeLoads(state, n, AddChainProgram(n));
}
BENCHMARK(BM_LoadAddChain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// The two halves of BM_LoadAddChain alone: reading the program (Program::FromBytes), and
// loading its method from a program kept between loads.
void BM_ReadAddChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<uint8_t> bytes = AddChainProgram(n);
  const long faults_before = MinorFaults();
  for (auto _ : state) {
    auto program = Program::FromBytes(bytes);
    benchmark::DoNotOptimize(program);
    if (!program.ok()) state.SkipWithError(std::string(program.status().message()).c_str());
  }
  ReportPerNode(state, n, faults_before);
}
BENCHMARK(BM_ReadAddChain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_LoadMethodAddChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto program = Program::FromBytes(AddChainProgram(n));
  if (!program.ok()) {
    state.SkipWithError(std::string(program.status().message()).c_str());
    return;
  }
  Runtime rt;
  const long faults_before = MinorFaults();
  for (auto _ : state) {
    auto method = rt.LoadMethod(**program, "forward");
    benchmark::DoNotOptimize(method);
    if (!method.ok()) state.SkipWithError(std::string(method.status().message()).c_str());
  }
  ReportPerNode(state, n, faults_before);
}
BENCHMARK(BM_LoadMethodAddChain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_LoadInPlaceChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  TimeLoads(state, n, AddChainProgram(n, /*in_place=*/true));
}
BENCHMARK(BM_LoadInPlaceChain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_LoadManyOutputs(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  TimeLoads(state, n, ManyOutputsProgram(n));
}
BENCHMARK(BM_LoadManyOutputs)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_LoadGraphDelegate(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  TimeLoads(state, n, GraphDelegateProgram(n));
}
BENCHMARK(BM_LoadGraphDelegate)->Arg(1000)->Arg(10000)->Arg(30000)->Unit(benchmark::kMillisecond);

// The same load split into its parts, each reported in us per node: verify (Program::FromBytes),
// placement (op schemas, shape inference and placement), planning (arena offsets),
// materialization (backend init, allocation, touching arenas, load-time copies, the step list) and
// teardown (destroying the method and the program).
void BM_LoadParts(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<uint8_t> bytes = DelegateChainProgram(n);
  Runtime rt;
  if (absl::Status s = LoadOnce(rt, bytes); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  double verify_us = 0, placement_us = 0, planning_us = 0, materialization_us = 0, teardown_us = 0;
  const long faults_before = MinorFaults();
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto program = Program::FromBytes(bytes);
    verify_us += MicrosSince(t0);
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
    auto t1 = Clock::now();
    method->reset();
    program->reset();
    teardown_us += MicrosSince(t1);
  }
  const double per = static_cast<double>(state.iterations()) * n;
  state.counters["page_faults_per_node"] = static_cast<double>(MinorFaults() - faults_before) / per;
  state.counters["verify_us_per_node"] = verify_us / per;
  state.counters["placement_us_per_node"] = placement_us / per;
  state.counters["planning_us_per_node"] = planning_us / per;
  state.counters["materialization_us_per_node"] = materialization_us / per;
  state.counters["teardown_us_per_node"] = teardown_us / per;
}
BENCHMARK(BM_LoadParts)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// Runs `child` in a forked child process and returns the two figures it reports through a pipe;
// nullopt when the fork fails or the child reports nothing. The child exits without running the
// parent's destructors.
std::optional<std::array<double, 2>> RunInChild(absl::FunctionRef<std::array<double, 2>()> child) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    // A fresh process holds no freed tables to reuse (base/huge_pages.h); the parent's would
    // be copied on write here.
    ReleaseCachedLargeTables();
    const std::array<double, 2> report = child();
    (void)!write(fds[1], report.data(), sizeof(report));
    _exit(0);
  }
  close(fds[1]);
  std::array<double, 2> report{};
  const bool read_all = pid > 0 && read(fds[0], report.data(), sizeof(report)) == sizeof(report);
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  if (!read_all) return std::nullopt;
  return report;
}

// The first load in a process: each iteration forks a child that loads the program once and
// reports its time and minor page faults. Second argument: 0 the add chain, 1 the chain with a
// graph delegate every 10 nodes.
void BM_LoadColdStart(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<uint8_t> bytes = state.range(1) == 0 ? AddChainProgram(n) : DelegateChainProgram(n);
  Runtime rt;
  double faults = 0;
  for (auto _ : state) {
    const std::optional<std::array<double, 2>> report = RunInChild([&]() -> std::array<double, 2> {
      const long before = MinorFaults();
      auto t0 = Clock::now();
      absl::Status s = LoadOnce(rt, bytes);
      return {s.ok() ? MicrosSince(t0) : -1.0, static_cast<double>(MinorFaults() - before)};
    });
    if (!report.has_value() || (*report)[0] < 0) {
      state.SkipWithError("the child's load failed");
      break;
    }
    state.SetIterationTime((*report)[0] * 1e-6);
    faults += (*report)[1];
  }
  const double per = static_cast<double>(state.iterations()) * n;
  state.counters["us_per_node"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["page_faults_per_node"] = faults / per;
}
BENCHMARK(BM_LoadColdStart)
    ->ArgNames({"n", "delegates"})
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({100000, 0})
    ->Args({10000, 1})
    ->Args({100000, 1})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

// Reads a field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 when it cannot be read.
long StatusBytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "re");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  const size_t len = std::strlen(field);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      kib = std::strtol(line + len + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

// Resets the process's peak resident size (VmHWM) to its current size; false when it cannot.
bool ResetPeak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "we");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// The memory reading a program and loading its method take at their peak, in bytes per node: in
// a child forked per iteration, the growth of the peak resident size (VmHWM) over each step.
// `file_bytes_per_node` is the program's own size, which reading copies.
void PeakMemory(benchmark::State& state, int n, const std::vector<uint8_t>& bytes) {
  Runtime rt;
  double read_peak = 0, load_peak = 0;
  for (auto _ : state) {
    const std::optional<std::array<double, 2>> report = RunInChild([&]() -> std::array<double, 2> {
      if (!ResetPeak()) return {-1.0, -1.0};
      const long base = StatusBytes("VmRSS");
      auto program = Program::FromBytes(bytes);
      const double read = static_cast<double>(StatusBytes("VmHWM") - base);
      ResetPeak();
      const long loaded = StatusBytes("VmRSS");
      const bool ok = program.ok() && rt.LoadMethod(**program, "forward").ok();
      return {read, ok ? static_cast<double>(StatusBytes("VmHWM") - loaded) : -1.0};
    });
    if (!report.has_value() || (*report)[1] < 0) {
      state.SkipWithError("the child could not load, or cannot reset its peak resident size");
      break;
    }
    read_peak += (*report)[0];
    load_peak += (*report)[1];
  }
  const double per = static_cast<double>(state.iterations()) * n;
  state.counters["file_bytes_per_node"] = static_cast<double>(bytes.size()) / n;
  state.counters["read_peak_bytes_per_node"] = read_peak / per;
  state.counters["load_peak_bytes_per_node"] = load_peak / per;
}

// Second argument: 0 the add chain, 1 the delegate chain, 2 and 3 LongArgumentListsProgram's host
// and delegate nodes of 1,000 arguments each (per node figures are then per 1,000 arguments).
void BM_LoadPeakMemory(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  switch (state.range(1)) {
    case 0:
      return PeakMemory(state, n, AddChainProgram(n));
    case 1:
      return PeakMemory(state, n, DelegateChainProgram(n));
    default:
      return PeakMemory(state, n, LongArgumentListsProgram(n, 1000, state.range(1) == 3));
  }
}
BENCHMARK(BM_LoadPeakMemory)
    ->ArgNames({"n", "program"})
    ->Args({100000, 0})
    ->Args({100000, 1})
    ->Args({1000, 2})
    ->Args({1000, 3})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ferry
