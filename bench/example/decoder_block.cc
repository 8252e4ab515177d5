#include "bench/example/decoder_block.h"

#include <cmath>
#include <cstring>
#include <utility>

namespace ferry::example {
namespace {

class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  // Uniform in [-scale, scale).
  float Next(float scale) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    float unit = static_cast<float>(state_ >> 40) / static_cast<float>(1ull << 24);
    return (unit * 2.0f - 1.0f) * scale;
  }

 private:
  uint64_t state_;
};

std::vector<float> Random(Lcg& rng, int64_t n, float scale, float offset = 0.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = offset + rng.Next(scale);
  return v;
}

}  // namespace

DecoderWeights MakeDecoderWeights() {
  Lcg rng(0x5eed);
  DecoderWeights w;
  const float proj = 1.0f / std::sqrt(static_cast<float>(kModel));
  w.norm1 = Random(rng, kModel, 0.1f, 1.0f);
  w.norm2 = Random(rng, kModel, 0.1f, 1.0f);
  w.wq = Random(rng, kModel * kModel, proj);
  w.wk = Random(rng, kModel * kModel, proj);
  w.wv = Random(rng, kModel * kModel, proj);
  w.wo = Random(rng, kModel * kModel, proj);
  w.w1 = Random(rng, kHidden * kModel, proj);
  w.w3 = Random(rng, kHidden * kModel, proj);
  w.w2 = Random(rng, kModel * kHidden, 1.0f / std::sqrt(static_cast<float>(kHidden)));
  return w;
}

void AddDecoderMethod(ProgramBuilder& builder, std::optional<std::string> device) {
  DecoderWeights w = MakeDecoderWeights();
  MethodBuilder& m = builder.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {1, kModel});
  ValueId pos = m.Input("pos", DType::kInt64, {1});
  ValueId mask = m.Input("mask", DType::kFloat32, {1, kSeq});
  ValueId norm1_weight = m.ConstantF32("norm1_weight", {kModel}, w.norm1);
  ValueId norm2_weight = m.ConstantF32("norm2_weight", {kModel}, w.norm2);
  ValueId wq = m.ConstantF32("wq", {kModel, kModel}, w.wq);
  ValueId wk = m.ConstantF32("wk", {kModel, kModel}, w.wk);
  ValueId wv = m.ConstantF32("wv", {kModel, kModel}, w.wv);
  ValueId wo = m.ConstantF32("wo", {kModel, kModel}, w.wo);
  ValueId w1 = m.ConstantF32("w1", {kHidden, kModel}, w.w1);
  ValueId w3 = m.ConstantF32("w3", {kHidden, kModel}, w.w3);
  ValueId w2 = m.ConstantF32("w2", {kModel, kHidden}, w.w2);
  ValueId k_cache = m.StateF32("k_cache", {kSeq, kModel}, std::vector<float>(kSeq * kModel, 0.0f));
  ValueId v_cache = m.StateF32("v_cache", {kSeq, kModel}, std::vector<float>(kSeq * kModel, 0.0f));

  ValueId h = m.Op("rms_norm", {x, norm1_weight, m.Double(kEps)}, "norm1");

  auto attention = [](MethodBuilder& g, absl::Span<const ValueId> in) {
    ValueId h = in[0], wq = in[1], wk = in[2], wv = in[3], wo = in[4];
    ValueId kc = in[5], vc = in[6], pos = in[7], mask = in[8];
    ValueId q = g.Op("linear", {h, wq}, "q_proj");
    ValueId k = g.Op("linear", {h, wk}, "k_proj");
    ValueId v = g.Op("linear", {h, wv}, "v_proj");
    g.Op("index_put_", {kc, pos, k}, "k_cache_update");
    g.Op("index_put_", {vc, pos, v}, "v_cache_update");
    ValueId qh = g.Op("transpose", {g.Op("view", {q, g.IntList({1, kHeads, kHeadDim})}),
                                    g.Int(0), g.Int(1)});
    ValueId kh = g.Op("permute", {g.Op("view", {kc, g.IntList({kSeq, kHeads, kHeadDim})}),
                                  g.IntList({1, 2, 0})});
    ValueId scores = g.Op("matmul", {qh, kh}, "scores");
    scores = g.Op("mul", {scores, g.Double(1.0 / std::sqrt(static_cast<double>(kHeadDim)))});
    scores = g.Op("add", {scores, mask}, "masked");
    ValueId probs = g.Op("softmax", {scores, g.Int(-1)});
    ValueId vh = g.Op("transpose", {g.Op("view", {vc, g.IntList({kSeq, kHeads, kHeadDim})}),
                                    g.Int(0), g.Int(1)});
    ValueId ctx = g.Op("matmul", {probs, vh}, "context");
    ctx = g.Op("transpose", {ctx, g.Int(0), g.Int(1)});
    ctx = g.Op("reshape", {ctx, g.IntList({1, kModel})});
    return std::vector<ValueId>{g.Op("linear", {ctx, wo}, "o_proj")};
  };
  ValueId attn;
  std::vector<ValueId> attn_args = {h, wq, wk, wv, wo, k_cache, v_cache, pos, mask};
  if (device.has_value()) {
    DelegateOptions options;
    options.name = "attention";
    attn = m.GraphDelegate(device, attn_args, attention, options)[0];
  } else {
    attn = attention(m, attn_args)[0];
  }
  ValueId a = m.Op("add", {x, attn}, "residual1");
  ValueId h2 = m.Op("rms_norm", {a, norm2_weight, m.Double(kEps)}, "norm2");
  ValueId gate = m.Op("silu", {m.Op("linear", {h2, w1}, "w1_proj")});
  ValueId up = m.Op("linear", {h2, w3}, "w3_proj");
  ValueId ff = m.Op("linear", {m.Op("mul", {gate, up}), w2}, "w2_proj");
  m.Output(m.Op("add", {a, ff}, "residual2"));
}

absl::StatusOr<std::vector<uint8_t>> BuildDecoderProgram(std::optional<std::string> device) {
  ProgramBuilder builder;
  AddDecoderMethod(builder, std::move(device));
  return builder.Build();
}

DecoderInputs MakeDecoderInputs(int64_t step) {
  DecoderInputs in;
  in.x.resize(kModel);
  for (int64_t i = 0; i < kModel; ++i) {
    in.x[i] = 0.5f * std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(step));
  }
  const int64_t p = step % kSeq;
  in.pos = {p};
  in.mask.resize(kSeq);
  for (int64_t j = 0; j < kSeq; ++j) in.mask[j] = j <= p ? 0.0f : kMaskedOut;
  return in;
}

}  // namespace ferry::example
