#include "bench/example/decoder_block.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

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

DecoderWeights RandomDecoderWeights(Lcg& rng) {
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

}  // namespace

DecoderWeights MakeDecoderWeights() {
  Lcg rng(0x5eed);
  return RandomDecoderWeights(rng);
}

ValueId AttentionGraph(MethodBuilder& g, const AttentionValues& v, int64_t tokens,
                       int64_t cache_rows) {
  ValueId q = g.Op("linear", {v.h, v.wq}, "q_proj");
  ValueId k = g.Op("linear", {v.h, v.wk}, "k_proj");
  ValueId val = g.Op("linear", {v.h, v.wv}, "v_proj");
  g.Op("index_put_", {v.k_cache, v.pos, k}, "k_cache_update");
  g.Op("index_put_", {v.v_cache, v.pos, val}, "v_cache_update");
  // [tokens, kModel] -> [kHeads, tokens, kHeadDim]; the caches -> [kHeads, kHeadDim, rows] (keys)
  // and [kHeads, rows, kHeadDim] (values).
  ValueId qh = g.Op("transpose", {g.Op("view", {q, g.IntList({tokens, kHeads, kHeadDim})}),
                                  g.Int(0), g.Int(1)});
  ValueId kh = g.Op("permute", {g.Op("view", {v.k_cache, g.IntList({cache_rows, kHeads, kHeadDim})}),
                                g.IntList({1, 2, 0})});
  ValueId scores = g.Op("matmul", {qh, kh}, "scores");
  scores = g.Op("mul", {scores, g.Double(1.0 / std::sqrt(static_cast<double>(kHeadDim)))});
  scores = g.Op("add", {scores, v.mask}, "masked");
  ValueId probs = g.Op("softmax", {scores, g.Int(-1)});
  ValueId vh = g.Op("transpose", {g.Op("view", {v.v_cache, g.IntList({cache_rows, kHeads, kHeadDim})}),
                                  g.Int(0), g.Int(1)});
  ValueId ctx = g.Op("matmul", {probs, vh}, "context");
  ctx = g.Op("transpose", {ctx, g.Int(0), g.Int(1)});
  ctx = g.Op("reshape", {ctx, g.IntList({tokens, kModel})});
  return g.Op("linear", {ctx, v.wo}, "o_proj");
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
    AttentionValues v{in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8]};
    return std::vector<ValueId>{AttentionGraph(g, v, /*tokens=*/1, kSeq)};
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
  CausalMask(in.pos, kSeq, &in.mask);
  return in;
}

// ---- the decode-loop example ------------------------------------------------------------------

LanguageModelWeights MakeLanguageModelWeights() {
  Lcg rng(0x10ad);
  LanguageModelWeights w;
  w.embedding = Random(rng, kVocab * kModel, 1.0f);
  for (int64_t l = 0; l < kLayers; ++l) w.layers.push_back(RandomDecoderWeights(rng));
  w.final_norm = Random(rng, kModel, 0.1f, 1.0f);
  w.lm_head = Random(rng, kVocab * kModel, 1.0f / std::sqrt(static_cast<float>(kModel)));
  return w;
}

