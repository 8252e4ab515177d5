#include "ferry/loader/executorch/xnnpack_reader.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/internal/untrusted_bytes.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/xnnpack_graph_generated.h"

namespace ferry {
namespace {

namespace fb = ::ferry::xnn::fbs;

static_assert(FLATBUFFERS_LITTLEENDIAN,
              "Ferry reads XNNPACK graphs in place on little-endian hosts");

constexpr size_t kHeaderMagicOffset = 4;
constexpr size_t kHeaderMinSize = 30;
// Graph/values/GraphValue/QuantizedTensor/quant_params/PerChannel/scales is the deepest path; the
// margin tolerates new fields.
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
// XNNPACK's limit on tensor rank (XNN_MAX_TENSOR_DIMS).
constexpr size_t kMaxRank = 6;

using ::ferry::internal::Quoted;
using ::ferry::internal::ReadLE;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("XNNPACK payload: ", what));
}

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

std::string Shape(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// Bytes of `numel` elements of `type`; nullopt for a type with no fixed element size.
std::optional<uint64_t> ByteSize(XnnDataType type, uint64_t numel) {
  switch (type) {
    case XnnDataType::kFloat32:
    case XnnDataType::kQInt32:
    case XnnDataType::kQCInt32:
    case XnnDataType::kInt32:
    case XnnDataType::kPackedFloat32:
      return numel > UINT64_MAX / 4 ? std::nullopt : std::optional<uint64_t>(numel * 4);
    case XnnDataType::kFloat16:
    case XnnDataType::kBFloat16:
      return numel > UINT64_MAX / 2 ? std::nullopt : std::optional<uint64_t>(numel * 2);
    case XnnDataType::kQInt8:
    case XnnDataType::kQUInt8:
    case XnnDataType::kQCInt8:
    case XnnDataType::kQDInt8:
    case XnnDataType::kQPInt8:
      return numel;
    case XnnDataType::kQCInt4:
    case XnnDataType::kQBInt4:
      return numel / 2 + numel % 2;
    case XnnDataType::kInvalid:
      break;
  }
  return std::nullopt;
}

class PayloadReader {
 public:
  PayloadReader(absl::Span<const uint8_t> payload, const NamedData* named_data)
      : payload_(payload), named_data_(named_data) {}

  absl::StatusOr<XnnGraph> Run() {
    FERRY_RETURN_IF_ERROR(ReadHeader());
    FERRY_RETURN_IF_ERROR(Verify());
    root_ = fb::GetGraph(graph_bytes_.data());
    if (root_->version() != nullptr) graph_.version = root_->version()->str();
    graph_.num_externs = root_->num_externs();
    FERRY_RETURN_IF_ERROR(ReadValues());
    FERRY_RETURN_IF_ERROR(ReadNodes());
    FERRY_RETURN_IF_ERROR(ReadExternals());
    return std::move(graph_);
  }

 private:
  absl::Status ReadHeader() {
    if (payload_.size() >= 8 && (std::memcmp(payload_.data() + 4, "XN01", 4) == 0 ||
                                 std::memcmp(payload_.data() + 4, "XN00", 4) == 0)) {
      return Align(payload_);  // the graph alone
    }
    if (payload_.size() < kHeaderMinSize ||
        std::memcmp(payload_.data() + kHeaderMagicOffset, "XH00", 4) != 0) {
      return Invalid(absl::StrCat(
          "its ", payload_.size(),
          " bytes start with neither an \"XH00\" header (bytes 4..7, at least ", kHeaderMinSize,
          " bytes) nor a graph (file identifier \"XN01\" at bytes 4..7)"));
    }
    const uint8_t* p = payload_.data();
    const uint64_t header_length = ReadLE(p + 8, 2);
    const uint64_t graph_offset = ReadLE(p + 10, 4);
    const uint64_t graph_size = ReadLE(p + 14, 4);
    const uint64_t constants_offset = ReadLE(p + 18, 4);
    const uint64_t constants_size = ReadLE(p + 22, 8);
    const uint64_t size = payload_.size();
    if (header_length < kHeaderMinSize || header_length > graph_offset) {
      return Invalid(absl::StrCat("the header says it is ", header_length,
                                  " bytes long; it is at least ", kHeaderMinSize,
                                  " and ends before the graph (at byte ", graph_offset, ")"));
    }
    if (graph_offset > size || graph_size > size - graph_offset || graph_size < 8) {
      return Invalid(absl::StrCat("the graph (", graph_size, " bytes at byte ", graph_offset,
                                  ") does not fit in the payload's ", size,
                                  " bytes, or is shorter than 8"));
    }
    if (constants_offset > size || constants_size > size - constants_offset) {
      return Invalid(absl::StrCat("the constant data (", constants_size, " bytes at byte ",
                                  constants_offset, ") does not fit in the payload's ", size,
                                  " bytes"));
    }
    if (constants_offset < graph_offset + graph_size) {
      return Invalid(absl::StrCat("the constant data (at byte ", constants_offset,
                                  ") overlaps the graph (", graph_size, " bytes at byte ",
                                  graph_offset, ")"));
    }
    constants_ = payload_.subspan(constants_offset, constants_size);
    return Align(payload_.subspan(graph_offset, graph_size));
  }

  // The graph's scalars are read in place: from the payload when it is 8-byte aligned there, else
  // from an aligned copy (which the graph keeps, for the legacy buffers that point into it).
  absl::Status Align(absl::Span<const uint8_t> graph) {
    if (reinterpret_cast<uintptr_t>(graph.data()) % 8 == 0) {
      graph_bytes_ = graph;
      return absl::OkStatus();
    }
    graph_.storage.assign((graph.size() + 7) / 8, 0);
    std::memcpy(graph_.storage.data(), graph.data(), graph.size());
    graph_bytes_ =
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(graph_.storage.data()), graph.size());
    return absl::OkStatus();
  }

  absl::Status Verify() {
    const absl::Span<const uint8_t> b = graph_bytes_;
    if (b.size() < 8 ||
        (std::memcmp(b.data() + 4, "XN01", 4) != 0 && std::memcmp(b.data() + 4, "XN00", 4) != 0)) {
      const std::string id =
          b.size() < 8
              ? std::string("(none)")
              : absl::CHexEscape(absl::string_view(reinterpret_cast<const char*>(b.data()) + 4, 4));
      return Invalid(absl::StrCat("the graph's file identifier is \"", id,
                                  "\", expected \"XN01\" (or \"XN00\")"));
    }
    if (b.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
      return Invalid(
          absl::StrCat("the graph is ", b.size(), " bytes; the format holds less than 2 GiB"));
    }
    // A table takes at least 4 bytes: the bound keeps the verifier linear in the size even for
    // hostile sharing of tables.
    const auto max_tables =
        static_cast<flatbuffers::uoffset_t>(std::max<size_t>(b.size() / 4, size_t{1} << 16));
    flatbuffers::Verifier verifier(b.data(), b.size(), kMaxDepth, max_tables);
    if (!verifier.VerifyBuffer<fb::Graph>(nullptr)) {
      return Invalid(absl::StrCat(
          "the FlatBuffers verifier rejected the graph's ", b.size(),
          " bytes: an offset or length points outside them, a field is misaligned, or its tables "
          "nest deeper than ",
          kMaxDepth, " or number more than ", max_tables));
    }
    return absl::OkStatus();
  }

  absl::Status ReadValues() {
    const auto* values = root_->values();
    const size_t count = Len(values);
    // Every value is a table of at least a few bytes, but tables may be shared: the bound on the
    // verifier's table count bounds the values too.
    graph_.values.reserve(count);
    std::vector<uint8_t> external_seen(
        graph_.num_externs <= (size_t{1} << 24) ? graph_.num_externs : 0, 0);
    if (graph_.num_externs > (size_t{1} << 24)) {
      return Invalid(absl::StrCat("the graph declares ", graph_.num_externs,
                                  " external values; at most 2^24 are read"));
    }
    for (size_t i = 0; i < count; ++i) {
      const fb::GraphValue* gv = values->Get(static_cast<flatbuffers::uoffset_t>(i));
      const std::string where = absl::StrCat("value ", i);
      XnnValue v;
      const fb::Tensor* t = nullptr;
      const fb::QuantizedTensor* q = nullptr;
      switch (gv->value_type()) {
        case fb::Value::Tensor:
          t = static_cast<const fb::Tensor*>(gv->value());
          break;
        case fb::Value::QuantizedTensor: {
          q = static_cast<const fb::QuantizedTensor*>(gv->value());
          t = q->tensor();
          break;
        }
        default:
          return Invalid(absl::StrCat(where,
                                      " is neither a tensor nor a quantized tensor (value type ",
                                      static_cast<int>(gv->value_type()), ")"));
      }
      if (t == nullptr) return Invalid(absl::StrCat(where, " has no tensor"));
      v.id = t->id();
      const int type = static_cast<int>(t->datatype());
      if (type < 1 || type > static_cast<int>(XnnDataType::kBFloat16)) {
        return Invalid(absl::StrCat(where, " (id ", v.id, ") has datatype ", type,
                                    ", which the format does not define"));
      }
      v.dtype = static_cast<XnnDataType>(type);
      const int dq = static_cast<int>(t->dynamic_quant_datatype());
      if (dq < 0 || dq > static_cast<int>(XnnDataType::kBFloat16)) {
        return Invalid(absl::StrCat(where, " (id ", v.id, ") is quantized at run time to datatype ",
                                    dq, ", which the format does not define"));
      }
      v.dynamic_quant = static_cast<XnnDataType>(dq);
      if (Len(t->dims()) != t->rank()) {
        return Invalid(absl::StrCat(where, " (id ", v.id, ") has rank ", t->rank(), " but ",
                                    Len(t->dims()), " dims"));
      }
      if (t->rank() > kMaxRank) {
        return Invalid(absl::StrCat(where, " (id ", v.id, ") has rank ", t->rank(),
                                    "; XNNPACK tensors have at most ", kMaxRank, " dims"));
      }
      uint64_t numel = 1;
      for (size_t d = 0; d < t->rank(); ++d) {
        const uint32_t dim = t->dims()->Get(static_cast<flatbuffers::uoffset_t>(d));
        v.dims.push_back(dim);
        if (dim != 0 && numel > (uint64_t{1} << 62) / dim) {
          return Invalid(absl::StrCat(where, " (id ", v.id, ") has dims ", Shape(v.dims),
                                      "..., whose element count overflows"));
        }
        numel *= dim;
      }
      const std::optional<uint64_t> bytes = ByteSize(v.dtype, numel);
      if (!bytes.has_value() || *bytes > (uint64_t{1} << 62)) {
        return Invalid(
            absl::StrCat(where, " (id ", v.id, ") of dims ", Shape(v.dims), " is too large"));
      }
      if (q != nullptr) FERRY_RETURN_IF_ERROR(ReadQuant(where, *q, v));
      v.flags = t->flags();
      if ((v.flags & ~(kXnnExternalInput | kXnnExternalOutput)) != 0) {
        return Invalid(absl::StrCat(where, " (id ", v.id, ") has flags 0x", absl::Hex(v.flags),
                                    "; only 1 (input) and 2 (output) are defined"));
      }
      if (v.flags != 0) {
        v.external_id = t->external_id();
        if (v.external_id >= graph_.num_externs) {
          return Invalid(absl::StrCat(where, " (id ", v.id, ") is external ", v.external_id,
                                      ", but the graph has ", graph_.num_externs,
                                      " external values"));
        }
        if (external_seen[v.external_id]++ != 0) {
          return Invalid(absl::StrCat(where, " (id ", v.id, ") is external ", v.external_id,
                                      ", like an earlier value"));
        }
      }
      if (t->constant_index() != 0) {
        if (v.flags != 0) {
          return Invalid(absl::StrCat(where, " (id ", v.id,
                                      ") is both a constant and an input or output of the call"));
        }
        v.is_constant = true;
        FERRY_ASSIGN_OR_RETURN(v.data, ConstantBytes(where, v, t->constant_index(), *bytes));
      }
      graph_.index.emplace_back(v.id, static_cast<uint32_t>(i));
      graph_.values.push_back(std::move(v));
    }
    std::sort(graph_.index.begin(), graph_.index.end());
    for (size_t i = 1; i < graph_.index.size(); ++i) {
      if (graph_.index[i].first == graph_.index[i - 1].first) {
        return Invalid(absl::StrCat("values ", graph_.index[i - 1].second, " and ",
                                    graph_.index[i].second, " have the same id ",
                                    graph_.index[i].first));
      }
    }
    return absl::OkStatus();
  }

  // The quantization parameters of value `v` (its dims read); per-channel scales come from the
  // parameters or, by constant index, from the constant data, one per channel.
  absl::Status ReadQuant(const std::string& where, const fb::QuantizedTensor& q, XnnValue& v) {
    const std::string label = absl::StrCat(where, " (id ", v.id, ")");
    auto channel_scales = [&](const flatbuffers::Vector<float>* scales, uint32_t index,
                              int32_t channel_dim) -> absl::Status {
      if (channel_dim < 0 || static_cast<size_t>(channel_dim) >= v.dims.size()) {
        return Invalid(absl::StrCat(label, " is quantized per channel along dim ", channel_dim,
                                    ", but has rank ", v.dims.size()));
      }
      v.channel_dim = channel_dim;
      const uint64_t channels = static_cast<uint64_t>(v.dims[channel_dim]);
      if (index != 0) {
        XnnValue scale_value;
        scale_value.id = v.id;
        scale_value.dtype = XnnDataType::kFloat32;
        scale_value.dims = {static_cast<int64_t>(channels)};
        FERRY_ASSIGN_OR_RETURN(absl::Span<const uint8_t> bytes,
                               ConstantBytes(absl::StrCat(where, "'s scales"), scale_value, index,
                                             channels * sizeof(float)));
        v.channel_scales.resize(channels);
        if (channels > 0) std::memcpy(v.channel_scales.data(), bytes.data(), bytes.size());
      } else if (scales != nullptr) {
        v.channel_scales.assign(scales->begin(), scales->end());
      }
      if (v.quant == XnnQuant::kPerChannel && v.channel_scales.size() != channels) {
        return Invalid(absl::StrCat(label, " has ", v.channel_scales.size(), " scales for ",
                                    channels, " channels"));
      }
      return absl::OkStatus();
    };
    switch (q.quant_params_type()) {
      case fb::QuantParams::PerTensor: {
        const auto* p = static_cast<const fb::PerTensor*>(q.quant_params());
        v.quant = XnnQuant::kPerTensor;
        v.scale = p->scale();
        v.zero_point = p->zero_point();
        return absl::OkStatus();
      }
      case fb::QuantParams::PerChannel: {
        const auto* p = static_cast<const fb::PerChannel*>(q.quant_params());
        v.quant = XnnQuant::kPerChannel;
        return channel_scales(p->scales(), p->scales_constant_index(), p->channel_dim());
      }
      case fb::QuantParams::PerChannelGroup: {
        const auto* p = static_cast<const fb::PerChannelGroup*>(q.quant_params());
        v.quant = XnnQuant::kPerChannelGroup;
        v.group_size = p->group_size();
        return channel_scales(p->scales(), p->scales_constant_index(), p->channel_dim());
      }
      case fb::QuantParams::PerTokenDynamic: {
        const auto* p = static_cast<const fb::PerTokenDynamic*>(q.quant_params());
        v.quant = XnnQuant::kPerTokenDynamic;
        v.num_nonbatch_dims = p->num_nonbatch_dims();
        return absl::OkStatus();
      }
      default:
        return Invalid(
            absl::StrCat(where, " is a quantized tensor without quantization parameters"));
    }
  }

  // The first `bytes` bytes of constant `index`.
  absl::StatusOr<absl::Span<const uint8_t>> ConstantBytes(const std::string& where,
                                                          const XnnValue& v, uint32_t index,
                                                          uint64_t bytes) {
    const std::string what =
        absl::StrCat(where, " (id ", v.id, ", ", XnnDataTypeName(v.dtype), " ", Shape(v.dims),
                     ") needs ", bytes, " bytes, but its constant ", index);
    const auto* constants = root_->constants();
    if (Len(constants) > 0) {
      if (index >= Len(constants)) {
        return Invalid(absl::StrCat(where, " (id ", v.id, ") is constant ", index,
                                    ", but the graph has ", Len(constants), " constants"));
      }
      const fb::ConstantData* c = constants->Get(index);
      const absl::string_view key =
          c->named_key() == nullptr
              ? absl::string_view()
              : absl::string_view(c->named_key()->c_str(), c->named_key()->size());
      if (!key.empty()) {
        const absl::Span<const uint8_t>* found =
            named_data_ == nullptr ? nullptr : named_data_->Find(key);
        if (found == nullptr) {
          return absl::NotFoundError(absl::StrCat(
              "XNNPACK payload: ", where, " (id ", v.id, ") is the program's named data ",
              Quoted(key), ", which the program ",
              named_data_ == nullptr ? "does not have (it has no named data)"
                                     : "does not have; give its data file (.ptd) if it has one"));
        }
        if (found->size() < bytes) {
          return Invalid(absl::StrCat(what, " (named data ", Quoted(key), ") has ", found->size()));
        }
        return found->subspan(0, bytes);
      }
      if (c->offset() > constants_.size() || c->size() > constants_.size() - c->offset()) {
        return Invalid(absl::StrCat(where, " (id ", v.id, ") is constant ", index, ", ", c->size(),
                                    " bytes at offset ", c->offset(), ", outside the payload's ",
                                    constants_.size(), " bytes of constant data"));
      }
      if (c->size() < bytes) return Invalid(absl::StrCat(what, " has ", c->size()));
      return constants_.subspan(c->offset(), bytes);
    }
    const auto* legacy = root_->legacy_buffers();
    if (index >= Len(legacy)) {
      return Invalid(absl::StrCat(where, " (id ", v.id, ") is constant ", index,
                                  ", but the graph has no constants"));
    }
    const auto* buffer = legacy->Get(index)->bytes();
    const size_t have = Len(buffer);
    if (have < bytes) return Invalid(absl::StrCat(what, " (an in-graph buffer) has ", have));
    return absl::MakeConstSpan(buffer->data(), static_cast<size_t>(bytes));
  }

  absl::Status ReadNodes() {
    const auto* nodes = root_->nodes();
    // Per value index: 0 not yet defined, 1 defined (input, constant or written).
    std::vector<uint8_t> defined(graph_.values.size(), 0);
    for (size_t i = 0; i < graph_.values.size(); ++i) {
      const XnnValue& v = graph_.values[i];
      if (v.is_constant || (v.flags & kXnnExternalInput) != 0) defined[i] = 1;
    }
    graph_.nodes.reserve(Len(nodes));
    for (size_t i = 0; i < Len(nodes); ++i) {
      const fb::GraphNode* gn = nodes->Get(static_cast<flatbuffers::uoffset_t>(i));
      XnnNode n;
      n.index = static_cast<uint32_t>(i);
      n.debug_handle = gn->debug_handle();
      const int type = static_cast<int>(gn->node_type());
      if (type < 1 || type > kXnnNodeTypeCount || gn->node() == nullptr) {
        return Invalid(absl::StrCat("node ", i, " has node type ", type,
                                    type >= 1 && type <= kXnnNodeTypeCount
                                        ? " but no parameters"
                                        : ", which the format does not define"));
      }
      n.type = static_cast<XnnNodeType>(type);
      if (gn->output_range() != nullptr) {
        n.output_range = std::array<float, 2>{gn->output_range()->min(), gn->output_range()->max()};
      }
      ReadParameters(gn->node_type(), gn->node(), n);
      for (uint32_t id : n.inputs) {
        if (id == kXnnNoValue) continue;
        const int64_t at = IndexOf(id);
        if (at < 0) {
          return Invalid(absl::StrCat(XnnGraph::NodeLabel(n), " reads value id ", id,
                                      ", which the graph does not define"));
        }
        if (defined[at] == 0) {
          return Invalid(absl::StrCat(XnnGraph::NodeLabel(n), " reads value id ", id,
                                      ", which is not an input or a constant and no earlier node "
                                      "writes"));
        }
      }
      for (uint32_t id : n.outputs) {
        const int64_t at = IndexOf(id);
        if (at < 0) {
          return Invalid(absl::StrCat(XnnGraph::NodeLabel(n), " writes value id ", id,
                                      ", which the graph does not define"));
        }
        const XnnValue& v = graph_.values[at];
        if (v.is_constant || (v.flags & kXnnExternalInput) != 0) {
          return Invalid(absl::StrCat(XnnGraph::NodeLabel(n), " writes value id ", id,
                                      ", which is ",
                                      v.is_constant ? "a constant" : "an input of the call"));
        }
        if (defined[at] != 0) {
          return Invalid(absl::StrCat(XnnGraph::NodeLabel(n), " writes value id ", id,
                                      ", which an earlier node writes"));
        }
        defined[at] = 1;
      }
      graph_.nodes.push_back(std::move(n));
    }
    written_ = std::move(defined);
    return absl::OkStatus();
  }

  // The node's value ids and parameters, by the table type its union member has.
  static void ReadParameters(fb::Node type, const void* table, XnnNode& n) {
    auto list = [](const flatbuffers::Vector<uint32_t>* v) {
      std::vector<int64_t> out;
      if (v != nullptr) out.assign(v->begin(), v->end());
      return out;
    };
    switch (type) {
      case fb::Node::Add:
      case fb::Node::Divide:
      case fb::Node::Minimum:
      case fb::Node::Multiply:
      case fb::Node::Subtract:
      case fb::Node::Maximum:
      case fb::Node::PRelu:
      case fb::Node::BatchMatrixMultiply: {
        const auto* t = static_cast<const fb::Binary*>(table);
        n.inputs = {t->input1(), t->input2()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::FullyConnected: {
        const auto* t = static_cast<const fb::FullyConnected*>(table);
        n.inputs = {t->input(), t->filter(), t->bias()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::StaticTranspose: {
        const auto* t = static_cast<const fb::StaticTranspose*>(table);
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        n.list = list(t->perm());
        return;
      }
      case fb::Node::Conv2d:
      case fb::Node::DepthwiseConv2d:
      case fb::Node::ConvTranspose2d: {
        const auto* t = static_cast<const fb::Convolution*>(table);
        n.padding = {t->padding_top(), t->padding_right(), t->padding_bottom(), t->padding_left()};
        n.kernel = {t->kernel_height(), t->kernel_width()};
        n.stride = {t->stride_height(), t->stride_width()};
        n.dilation = {t->dilation_height(), t->dilation_width()};
        n.adjustment = {t->adjustment_height(), t->adjustment_width()};
        n.groups = t->groups();
        n.group_input_channels = t->group_input_channels();
        n.group_output_channels = t->group_output_channels();
        n.inputs = {t->input(), t->filter(), t->bias()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::StaticResizeBilinear2d: {
        const auto* t = static_cast<const fb::StaticResizeBilinear2d*>(table);
        n.new_size = {t->height(), t->width()};
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::StaticConstantPad: {
        const auto* t = static_cast<const fb::StaticConstantPad*>(table);
        n.list = list(t->before());
        n.list2 = list(t->after());
        n.alpha = t->value();
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::AvgPooling2d:
      case fb::Node::MaxPooling2d: {
        const auto* t = static_cast<const fb::Pooling2d*>(table);
        n.padding = {t->padding_top(), t->padding_right(), t->padding_bottom(), t->padding_left()};
        n.kernel = {t->pooling_height(), t->pooling_width()};
        n.stride = {t->stride_height(), t->stride_width()};
        n.dilation = {t->dilation_height(), t->dilation_width()};
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::StaticReshape: {
        const auto* t = static_cast<const fb::StaticReshape*>(table);
        n.list = list(t->new_shape());
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::ArgMaxPooling2d: {
        const auto* t = static_cast<const fb::ArgMaxPooling2d*>(table);
        n.padding = {t->padding_top(), t->padding_right(), t->padding_bottom(), t->padding_left()};
        n.kernel = {t->pooling_height(), t->pooling_width()};
        n.stride = n.kernel;
        n.inputs = {t->input()};
        n.outputs = {t->output_value(), t->output_index()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::LeakyRelu: {
        const auto* t = static_cast<const fb::LeakyRelu*>(table);
        n.alpha = t->negative_slope();
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::Elu: {
        const auto* t = static_cast<const fb::Elu*>(table);
        n.alpha = t->alpha();
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::Concatenate2:
      case fb::Node::Concatenate3:
      case fb::Node::Concatenate4:
      case fb::Node::Concatenate5: {
        const auto* t = static_cast<const fb::Concatenate*>(table);
        const size_t k =
            2 + static_cast<size_t>(type) - static_cast<size_t>(fb::Node::Concatenate2);
        const uint32_t all[5] = {t->input1(), t->input2(), t->input3(), t->input4(), t->input5()};
        // Concatenate5 comes after the others in the union.
        const size_t inputs = type == fb::Node::Concatenate5 ? 5 : k;
        n.inputs.assign(all, all + inputs);
        n.axis = t->axis();
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::StaticSlice: {
        const auto* t = static_cast<const fb::StaticSlice*>(table);
        n.list = list(t->offsets());
        n.list2 = list(t->sizes());
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      case fb::Node::ScaledDotProductAttention: {
        const auto* t = static_cast<const fb::ScaledDotProductAttention*>(table);
        n.inputs = {t->query(), t->key(), t->value(), t->scale(), t->mask()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
      default: {  // the one-input, one-output nodes
        const auto* t = static_cast<const fb::Unary*>(table);
        n.inputs = {t->input()};
        n.outputs = {t->output()};
        n.flags = t->flags();
        return;
      }
    }
  }

  absl::Status ReadExternals() {
    auto read = [&](const flatbuffers::Vector<uint32_t>* ids, uint32_t flag, const char* what,
                    std::vector<uint32_t>& out) -> absl::Status {
      for (size_t i = 0; i < Len(ids); ++i) {
        const uint32_t id = ids->Get(static_cast<flatbuffers::uoffset_t>(i));
        const int64_t at = IndexOf(id);
        if (at < 0) {
          return Invalid(
              absl::StrCat(what, " ", i, " is value id ", id, ", which the graph does not define"));
        }
        if ((graph_.values[at].flags & flag) == 0) {
          return Invalid(
              absl::StrCat(what, " ", i, " is value id ", id, ", which is not flagged as one"));
        }
        if (flag == kXnnExternalOutput && written_[at] == 0) {
          return Invalid(absl::StrCat(what, " ", i, " is value id ", id, ", which no node writes"));
        }
        out.push_back(id);
      }
      return absl::OkStatus();
    };
    FERRY_RETURN_IF_ERROR(read(root_->input_ids(), kXnnExternalInput, "input", graph_.input_ids));
    FERRY_RETURN_IF_ERROR(
        read(root_->output_ids(), kXnnExternalOutput, "output", graph_.output_ids));
    // Every value flagged as an output is written: the call's result would be left unwritten.
    for (size_t i = 0; i < graph_.values.size(); ++i) {
      const XnnValue& v = graph_.values[i];
      if ((v.flags & kXnnExternalOutput) != 0 && written_[i] == 0) {
        return Invalid(absl::StrCat("value ", i, " (id ", v.id, ") is output ", v.external_id,
                                    " of the call, but no node writes it"));
      }
    }
    return absl::OkStatus();
  }

  int64_t IndexOf(uint32_t id) const { return graph_.IndexOf(id); }

  absl::Span<const uint8_t> payload_;
  const NamedData* named_data_;
  absl::Span<const uint8_t> graph_bytes_;
  absl::Span<const uint8_t> constants_;
  const fb::Graph* root_ = nullptr;
  XnnGraph graph_;
  std::vector<uint8_t> written_;  // per value index: defined by the end of the graph
};

constexpr absl::string_view kNodeTypeNames[kXnnNodeTypeCount] = {"Add",
                                                                 "FullyConnected",
                                                                 "Softmax",
                                                                 "Sigmoid",
                                                                 "StaticTranspose",
                                                                 "Clamp",
                                                                 "Conv2d",
                                                                 "Divide",
                                                                 "StaticResizeBilinear2D",
                                                                 "StaticConstantPad",
                                                                 "AvgPooling2d",
                                                                 "Minimum",
                                                                 "DepthwiseConv2d",
                                                                 "MaxPooling2d",
                                                                 "Multiply",
                                                                 "Subtract",
                                                                 "Floor",
                                                                 "Convert",
                                                                 "GlobalAvgPooling2d",
                                                                 "StaticReshape",
                                                                 "ArgMaxPooling2d",
                                                                 "SquareRoot",
                                                                 "Ceiling",
                                                                 "Hardswish",
                                                                 "LeakyReLU",
                                                                 "Maximum",
                                                                 "Negate",
                                                                 "Square",
                                                                 "ELU",
                                                                 "Abs",
                                                                 "PReLU",
                                                                 "Concatenate2",
                                                                 "Concatenate3",
                                                                 "Concatenate4",
                                                                 "StaticSlice",
                                                                 "ScaledDotProductAttention",
                                                                 "BatchMatrixMultiply",
                                                                 "Concatenate5",
                                                                 "ConvTranspose2d",
                                                                 "ReciprocalSquareRoot",
                                                                 "Log",
                                                                 "Gelu",
                                                                 "Tanh",
                                                                 "Exp",
                                                                 "Sin",
                                                                 "Copy",
                                                                 "Cos"};

constexpr absl::string_view kDataTypeNames[] = {"invalid", "fp32",   "fp16",    "qint8",  "quint8",
                                                "qint32",  "qcint8", "qcint32", "qcint4", "qdint8",
                                                "qbint4",  "qpint8", "int32",   "pfp32",  "bf16"};

}  // namespace

absl::string_view XnnNodeTypeName(XnnNodeType type) {
  const int i = static_cast<int>(type);
  return i >= 1 && i <= kXnnNodeTypeCount ? kNodeTypeNames[i - 1] : "unknown";
}

absl::string_view XnnDataTypeName(XnnDataType type) {
  const int i = static_cast<int>(type);
  return i >= 0 && i <= static_cast<int>(XnnDataType::kBFloat16) ? kDataTypeNames[i] : "unknown";
}

int64_t XnnGraph::IndexOf(uint32_t id) const {
  auto it = std::lower_bound(index.begin(), index.end(), std::pair<uint32_t, uint32_t>(id, 0));
  if (it == index.end() || it->first != id) return -1;
  return static_cast<int64_t>(it->second);
}

const XnnValue* XnnGraph::value(uint32_t id) const {
  const int64_t at = IndexOf(id);
  return at < 0 ? nullptr : &values[at];
}

std::string XnnGraph::NodeLabel(const XnnNode& node) {
  return absl::StrCat("node ", node.index, " (", XnnNodeTypeName(node.type), ")");
}

absl::StatusOr<XnnGraph> ReadXnnpackPayload(absl::Span<const uint8_t> payload,
                                            const NamedData* named_data) {
  return PayloadReader(payload, named_data).Run();
}

}  // namespace ferry
