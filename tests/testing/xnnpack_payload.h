// Writes XNNPACK delegate payloads for tests, through Ferry's schema of the graph
// (loader/executorch/schema/xnnpack_graph.fbs), and wraps them in ExecuTorch programs whose one
// method calls the delegate, so that a hand-made graph goes through the .pte reader, the import,
// the payload reader and the backend as an exported one does.
//
//   XnnPayloadWriter w;
//   const uint32_t a = w.Input({2, 3}, 0), b = w.Input({3}, 1), y = w.Output({2, 3}, 2);
//   w.Binary(xfb::Node::Add, a, b, y);
//   XnnpackCall call = XnnpackCall::Of(w.Build(), {{2, 3}, {3}}, {{2, 3}});
//   ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(call.pte));
//
// Values are float32 unless a test says otherwise; ids are given in order from 0. Nothing is
// checked: a test may write a graph the reader refuses.
#ifndef FERRY_TESTS_TESTING_XNNPACK_PAYLOAD_H_
#define FERRY_TESTS_TESTING_XNNPACK_PAYLOAD_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/loader/executorch/pte_reader.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/xnnpack_graph_generated.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/pte_writer.h"

namespace ferry::testing {

namespace xfb = ::ferry::xnn::fbs;

class XnnPayloadWriter {
 public:
  using Range = std::optional<std::array<float, 2>>;
  using MakeNode = std::function<flatbuffers::Offset<void>(flatbuffers::FlatBufferBuilder&)>;

  struct Value {
    xfb::DataType dtype = xfb::DataType::Float32;
    std::vector<uint32_t> dims;
    uint32_t flags = 0;
    uint32_t external_id = UINT32_MAX;
    uint32_t constant = 0;
    uint32_t id = 0;
    std::optional<std::pair<float, int32_t>> per_tensor;  // a QuantizedTensor's scale, zero point
    // Or per channel: the scales, inline, and the channel dim.
    std::optional<std::pair<std::vector<float>, int32_t>> per_channel;
    uint32_t scales_constant = 0;  // per channel: the scales are this constant instead
  };

  uint32_t Input(std::vector<uint32_t> dims, uint32_t external_id) {
    return AddValue({xfb::DataType::Float32, std::move(dims), 1, external_id, 0, 0, {}, {}});
  }
  uint32_t Output(std::vector<uint32_t> dims, uint32_t external_id) {
    return AddValue({xfb::DataType::Float32, std::move(dims), 2, external_id, 0, 0, {}, {}});
  }
  uint32_t Internal(std::vector<uint32_t> dims) {
    return AddValue({xfb::DataType::Float32, std::move(dims), 0, UINT32_MAX, 0, 0, {}, {}});
  }
  // A float32 constant whose bytes follow the graph in the payload.
  uint32_t Constant(std::vector<uint32_t> dims, const std::vector<float>& data) {
    std::vector<uint8_t> bytes(data.size() * sizeof(float));
    if (!data.empty()) std::memcpy(bytes.data(), data.data(), bytes.size());
    return ConstantBytes(xfb::DataType::Float32, std::move(dims), bytes);
  }
  uint32_t ConstantBytes(xfb::DataType dtype, std::vector<uint32_t> dims,
                         const std::vector<uint8_t>& bytes) {
    while (constant_data_.size() % 16 != 0) constant_data_.push_back(0);
    constants_.push_back({constant_data_.size(), bytes.size(), ""});
    constant_data_.insert(constant_data_.end(), bytes.begin(), bytes.end());
    return AddValue({dtype,
                     std::move(dims),
                     0,
                     UINT32_MAX,
                     static_cast<uint32_t>(constants_.size()),
                     0,
                     {},
                     {}});
  }
  // A float32 constant that is the program's named data entry `key` of `size` bytes.
  uint32_t NamedConstant(std::vector<uint32_t> dims, std::string key, uint64_t size) {
    constants_.push_back({UINT64_MAX, size, std::move(key)});
    return AddValue({xfb::DataType::Float32,
                     std::move(dims),
                     0,
                     UINT32_MAX,
                     static_cast<uint32_t>(constants_.size()),
                     0,
                     {},
                     {}});
  }
  // Any value, as given (its id is the next one unless `v.id` is set after).
  uint32_t AddValue(Value v) {
    v.id = static_cast<uint32_t>(values_.size());
    values_.push_back(std::move(v));
    return values_.back().id;
  }
  Value& value(uint32_t index) { return values_[index]; }

