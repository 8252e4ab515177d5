#include "bench/peers/onnx_writer.h"

namespace ferry::peers {
namespace {

// Field numbers of onnx.proto.
namespace model {
constexpr int kIrVersion = 1, kGraph = 7, kOpsetImport = 8;
}
namespace opset_id {
constexpr int kVersion = 2;
}
namespace graph {
constexpr int kNode = 1, kName = 2, kInitializer = 5, kInput = 11, kOutput = 12;
}
namespace node {
constexpr int kInput = 1, kOutput = 2, kOpType = 4, kAttribute = 5;
}
namespace attribute {
constexpr int kName = 1, kI = 3, kType = 20;
constexpr int64_t kTypeInt = 2;  // AttributeProto.AttributeType INT
}  // namespace attribute
namespace tensor {
constexpr int kDims = 1, kDataType = 2, kName = 8, kRawData = 9;
constexpr int64_t kFloat = 1;  // TensorProto.DataType FLOAT
}  // namespace tensor
namespace value_info {
constexpr int kName = 1, kType = 2;
}
namespace type {
constexpr int kTensorType = 1;            // TypeProto.tensor_type
constexpr int kElemType = 1, kShape = 2;  // TypeProto.Tensor
constexpr int kDim = 1;                   // TensorShapeProto.dim
constexpr int kDimValue = 1;              // TensorShapeProto.Dimension.dim_value
}  // namespace type

// The IR version that goes with opsets up to 18 (ONNX 1.13).
constexpr int64_t kIrVersion = 8;

}  // namespace

void ProtoWriter::Varint(uint64_t value) {
  while (value >= 0x80) {
    bytes_.push_back(static_cast<uint8_t>(value | 0x80));
    value >>= 7;
  }
  bytes_.push_back(static_cast<uint8_t>(value));
}

void ProtoWriter::Int(int field, int64_t value) {
  Tag(field, 0);
  Varint(static_cast<uint64_t>(value));  // negative values take ten bytes, as protobuf's do
}

void ProtoWriter::Bytes(int field, absl::string_view bytes) {
  Tag(field, 2);
  Varint(bytes.size());
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
}

ProtoWriter OnnxModelWriter::ValueInfo(absl::string_view name,
                                       absl::Span<const int64_t> dims) const {
  ProtoWriter shape;
  for (int64_t d : dims) {
    ProtoWriter dim;
    dim.Int(type::kDimValue, d);
    shape.Message(type::kDim, dim);
  }
  ProtoWriter tensor_type;
  tensor_type.Int(type::kElemType, tensor::kFloat);
  tensor_type.Message(type::kShape, shape);
  ProtoWriter type_proto;
  type_proto.Message(type::kTensorType, tensor_type);
  ProtoWriter info;
  info.Bytes(value_info::kName, name);
  info.Message(value_info::kType, type_proto);
  return info;
}

void OnnxModelWriter::Input(absl::string_view name, absl::Span<const int64_t> dims) {
  graph_.Message(graph::kInput, ValueInfo(name, dims));
}

void OnnxModelWriter::Output(absl::string_view name, absl::Span<const int64_t> dims) {
  graph_.Message(graph::kOutput, ValueInfo(name, dims));
}

void OnnxModelWriter::Initializer(absl::string_view name, absl::Span<const int64_t> dims,
                                  absl::Span<const float> values) {
  ProtoWriter t;
  for (int64_t d : dims) t.Int(tensor::kDims, d);
  t.Int(tensor::kDataType, tensor::kFloat);
  t.Bytes(tensor::kName, name);
  // raw_data is little-endian, as this machine's floats are.
  t.Bytes(tensor::kRawData, absl::string_view(reinterpret_cast<const char*>(values.data()),
                                              values.size() * sizeof(float)));
  graph_.Message(graph::kInitializer, t);
}

void OnnxModelWriter::Node(absl::string_view op_type, absl::Span<const std::string> inputs,
                           absl::Span<const std::string> outputs,
                           absl::Span<const std::pair<std::string, int64_t>> int_attributes) {
  ProtoWriter n;
  for (const std::string& in : inputs) n.Bytes(node::kInput, in);
  for (const std::string& out : outputs) n.Bytes(node::kOutput, out);
  n.Bytes(node::kOpType, op_type);
  for (const auto& [name, value] : int_attributes) {
    ProtoWriter a;
    a.Bytes(attribute::kName, name);
    a.Int(attribute::kI, value);
    a.Int(attribute::kType, attribute::kTypeInt);
    n.Message(node::kAttribute, a);
  }
  graph_.Message(graph::kNode, n);
}

std::vector<uint8_t> OnnxModelWriter::Finish() {
  graph_.Bytes(graph::kName, "ferry_peer");
  ProtoWriter opset;
  opset.Int(opset_id::kVersion, opset_);  // the default domain: domain left unset
  ProtoWriter m;
  m.Int(model::kIrVersion, kIrVersion);
  m.Message(model::kOpsetImport, opset);
  m.Message(model::kGraph, graph_);
  return m.Take();
}

}  // namespace ferry::peers