void AddLanguageModelMethod(ProgramBuilder& builder, const std::string& name, int64_t tokens,
                            const std::optional<std::string>& device) {
  const LanguageModelWeights w = MakeLanguageModelWeights();
  MethodBuilder& m = builder.AddMethod(name);
  ValueId token_ids = m.Input("tokens", DType::kInt64, {tokens});
  ValueId pos = m.Input("pos", DType::kInt64, {tokens});
  ValueId mask = m.Input("mask", DType::kFloat32, {tokens, kContext});
  ValueId embedding = m.ConstantF32("embedding", {kVocab, kModel}, w.embedding);
  // The lookup runs on the host; every block and the head run in delegates on `device`.
  ValueId x = m.Op("embedding", {embedding, token_ids}, "embed");
  const std::vector<float> empty_cache(kContext * kModel, 0.0f);
  for (int64_t l = 0; l < kLayers; ++l) {
    const DecoderWeights& lw = w.layers[l];
    const std::string p = absl::StrCat("layers.", l, ".");
    std::vector<ValueId> args = {
        x,
        m.ConstantF32(p + "norm1", {kModel}, lw.norm1),
        m.ConstantF32(p + "norm2", {kModel}, lw.norm2),
        m.ConstantF32(p + "wq", {kModel, kModel}, lw.wq),
        m.ConstantF32(p + "wk", {kModel, kModel}, lw.wk),
        m.ConstantF32(p + "wv", {kModel, kModel}, lw.wv),
        m.ConstantF32(p + "wo", {kModel, kModel}, lw.wo),
        m.ConstantF32(p + "w1", {kHidden, kModel}, lw.w1),
        m.ConstantF32(p + "w3", {kHidden, kModel}, lw.w3),
        m.ConstantF32(p + "w2", {kModel, kHidden}, lw.w2),
        // One cache per layer, shared by the methods: prefill fills it, decode extends it.
        m.SharedStateF32(p + "k_cache", {kContext, kModel}, empty_cache),
        m.SharedStateF32(p + "v_cache", {kContext, kModel}, empty_cache),
        pos,
        mask};
    auto block = [tokens](MethodBuilder& g, absl::Span<const ValueId> in) {
      ValueId x = in[0];
      ValueId h = g.Op("rms_norm", {x, in[1], g.Double(kEps)}, "norm1");
      AttentionValues v{h, in[3], in[4], in[5], in[6], in[10], in[11], in[12], in[13]};
      ValueId a = g.Op("add", {x, AttentionGraph(g, v, tokens, kContext)}, "residual1");
      ValueId h2 = g.Op("rms_norm", {a, in[2], g.Double(kEps)}, "norm2");
      ValueId gate = g.Op("silu", {g.Op("linear", {h2, in[7]}, "w1_proj")});
      ValueId up = g.Op("linear", {h2, in[8]}, "w3_proj");
      ValueId ff = g.Op("linear", {g.Op("mul", {gate, up}), in[9]}, "w2_proj");
      return std::vector<ValueId>{g.Op("add", {a, ff}, "residual2")};
    };
    if (device.has_value()) {
      DelegateOptions options;
      options.name = absl::StrCat("block", l);
      x = m.GraphDelegate(device, args, block, options)[0];
    } else {
      x = block(m, args)[0];
    }
  }
  std::vector<ValueId> head_args = {x, m.ConstantF32("final_norm", {kModel}, w.final_norm),
                                    m.ConstantF32("lm_head", {kVocab, kModel}, w.lm_head)};
  auto head = [](MethodBuilder& g, absl::Span<const ValueId> in) {
    ValueId h = g.Op("rms_norm", {in[0], in[1], g.Double(kEps)}, "final_norm_out");
    return std::vector<ValueId>{g.Op("linear", {h, in[2]}, "logits")};
  };
  if (device.has_value()) {
    DelegateOptions options;
    options.name = "head";
    m.Output(m.GraphDelegate(device, head_args, head, options)[0]);
  } else {
    m.Output(head(m, head_args)[0]);
  }
}

absl::StatusOr<std::vector<uint8_t>> BuildLanguageModelProgram(std::optional<std::string> device) {
  ProgramBuilder builder;
  AddLanguageModelMethod(builder, "prefill", kPrompt, device);
  AddLanguageModelMethod(builder, "decode", 1, device);
  return builder.Build();
}

std::vector<int64_t> LanguageModelPrompt() {
  std::vector<int64_t> prompt(kPrompt);
  for (int64_t i = 0; i < kPrompt; ++i) prompt[i] = (37 * i + 11) % kVocab;
  return prompt;
}

void CausalMask(const std::vector<int64_t>& pos, int64_t cache_rows, std::vector<float>* mask) {
  mask->resize(pos.size() * cache_rows);
  for (size_t i = 0; i < pos.size(); ++i) {
    for (int64_t j = 0; j < cache_rows; ++j) {
      (*mask)[i * cache_rows + j] = j <= pos[i] ? 0.0f : kMaskedOut;
    }
  }
}

}  // namespace ferry::example