  void Node(xfb::Node type, MakeNode make, Range range = std::nullopt) {
    nodes_.push_back({type, std::move(make), range});
  }
  void Binary(xfb::Node type, uint32_t a, uint32_t b, uint32_t out, uint32_t flags = 0,
              Range range = std::nullopt) {
    Node(
        type, [=](auto& fbb) { return xfb::CreateBinary(fbb, a, b, out, flags).Union(); }, range);
  }
  void Unary(xfb::Node type, uint32_t in, uint32_t out, Range range = std::nullopt,
             uint32_t flags = 0) {
    Node(
        type, [=](auto& fbb) { return xfb::CreateUnary(fbb, in, out, flags).Union(); }, range);
  }
  void FullyConnected(uint32_t in, uint32_t filter, uint32_t bias, uint32_t out,
                      uint32_t flags = 0) {
    Node(xfb::Node::FullyConnected, [=](auto& fbb) {
      return xfb::CreateFullyConnected(fbb, in, filter, bias, out, flags).Union();
    });
  }
  struct Conv {
    std::array<uint32_t, 4> padding = {0, 0, 0, 0};  // top, right, bottom, left
    std::array<uint32_t, 2> kernel = {1, 1};
    std::array<uint32_t, 2> stride = {1, 1};
    std::array<uint32_t, 2> dilation = {1, 1};
    uint32_t groups = 1, group_in = 0, group_out = 0;
    std::array<uint32_t, 2> adjustment = {0, 0};  // transposed convolutions
    uint32_t flags = 0;
  };
  void Convolution(xfb::Node type, const Conv& c, uint32_t in, uint32_t filter, uint32_t bias,
                   uint32_t out, Range range = std::nullopt) {
    Node(
        type,
        [=](auto& fbb) {
          return xfb::CreateConvolution(fbb, c.padding[0], c.padding[1], c.padding[2], c.padding[3],
                                        c.kernel[0], c.kernel[1], c.stride[0], c.stride[1],
                                        c.dilation[0], c.dilation[1], c.group_in, c.group_out,
                                        c.groups, c.adjustment[0], c.adjustment[1], in, filter,
                                        bias, out, c.flags)
              .Union();
        },
        range);
  }
  void Pooling(xfb::Node type, const Conv& c, uint32_t in, uint32_t out) {
    Node(type, [=](auto& fbb) {
      return xfb::CreatePooling2d(fbb, c.padding[0], c.padding[1], c.padding[2], c.padding[3],
                                  c.kernel[0], c.kernel[1], c.stride[0], c.stride[1], c.dilation[0],
                                  c.dilation[1], in, out, c.flags)
          .Union();
    });
  }
  void Transpose(std::vector<uint32_t> perm, uint32_t in, uint32_t out) {
    Node(xfb::Node::StaticTranspose, [=](auto& fbb) {
      return xfb::CreateStaticTransposeDirect(fbb, static_cast<uint32_t>(perm.size()), &perm, in,
                                              out, 0)
          .Union();
    });
  }
  void Reshape(std::vector<uint32_t> shape, uint32_t in, uint32_t out) {
    Node(xfb::Node::StaticReshape, [=](auto& fbb) {
      return xfb::CreateStaticReshapeDirect(fbb, static_cast<uint32_t>(shape.size()), &shape, in,
                                            out, 0)
          .Union();
    });
  }
  void Slice(std::vector<uint32_t> offsets, std::vector<uint32_t> sizes, uint32_t in,
             uint32_t out) {
    Node(xfb::Node::StaticSlice, [=](auto& fbb) {
      return xfb::CreateStaticSliceDirect(fbb, static_cast<uint32_t>(offsets.size()), &offsets,
                                          &sizes, in, out, 0)
          .Union();
    });
  }
  void Concatenate(uint32_t axis, std::vector<uint32_t> in, uint32_t out) {
    const xfb::Node type = in.size() == 5
                               ? xfb::Node::Concatenate5
                               : static_cast<xfb::Node>(static_cast<int>(xfb::Node::Concatenate2) +
                                                        static_cast<int>(in.size()) - 2);
    in.resize(5, 0);
    Node(type, [=](auto& fbb) {
      return xfb::CreateConcatenate(fbb, axis, in[0], in[1], in[2], in[3], out, 0, in[4]).Union();
    });
  }

