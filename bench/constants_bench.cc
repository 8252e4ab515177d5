// Constant materialization: a program whose constants total FERRY_BENCH_CONSTANT_MIB MiB (1024 by
// default; generated into a temporary file, never committed) is loaded with a delegate on cuda:0
// (sim:0 here) reading them, so every byte is copied to the device once at load. Reported in one
// run: load throughput against a plain memcpy of the same bytes, and the growth of the process's
// peak resident memory during the load (it must stay well below the constants' size plus the
// replica, i.e. the program is not copied on the host).
//
//   FERRY_BENCH_CONSTANT_MIB=1024 build/bench/ferry_bench --benchmark_filter=Constant
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "loader/program.h"
#include "loader/program_builder.h"
#include "runtime/runtime.h"

namespace ferry {
namespace {

size_t PeakRssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// Writes the program in a child process, so the builder's buffers never count in this one.
bool WriteProgram(const std::string& path, size_t mib) {
  pid_t pid = fork();
  if (pid == 0) {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId x = m.Input("x", DType::kFloat32, {1, 1024});
    const int64_t rows = 256;  // 1 MiB per constant: [256, 1024] float32
    ValueId acc = x;
    for (size_t i = 0; i < mib; ++i) {
      ValueId w = m.ConstantF32("w" + std::to_string(i), {rows, 1024},
                                std::vector<float>(rows * 1024, 0.001f * static_cast<float>(i % 7)));
      acc = m.GraphDelegate("cuda:0", {acc, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        ValueId row = g.Op("slice", {in[1], g.Int(0), g.Int(0), g.Int(1), g.Int(1)});
        return std::vector<ValueId>{g.Op("add", {in[0], row})};
      })[0];
    }
    m.Output(acc);
    _exit(pb.WriteFile(path).ok() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void BM_ConstantMaterialization(benchmark::State& state) {
  const char* env = std::getenv("FERRY_BENCH_CONSTANT_MIB");
  const size_t mib = env != nullptr ? std::strtoull(env, nullptr, 10) : 1024;
  const std::string path = "/tmp/ferry_constants_bench_" + std::to_string(getpid()) + ".ferry";
  if (!WriteProgram(path, mib)) {
    state.SkipWithError("could not write the program");
    return;
  }
  RuntimeOptions options;
  options.sim_guard = false;
  Runtime rt(options);
  const size_t bytes = mib << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // touched: memcpy runs warm
  double load_s = 0, memcpy_s = 0, rss_growth_mib = 0;
  for (auto _ : state) {
    ResetPeakRss();
    const size_t before = PeakRssKiB();
    auto t0 = std::chrono::steady_clock::now();
    auto program = Program::Load(path);
    auto method = program.ok() ? rt.LoadMethod(**program, "forward")
                               : absl::StatusOr<std::unique_ptr<Method>>(program.status());
    auto t1 = std::chrono::steady_clock::now();
    if (!method.ok()) {
      state.SkipWithError(std::string(method.status().message()).c_str());
      break;
    }
    rss_growth_mib = static_cast<double>(PeakRssKiB() - before) / 1024.0;
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
    auto t2 = std::chrono::steady_clock::now();
    load_s += std::chrono::duration<double>(t1 - t0).count();
    memcpy_s += std::chrono::duration<double>(t2 - t1).count();
  }
  std::remove(path.c_str());
  const double total = static_cast<double>(state.iterations()) * bytes;
  state.counters["constant_MiB"] = static_cast<double>(mib);
  state.counters["load_GBps"] = total / load_s / 1e9;
  state.counters["memcpy_GBps"] = total / memcpy_s / 1e9;
  state.counters["ratio_vs_memcpy"] = memcpy_s / load_s;
  state.counters["peak_rss_growth_MiB"] = rss_growth_mib;
  // The sim device's replica is host memory too; what is left is the loader's own host memory.
  state.counters["host_overhead_MiB"] = rss_growth_mib - static_cast<double>(mib);
}
BENCHMARK(BM_ConstantMaterialization)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ferry
