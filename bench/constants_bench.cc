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
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/runtime.h"

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
  options.sim.guard = false;
  Runtime rt(options);
  DeviceRuntime& sim = *rt.devices().Find(Device::Sim(0));
  const size_t bytes = mib << 20;
  const size_t piece = size_t{1} << 20;  // the program's constants are 1 MiB each
  std::vector<char> src(bytes, 1), dst(bytes, 2);  // resident: the plain copies read warm memory
  double load_s = 0, plain_s = 0, resident_s = 0, memcpy_s = 0, rss_growth_mib = 0;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (auto _ : state) {
    ResetPeakRss();
    const size_t before = PeakRssKiB();
    auto t0 = Clock::now();
    auto program = Program::Load(path);
    auto method = program.ok() ? rt.LoadMethod(**program, "forward")
                               : absl::StatusOr<std::unique_ptr<Method>>(program.status());
    auto t1 = Clock::now();
    if (!method.ok()) {
      state.SkipWithError(std::string(method.status().message()).c_str());
      break;
    }
    rss_growth_mib = static_cast<double>(PeakRssKiB() - before) / 1024.0;
    // The same bytes put on the device with its own calls: fresh device memory, like the
    // loader's constant region, filled from resident host memory one constant at a time.
    auto device = DeviceBuffer::Allocate(sim, bytes, 64);
    if (!device.ok()) {
      state.SkipWithError(std::string(device.status().message()).c_str());
      break;
    }
    char* d = static_cast<char*>(device->data());
    bool ok = true;
    auto t2 = Clock::now();
    for (size_t off = 0; off < bytes; off += piece) ok = ok && sim.CopyHostToDevice(d + off, src.data() + off, piece).ok();
    auto t3 = Clock::now();
    // Again, into device memory already touched: the device's copy throughput.
    for (size_t off = 0; off < bytes; off += piece) ok = ok && sim.CopyHostToDevice(d + off, src.data() + off, piece).ok();
    auto t4 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
    auto t5 = Clock::now();
    if (!ok) {
      state.SkipWithError("a plain copy failed");
      break;
    }
    load_s += seconds(t0, t1);
    plain_s += seconds(t2, t3);
    resident_s += seconds(t3, t4);
    memcpy_s += seconds(t4, t5);
  }
  std::remove(path.c_str());
  const double total = static_cast<double>(state.iterations()) * bytes;
  state.counters["constant_MiB"] = static_cast<double>(mib);
  state.counters["load_GBps"] = total / load_s / 1e9;
  state.counters["plain_copy_GBps"] = total / plain_s / 1e9;
  state.counters["resident_copy_GBps"] = total / resident_s / 1e9;
  state.counters["memcpy_GBps"] = total / memcpy_s / 1e9;
  // The target: loading is at least 0.8x of copying the same bytes to fresh device memory.
  state.counters["ratio_vs_plain_copy"] = plain_s / load_s;
  state.counters["ratio_vs_resident_copy"] = resident_s / load_s;
  state.counters["ratio_vs_memcpy"] = memcpy_s / load_s;
  state.counters["peak_rss_growth_MiB"] = rss_growth_mib;
  // The sim device's replica is host memory too; what is left is the loader's own host memory.
  state.counters["host_overhead_MiB"] = rss_growth_mib - static_cast<double>(mib);
}
BENCHMARK(BM_ConstantMaterialization)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ferry