  std::string version = "0";
  std::optional<uint32_t> num_externs;              // default: the flagged values
  std::optional<std::vector<uint32_t>> input_ids;   // default: values flagged 1, in order
  std::optional<std::vector<uint32_t>> output_ids;  // default: values flagged 2, in order
  std::string identifier = "XN01";

  // The graph alone (a FlatBuffer).
  std::vector<uint8_t> Graph() const {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<xfb::GraphValue>> values;
    std::vector<uint32_t> inputs, outputs;
    uint32_t externs = 0;
    for (const Value& v : values_) {
      auto tensor = xfb::CreateTensorDirect(fbb, v.dtype, static_cast<uint32_t>(v.dims.size()),
                                            &v.dims, v.constant, v.external_id, v.flags, v.id);
      if (v.flags & 1) inputs.push_back(v.id);
      if (v.flags & 2) outputs.push_back(v.id);
      if (v.flags != 0) ++externs;
      if (v.per_tensor.has_value()) {
        auto q = xfb::CreatePerTensor(fbb, v.per_tensor->first, v.per_tensor->second);
        auto qt = xfb::CreateQuantizedTensor(fbb, tensor, xfb::QuantParams::PerTensor, q.Union());
        values.push_back(xfb::CreateGraphValue(fbb, xfb::Value::QuantizedTensor, qt.Union()));
      } else if (v.per_channel.has_value()) {
        auto q = xfb::CreatePerChannelDirect(
            fbb, v.per_channel->first.empty() ? nullptr : &v.per_channel->first,
            v.per_channel->second, v.scales_constant);
        auto qt = xfb::CreateQuantizedTensor(fbb, tensor, xfb::QuantParams::PerChannel, q.Union());
        values.push_back(xfb::CreateGraphValue(fbb, xfb::Value::QuantizedTensor, qt.Union()));
      } else {
        values.push_back(xfb::CreateGraphValue(fbb, xfb::Value::Tensor, tensor.Union()));
      }
    }
    std::vector<flatbuffers::Offset<xfb::GraphNode>> nodes;
    for (const NodeEntry& n : nodes_) {
      const flatbuffers::Offset<void> made = n.make(fbb);
      flatbuffers::Offset<xfb::OutputRange> range;
      if (n.range.has_value()) range = xfb::CreateOutputRange(fbb, (*n.range)[0], (*n.range)[1]);
      nodes.push_back(xfb::CreateGraphNode(fbb, n.type, made, 1, range));
    }
    std::vector<flatbuffers::Offset<xfb::ConstantData>> constants;
    constants.push_back(xfb::CreateConstantDataDirect(fbb, 0, 0, ""));
    for (const ConstantEntry& c : constants_) {
      constants.push_back(xfb::CreateConstantDataDirect(fbb, c.offset, c.size, c.key.c_str()));
    }
    const std::vector<uint32_t>& in_ids = input_ids.value_or(inputs);
    const std::vector<uint32_t>& out_ids = output_ids.value_or(outputs);
    auto graph =
        xfb::CreateGraphDirect(fbb, version.c_str(), &nodes, &values, num_externs.value_or(externs),
                               &in_ids, &out_ids, nullptr, &constants);
    fbb.Finish(graph, identifier.c_str());
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }

