// The example program shipped with Ferry: one transformer decoder block decoding one token per
// call, with its KV cache kept in state buffers.
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
#include "ferry/loader/program_builder.h"

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

}  // namespace ferry::example

#endif  // FERRY_BENCH_EXAMPLE_DECODER_BLOCK_H_
