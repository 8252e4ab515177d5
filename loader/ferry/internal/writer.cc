#include "ferry/loader/ferry/internal/writer.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ferry/loader/ferry/internal/reader.h"
#include "ferry/loader/file_identifiers.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/ferry/schema/program_generated.h"

namespace ferry::internal {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// An upper bound of the serialized size, so that an oversized program is refused before the
// builder (which does not check in release builds) passes the format's limit.
size_t SizeBound(absl::Span<const MethodDef* const> methods) {
  constexpr size_t kPerObject = 128;
  size_t bound = 256;
  for (const MethodDef* m : methods) {
    bound += kPerObject + m->name.size() + 4 * (m->inputs.size() + m->outputs.size());
    for (const ValueDef& v : m->values) {
      bound += 2 * kPerObject + v.name.size() + 12 * v.meta.sizes.size() +
               8 * v.scalar.list.size() + 8 * v.scalar.doubles().size() + v.scalar.str().size() +
               v.data.size() + kSegmentAlignment;
    }
    for (const NodeDef& n : m->nodes) {
      const DelegateDef& call = n.delegate();  // empty for a host op
      bound += 2 * kPerObject + n.name.size() + n.op.size() + call.backend.size() +
               4 * (n.args.size() + n.results.size() + call.written_args.size()) +
               call.payload.size() + kSegmentAlignment;
      for (const auto& [k, v] : call.compile_specs) bound += kPerObject + k.size() + v.size();
      for (const auto& d : call.arg_dim_orders) bound += kPerObject + 4 * d.size();
    }
  }
  return bound;
}

// A byte vector whose first byte lies at a multiple of kSegmentAlignment from the end of the
// finished buffer; the buffer's size is a multiple of it too, so the bytes are aligned from the
// start.
Offset<flatbuffers::Vector<uint8_t>> AlignedBytes(FlatBufferBuilder& fbb,
                                                  absl::Span<const uint8_t> bytes) {
  if (!bytes.empty()) fbb.PreAlign(bytes.size(), kSegmentAlignment);
  return fbb.CreateVector(bytes.data(), bytes.size());
}

Offset<fbs::ScalarValue> WriteScalar(FlatBufferBuilder& fbb, const Scalar& s) {
  switch (s.kind) {
    case Scalar::Kind::kInt:
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::Int, s.i);
    case Scalar::Kind::kDouble:
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::Double, 0, s.d);
    case Scalar::Kind::kBool:
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::Bool, 0, 0.0, s.b);
    case Scalar::Kind::kIntList:
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::IntList, 0, 0.0, false,
                                    fbb.CreateVector(s.list));
    case Scalar::Kind::kNone:
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::None);
    case Scalar::Kind::kString: {
      auto text = fbb.CreateString(s.str().data(), s.str().size());
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::String, 0, 0.0, false, 0, text);
    }
    case Scalar::Kind::kDoubleList: {
      auto list = fbb.CreateVector(s.doubles().data(), s.doubles().size());
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::DoubleList, 0, 0.0, false, 0, 0, list);
    }
    case Scalar::Kind::kBoolList: {
      std::vector<uint8_t> bytes(s.list.begin(), s.list.end());
      auto list = fbb.CreateVector(bytes);
      return fbs::CreateScalarValue(fbb, fbs::ScalarKind::BoolList, 0, 0.0, false, 0, 0, 0, list);
    }
  }
  return fbs::CreateScalarValue(fbb);
}