  // The payload: the "XH00" header, the graph at byte 32, the constant data 16-byte aligned after.
  std::vector<uint8_t> Build() const {
    const std::vector<uint8_t> graph = Graph();
    std::vector<uint8_t> out(32, 0);
    out.insert(out.end(), graph.begin(), graph.end());
    while (out.size() % 16 != 0) out.push_back(0);
    const uint64_t constants_offset = out.size();
    out.insert(out.end(), constant_data_.begin(), constant_data_.end());
    std::memcpy(out.data() + 4, "XH00", 4);
    auto put = [&](size_t at, uint64_t v, size_t n) {
      for (size_t i = 0; i < n; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
    };
    put(8, 30, 2);
    put(10, 32, 4);
    put(14, graph.size(), 4);
    put(18, constants_offset, 4);
    put(22, constant_data_.size(), 8);
    return out;
  }

 private:
  struct NodeEntry {
    xfb::Node type;
    MakeNode make;
    Range range;
  };
  struct ConstantEntry {
    uint64_t offset;
    uint64_t size;
    std::string key;
  };
  std::vector<Value> values_;
  std::vector<NodeEntry> nodes_;
  std::vector<ConstantEntry> constants_;
  std::vector<uint8_t> constant_data_;
};

// An ExecuTorch program whose method "forward" takes float32 tensors of `args` sizes, calls one
// XnnpackBackend delegate on them with `payload` and returns its results of `results` sizes.
struct XnnpackCall {
  std::vector<uint8_t> payload;
  std::vector<uint8_t> pte;

  // `dim_orders`, when given, has one entry per argument, then per result (empty: row-major);
  // `int8`, when given, says per argument, then per result, whether it is an int8 tensor.
  static XnnpackCall Of(std::vector<uint8_t> payload, const std::vector<std::vector<int64_t>>& args,
                        const std::vector<std::vector<int64_t>>& results,
                        const std::vector<std::vector<uint8_t>>& dim_orders = {},
                        const std::vector<bool>& int8 = {}) {
    XnnpackCall call;
    call.payload = std::move(payload);
    EtProgram p;
    EtMethod m;
    m.name = "forward";
    EtInstruction instruction;
    instruction.kind = EtInstructionKind::kDelegateCall;
    instruction.delegate_index = 0;
    for (const std::vector<int64_t>& sizes : args) {
      m.inputs.push_back(static_cast<int32_t>(m.values.size()));
      instruction.args.push_back(static_cast<int32_t>(m.values.size()));
      m.values.push_back(FloatTensor(sizes));
    }
    for (const std::vector<int64_t>& sizes : results) {
      m.outputs.push_back(static_cast<int32_t>(m.values.size()));
      instruction.args.push_back(static_cast<int32_t>(m.values.size()));
      m.values.push_back(FloatTensor(sizes));
    }
    for (size_t i = 0; i < int8.size() && i < m.values.size(); ++i) {
      if (int8[i]) m.values[i] = TensorOf(1, DType::kInt8, 1, m.values[i].tensor.sizes);
    }
    for (size_t i = 0; i < dim_orders.size() && i < m.values.size(); ++i) {
      m.values[i].tensor.dim_order = dim_orders[i];
    }
    EtDelegate d;
    d.backend_id = "XnnpackBackend";
    d.payload = call.payload;
    m.delegates = {d};
    m.instructions = {instruction};
    p.methods.push_back(std::move(m));
    call.pte = WritePte(p);
    return call;
  }
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_XNNPACK_PAYLOAD_H_
