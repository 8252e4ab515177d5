// GPU executor overhead (when a GPU is present): a delegate on cuda:0 running a chain of `ops` relu
// over `elems` floats through Method::Execute, against the same CUDA kernels launched directly on
// the device's stream followed by one wait, timed in the same loop so the ratio comes from one run.
// With `host_io` 0 the input and output are bound in device memory (skip_h2d/skip_d2h: no per-call
// copy); with 1 they are pageable host vectors, so each call adds an h2d and a d2h, and the
// direct loop does the same two copies.
//   exec_us_per_call, direct_us_per_call   wall time of one Execute / one direct call
//   overhead_us_per_op                     (exec - direct) / ops
//   ratio                                  exec / direct
//
//   build/bench/ferry_bench --benchmark_filter=CudaDelegate
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/cuda/cuda_ops.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_registry.h"
#include "ferry/runtime/runtime.h"

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

// Launches `ops` relu kernels ping-ponging between `a` and `b` (the first reads `in`), then waits.
absl::Status DirectChain(DeviceRuntime& gpu, KernelFn relu, int ops, int64_t elems, void* in,
                         void* a, void* b) {
  TensorRef refs[3] = {TensorRef::Contiguous(DType::kFloat32, {elems}, in),
                       TensorRef::Contiguous(DType::kFloat32, {elems}, a),
                       TensorRef::Contiguous(DType::kFloat32, {elems}, b)};
  absl::Status status;
  {
    DeviceScope scope(gpu);
    SetCurrentCudaStream(gpu.native_stream());
    for (int i = 0; i < ops && status.ok(); ++i) {
      OpArg arg;
      arg.tensor = i == 0 ? &refs[0] : &refs[1 + (i + 1) % 2];
      TensorRef* result = &refs[1 + i % 2];
      status = relu(absl::MakeConstSpan(&arg, 1), absl::MakeConstSpan(&result, 1));
    }
    SetCurrentCudaStream(nullptr);
  }
  FERRY_RETURN_IF_ERROR(status);
  return gpu.Synchronize();
}

void BM_CudaDelegateOverhead(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  const int64_t elems = state.range(1);
  const bool host_io = state.range(2) != 0;
  const size_t bytes = static_cast<size_t>(elems) * sizeof(float);
  Runtime rt;
  DeviceRuntime* gpu = rt.devices().Find(Device::Cuda(0));
  KernelFn relu = FindCudaKernel("relu");
  if (gpu == nullptr || relu == nullptr) {
    state.SkipWithError("no CUDA device present");
    return;
  }
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {elems});
  m.Output(m.GraphDelegate("cuda:0", {x}, [ops](MethodBuilder& g, absl::Span<const ValueId> in) {
    ValueId v = in[0];
    for (int i = 0; i < ops; ++i) v = g.Op("relu", {v});
    return std::vector<ValueId>{v};
  })[0]);
  absl::StatusOr<std::vector<uint8_t>> program_bytes = pb.Build();
  if (!program_bytes.ok()) {
    state.SkipWithError(program_bytes.status().ToString().c_str());
    return;
  }
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*program_bytes);
  LoadOptions options;
  options.device_map = absl::flat_hash_map<Device, Device>{};
  options.skip_h2d_for_method_inputs = !host_io;
  options.skip_d2h_for_method_outputs = !host_io;
  absl::StatusOr<std::unique_ptr<Method>> method =
      program.ok() ? rt.LoadMethod(**program, "forward", options)
                   : absl::StatusOr<std::unique_ptr<Method>>(program.status());
  absl::StatusOr<DeviceBuffer> in = DeviceBuffer::Allocate(*gpu, bytes, 256);
  absl::StatusOr<DeviceBuffer> out = DeviceBuffer::Allocate(*gpu, bytes, 256);
  absl::StatusOr<DeviceBuffer> scratch = DeviceBuffer::Allocate(*gpu, bytes, 256);
  for (const absl::Status& s : {method.status(), in.status(), out.status(), scratch.status()}) {
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  std::vector<float> host_in(static_cast<size_t>(elems), 0.5f),
      host_out(static_cast<size_t>(elems));
  absl::Status bound =
      host_io ? (*method)->SetInput(0, TensorView::Host(DType::kFloat32, {elems}, host_in.data()))
              : (*method)->SetInput(
                    0, TensorView(DType::kFloat32, {elems}, in->data(), Device::Cuda(0)));
  if (bound.ok()) {
    bound = host_io ? (*method)->SetOutputBuffer(
                          0, TensorView::Host(DType::kFloat32, {elems}, host_out.data()))
                    : (*method)->SetOutputBuffer(
                          0, TensorView(DType::kFloat32, {elems}, out->data(), Device::Cuda(0)));
  }
  if (bound.ok()) bound = gpu->CopyHostToDevice(in->data(), host_in.data(), bytes);
  if (!bound.ok()) {
    state.SkipWithError(bound.ToString().c_str());
    return;
  }
  double exec_ns = 0, direct_ns = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    absl::Status s = (*method)->Execute();
    const auto t1 = Clock::now();
    if (s.ok() && host_io) s = gpu->CopyHostToDevice(in->data(), host_in.data(), bytes);
    if (s.ok()) s = DirectChain(*gpu, relu, ops, elems, in->data(), out->data(), scratch->data());
    if (s.ok() && host_io) s = gpu->CopyDeviceToHost(host_out.data(), out->data(), bytes);
    const auto t2 = Clock::now();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    exec_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    direct_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["exec_us_per_call"] = exec_ns / calls / 1e3;
  state.counters["direct_us_per_call"] = direct_ns / calls / 1e3;
  state.counters["overhead_us_per_op"] = (exec_ns - direct_ns) / calls / ops / 1e3;
  state.counters["ratio"] = exec_ns / direct_ns;
}
BENCHMARK(BM_CudaDelegateOverhead)
    ->ArgNames({"ops", "elems", "host_io"})
    ->ArgsProduct({{1, 10, 100}, {16, 1 << 20}, {0, 1}});

}  // namespace
}  // namespace ferry