Offset<fbs::Method> WriteMethod(FlatBufferBuilder& fbb, const MethodDef& m,
                                const std::vector<int32_t>& segment_of) {
  std::vector<Offset<fbs::Value>> values;
  values.reserve(m.values.size());
  for (size_t v = 0; v < m.values.size(); ++v) {
    const ValueDef& value = m.values[v];
    auto name = fbb.CreateString(value.name);
    const auto kind = static_cast<fbs::ValueKind>(static_cast<int>(value.kind));
    if (!value.is_tensor()) {
      values.push_back(fbs::CreateValue(fbb, name, kind, fbs::DType::Float32, 0, 0,
                                        WriteScalar(fbb, value.scalar)));
      continue;
    }
    auto sizes = fbb.CreateVector(value.meta.sizes.data(), value.meta.sizes.size());
    Offset<flatbuffers::Vector<int32_t>> dim_order;
    if (!value.meta.dim_order.empty()) dim_order = fbb.CreateVector(value.meta.dim_order);
    values.push_back(fbs::CreateValue(fbb, name, kind,
                                      static_cast<fbs::DType>(static_cast<int>(value.meta.dtype)),
                                      sizes, dim_order, 0, segment_of[v], value.shared));
  }
  std::vector<Offset<fbs::Node>> nodes;
  nodes.reserve(m.nodes.size());
  for (const NodeDef& node : m.nodes) {
    auto name = fbb.CreateString(node.name);
    auto args = fbb.CreateVector(node.args.data(), node.args.size());
    auto results = fbb.CreateVector(node.results.data(), node.results.size());
    if (node.kind == NodeKind::kHostOp) {
      auto op = fbs::CreateHostOp(fbb, fbb.CreateString(node.op));
      nodes.push_back(fbs::CreateNode(fbb, name, fbs::NodeOp::HostOp, op.Union(), args, results));
      continue;
    }
    const DelegateDef& delegate = node.delegate();
    std::vector<Offset<fbs::CompileSpec>> specs;
    for (const auto& [key, value] : delegate.compile_specs) {
      specs.push_back(fbs::CreateCompileSpec(fbb, fbb.CreateString(key), fbb.CreateString(value)));
    }
    std::vector<Offset<fbs::DimOrder>> orders;
    for (const std::vector<int32_t>& dims : delegate.arg_dim_orders) {
      orders.push_back(fbs::CreateDimOrder(fbb, dims.empty() ? 0 : fbb.CreateVector(dims)));
    }
    auto backend = fbb.CreateString(delegate.backend);
    auto payload = AlignedBytes(fbb, delegate.payload);
    auto call = fbs::CreateDelegateCall(
        fbb, backend, specs.empty() ? 0 : fbb.CreateVector(specs), payload,
        orders.empty() ? 0 : fbb.CreateVector(orders),
        delegate.written_args.empty() ? 0 : fbb.CreateVector(delegate.written_args));
    nodes.push_back(
        fbs::CreateNode(fbb, name, fbs::NodeOp::DelegateCall, call.Union(), args, results));
  }
  auto name = fbb.CreateString(m.name);
  auto values_vec = fbb.CreateVector(values);
  auto nodes_vec = fbb.CreateVector(nodes);
  auto inputs = fbb.CreateVector(m.inputs);
  auto outputs = fbb.CreateVector(m.outputs);
  return fbs::CreateMethod(fbb, name, values_vec, nodes_vec, inputs, outputs);
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> SerializeProgram(absl::Span<const MethodDef* const> methods) {
  const size_t bound = SizeBound(methods);
  if (bound >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return absl::InvalidArgumentError(absl::StrCat("the program would take up to ", bound,
                                                   " bytes; the format holds less than 2 GiB"));
  }
  FlatBufferBuilder fbb(std::min<size_t>(bound, size_t{1} << 20));
  // Raises the buffer's minimum alignment, so Finish pads its size to a multiple of 64 even when
  // there is no data.
  fbb.TrackMinAlign(kSegmentAlignment);
  // Data first: it ends up at the end of the buffer, away from the metadata read at load.
  // Equal data is stored once: methods of a program that read the same weights read one segment,
  // so that their replicas on a device can be shared (runtime/loaded_program.h).
  std::vector<std::vector<int32_t>> segment_of(methods.size());
  std::vector<Offset<fbs::DataSegment>> segments;
  absl::flat_hash_map<absl::string_view, int32_t> segment_with;
  for (size_t m = 0; m < methods.size(); ++m) {
    segment_of[m].assign(methods[m]->values.size(), -1);
    for (size_t v = 0; v < methods[m]->values.size(); ++v) {
      const ValueDef& value = methods[m]->values[v];
      if (value.kind != ValueKind::kConstant && value.kind != ValueKind::kState) continue;
      const absl::string_view bytes(reinterpret_cast<const char*>(value.data.data()),
                                    value.data.size());
      auto [it, added] = segment_with.try_emplace(bytes, static_cast<int32_t>(segments.size()));
      if (added) segments.push_back(fbs::CreateDataSegment(fbb, AlignedBytes(fbb, value.data)));
      segment_of[m][v] = it->second;
    }
  }
  std::vector<Offset<fbs::Method>> written;
  for (size_t m = 0; m < methods.size(); ++m) {
    written.push_back(WriteMethod(fbb, *methods[m], segment_of[m]));
  }
  auto methods_vec = fbb.CreateVector(written);
  auto segments_vec = fbb.CreateVector(segments);
  fbb.Finish(fbs::CreateProgram(fbb, kProgramFormatVersion, methods_vec, segments_vec),
             kProgramFileIdentifier);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace ferry::internal
