// Executor overhead per host step: a chain of N tiny ops (relu or add over 16 floats) run through
// Method::Execute, against calling the same kernels directly in a loop. Both run in the same
// process and the same run; the ratio and ns per step are reported as counters.
//
//   build/bench/ferry_bench --benchmark_filter=Chain
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"

namespace ferry {
namespace {

constexpr int64_t kElems = 16;

struct Chain {
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
  std::vector<float> a, b;
};

Chain MakeChain(const std::string& op, int n, bool record_trace = false) {
  Chain c;
  c.rt = std::make_unique<Runtime>();
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {kElems});
  ValueId b = m.Input("b", DType::kFloat32, {kElems});
  ValueId v = a;
  for (int i = 0; i < n; ++i) v = op == "add" ? m.Op("add", {v, b}) : m.Op("relu", {v});
  m.Output(v);
  auto bytes = pb.Build();
  c.program = std::move(Program::FromBytes(*bytes)).value();
  LoadOptions options;
  options.record_trace = record_trace;
  c.method = std::move(c.rt->LoadMethod(*c.program, "forward", options)).value();
  c.a.assign(kElems, 0.5f);
  c.b.assign(kElems, 0.25f);
  (void)c.method->SetInput(0, TensorView::Host(DType::kFloat32, {kElems}, c.a.data()));
  (void)c.method->SetInput(1, TensorView::Host(DType::kFloat32, {kElems}, c.b.data()));
  return c;
}

void RunChain(benchmark::State& state, const std::string& op) {
  const int n = static_cast<int>(state.range(0));
  Chain c = MakeChain(op, n);
  for (auto _ : state) {
    absl::Status s = c.method->Execute();
    benchmark::DoNotOptimize(s);
  }
  state.counters["ns_per_step"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}

// The same kernels called directly on the same buffers.
void RunDirect(benchmark::State& state, const std::string& op) {
  const int n = static_cast<int>(state.range(0));
  OpRegistry ops = OpRegistry::WithBuiltIns();
  const OpSchema* schema = ops.Find(op);
  std::vector<float> a(kElems, 0.5f), b(kElems, 0.25f);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(kElems));
  std::vector<TensorRef> refs;
  refs.reserve(n + 2);
  refs.push_back(TensorRef::Contiguous(DType::kFloat32, {kElems}, a.data()));
  refs.push_back(TensorRef::Contiguous(DType::kFloat32, {kElems}, b.data()));
  for (int i = 0; i < n; ++i) refs.push_back(TensorRef::Contiguous(DType::kFloat32, {kElems}, bufs[i].data()));
  std::vector<OpArg> args(2 * n);
  std::vector<TensorRef*> results(n);
  for (int i = 0; i < n; ++i) {
    args[2 * i].tensor = i == 0 ? &refs[0] : &refs[i + 1];
    args[2 * i + 1].tensor = &refs[1];
    results[i] = &refs[i + 2];
  }
  const size_t nargs = op == "add" ? 2 : 1;
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) {
      absl::Status s = schema->kernel(absl::MakeConstSpan(&args[2 * i], nargs),
                                      absl::MakeConstSpan(&results[i], 1));
      benchmark::DoNotOptimize(s);
    }
  }
  state.counters["ns_per_step"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}

void BM_ChainRelu(benchmark::State& s) { RunChain(s, "relu"); }
void BM_DirectRelu(benchmark::State& s) { RunDirect(s, "relu"); }
void BM_ChainAdd(benchmark::State& s) { RunChain(s, "add"); }
void BM_DirectAdd(benchmark::State& s) { RunDirect(s, "add"); }
BENCHMARK(BM_ChainRelu)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_DirectRelu)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_ChainAdd)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_DirectAdd)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);

// Both in one benchmark, so the ratio comes from one run: executor time / direct time per step.
void BM_OverheadRatio(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Chain c = MakeChain("relu", n);
  OpRegistry ops = OpRegistry::WithBuiltIns();
  const OpSchema* relu = ops.Find("relu");
  std::vector<float> x(kElems, 0.5f), y(kElems);
  TensorRef in = TensorRef::Contiguous(DType::kFloat32, {kElems}, x.data());
  TensorRef out = TensorRef::Contiguous(DType::kFloat32, {kElems}, y.data());
  OpArg arg;
  arg.tensor = &in;
  TensorRef* res = &out;
  double exec_ns = 0, direct_ns = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(c.method->Execute());
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(relu->kernel({&arg, 1}, {&res, 1}));
    auto t2 = std::chrono::steady_clock::now();
    exec_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    direct_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  const double steps = static_cast<double>(state.iterations()) * n;
  state.counters["exec_ns_per_step"] = exec_ns / steps;
  state.counters["direct_ns_per_step"] = direct_ns / steps;
  state.counters["overhead_ns_per_step"] = (exec_ns - direct_ns) / steps;
  state.counters["ratio"] = exec_ns / direct_ns;
}
BENCHMARK(BM_OverheadRatio)->Arg(10)->Arg(100)->Arg(1000);

// The timeline's cost (LoadOptions::record_trace), in one run: the same chain loaded twice, with
// and without recording, their calls interleaved. Off is the loop Execute runs without the
// option; on adds two clock reads per step.
void BM_TraceOverhead(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Chain off = MakeChain("relu", n);
  Chain on = MakeChain("relu", n, /*record_trace=*/true);
  double off_ns = 0, on_ns = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(off.method->Execute());
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(on.method->Execute());
    auto t2 = std::chrono::steady_clock::now();
    off_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    on_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  const double steps = static_cast<double>(state.iterations()) * n;
  state.counters["off_ns_per_step"] = off_ns / steps;
  state.counters["on_ns_per_step"] = on_ns / steps;
  state.counters["on_over_off"] = on_ns / off_ns;
}
BENCHMARK(BM_TraceOverhead)->Arg(10)->Arg(100)->Arg(1000);

// Binding inputs and running one op, as a caller does every call: SetInput of each input (1 for
// relu, 2 for add) then Execute. The peers' figures for the same loop are in bench/README.md.
void RunBindExecute(benchmark::State& state, const std::string& op) {
  Chain c = MakeChain(op, 1);
  const int inputs = op == "add" ? 2 : 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        c.method->SetInput(0, TensorView::Host(DType::kFloat32, {kElems}, c.a.data())));
    if (inputs == 2) {
      benchmark::DoNotOptimize(
          c.method->SetInput(1, TensorView::Host(DType::kFloat32, {kElems}, c.b.data())));
    }
    benchmark::DoNotOptimize(c.method->Execute());
  }
}
void BM_BindExecuteRelu(benchmark::State& s) { RunBindExecute(s, "relu"); }
void BM_BindExecuteAdd(benchmark::State& s) { RunBindExecute(s, "add"); }
BENCHMARK(BM_BindExecuteRelu);
BENCHMARK(BM_BindExecuteAdd);

}  // namespace
}  // namespace ferry
