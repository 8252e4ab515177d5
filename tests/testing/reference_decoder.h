// A straightforward reference of the example programs' decoder block (bench/example/
// decoder_block.h), written independently of Ferry's kernels: double accumulation, one token at
// a time, loops over heads and cache rows.
#ifndef FERRY_TESTS_TESTING_REFERENCE_DECODER_H_
#define FERRY_TESTS_TESTING_REFERENCE_DECODER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "bench/example/decoder_block.h"

namespace ferry::testing {

// y[o] = sum_i x[i] * w[o * in + i]
inline std::vector<float> Linear(const std::vector<float>& x, const std::vector<float>& w,
                                 int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<float> y(out, 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    double acc = 0;
    for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(x[i]) * w[o * in + i];
    y[o] = static_cast<float>(acc);
  }
  return y;
}

inline std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& w) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(ss / x.size() + example::kEps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i] * scale * w[i]);
  return y;
}

// One decoder block with its own KV cache of `rows` rows (zeros at first).
class ReferenceDecoder {
 public:
  ReferenceDecoder(example::DecoderWeights w, int64_t rows)
      : w_(std::move(w)), rows_(rows), k_(rows * example::kModel, 0.0f),
        v_(rows * example::kModel, 0.0f) {}

  // The block's output for token embedding `x` ([kModel]) written to cache row `pos`, attending
  // to the rows where `mask` ([rows], additive) allows.
  std::vector<float> Step(const std::vector<float>& x, int64_t pos, const float* mask) {
    using namespace ::ferry::example;  // NOLINT
    std::vector<float> h = RmsNorm(x, w_.norm1);
    std::vector<float> q = Linear(h, w_.wq, kModel);
    std::vector<float> k = Linear(h, w_.wk, kModel);
    std::vector<float> v = Linear(h, w_.wv, kModel);
    std::copy(k.begin(), k.end(), k_.begin() + pos * kModel);
    std::copy(v.begin(), v.end(), v_.begin() + pos * kModel);
    std::vector<float> ctx(kModel, 0.0f);
    for (int64_t head = 0; head < kHeads; ++head) {
      std::vector<double> scores(rows_);
      double max = -INFINITY;
      for (int64_t t = 0; t < rows_; ++t) {
        double dot = 0;
        for (int64_t d = 0; d < kHeadDim; ++d) {
          dot += static_cast<double>(q[head * kHeadDim + d]) * k_[t * kModel + head * kHeadDim + d];
        }
        scores[t] = dot / std::sqrt(static_cast<double>(kHeadDim)) + mask[t];
        max = std::max(max, scores[t]);
      }
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - max));
      for (int64_t d = 0; d < kHeadDim; ++d) {
        double acc = 0;
        for (int64_t t = 0; t < rows_; ++t) {
          acc += scores[t] / sum * v_[t * kModel + head * kHeadDim + d];
        }
        ctx[head * kHeadDim + d] = static_cast<float>(acc);
      }
    }
    std::vector<float> o = Linear(ctx, w_.wo, kModel);
    std::vector<float> a(kModel);
    for (int64_t i = 0; i < kModel; ++i) a[i] = x[i] + o[i];
    std::vector<float> h2 = RmsNorm(a, w_.norm2);
    std::vector<float> g = Linear(h2, w_.w1, kHidden);
    std::vector<float> u = Linear(h2, w_.w3, kHidden);
    for (int64_t i = 0; i < kHidden; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    std::vector<float> f = Linear(g, w_.w2, kModel);
    for (int64_t i = 0; i < kModel; ++i) a[i] += f[i];
    return a;
  }

 private:
  example::DecoderWeights w_;
  int64_t rows_;
  std::vector<float> k_, v_;
};

// The decode-loop example's language model, one token at a time: every layer keeps its own cache
// of kContext rows.
class ReferenceModel {
 public:
  ReferenceModel() : w_(example::MakeLanguageModelWeights()) {
    for (const example::DecoderWeights& layer : w_.layers) {
      layers_.emplace_back(layer, example::kContext);
    }
  }

  // The logits ([kVocab]) of `token` at position `pos` (attending to positions 0..pos).
  std::vector<float> Step(int64_t token, int64_t pos) {
    using namespace ::ferry::example;  // NOLINT
    std::vector<float> x(w_.embedding.begin() + token * kModel,
                         w_.embedding.begin() + (token + 1) * kModel);
    std::vector<float> mask(kContext);
    for (int64_t j = 0; j < kContext; ++j) mask[j] = j <= pos ? 0.0f : kMaskedOut;
    for (ReferenceDecoder& layer : layers_) x = layer.Step(x, pos, mask.data());
    return Linear(RmsNorm(x, w_.final_norm), w_.lm_head, kVocab);
  }

 private:
  example::LanguageModelWeights w_;
  std::vector<ReferenceDecoder> layers_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_REFERENCE_DECODER_H_
