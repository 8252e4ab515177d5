// The layers of convolutional and transformer networks as host kernels, at the sizes the ONNX
// Runtime comparison uses (bench/peers): a 3x3 convolution 1x32x56x56 -> 32 (padding 1) through
// the host BLAS and through the direct loop, in one run; a depthwise 3x3 over the same input;
// layer_norm over [128, 768]; gelu (both forms) over 64K floats; bmm [8, 64, 64] x [8, 64, 64].
//
//   build/bench/ferry_bench --benchmark_filter='Nn'
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/kernels/op_registry.h"

namespace ferry {
namespace {

// An argument of OpCall: a float32 tensor of `sizes`, or `scalar`.
struct BenchArg {
  std::vector<int64_t> sizes;
  std::optional<Scalar> scalar;
};
BenchArg Tensor(std::vector<int64_t> sizes) { return {std::move(sizes), std::nullopt}; }
BenchArg Number(Scalar s) { return {{}, std::move(s)}; }

// One op's arguments and results with owned storage: tensors filled with small varied values,
// results laid out as the op's infer says.
class OpCall {
 public:
  OpCall(const std::string& op, std::vector<BenchArg> args)
      : registry_(OpRegistry::WithBuiltIns()), spec_(std::move(args)) {
    schema_ = registry_.Find(op);
    const size_t total = spec_.size() + schema_->num_results;
    storage_.reserve(total);
    refs_.reserve(total);
    for (const BenchArg& a : spec_) {
      if (a.scalar.has_value()) {
        args_.push_back(OpArg{nullptr, &*a.scalar});
        continue;
      }
      int64_t n = 1;
      for (int64_t s : a.sizes) n *= s;
      std::vector<float>& data = storage_.emplace_back(n);
      for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % 29) * 0.0625f - 0.875f;
      refs_.push_back(TensorRef::Contiguous(DType::kFloat32, a.sizes, data.data()));
      args_.push_back(OpArg{&refs_.back(), nullptr});
    }
    std::vector<InferredResult> inferred(schema_->num_results);
    ok_ = schema_->infer(args_, absl::MakeSpan(inferred)).ok();
    if (!ok_) return;
    for (InferredResult& r : inferred) {
      std::vector<float>& data = storage_.emplace_back(r.layout.numel());
      refs_.push_back(r.layout);
      refs_.back().data = data.data();
      results_.push_back(&refs_.back());
    }
  }

  bool ok() const { return ok_; }
  absl::Status Run() { return schema_->kernel(args_, results_); }

 private:
  OpRegistry registry_;
  const OpSchema* schema_ = nullptr;
  std::vector<BenchArg> spec_;
  std::vector<std::vector<float>> storage_;
  std::vector<TensorRef> refs_;
  std::vector<OpArg> args_;
  std::vector<TensorRef*> results_;
  bool ok_ = false;
};

void RunCall(benchmark::State& state, OpCall& call, double flops) {
  if (!call.ok()) {
    state.SkipWithError("infer refused the arguments");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(call.Run());
    benchmark::ClobberMemory();
  }
  if (flops > 0) {
    state.counters["gflops"] =
        benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  }
}

// The argument: 1 for the host BLAS (im2col), 0 for the direct loop.
void BM_NnConv3x3(benchmark::State& state) {
  const bool blas = state.range(0) != 0;
  if (blas && !internal::HaveHostBlas()) return;
  internal::UseHostBlas(blas);
  OpCall call("conv", {Tensor({1, 32, 56, 56}), Tensor({32, 32, 3, 3}),
                       Number(Scalar::IntList({1})), Number(Scalar::IntList({1})),
                       Number(Scalar::IntList({1})), Number(Scalar::Int(1)), Tensor({32})});
  RunCall(state, call, 2.0 * 32 * 56 * 56 * 32 * 9);
  internal::UseHostBlas(true);
}
BENCHMARK(BM_NnConv3x3)->Arg(1)->Arg(0);

void BM_NnConvDepthwise3x3(benchmark::State& state) {
  OpCall call("conv", {Tensor({1, 32, 56, 56}), Tensor({32, 1, 3, 3}), Number(Scalar::IntList({1})),
                       Number(Scalar::IntList({1})), Number(Scalar::IntList({1})),
                       Number(Scalar::Int(32))});
  RunCall(state, call, 2.0 * 32 * 56 * 56 * 9);
}
BENCHMARK(BM_NnConvDepthwise3x3);

void BM_NnLayerNorm(benchmark::State& state) {
  OpCall call("layer_norm",
              {Tensor({128, 768}), Number(Scalar::IntList({768})), Number(Scalar::None()),
               Number(Scalar::None()), Number(Scalar::Double(1e-5))});
  RunCall(state, call, 0);
  state.SetBytesProcessed(state.iterations() * 2 * 128 * 768 * sizeof(float));
}
BENCHMARK(BM_NnLayerNorm);

// The argument: 0 for the erf form, 1 for the tanh one.
void BM_NnGelu64K(benchmark::State& state) {
  OpCall call(state.range(0) != 0 ? "gelu_tanh" : "gelu", {Tensor({64 * 1024})});
  RunCall(state, call, 0);
  state.SetBytesProcessed(state.iterations() * 2 * 64 * 1024 * sizeof(float));
}
BENCHMARK(BM_NnGelu64K)->Arg(0)->Arg(1);

void BM_NnBmm(benchmark::State& state) {
  OpCall call("matmul", {Tensor({8, 64, 64}), Tensor({8, 64, 64})});
  RunCall(state, call, 2.0 * 8 * 64 * 64 * 64);
}
BENCHMARK(BM_NnBmm);

}  // namespace
}  // namespace ferry
