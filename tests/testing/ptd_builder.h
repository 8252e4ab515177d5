// Writes ExecuTorch data files (.ptd) in the current layout for tests: named tensors, each in a
// segment of its own, behind the "FH01" header, laid out as ExecuTorch lays them out (the header
// inserted after the FlatBuffer's identifier, segments after the FlatBuffer part, 16-byte
// alignment).
//
//   PtdTensor w{"linear.weight", /*scalar_type=*/6, {3, 3}, FloatBytes({...})};
//   std::vector<uint8_t> ptd = BuildPtd({w});
#ifndef FERRY_TESTS_TESTING_PTD_BUILDER_H_
#define FERRY_TESTS_TESTING_PTD_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/executorch_data_generated.h"

namespace ferry::testing {

struct PtdTensor {
  std::string key;
  int8_t scalar_type = 6;  // float32
  std::vector<int32_t> sizes;
  std::vector<uint8_t> bytes;
  bool with_layout = true;
};

inline std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline void PutLE(std::vector<uint8_t>& out, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

inline std::vector<uint8_t> BuildPtd(const std::vector<PtdTensor>& tensors) {
  namespace fb = ::ferry::et::data::fbs;
  constexpr size_t kAlign = 16;
  auto aligned = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::DataSegment>> segments;
  std::vector<flatbuffers::Offset<fb::NamedData>> named;
  size_t data_size = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PtdTensor& t = tensors[i];
    data_size = aligned(data_size);
    segments.push_back(fb::CreateDataSegment(b, data_size, t.bytes.size()));
    data_size += t.bytes.size();
    flatbuffers::Offset<fb::TensorLayout> layout;
    if (t.with_layout) {
      std::vector<uint8_t> dim_order;
      for (size_t d = 0; d < t.sizes.size(); ++d) dim_order.push_back(static_cast<uint8_t>(d));
      layout = fb::CreateTensorLayoutDirect(b, t.scalar_type, &t.sizes, &dim_order);
    }
    named.push_back(
        fb::CreateNamedDataDirect(b, t.key.c_str(), static_cast<uint32_t>(i), layout));
  }
  b.Finish(fb::CreateDataFileDirect(b, 0, &segments, &named), "FT01");
  const uint8_t* fbuf = b.GetBufferPointer();
  const size_t fsize = b.GetSize();

  constexpr size_t kHeaderLength = 40;
  const size_t padded_header = aligned(kHeaderLength);  // inserted at byte 8
  const size_t flatbuffer_part = fsize + padded_header;
  const size_t segment_base = aligned(flatbuffer_part);
  std::vector<uint8_t> out(segment_base + data_size, 0);
  std::memcpy(out.data(), fbuf, 8);
  std::memcpy(out.data() + 8 + padded_header, fbuf + 8, fsize - 8);
  // The root offset counts from the start of the file, so it moves by the inserted bytes; every
  // other offset is relative and stays.
  uint32_t root = 0;
  std::memcpy(&root, fbuf, 4);
  PutLE(out, 0, root + padded_header, 4);
  std::memcpy(out.data() + 8, "FH01", 4);
  PutLE(out, 12, kHeaderLength, 4);
  PutLE(out, 16, padded_header, 8);  // flatbuffer_offset
  PutLE(out, 24, fsize, 8);          // flatbuffer_size
  PutLE(out, 32, segment_base, 8);
  PutLE(out, 40, data_size, 8);
  size_t at = 0;
  for (const PtdTensor& t : tensors) {
    at = aligned(at);
    if (!t.bytes.empty()) std::memcpy(out.data() + segment_base + at, t.bytes.data(), t.bytes.size());
    at += t.bytes.size();
  }
  return out;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_PTD_BUILDER_H_
