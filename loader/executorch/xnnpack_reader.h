// Reads the payload of an ExecuTorch XNNPACK delegate call (backend id "XnnpackBackend"): an
// "XH00" header, the graph (a FlatBuffer with file identifier "XN01" or "XN00", Ferry's schema
// loader/executorch/schema/xnnpack_graph.fbs) and the graph's constant data.
//
//   absl::StatusOr<XnnGraph> graph = ReadXnnpackPayload(payload, method.named_data);
//
// Layout of the payload (little-endian): bytes 4..7 "XH00", 8..9 the header's length (at least
// 30), 10..13 the graph's offset, 14..17 its size, 18..21 the constant data's offset, 22..29 its
// size. The graph comes before the constant data and neither leaves the payload. A payload
// without the header (bytes 4..7 "XN01" or "XN00") is the graph alone.
//
// Every byte is untrusted. The FlatBuffers verifier runs first (bounded depth and table count),
// then the semantic checks: every value's datatype is known, its rank at most 6 and its dims
// list as long as the rank, its byte size does not overflow; ids are unique; external values are
// flagged as inputs or outputs with distinct external ids below the graph's count of externs; a
// constant's bytes lie inside the payload's constant data, a legacy in-graph buffer or the named
// data entry it names, and are at least as many as its dims need; every node's inputs are
// defined before it (an external input, a constant or an earlier node's output) and every value
// is written at most once, never a constant or an input; the graph's inputs and outputs are
// external values flagged so. A failure is InvalidArgument naming the part, e.g.
//   XNNPACK payload: node 3 (Conv2d) reads value 7, which no earlier node writes
// A constant whose named data entry the program lacks is NotFound naming the key.
//
// The returned graph holds no FlatBuffers types; constant bytes are spans into the payload or the
// named data (unaligned as far as a reader knows), so the graph lives no longer than either.
// Thread safety: a pure function.
#ifndef FERRY_LOADER_EXECUTORCH_XNNPACK_READER_H_
#define FERRY_LOADER_EXECUTORCH_XNNPACK_READER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/loader/model/named_data.h"

