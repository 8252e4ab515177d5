// The example programs shipped with Ferry.
//
// The decoder block (BuildDecoderProgram, method "forward"): one transformer decoder block decoding
// one token per call, with its KV cache kept in state buffers.
//
//   x    [1, kModel]  float32   the token's embedding
//   pos  [1]          int64     the position the token is written to in the KV cache
//   mask [1, kSeq]    float32   0 for cache positions <= pos, a large negative number elsewhere
//   -> out [1, kModel]
//
//   h = rms_norm(x); q, k, v = h Wq, h Wk, h Wv; k_cache[pos] = k; v_cache[pos] = v;
//   attention over the cache (kHeads heads, masked softmax); a = x + attn Wo;
//   out = a + W2 (silu(rms_norm(a) W1) * rms_norm(a) W3)
//
// With a device, the projections, the cache update and the attention run in one delegate call of
// the graph backend on that device, which owns the KV cache (it writes it in place, so the cache
// lives there, P11); the norms and the MLP run on the host. Weights are deterministic (a fixed
// pseudo-random sequence), so every build produces the same program.
#ifndef FERRY_BENCH_EXAMPLE_DECODER_BLOCK_H_
#define FERRY_BENCH_EXAMPLE_DECODER_BLOCK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/loader/ferry/program_builder.h"

namespace ferry::example {

inline constexpr int64_t kModel = 64;
inline constexpr int64_t kHeads = 4;
inline constexpr int64_t kHeadDim = kModel / kHeads;
inline constexpr int64_t kHidden = 128;
inline constexpr int64_t kSeq = 16;
inline constexpr float kEps = 1e-5f;
inline constexpr float kMaskedOut = -1e9f;

struct DecoderWeights {
  std::vector<float> norm1, norm2;           // [kModel]
  std::vector<float> wq, wk, wv, wo;         // [kModel, kModel], (out, in) like linear
  std::vector<float> w1, w3;                 // [kHidden, kModel]
  std::vector<float> w2;                     // [kModel, kHidden]
};

// The deterministic weights of the example.
DecoderWeights MakeDecoderWeights();

// Adds method "forward" to `builder`. `device`: target_device of the attention delegate; nullopt
// runs everything as host ops.
void AddDecoderMethod(ProgramBuilder& builder, std::optional<std::string> device);

// The serialized example program (attention on "cuda:0" unless `device` says otherwise).
absl::StatusOr<std::vector<uint8_t>> BuildDecoderProgram(
    std::optional<std::string> device = std::string("cuda:0"));

// The inputs of call `step` (0, 1, ...): a deterministic embedding, pos = step, and the mask.
struct DecoderInputs {
  std::vector<float> x;
  std::vector<int64_t> pos;
  std::vector<float> mask;
};
DecoderInputs MakeDecoderInputs(int64_t step);

// The attention of a decoder block inside a sub-graph: q, k, v projections of `h` ([tokens,
// kModel]), the caches' rows `pos` ([tokens] int64) overwritten with k and v, masked softmax
// attention of the kHeads heads over the `cache_rows` rows of the caches ([cache_rows, kModel])
// with the additive `mask` ([tokens, cache_rows]), and the output projection. Returns [tokens,
// kModel].
struct AttentionValues {
  ValueId h, wq, wk, wv, wo, k_cache, v_cache, pos, mask;
};
ValueId AttentionGraph(MethodBuilder& g, const AttentionValues& v, int64_t tokens,
                       int64_t cache_rows);

// Writes mask[i, j] = 0 for j <= pos[i] and kMaskedOut elsewhere: [pos.size(), cache_rows].
void CausalMask(const std::vector<int64_t>& pos, int64_t cache_rows, std::vector<float>* mask);

// The decode-loop example (BuildLanguageModelProgram): a decoder-only language model with two
// methods loaded as one program, "prefill" (a prompt of kPrompt tokens) and "decode" (one token),
// sharing their weights and the KV caches.
//
//   tokens [T]            int64     token ids, each in [0, kVocab)
//   pos    [T]            int64     the cache rows the tokens are written to (their positions)
//   mask   [T, kContext]  float32   CausalMask(pos, kContext)
//   -> logits [T, kVocab] float32
//
//   x = embedding[tokens]; kLayers times: x = block(x) (the decoder block above, over a cache of
//   kContext rows); logits = rms_norm(x) lm_head^T
//
// The embedding lookup runs on the host. Each block (norms, attention, MLP) is one delegate call
// of the graph backend on `device`, which owns that layer's KV cache (shared states
// "layers.L.k_cache", "layers.L.v_cache"); the final norm and the logits are one more delegate
// call there. Without a device, everything runs as host ops.
inline constexpr int64_t kVocab = 256;
inline constexpr int64_t kLayers = 4;
inline constexpr int64_t kContext = 128;
inline constexpr int64_t kPrompt = 8;

struct LanguageModelWeights {
  std::vector<float> embedding;        // [kVocab, kModel]
  std::vector<DecoderWeights> layers;  // kLayers
  std::vector<float> final_norm;       // [kModel]
  std::vector<float> lm_head;          // [kVocab, kModel]
};
LanguageModelWeights MakeLanguageModelWeights();

// Adds method `name` taking `tokens` tokens per call to `builder`.
void AddLanguageModelMethod(ProgramBuilder& builder, const std::string& name, int64_t tokens,
                            const std::optional<std::string>& device);
// The serialized program: "prefill" (kPrompt tokens) and "decode" (1 token).
absl::StatusOr<std::vector<uint8_t>> BuildLanguageModelProgram(
    std::optional<std::string> device = std::string("cuda:0"));
// The example's deterministic prompt: kPrompt token ids.
std::vector<int64_t> LanguageModelPrompt();

}  // namespace ferry::example

#endif  // FERRY_BENCH_EXAMPLE_DECODER_BLOCK_H_
