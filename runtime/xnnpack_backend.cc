// The built-in XNNPACK backend: an XNNPACK graph translated at init into a Ferry sub-program of
// host ops, run as the graph backend runs its own. See runtime/backend.h (MakeXnnpackBackend).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/op_util.h"
#include "ferry/loader/executorch/xnnpack_reader.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/internal/graph_instance.h"

namespace ferry {
namespace {

std::string Shape(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The physical order of `ref`'s dimensions (outermost first), from its strides: what XNNPACK sees
// of a tensor (ExecuTorch hands it the sizes in dim order).
std::vector<int64_t> DimOrderOf(const TensorRef& ref) {
  std::vector<int64_t> order(ref.rank);
  for (int i = 0; i < ref.rank; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    // Size-1 dimensions keep their logical place: any stride is theirs.
    const int64_t sa = ref.sizes[a] == 1 ? -1 : ref.strides[a];
    const int64_t sb = ref.sizes[b] == 1 ? -1 : ref.strides[b];
    if (sa < 0 || sb < 0) return false;
    return sa > sb;
  });
  return order;
}

bool IsIdentity(absl::Span<const int64_t> order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Translates one XNNPACK graph into method "main" of a Ferry program for one call.
class Translator {
 public:
  Translator(const XnnGraph& graph, const DelegateInit& init)
      : graph_(graph), init_(init), builder_(init.ops), m_(builder_.AddMethod("main")) {}

  absl::StatusOr<std::vector<uint8_t>> Run() {
    ferry_of_.assign(graph_.values.size(), -1);
    FERRY_RETURN_IF_ERROR(BindArguments());
    for (const XnnNode& node : graph_.nodes) {
      FERRY_RETURN_IF_ERROR(Node(node));
      FERRY_RETURN_IF_ERROR(builder_.status());
    }
    FERRY_RETURN_IF_ERROR(BindResults());
    return builder_.Build();
  }

 private:
  int64_t IndexOf(uint32_t id) const { return graph_.IndexOf(id); }

  absl::Status Refuse(const XnnNode& node, absl::string_view why) const {
    return absl::UnimplementedError(absl::StrCat("XNNPACK ", XnnGraph::NodeLabel(node), ": ", why));
  }

  // Quantized values are computed as float32 holding their dequantized values: a value of
  // qint8 or quint8 (one scale and zero point) is rounded to its grid where a node writes it, and
  // quantized constants (per-tensor, or qcint8 and qcint32 per channel) are dequantized once at
  // load. Every other datatype, and quantization at run time, is refused by name.
  static bool PerTensorActivation(const XnnValue& v) {
    return (v.dtype == XnnDataType::kQInt8 || v.dtype == XnnDataType::kQUInt8) &&
           v.quant == XnnQuant::kPerTensor;
  }
  absl::Status CheckSupported(const XnnValue& v, absl::string_view where) const {
    const bool plain = v.dtype == XnnDataType::kFloat32 && v.quant == XnnQuant::kNone;
    const bool constant_quant =
        v.is_constant && (((v.dtype == XnnDataType::kQInt8 || v.dtype == XnnDataType::kQUInt8 ||
                            v.dtype == XnnDataType::kQInt32) &&
                           v.quant == XnnQuant::kPerTensor) ||
                          ((v.dtype == XnnDataType::kQCInt8 || v.dtype == XnnDataType::kQCInt32) &&
                           v.quant == XnnQuant::kPerChannel));
    if ((plain || PerTensorActivation(v) || constant_quant) &&
        v.dynamic_quant == XnnDataType::kInvalid) {
      return absl::OkStatus();
    }
    return absl::UnimplementedError(absl::StrCat(
        "XNNPACK ", where, ": value id ", v.id, " is ",
        v.dynamic_quant != XnnDataType::kInvalid
            ? absl::StrCat("quantized at run time to ", XnnDataTypeName(v.dynamic_quant))
            : std::string(XnnDataTypeName(v.dtype)),
        v.quant == XnnQuant::kPerChannelGroup                ? " per channel group"
        : v.quant == XnnQuant::kPerTokenDynamic              ? " per token"
        : v.quant == XnnQuant::kPerChannel && !v.is_constant ? " per channel, not a constant"
                                                             : "",
        "; Ferry's XNNPACK backend runs float32 graphs, and qint8 and quint8 ones with qint8, "
        "qcint8, qint32 and qcint32 constants"));
  }

  // The element range and dtype of a qint8 or quint8 value.
  static std::pair<int64_t, int64_t> QuantRange(const XnnValue& v) {
    return v.dtype == XnnDataType::kQUInt8 ? std::pair<int64_t, int64_t>{0, 255}
                                           : std::pair<int64_t, int64_t>{-128, 127};
  }
  static DType QuantDType(const XnnValue& v) {
    return v.dtype == XnnDataType::kQUInt8 ? DType::kUInt8 : DType::kInt8;
  }
  // quantize(x) to v's grid, as the integer tensor.
  ValueId Quantize(ValueId x, const XnnValue& v) {
    const auto [lo, hi] = QuantRange(v);
    return m_.Op("quantize", {x, m_.Double(v.scale), m_.Int(v.zero_point), m_.Int(lo), m_.Int(hi),
                              m_.Int(static_cast<int64_t>(QuantDType(v)))});
  }
  ValueId Dequantize(ValueId q, const XnnValue& v) {
    const auto [lo, hi] = QuantRange(v);
    return m_.Op("dequantize",
                 {q, m_.Double(v.scale), m_.Int(v.zero_point), m_.Int(lo), m_.Int(hi)});
  }

  // A constant's elements as floats: dequantized ((q - zero point) * scale, the channel's scale
  // and zero point 0 per channel) when it is quantized.
  static std::vector<float> FloatValues(const XnnValue& v) {
    int64_t numel = 1;
    for (int64_t d : v.dims) numel *= d;
    std::vector<float> out(static_cast<size_t>(numel));
    if (v.quant == XnnQuant::kNone) {
      if (numel > 0) std::memcpy(out.data(), v.data.data(), out.size() * sizeof(float));
      return out;
    }
    // Elements between two steps of the channel dim, and the channel count.
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(v.channel_dim) + 1; d < v.dims.size(); ++d)
      inner *= v.dims[d];
    const int64_t channels = v.quant == XnnQuant::kPerChannel ? v.dims[v.channel_dim] : 1;
    for (int64_t i = 0; i < numel; ++i) {
      int64_t q = 0;
      if (v.dtype == XnnDataType::kQInt8 || v.dtype == XnnDataType::kQCInt8) {
        q = static_cast<int8_t>(v.data[i]);
      } else if (v.dtype == XnnDataType::kQUInt8) {
        q = v.data[i];
      } else {  // qint32, qcint32
        int32_t w = 0;
        std::memcpy(&w, v.data.data() + 4 * i, 4);
        q = w;
      }
      if (v.quant == XnnQuant::kPerChannel) {
        out[i] = static_cast<float>(q) * v.channel_scales[(i / inner) % channels];
      } else {
        out[i] = static_cast<float>(q - v.zero_point) * v.scale;
      }
    }
    return out;
  }

  absl::Status BindArguments() {
    const size_t n_args = init_.args.size();
    const size_t n_results = init_.results.size();
    if (graph_.num_externs != n_args + n_results) {
      return absl::InvalidArgumentError(absl::StrCat(
          "XNNPACK graph has ", graph_.num_externs, " external values, but the call passes ",
          n_args, " arguments and has ", n_results, " results"));
    }
    std::vector<int64_t> value_of_external(graph_.num_externs, -1);
    for (size_t i = 0; i < graph_.values.size(); ++i) {
      const XnnValue& v = graph_.values[i];
      if (v.flags == 0) continue;
      value_of_external[v.external_id] = static_cast<int64_t>(i);
      const bool is_arg = v.external_id < n_args;
      if (((v.flags & kXnnExternalInput) != 0) != is_arg ||
          ((v.flags & kXnnExternalOutput) != 0) == is_arg) {
        return absl::InvalidArgumentError(absl::StrCat(
            "XNNPACK graph: value id ", v.id, " is external ", v.external_id, " and flagged as ",
            (v.flags & kXnnExternalInput) != 0 ? "an input" : "an output", ", but position ",
            v.external_id, " of the call is ", is_arg ? "an argument" : "a result"));
      }
    }
    for (size_t a = 0; a < n_args; ++a) {
      const TensorRef& arg = init_.args[a];
      if (arg.rank < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", a, " is not a tensor; an XNNPACK call takes tensors only"));
      }
      const std::vector<int64_t> sizes(arg.sizes.begin(), arg.sizes.begin() + arg.rank);
      ValueId x = m_.Input(absl::StrCat("argument ", a), arg.dtype, sizes);
      const int64_t at = value_of_external[a];
      if (at < 0) continue;  // an argument the graph does not read
      const XnnValue& v = graph_.values[at];
      FERRY_RETURN_IF_ERROR(CheckSupported(v, absl::StrCat("argument ", a)));
      const DType want = PerTensorActivation(v) ? QuantDType(v) : DType::kFloat32;
      // XNNPACK sees the tensor as stored: a permuted view of the argument in its dim order.
      const std::vector<int64_t> order = DimOrderOf(arg);
      std::vector<int64_t> stored(order.size());
      for (size_t d = 0; d < order.size(); ++d) stored[d] = sizes[order[d]];
      if (arg.dtype != want || stored != v.dims) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", a, " is ", DTypeName(arg.dtype), Shape(sizes),
                         IsIdentity(order) ? "" : absl::StrCat(" (stored as ", Shape(stored), ")"),
                         ", but the XNNPACK graph reads it (value id ", v.id, ") as ",
                         XnnDataTypeName(v.dtype), Shape(v.dims)));
      }
      x = Permute(x, order);
      if (PerTensorActivation(v)) x = Dequantize(x, v);
      ferry_of_[at] = x;
    }
    value_of_external_ = std::move(value_of_external);
    return absl::OkStatus();
  }

  absl::Status BindResults() {
    const size_t n_args = init_.args.size();
    for (size_t r = 0; r < init_.results.size(); ++r) {
      const TensorRef& result = init_.results[r];
      const int64_t at = value_of_external_[n_args + r];
      if (at < 0) {
        return absl::InvalidArgumentError(absl::StrCat("XNNPACK graph has no value for result ", r,
                                                       " (external ", n_args + r, ")"));
      }
      const XnnValue& v = graph_.values[at];
      ValueId y = ferry_of_[at];
      if (y < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("XNNPACK graph never writes result ", r, " (value id ", v.id, ")"));
      }
      // The graph writes the result as stored; the call's result is its logical view.
      const std::vector<int64_t> order = DimOrderOf(result);
      const std::vector<int64_t> sizes(result.sizes.begin(), result.sizes.begin() + result.rank);
      std::vector<int64_t> stored(order.size());
      for (size_t d = 0; d < order.size(); ++d) stored[d] = sizes[order[d]];
      const DType want = PerTensorActivation(v) ? QuantDType(v) : DType::kFloat32;
      if (result.dtype != want || stored != v.dims) {
        return absl::InvalidArgumentError(
            absl::StrCat("result ", r, " is ", DTypeName(result.dtype), Shape(sizes),
                         IsIdentity(order) ? "" : absl::StrCat(" (stored as ", Shape(stored), ")"),
                         ", but the XNNPACK graph writes it (value id ", v.id, ") as ",
                         XnnDataTypeName(v.dtype), Shape(v.dims)));
      }
      if (PerTensorActivation(v)) y = Quantize(y, v);
      std::vector<int64_t> inverse(order.size());
      for (size_t d = 0; d < order.size(); ++d) inverse[order[d]] = static_cast<int64_t>(d);
      y = Permute(y, inverse);
      m_.Output(y);
    }
    return builder_.status();
  }

  // The Ferry value of XNNPACK value `id` (a constant is added on first use).
  absl::StatusOr<ValueId> In(const XnnNode& node, uint32_t id) {
    const int64_t at = IndexOf(id);
    const XnnValue& v = graph_.values[at];
    if (ferry_of_[at] >= 0) return ferry_of_[at];
    FERRY_RETURN_IF_ERROR(CheckSupported(v, XnnGraph::NodeLabel(node)));
    if (!v.is_constant) {
      return absl::InvalidArgumentError(absl::StrCat("XNNPACK ", XnnGraph::NodeLabel(node),
                                                     " reads value id ", id,
                                                     ", which is not an argument of the call"));
    }
    ferry_of_[at] = m_.ConstantF32(absl::StrCat("xnnpack value ", v.id),
                                   {v.dims.begin(), v.dims.end()}, FloatValues(v));
    return ferry_of_[at];
  }

  // A constant filter with its dimensions reordered: out[j...] = in[...] where out's dim d is
  // in's dim perm[d]. Non-constant filters are permuted as views.
  // `final_dims`, when given, reshapes the permuted filter (the same elements in order).
  absl::StatusOr<ValueId> PermutedFilter(const XnnNode& node, uint32_t id,
                                         const std::vector<int64_t>& in_dims,
                                         const std::vector<int64_t>& perm,
                                         std::vector<int64_t> final_dims = {}) {
    const int64_t at = IndexOf(id);
    const XnnValue& v = graph_.values[at];
    FERRY_RETURN_IF_ERROR(CheckSupported(v, XnnGraph::NodeLabel(node)));
    if (!v.is_constant) {
      FERRY_ASSIGN_OR_RETURN(ValueId w, In(node, id));
      if (in_dims != v.dims) w = m_.Op("reshape", {w, m_.IntList(in_dims)});
      w = Permute(w, perm);
      if (!final_dims.empty()) w = m_.Op("reshape", {w, m_.IntList(final_dims)});
      return w;
    }
    int64_t want = 1, have = 1;
    for (int64_t d : in_dims) want *= d;
    for (int64_t d : v.dims) have *= d;
    if (want != have) {
      return absl::InvalidArgumentError(
          absl::StrCat("XNNPACK ", XnnGraph::NodeLabel(node), ": its filter (value id ", v.id,
                       ") is ", Shape(v.dims), ", but the node needs ", Shape(in_dims)));
    }
    // The permuted view of the filter, copied dense by the kernels' strided copy.
    std::vector<float> in = FloatValues(v);
    std::vector<float> out(in.size());
    const TensorRef source = TensorRef::Contiguous(DType::kFloat32, in_dims, in.data());
    TensorRef view = source;
    std::vector<int64_t> out_dims(in_dims.size());
    for (size_t d = 0; d < in_dims.size(); ++d) {
      out_dims[d] = view.sizes[d] = in_dims[perm[d]];
      view.strides[d] = source.strides[perm[d]];
    }
    internal::BroadcastCopy(TensorRef::Contiguous(DType::kFloat32, out_dims, out.data()), view);
    return m_.ConstantF32(absl::StrCat("xnnpack value ", v.id, " (reordered)"),
                          final_dims.empty() ? out_dims : final_dims, std::move(out));
  }

  absl::Status CheckFlags(const XnnNode& node, uint32_t allowed) const {
    if ((node.flags & ~allowed) != 0) {
      return Refuse(node, absl::StrCat("flags 0x", absl::Hex(node.flags), " are not supported"));
    }
    return absl::OkStatus();
  }

  absl::Status SymmetricPadding(const XnnNode& node) const {
    if (node.padding[0] != node.padding[2] || node.padding[1] != node.padding[3]) {
      return Refuse(node, absl::StrCat("asymmetric padding (top ", node.padding[0], ", right ",
                                       node.padding[1], ", bottom ", node.padding[2], ", left ",
                                       node.padding[3], ") is not supported"));
    }
    return absl::OkStatus();
  }

  // x with its dims reordered (out dim d is x's dim perm[d]), as a view. Permutes of permutes
  // compose, and one that composes to the identity is the original value: the exporter's
  // NCHW <-> NHWC transposes around a convolution cancel against the backend's own.
  ValueId Permute(ValueId x, std::vector<int64_t> perm) {
    if (auto it = permute_of_.find(x); it != permute_of_.end()) {
      const std::vector<int64_t>& inner = it->second.second;
      if (inner.size() == perm.size()) {
        std::vector<int64_t> composed(perm.size());
        for (size_t d = 0; d < perm.size(); ++d) composed[d] = inner[perm[d]];
        x = it->second.first;
        perm = std::move(composed);
      }
    }
    if (IsIdentity(perm)) return x;
    const ValueId y = m_.Op("permute", {x, m_.IntList(perm)});
    permute_of_[y] = {x, std::move(perm)};
    return y;
  }
  ValueId ToNchw(ValueId x) { return Permute(x, {0, 3, 1, 2}); }

  // The node's first input, which is NHWC (rank 4), once its flags are checked.
  absl::StatusOr<ValueId> NhwcInput(const XnnNode& node, uint32_t allowed_flags) {
    FERRY_RETURN_IF_ERROR(CheckFlags(node, allowed_flags));
    FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
    if (m_.meta(x).rank() != 4) {
      return Refuse(
          node, absl::StrCat("its input is ", m_.meta(x).ToString(), "; it takes NHWC (rank 4)"));
    }
    return x;
  }

  absl::Status CheckFilterRank(const XnnNode& node, const XnnValue& filter) const {
    if (filter.dims.size() != 4) {
      return Refuse(node, absl::StrCat("its filter is ", Shape(filter.dims), "; it has rank 4"));
    }
    return absl::OkStatus();
  }

  absl::Status Node(const XnnNode& node) {
    const XnnValue& out_value = graph_.values[IndexOf(node.outputs[0])];
    FERRY_RETURN_IF_ERROR(CheckSupported(out_value, XnnGraph::NodeLabel(node)));
    nhwc_after_ = false;
    FERRY_ASSIGN_OR_RETURN(ValueId y, Translate(node));
    FERRY_RETURN_IF_ERROR(builder_.status());
    if (node.output_range.has_value()) {
      const auto [lo, hi] = *node.output_range;
      if (lo > -std::numeric_limits<float>::infinity() ||
          hi < std::numeric_limits<float>::infinity()) {
        y = m_.Op("clamp", {y, m_.Double(lo), m_.Double(hi)});
      }
    }
    // Convolutions and pooling computed in NCHW are clamped there, then seen as NHWC.
    if (nhwc_after_) y = Permute(y, {0, 2, 3, 1});
    // A quantized result is rounded to its grid (and clamped to its range), as the integer
    // kernels' requantization does.
    if (PerTensorActivation(out_value)) y = Dequantize(Quantize(y, out_value), out_value);
    FERRY_RETURN_IF_ERROR(builder_.status());
    const TensorMeta& meta = m_.meta(y);
    const std::vector<int64_t> sizes(meta.sizes.begin(), meta.sizes.end());
    if (sizes != out_value.dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "XNNPACK ", XnnGraph::NodeLabel(node), ": the graph declares its output (value id ",
          out_value.id, ") as ", Shape(out_value.dims), ", but the node computes ", Shape(sizes)));
    }
    ferry_of_[IndexOf(node.outputs[0])] = y;
    return absl::OkStatus();
  }

  absl::StatusOr<ValueId> Unary(const XnnNode& node, const char* op) {
    FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
    FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
    return m_.Op(op, {x});
  }

  absl::StatusOr<ValueId> Binary(const XnnNode& node, const char* op) {
    FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
    FERRY_ASSIGN_OR_RETURN(ValueId a, In(node, node.inputs[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId b, In(node, node.inputs[1]));
    return m_.Op(op, {a, b});
  }

  absl::StatusOr<ValueId> Translate(const XnnNode& node) {
    switch (node.type) {
      case XnnNodeType::kAdd:
        return Binary(node, "add");
      case XnnNodeType::kSubtract:
        return Binary(node, "sub");
      case XnnNodeType::kMultiply:
        return Binary(node, "mul");
      case XnnNodeType::kDivide:
        return Binary(node, "div");
      case XnnNodeType::kMinimum:
        return Binary(node, "minimum");
      case XnnNodeType::kMaximum:
        return Binary(node, "maximum");
      case XnnNodeType::kBatchMatrixMultiply: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, kXnnTransposeWeights));
        FERRY_ASSIGN_OR_RETURN(ValueId a, In(node, node.inputs[0]));
        FERRY_ASSIGN_OR_RETURN(ValueId b, In(node, node.inputs[1]));
        if ((node.flags & kXnnTransposeWeights) != 0) {
          b = m_.Op("transpose", {b, m_.Int(-2), m_.Int(-1)});
        }
        return m_.Op("matmul", {a, b});
      }
      case XnnNodeType::kPRelu: {
        // max(x, 0) + slope * min(x, 0), the slope broadcast over the channels (the last dim).
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        FERRY_ASSIGN_OR_RETURN(ValueId slope, In(node, node.inputs[1]));
        const ValueId neg = m_.Op("mul", {m_.Op("minimum", {x, m_.Double(0)}), slope});
        return m_.Op("add", {m_.Op("relu", {x}), neg});
      }
      case XnnNodeType::kFullyConnected:
        return FullyConnected(node);
      case XnnNodeType::kConv2d:
      case XnnNodeType::kDepthwiseConv2d:
        return Convolution(node);
      case XnnNodeType::kConvTranspose2d:
        return ConvTranspose(node);
      case XnnNodeType::kMaxPooling2d:
      case XnnNodeType::kAvgPooling2d:
        return Pooling(node);
      case XnnNodeType::kGlobalAvgPooling2d: {
        FERRY_ASSIGN_OR_RETURN(ValueId x, NhwcInput(node, kXnnKeepDims));
        const bool keep = (node.flags & kXnnKeepDims) != 0;
        return m_.Op("mean", {x, m_.IntList({1, 2}), m_.Scalar(ferry::Scalar::Bool(keep))});
      }
      case XnnNodeType::kClamp: {
        // The range is the node's output range (applied by the caller); none is the identity.
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        if (!node.output_range.has_value()) return m_.Op("clone", {x});
        return x;
      }
      case XnnNodeType::kSoftmax: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        return m_.Op("softmax", {x, m_.Int(-1)});
      }
      case XnnNodeType::kSigmoid:
        return Unary(node, "sigmoid");
      case XnnNodeType::kTanh:
        return Unary(node, "tanh");
      case XnnNodeType::kExp:
        return Unary(node, "exp");
      case XnnNodeType::kLog:
        return Unary(node, "log");
      case XnnNodeType::kSin:
        return Unary(node, "sin");
      case XnnNodeType::kCos:
        return Unary(node, "cos");
      case XnnNodeType::kAbs:
        return Unary(node, "abs");
      case XnnNodeType::kNegate:
        return Unary(node, "neg");
      case XnnNodeType::kSquareRoot:
        return Unary(node, "sqrt");
      case XnnNodeType::kReciprocalSquareRoot:
        return Unary(node, "rsqrt");
      case XnnNodeType::kHardswish:
        return Unary(node, "hardswish");
      case XnnNodeType::kGelu:
        return Unary(node, "gelu");
      case XnnNodeType::kFloor:
        return Unary(node, "floor");
      case XnnNodeType::kCeiling:
        return Unary(node, "ceil");
      case XnnNodeType::kCopy:
      case XnnNodeType::kConvert:  // float32 to float32 (other datatypes are refused)
        return Unary(node, "clone");
      case XnnNodeType::kSquare: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        return m_.Op("mul", {x, x});
      }
      case XnnNodeType::kLeakyRelu: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        return m_.Op("leaky_relu", {x, m_.Double(node.alpha)});
      }
      case XnnNodeType::kElu: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        return m_.Op("elu", {x, m_.Double(node.alpha), m_.Double(1), m_.Double(1)});
      }
      case XnnNodeType::kStaticTranspose: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        if (node.list.size() != static_cast<size_t>(m_.meta(x).rank())) {
          return absl::InvalidArgumentError(
              absl::StrCat("XNNPACK ", XnnGraph::NodeLabel(node), ": a permutation of ",
                           node.list.size(), " dims for an input of rank ", m_.meta(x).rank()));
        }
        return Permute(x, node.list);
      }
      case XnnNodeType::kStaticReshape: {
        // The output's declared dims are the new shape (the node's own may hold a 0 to infer).
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        return m_.Op("reshape", {x, m_.IntList(graph_.value(node.outputs[0])->dims)});
      }
      case XnnNodeType::kStaticSlice:
        return Slice(node);
      case XnnNodeType::kConcatenate2:
      case XnnNodeType::kConcatenate3:
      case XnnNodeType::kConcatenate4:
      case XnnNodeType::kConcatenate5: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        std::vector<ValueId> args = {m_.Int(node.axis)};
        for (uint32_t id : node.inputs) {
          FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, id));
          args.push_back(x);
        }
        return m_.Op("cat", std::move(args));
      }
      case XnnNodeType::kScaledDotProductAttention:
        return Attention(node);
      case XnnNodeType::kStaticConstantPad: {
        FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
        FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
        const int rank = m_.meta(x).rank();
        if (node.list.size() != static_cast<size_t>(rank) ||
            node.list2.size() != node.list.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("XNNPACK ", XnnGraph::NodeLabel(node), ": ", node.list.size(), " and ",
                           node.list2.size(), " paddings for an input of rank ", rank));
        }
        // (before, after) pairs from the last dim backwards.
        std::vector<int64_t> pad;
        for (int d = rank - 1; d >= 0; --d) {
          pad.push_back(node.list[d]);
          pad.push_back(node.list2[d]);
        }
        return m_.Op("constant_pad", {x, m_.IntList(std::move(pad)), m_.Double(node.alpha)});
      }
      case XnnNodeType::kStaticResizeBilinear2d: {
        // XNNPACK's half-pixel or align-corners mapping, as PyTorch's upsample_bilinear2d.
        FERRY_ASSIGN_OR_RETURN(ValueId x, NhwcInput(node, kXnnAlignCorners));
        const bool align = (node.flags & kXnnAlignCorners) != 0;
        const ValueId y =
            m_.Op("upsample_bilinear2d",
                  {ToNchw(x), m_.IntList({node.new_size[0], node.new_size[1]}),
                   m_.Scalar(ferry::Scalar::Bool(align)), m_.Double(0), m_.Double(0)});
        nhwc_after_ = true;
        return y;
      }
      case XnnNodeType::kArgMaxPooling2d:
        break;
    }
    return Refuse(node, "this node type is not supported by Ferry's XNNPACK backend yet");
  }

  absl::StatusOr<ValueId> FullyConnected(const XnnNode& node) {
    FERRY_RETURN_IF_ERROR(CheckFlags(node, kXnnTransposeWeights));
    FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
    const XnnValue& filter = *graph_.value(node.inputs[1]);
    if (filter.dims.size() != 2) {
      return Refuse(node, absl::StrCat("its filter is ", Shape(filter.dims),
                                       "; a fully connected filter has rank 2"));
    }
    ValueId w;
    if ((node.flags & kXnnTransposeWeights) != 0) {
      // [in, out] stored: Ferry's linear takes [out, in].
      FERRY_ASSIGN_OR_RETURN(w, PermutedFilter(node, node.inputs[1], filter.dims, {1, 0}));
    } else {
      FERRY_ASSIGN_OR_RETURN(w, In(node, node.inputs[1]));
    }
    std::vector<ValueId> args = {x, w};
    if (node.inputs[2] != kXnnNoValue) {
      FERRY_ASSIGN_OR_RETURN(ValueId bias, In(node, node.inputs[2]));
      args.push_back(bias);
    }
    return m_.Op("linear", std::move(args));
  }

  // Convolutions take NHWC input and write NHWC output; Ferry's conv is NCHW. The permutes are
  // views, so with the exporter's own NCHW <-> NHWC transposes around the node they cancel.
  absl::StatusOr<ValueId> Convolution(const XnnNode& node) {
    FERRY_RETURN_IF_ERROR(SymmetricPadding(node));
    FERRY_ASSIGN_OR_RETURN(ValueId x, NhwcInput(node, 0));
    const XnnValue& filter = *graph_.value(node.inputs[1]);
    FERRY_RETURN_IF_ERROR(CheckFilterRank(node, filter));
    ValueId w;
    const int64_t kh = node.kernel[0], kw = node.kernel[1];
    const int64_t groups = node.groups;
    if (node.type == XnnNodeType::kDepthwiseConv2d) {
      // [1, kh, kw, channels * multiplier] -> [channels * multiplier, 1, kh, kw].
      const int64_t out_channels = filter.dims[3];
      FERRY_ASSIGN_OR_RETURN(
          w, PermutedFilter(node, node.inputs[1], {1, kh, kw, out_channels}, {3, 0, 1, 2}));
    } else {
      // [out, kh, kw, in / groups] -> [out, in / groups, kh, kw].
      FERRY_ASSIGN_OR_RETURN(w, PermutedFilter(node, node.inputs[1], filter.dims, {0, 3, 1, 2}));
    }
    const TensorMeta& wm = m_.meta(w);
    if (wm.rank() != 4 || wm.sizes[2] != kh || wm.sizes[3] != kw) {
      return absl::InvalidArgumentError(absl::StrCat("XNNPACK ", XnnGraph::NodeLabel(node),
                                                     ": its filter ", Shape(filter.dims),
                                                     " does not hold a ", kh, "x", kw, " kernel"));
    }
    std::vector<ValueId> args = {ToNchw(x),
                                 w,
                                 m_.IntList({node.stride[0], node.stride[1]}),
                                 m_.IntList({node.padding[0], node.padding[1]}),
                                 m_.IntList({node.dilation[0], node.dilation[1]}),
                                 m_.Int(groups)};
    if (node.inputs[2] != kXnnNoValue) {
      FERRY_ASSIGN_OR_RETURN(ValueId bias, In(node, node.inputs[2]));
      args.push_back(bias);
    }
    const std::vector<ValueId> results = m_.HostOp("conv", std::move(args));
    nhwc_after_ = true;
    return results[0];
  }

  // A transposed convolution (XNNPACK's deconvolution): NHWC in and out, the filter
  // [groups * out per group, kh, kw, in per group]; Ferry's conv_transpose is NCHW with the filter
  // [in, out per group, kh, kw], reordered once at load.
  absl::StatusOr<ValueId> ConvTranspose(const XnnNode& node) {
    FERRY_RETURN_IF_ERROR(SymmetricPadding(node));
    FERRY_ASSIGN_OR_RETURN(ValueId x, NhwcInput(node, 0));
    const XnnValue& filter = *graph_.value(node.inputs[1]);
    FERRY_RETURN_IF_ERROR(CheckFilterRank(node, filter));
    const int64_t groups = node.groups, kh = node.kernel[0], kw = node.kernel[1];
    const int64_t og = node.group_output_channels, cg = node.group_input_channels;
    FERRY_ASSIGN_OR_RETURN(ValueId w, PermutedFilter(node, node.inputs[1], {groups, og, kh, kw, cg},
                                                     {0, 4, 1, 2, 3}, {groups * cg, og, kh, kw}));
    std::vector<ValueId> args = {ToNchw(x),
                                 w,
                                 m_.IntList({node.stride[0], node.stride[1]}),
                                 m_.IntList({node.padding[0], node.padding[1]}),
                                 m_.IntList({node.adjustment[0], node.adjustment[1]}),
                                 m_.IntList({node.dilation[0], node.dilation[1]}),
                                 m_.Int(groups)};
    if (node.inputs[2] != kXnnNoValue) {
      FERRY_ASSIGN_OR_RETURN(ValueId bias, In(node, node.inputs[2]));
      args.push_back(bias);
    }
    const ValueId y = m_.Op("conv_transpose", std::move(args));
    nhwc_after_ = true;
    return y;
  }

  // The exporter flags pooling KEEP_DIMS (the output stays 4-D, as here) and writes ATen's
  // ceil_mode as extra bottom and right padding: for max pooling, that padding (never the max) is
  // ceil_mode over the top and left padding, which the node's declared output sizes confirm.
  absl::StatusOr<ValueId> Pooling(const XnnNode& node) {
    const bool ceil = node.type == XnnNodeType::kMaxPooling2d &&
                      node.padding[2] >= node.padding[0] && node.padding[1] >= node.padding[3] &&
                      (node.padding[2] > node.padding[0] || node.padding[1] > node.padding[3]);
    if (!ceil) FERRY_RETURN_IF_ERROR(SymmetricPadding(node));
    FERRY_ASSIGN_OR_RETURN(ValueId x, NhwcInput(node, kXnnKeepDims));
    const ValueId kernel = m_.IntList({node.kernel[0], node.kernel[1]});
    const ValueId stride = m_.IntList({node.stride[0], node.stride[1]});
    const ValueId padding = m_.IntList({node.padding[0], node.padding[3]});
    const ValueId no = m_.Scalar(ferry::Scalar::Bool(false));
    ValueId y;
    if (node.type == XnnNodeType::kMaxPooling2d) {
      y = m_.Op("max_pool2d", {ToNchw(x), kernel, stride, padding,
                               m_.IntList({node.dilation[0], node.dilation[1]}),
                               m_.Scalar(ferry::Scalar::Bool(ceil))});
    } else {
      if (node.dilation[0] > 1 || node.dilation[1] > 1) {
        return Refuse(node, "dilated average pooling is not supported");
      }
      // XNNPACK averages over the window's elements inside the input (padding not counted).
      y = m_.Op("avg_pool2d",
                {ToNchw(x), kernel, stride, padding, no, no, m_.Scalar(ferry::Scalar::None())});
    }
    nhwc_after_ = true;
    return y;
  }

  absl::StatusOr<ValueId> Slice(const XnnNode& node) {
    FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
    FERRY_ASSIGN_OR_RETURN(ValueId x, In(node, node.inputs[0]));
    const TensorMeta meta = m_.meta(x);
    if (node.list.size() != static_cast<size_t>(meta.rank()) ||
        node.list2.size() != node.list.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "XNNPACK ", XnnGraph::NodeLabel(node), ": ", node.list.size(), " offsets and ",
          node.list2.size(), " sizes for an input of rank ", meta.rank()));
    }
    for (int d = 0; d < meta.rank(); ++d) {
      const int64_t offset = node.list[d], size = node.list2[d];
      if (offset > meta.sizes[d] || size > meta.sizes[d] - offset) {
        return absl::InvalidArgumentError(absl::StrCat("XNNPACK ", XnnGraph::NodeLabel(node),
                                                       ": dim ", d, " slices ", size, " from ",
                                                       offset, " of ", meta.sizes[d]));
      }
      if (offset == 0 && size == meta.sizes[d]) continue;
      x = m_.Op("slice", {x, m_.Int(d), m_.Int(offset), m_.Int(offset + size), m_.Int(1)});
    }
    return x;
  }

  // softmax((query * scale) key^T + mask) value, over the last dim.
  absl::StatusOr<ValueId> Attention(const XnnNode& node) {
    FERRY_RETURN_IF_ERROR(CheckFlags(node, 0));
    FERRY_ASSIGN_OR_RETURN(ValueId q, In(node, node.inputs[0]));
    FERRY_ASSIGN_OR_RETURN(ValueId k, In(node, node.inputs[1]));
    FERRY_ASSIGN_OR_RETURN(ValueId v, In(node, node.inputs[2]));
    FERRY_ASSIGN_OR_RETURN(ValueId scale, In(node, node.inputs[3]));
    FERRY_ASSIGN_OR_RETURN(ValueId mask, In(node, node.inputs[4]));
    const ValueId scores = m_.Op(
        "matmul", {m_.Op("mul", {q, scale}), m_.Op("transpose", {k, m_.Int(-2), m_.Int(-1)})});
    const ValueId weights = m_.Op("softmax", {m_.Op("add", {scores, mask}), m_.Int(-1)});
    return m_.Op("matmul", {weights, v});
  }

  const XnnGraph& graph_;
  const DelegateInit& init_;
  ProgramBuilder builder_;
  MethodBuilder& m_;
  std::vector<ValueId> ferry_of_;  // per XNNPACK value index: its Ferry value, or -1
  std::vector<int64_t> value_of_external_;
  // Values made by Permute: their base value and permutation.
  absl::flat_hash_map<ValueId, std::pair<ValueId, std::vector<int64_t>>> permute_of_;
  bool nhwc_after_ = false;  // the node translated last wants its result permuted to NHWC
};

class XnnpackBackend : public Backend {
 public:
  absl::string_view name() const override { return kXnnpackBackendName; }
  bool SupportsDevice(DeviceType type) const override { return type == DeviceType::kHost; }
  absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(const DelegateInit& init) const override {
    FERRY_ASSIGN_OR_RETURN(XnnGraph graph, ReadXnnpackPayload(init.payload, init.named_data));
    FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Translator(graph, init).Run());
    absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(bytes);
    if (!program.ok()) {
      // The translation writes only what Ferry's reader accepts.
      return absl::InternalError(
          absl::StrCat("the translated XNNPACK graph does not load: ", program.status().message()));
    }
    return internal::InitGraphInstance(init, std::shared_ptr<const Program>(*std::move(program)),
                                       *cache_);
  }

 private:
  std::shared_ptr<internal::GraphProgramCache> cache_ = internal::MakeGraphProgramCache();
};

}  // namespace

std::unique_ptr<Backend> MakeXnnpackBackend() { return std::make_unique<XnnpackBackend>(); }

}  // namespace ferry
