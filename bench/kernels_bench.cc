// Host kernels on large float32 tensors against memcpy, and linear through the BLAS or not, in one
// run: add (two reads, one write)
// and relu (one read, one write), softmax and rms_norm over rows of 64K floats, at each SIMD level
// this CPU runs (the argument),
// and memcpy of 64K floats. Throughput counts every
// byte read and written, so kernel and memcpy figures compare directly.
//
//   build/bench/ferry_bench --benchmark_filter=Kernel64K
#include <cstring>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/kernels/internal/simd_loops.h"
#include "ferry/kernels/op_registry.h"

namespace ferry {
namespace {

constexpr int64_t kN = 64 * 1024;

void RunKernel64K(benchmark::State& state, const std::string& op, int inputs) {
  const auto level = static_cast<internal::SimdLevel>(state.range(0));
  const internal::SimdLevel saved = internal::ActiveSimdLevel();
  if (!internal::ForceSimdLevel(level).ok()) return;  // registered only for available levels
  OpRegistry ops = OpRegistry::WithBuiltIns();
  const OpSchema* schema = ops.Find(op);
  std::vector<float> a(kN), b(kN), out(kN);
  for (int64_t i = 0; i < kN; ++i) {
    a[i] = static_cast<float>(i % 97) - 48.0f;
    b[i] = static_cast<float>(i % 13) * 0.5f;
  }
  TensorRef ta = TensorRef::Contiguous(DType::kFloat32, {kN}, a.data());
  TensorRef tb = TensorRef::Contiguous(DType::kFloat32, {kN}, b.data());
  TensorRef to = TensorRef::Contiguous(DType::kFloat32, {kN}, out.data());
  OpArg args[2];
  args[0].tensor = &ta;
  args[1].tensor = &tb;
  TensorRef* res = &to;
  for (auto _ : state) {
    benchmark::DoNotOptimize(schema->kernel({args, static_cast<size_t>(inputs)}, {&res, 1}));
    benchmark::ClobberMemory();
  }
  // Bytes read and written per call.
  state.SetBytesProcessed(state.iterations() * (inputs + 1) * kN * sizeof(float));
  state.counters["simd_level"] = static_cast<int>(internal::ActiveSimdLevel());
  (void)internal::ForceSimdLevel(saved);
}

void BM_Kernel64KAdd(benchmark::State& s) { RunKernel64K(s, "add", 2); }
void BM_Kernel64KRelu(benchmark::State& s) { RunKernel64K(s, "relu", 1); }

// softmax along the last dimension and rms_norm (weight over the last dimension, eps 1e-6) of a
// [64, 1024] float32 tensor (64K floats) at the SIMD level of the argument. Bytes count one read
// and one write per element (rms_norm's weight row stays in cache).
void RunRows64K(benchmark::State& state, const std::string& op) {
  const auto level = static_cast<internal::SimdLevel>(state.range(0));
  const internal::SimdLevel saved = internal::ActiveSimdLevel();
  if (!internal::ForceSimdLevel(level).ok()) return;
  constexpr int64_t kRows = 64, kCols = kN / kRows;
  OpRegistry ops = OpRegistry::WithBuiltIns();
  const OpSchema* schema = ops.Find(op);
  std::vector<float> x(kN), w(kCols), out(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = static_cast<float>(i % 97) * 0.125f - 6.0f;
  for (int64_t i = 0; i < kCols; ++i) w[i] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  TensorRef tx = TensorRef::Contiguous(DType::kFloat32, {kRows, kCols}, x.data());
  TensorRef tw = TensorRef::Contiguous(DType::kFloat32, {kCols}, w.data());
  TensorRef to = TensorRef::Contiguous(DType::kFloat32, {kRows, kCols}, out.data());
  const Scalar dim = Scalar::Int(-1);
  const Scalar eps = Scalar::Double(1e-6);
  OpArg args[3];
  args[0].tensor = &tx;
  const bool softmax = op == "softmax";
  if (softmax) {
    args[1].scalar = &dim;
  } else {
    args[1].tensor = &tw;
    args[2].scalar = &eps;
  }
  const size_t nargs = softmax ? 2 : 3;
  TensorRef* res = &to;
  for (auto _ : state) {
    benchmark::DoNotOptimize(schema->kernel({args, nargs}, {&res, 1}));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * sizeof(float));
  state.counters["simd_level"] = static_cast<int>(internal::ActiveSimdLevel());
  (void)internal::ForceSimdLevel(saved);
}

void BM_Kernel64KSoftmax(benchmark::State& s) { RunRows64K(s, "softmax"); }
void BM_Kernel64KRmsNorm(benchmark::State& s) { RunRows64K(s, "rms_norm"); }

// The reference: memcpy of 64K floats (one read, one write per element).
void BM_Kernel64KMemcpy(benchmark::State& state) {
  std::vector<float> src(kN, 1.0f), dst(kN);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kN * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * sizeof(float));
}
BENCHMARK(BM_Kernel64KMemcpy);

// linear of a [rows, size] input by a [size, size] weight with bias, through the host BLAS (when
// built with it) or Ferry's own loops, in one run.
void RunLinear(benchmark::State& state, int64_t rows, int64_t size, bool blas) {
  if (blas && !internal::HaveHostBlas()) return;
  internal::UseHostBlas(blas);
  OpRegistry ops = OpRegistry::WithBuiltIns();
  std::vector<float> x(rows * size, 0.5f), w(size * size, 0.25f), bias(size, 1.0f),
      out(rows * size);
  TensorRef tx = TensorRef::Contiguous(DType::kFloat32, {rows, size}, x.data());
  TensorRef tw = TensorRef::Contiguous(DType::kFloat32, {size, size}, w.data());
  TensorRef tb = TensorRef::Contiguous(DType::kFloat32, {size}, bias.data());
  TensorRef to = TensorRef::Contiguous(DType::kFloat32, {rows, size}, out.data());
  OpArg args[3];
  args[0].tensor = &tx;
  args[1].tensor = &tw;
  args[2].tensor = &tb;
  TensorRef* res = &to;
  const OpSchema* linear = ops.Find("linear");
  for (auto _ : state) {
    benchmark::DoNotOptimize(linear->kernel({args, 3}, {&res, 1}));
    benchmark::ClobberMemory();
  }
  state.counters["gflops"] = benchmark::Counter(2.0 * rows * size * size * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
  internal::UseHostBlas(true);
}

// Square: [size, size] by [size, size]; the second argument 1 for the BLAS, 0 for Ferry's loops.
void BM_Linear(benchmark::State& state) {
  RunLinear(state, state.range(0), state.range(0), state.range(1) != 0);
}
BENCHMARK(BM_Linear)->ArgsProduct({{64, 512}, {0, 1}});

// A few rows (tokens) by a [size, size] weight, as a decode step runs it (arguments: rows, size,
// and 1 for the host BLAS or 0 for Ferry's loops); linear takes its own loop ahead of the BLAS
// for few rows by a large weight (OwnLoopFirst in kernels/linalg_ops.cc).
void BM_LinearRows(benchmark::State& state) {
  RunLinear(state, state.range(0), state.range(1), state.range(2) != 0);
}
BENCHMARK(BM_LinearRows)->ArgsProduct({{1, 8, 16, 32, 64}, {64, 256, 1024}, {0, 1}});

// One run per SIMD level this CPU runs (the argument: 0 baseline, 1 AVX2, 2 AVX-512).
const bool kRegistered = [] {
  for (internal::SimdLevel level : internal::AvailableSimdLevels()) {
    const int64_t arg = static_cast<int64_t>(level);
    benchmark::RegisterBenchmark("BM_Kernel64KAdd", BM_Kernel64KAdd)->Arg(arg);
    benchmark::RegisterBenchmark("BM_Kernel64KRelu", BM_Kernel64KRelu)->Arg(arg);
    benchmark::RegisterBenchmark("BM_Kernel64KSoftmax", BM_Kernel64KSoftmax)->Arg(arg);
    benchmark::RegisterBenchmark("BM_Kernel64KRmsNorm", BM_Kernel64KRmsNorm)->Arg(arg);
  }
  return true;
}();

}  // namespace
}  // namespace ferry