namespace ferry {

inline constexpr char kXnnpackBackendName[] = "XnnpackBackend";

// The graph's datatypes, numbered as the format numbers them.
enum class XnnDataType : int16_t {
  kInvalid = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kQInt8 = 3,
  kQUInt8 = 4,
  kQInt32 = 5,
  kQCInt8 = 6,
  kQCInt32 = 7,
  kQCInt4 = 8,
  kQDInt8 = 9,
  kQBInt4 = 10,
  kQPInt8 = 11,
  kInt32 = 12,
  kPackedFloat32 = 13,
  kBFloat16 = 14,
};
absl::string_view XnnDataTypeName(XnnDataType type);

// The node types, numbered as the format's node union numbers them.
enum class XnnNodeType : uint8_t {
  kAdd = 1,
  kFullyConnected,
  kSoftmax,
  kSigmoid,
  kStaticTranspose,
  kClamp,
  kConv2d,
  kDivide,
  kStaticResizeBilinear2d,
  kStaticConstantPad,
  kAvgPooling2d,
  kMinimum,
  kDepthwiseConv2d,
  kMaxPooling2d,
  kMultiply,
  kSubtract,
  kFloor,
  kConvert,
  kGlobalAvgPooling2d,
  kStaticReshape,
  kArgMaxPooling2d,
  kSquareRoot,
  kCeiling,
  kHardswish,
  kLeakyRelu,
  kMaximum,
  kNegate,
  kSquare,
  kElu,
  kAbs,
  kPRelu,
  kConcatenate2,
  kConcatenate3,
  kConcatenate4,
  kStaticSlice,
  kScaledDotProductAttention,
  kBatchMatrixMultiply,
  kConcatenate5,
  kConvTranspose2d,
  kReciprocalSquareRoot,
  kLog,
  kGelu,
  kTanh,
  kExp,
  kSin,
  kCopy,
  kCos,
};
inline constexpr int kXnnNodeTypeCount = 47;
absl::string_view XnnNodeTypeName(XnnNodeType type);

// Value flags.
inline constexpr uint32_t kXnnExternalInput = 1;
inline constexpr uint32_t kXnnExternalOutput = 2;
// An absent optional input (a fully connected or convolution node without bias) or external id.
inline constexpr uint32_t kXnnNoValue = UINT32_MAX;
// Node flags the format defines.
inline constexpr uint32_t kXnnTransposeWeights = 1;  // fully connected: filter [in, out]
inline constexpr uint32_t kXnnKeepDims = 0x40;       // pooling: the reduced dims stay, as 1
inline constexpr uint32_t kXnnAlignCorners = 0x8;    // bilinear resize: corners map to corners

enum class XnnQuant : uint8_t {
  kNone,
  kPerChannel,
  kPerTensor,
  kPerTokenDynamic,
  kPerChannelGroup
};

struct XnnValue {
  uint32_t id = 0;
  XnnDataType dtype = XnnDataType::kInvalid;
  std::vector<int64_t> dims;
  uint32_t external_id = kXnnNoValue;  // its position in the call's arguments, or kXnnNoValue
  uint32_t flags = 0;                  // kXnnExternalInput | kXnnExternalOutput
  bool is_constant = false;
  absl::Span<const uint8_t> data;  // a constant's bytes (exactly the bytes its dims need)
  // Quantization (a QuantizedTensor value); kNone for a plain tensor.
  XnnQuant quant = XnnQuant::kNone;
  float scale = 0;                                    // kPerTensor
  int32_t zero_point = 0;                             // kPerTensor
  std::vector<float> channel_scales;                  // kPerChannel, kPerChannelGroup
  int32_t channel_dim = 0;                            // kPerChannel, kPerChannelGroup
  int32_t group_size = 0;                             // kPerChannelGroup
  int32_t num_nonbatch_dims = 0;                      // kPerTokenDynamic
  XnnDataType dynamic_quant = XnnDataType::kInvalid;  // quantized at run time to this type
};

struct XnnNode {
  uint32_t index = 0;  // in the graph's node list
  XnnNodeType type = XnnNodeType::kAdd;
  uint32_t debug_handle = 0;
  uint32_t flags = 0;
  // Value ids read and written, in the node's own order: binary nodes (input1, input2); fully
  // connected and convolutions (input, filter, bias); concatenations their inputs; attention
  // (query, key, value, scale, mask). An absent bias is kXnnNoValue. Arg-max pooling writes
  // (values, indices).
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  // The clamp of the output ([min, max]), when the node has one.
  std::optional<std::array<float, 2>> output_range;
  // Convolutions and pooling: top, right, bottom, left.
  std::array<uint32_t, 4> padding = {0, 0, 0, 0};
  std::array<uint32_t, 2> kernel = {0, 0};      // height, width (pooling: the window)
  std::array<uint32_t, 2> stride = {1, 1};      // height, width
  std::array<uint32_t, 2> dilation = {1, 1};    // height, width
  std::array<uint32_t, 2> adjustment = {0, 0};  // transposed convolution
  uint32_t groups = 1;
  uint32_t group_input_channels = 0;
  uint32_t group_output_channels = 0;
  // Transpose: the permutation; reshape: the new shape; slice: the offsets; pad: before.
  std::vector<int64_t> list;
  // Slice: the sizes; pad: after.
  std::vector<int64_t> list2;
  float alpha = 0;                            // elu's alpha, leaky ReLU's slope, the pad value
  uint32_t axis = 0;                          // concatenations
  std::array<uint32_t, 2> new_size = {0, 0};  // bilinear resize: height, width
};

struct XnnGraph {
  std::string version;
  std::vector<XnnValue> values;  // in the graph's order
  std::vector<XnnNode> nodes;    // in the graph's (execution) order
  std::vector<uint32_t> input_ids;
  std::vector<uint32_t> output_ids;
  uint32_t num_externs = 0;

  // The value with id `id`, or nullptr; its index in `values`, or -1.
  const XnnValue* value(uint32_t id) const;
  int64_t IndexOf(uint32_t id) const;
  // "node 3 (Conv2d)"
  static std::string NodeLabel(const XnnNode& node);

  // Built by the reader: id -> index in `values`, sorted by id.
  std::vector<std::pair<uint32_t, uint32_t>> index;
  // An aligned copy of the graph's bytes, when the payload did not align them (legacy in-graph
  // constants point into it).
  std::vector<uint64_t> storage;
};

// `named_data` may be null (a program without any); see the file comment.
absl::StatusOr<XnnGraph> ReadXnnpackPayload(absl::Span<const uint8_t> payload,
                                            const NamedData* named_data);

}  // namespace ferry

#endif  // FERRY_LOADER_EXECUTORCH_XNNPACK_READER_H_
