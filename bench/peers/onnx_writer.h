// Writes ONNX models (protobuf bytes) in memory, for the peer harness: graphs of float32 tensors
// with fixed shapes, initializers and nodes with integer attributes. Only the fields the harness
// needs are written (ModelProto ir_version, opset_import, graph; GraphProto node, initializer,
// input, output; NodeProto input, output, op_type, attribute; TensorProto dims, data_type, name,
// raw_data; ValueInfoProto name and tensor type), with their field numbers from onnx.proto.
//
//   OnnxModelWriter w(/*opset=*/17);
//   w.Input("x", {16});
//   w.Initializer("w", {16}, weights);
//   w.Node("Add", {"x", "w"}, {"y"});
//   w.Output("y", {16});
//   std::vector<uint8_t> model = w.Finish();
//
// Nothing is checked here: ONNX Runtime validates the model when a session is made from it.
// Allocates; not thread-safe.
#ifndef FERRY_BENCH_PEERS_ONNX_WRITER_H_
#define FERRY_BENCH_PEERS_ONNX_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ferry::peers {

// Protobuf wire format: one message's fields, appended in order.
class ProtoWriter {
 public:
  void Varint(uint64_t value);
  // A varint field (wire type 0): int32, int64 and enums alike.
  void Int(int field, int64_t value);
  // A length-delimited field (wire type 2): strings, bytes and embedded messages.
  void Bytes(int field, absl::string_view bytes);
  void Message(int field, const ProtoWriter& message) { Bytes(field, message.view()); }

  absl::string_view view() const {
    return absl::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  void Tag(int field, int wire_type) { Varint(static_cast<uint64_t>(field) << 3 | wire_type); }
  std::vector<uint8_t> bytes_;
};

class OnnxModelWriter {
 public:
  explicit OnnxModelWriter(int64_t opset) : opset_(opset) {}

  // A float32 graph input or output of fixed shape.
  void Input(absl::string_view name, absl::Span<const int64_t> dims);
  void Output(absl::string_view name, absl::Span<const int64_t> dims);
  // A float32 initializer (a constant), stored as raw little-endian bytes.
  void Initializer(absl::string_view name, absl::Span<const int64_t> dims,
                   absl::Span<const float> values);
  // A node of the default domain with integer attributes.
  void Node(absl::string_view op_type, absl::Span<const std::string> inputs,
            absl::Span<const std::string> outputs,
            absl::Span<const std::pair<std::string, int64_t>> int_attributes = {});

  // The serialized ModelProto; the writer is spent.
  std::vector<uint8_t> Finish();

 private:
  ProtoWriter ValueInfo(absl::string_view name, absl::Span<const int64_t> dims) const;

  int64_t opset_;
  ProtoWriter graph_;
};

}  // namespace ferry::peers

#endif  // FERRY_BENCH_PEERS_ONNX_WRITER_H_
