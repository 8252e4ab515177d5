#include "ferry/loader/executorch/ptd_reader.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/internal/untrusted_bytes.h"
#include "ferry/loader/model/checks.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/executorch_data_generated.h"

namespace ferry {
namespace {

namespace fb = ::ferry::et::data::fbs;

static_assert(FLATBUFFERS_LITTLEENDIAN, "Ferry reads data files in place on little-endian hosts");

// DataFile/named_data/NamedData/tensor_layout/TensorLayout/sizes is the deepest path; the margin
// tolerates new fields, the bound stops hostile nesting.
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
// ExecuTorch's runtime limit on tensor rank (kTensorDimensionLimit).
constexpr size_t kMaxRank = 16;
// The header: magic, length (uint32), then flatbuffer_offset, flatbuffer_size,
// segment_base_offset and segment_data_size (uint64 each). All little-endian.
constexpr size_t kHeaderOffset = 8;
constexpr uint32_t kMinHeaderLength = 40;
// The vtable offset of the legacy root table's fourth field (segments, id 3: 4 + 2 * 3); the
// current root has three fields.
constexpr flatbuffers::voffset_t kLegacySegmentsField = 10;

using ::ferry::internal::Add;
using ::ferry::internal::Quoted;
using ::ferry::internal::ReadLE;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("ExecuTorch data file: ", what));
}

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

class DataFileReader {
 public:
  explicit DataFileReader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  absl::StatusOr<EtDataFile> Run() {
    FERRY_RETURN_IF_ERROR(CheckIdentifier());
    FERRY_RETURN_IF_ERROR(ReadHeader());
    FERRY_RETURN_IF_ERROR(VerifyFlatBuffer());
    if (file_.layout == EtDataLayout::kLegacyTensors) {
      FERRY_RETURN_IF_ERROR(ReadSegments(legacy_root_->segments()));
      FERRY_RETURN_IF_ERROR(ReadLegacyTensors());
    } else {
      FERRY_RETURN_IF_ERROR(ReadSegments(root_->segments()));
      FERRY_RETURN_IF_ERROR(ReadNamedData());
    }
    return std::move(file_);
  }

 private:
  absl::Status CheckIdentifier() const {
    if (bytes_.size() < kHeaderOffset) {
      return Invalid(absl::StrCat("the file is ", bytes_.size(), " bytes, too short for one"));
    }
    if (reinterpret_cast<uintptr_t>(bytes_.data()) % 8 != 0) {
      return Invalid("its bytes are not 8-byte aligned in memory; copy them to an aligned buffer");
    }
    const absl::string_view id(reinterpret_cast<const char*>(bytes_.data()) + 4, 4);
    if (id == kExecuTorchDataFileIdentifier) return absl::OkStatus();
    if (id == kExecuTorchFileIdentifier) {
      return Invalid(absl::StrCat("this is an ExecuTorch program (.pte, file identifier ",
                                  Quoted(id), "), not a data file"));
    }
    if (id.substr(0, 2) == "FT" && absl::ascii_isdigit(static_cast<unsigned char>(id[2])) &&
        absl::ascii_isdigit(static_cast<unsigned char>(id[3]))) {
      return absl::UnimplementedError(
          absl::StrCat("ExecuTorch data file format ", Quoted(id), " is not supported; Ferry reads \"",
                       kExecuTorchDataFileIdentifier, "\""));
    }
    return Invalid(absl::StrCat("not a .ptd file: the file identifier (bytes 4..7) is ",
                                Quoted(id), ", expected \"", kExecuTorchDataFileIdentifier, "\""));
  }

  absl::Status ReadHeader() {
    const uint64_t file_size = bytes_.size();
    if (file_size < kHeaderOffset + 4 ||
        std::memcmp(bytes_.data() + kHeaderOffset, kExecuTorchDataHeaderMagic, 4) != 0) {
      return Invalid(absl::StrCat("it has no header (magic \"", kExecuTorchDataHeaderMagic,
                                  "\" at bytes 8..11), which says where its data lies"));
    }
    std::string error;
    const std::optional<uint32_t> length = internal::ReadHeaderLength(
        "the header", bytes_.data(), file_size, kHeaderOffset, kMinHeaderLength, &error);
    if (!length.has_value()) return Invalid(error);
    const uint8_t* h = bytes_.data() + kHeaderOffset;
    EtDataHeader& header = file_.header;
    header.length = *length;
    header.flatbuffer_offset = ReadLE(h + 8, 8);
    header.flatbuffer_size = ReadLE(h + 16, 8);
    header.segment_base_offset = ReadLE(h + 24, 8);
    header.segment_data_size = ReadLE(h + 32, 8);
    const uint64_t header_end = kHeaderOffset + uint64_t{header.length};
    const std::optional<uint64_t> fb_end = Add(header.flatbuffer_offset, header.flatbuffer_size);
    if (!fb_end.has_value() || *fb_end > file_size) {
      return Invalid(absl::StrCat("the header says the FlatBuffer data is ", header.flatbuffer_size,
                                  " bytes from byte ", header.flatbuffer_offset,
                                  ", past the end of the file (", file_size,
                                  " bytes): it is truncated"));
    }
    if (header.flatbuffer_offset < header_end) {
      return Invalid(absl::StrCat("the header's flatbuffer_offset, ", header.flatbuffer_offset,
                                  ", lies inside the header (which ends at byte ", header_end,
                                  ")"));
    }
    flatbuffer_end_ = *fb_end;
    const std::optional<uint64_t> data_end =
        Add(header.segment_base_offset, header.segment_data_size);
    if (!data_end.has_value() || *data_end > file_size) {
      return Invalid(absl::StrCat("the header's segment data (", header.segment_data_size,
                                  " bytes from byte ", header.segment_base_offset,
                                  ") runs past the end of the file (", file_size,
                                  " bytes): it is truncated"));
    }
    if (header.segment_data_size != 0 && header.segment_base_offset < flatbuffer_end_) {
      return Invalid(absl::StrCat("the header's segment_base_offset, ", header.segment_base_offset,
                                  ", lies inside the FlatBuffer data (which ends at byte ",
                                  flatbuffer_end_, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status VerifyFlatBuffer() {
    const uint64_t size = flatbuffer_end_;
    if (size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
      return Invalid(absl::StrCat("its FlatBuffer data is ", size,
                                  " bytes; the format holds less than 2 GiB"));
    }
    // A table takes at least 4 bytes; the bound keeps the verifier's work linear in the size.
    const auto max_tables =
        static_cast<flatbuffers::uoffset_t>(std::max<uint64_t>(size / 4, uint64_t{1} << 16));
    // Which layout: both share the identifier, so look at the root table's fields. The root
    // table and its vtable are verified before a field is looked up.
    const uint64_t root = ReadLE(bytes_.data(), 4);
    if (root > size - sizeof(flatbuffers::soffset_t)) {
      return Invalid(absl::StrCat("the root offset, ", root, ", points outside its ", size,
                                  " bytes of FlatBuffer data"));
    }
    const auto* table = reinterpret_cast<const flatbuffers::Table*>(bytes_.data() + root);
    flatbuffers::Verifier probe(bytes_.data(), static_cast<size_t>(size), kMaxDepth, max_tables);
    if (!table->VerifyTableStart(probe)) {
      return Invalid("its FlatBuffer data is malformed: the root table's vtable lies outside it");
    }
    const bool legacy = table->GetOptionalFieldOffset(kLegacySegmentsField) != 0;
    flatbuffers::Verifier verifier(bytes_.data(), static_cast<size_t>(size), kMaxDepth,
                                   max_tables);
    const bool ok = legacy ? verifier.VerifyBuffer<fb::LegacyDataFile>(kExecuTorchDataFileIdentifier)
                           : fb::VerifyDataFileBuffer(verifier);
    if (!ok) {
      return Invalid(absl::StrCat(
          "its FlatBuffer data is malformed: the FlatBuffers verifier rejected its ", size,
          " bytes (an offset or length points outside them, or the nesting is too deep)"));
    }
    if (legacy) {
      file_.layout = EtDataLayout::kLegacyTensors;
      legacy_root_ = flatbuffers::GetRoot<fb::LegacyDataFile>(bytes_.data());
      file_.version = legacy_root_->version();
    } else {
      file_.layout = EtDataLayout::kNamedData;
      root_ = fb::GetDataFile(bytes_.data());
      file_.version = root_->version();
    }
    return absl::OkStatus();
  }

  absl::Status ReadSegments(
      const flatbuffers::Vector<flatbuffers::Offset<fb::DataSegment>>* segments) {
    const EtDataHeader& header = file_.header;
    file_.segments.reserve(Len(segments));
    for (size_t i = 0; i < Len(segments); ++i) {
      EtSegment segment;
      segment.offset = segments->Get(i)->offset();
      segment.size = segments->Get(i)->size();
      const std::optional<uint64_t> end = Add(segment.offset, segment.size);
      if (!end.has_value() || *end > header.segment_data_size) {
        return Invalid(absl::StrCat("segment ", i, " (", segment.size, " bytes at offset ",
                                    segment.offset, ") runs past the end of the segment data (",
                                    header.segment_data_size, " bytes)"));
      }
      // Within the segment data, which lies inside the file (ReadHeader).
      segment.file_offset = header.segment_base_offset + segment.offset;
      segment.bytes = bytes_.subspan(static_cast<size_t>(segment.file_offset),
                                     static_cast<size_t>(segment.size));
      file_.segments.push_back(segment);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<EtDataTensorLayout> ReadLayout(absl::string_view what, int8_t scalar_type,
                                                const flatbuffers::Vector<int32_t>* sizes,
                                                const flatbuffers::Vector<uint8_t>* dim_order) const {
    EtDataTensorLayout layout;
    layout.scalar_type = scalar_type;
    const size_t element_size = EtScalarTypeSize(scalar_type);
    if (element_size == 0) {
      return Invalid(absl::StrCat(what, ": scalar type ", scalar_type, " names no type"));
    }
    if (Len(sizes) > kMaxRank) {
      return Invalid(absl::StrCat(what, " has rank ", Len(sizes), "; at most ", kMaxRank,
                                  " is allowed"));
    }
    for (size_t d = 0; d < Len(sizes); ++d) {
      const int32_t s = sizes->Get(static_cast<flatbuffers::uoffset_t>(d));
      if (s < 0) return Invalid(absl::StrCat(what, ": size ", d, " is ", s, ", negative"));
      layout.sizes.push_back(s);
    }
    // The model's rules (loader/model/checks.h): a byte size that fits in int64, and a dim order
    // that is a permutation of the rank.
    const std::optional<size_t> bytes =
        CheckedByteSize<int64_t>(element_size, absl::MakeConstSpan(layout.sizes));
    if (!bytes.has_value()) return Invalid(absl::StrCat(what, ": its byte size overflows"));
    layout.byte_size = *bytes;
    if (Len(dim_order) != 0) {
      if (Len(dim_order) != layout.sizes.size()) {
        return Invalid(absl::StrCat(what, ": its dim order has ", Len(dim_order),
                                    " entries, but its rank is ", layout.sizes.size()));
      }
      if (!IsDimOrder(absl::MakeConstSpan(dim_order->data(), dim_order->size()),
                      layout.sizes.size())) {
        return Invalid(absl::StrCat(what, ": its dim order is not a permutation of 0..",
                                    layout.sizes.size() - 1));
      }
      layout.dim_order.assign(dim_order->begin(), dim_order->end());
    }
    return layout;
  }

  absl::Status AddKey(absl::string_view what, const flatbuffers::String* key, EtDataEntry& entry) {
    if (key == nullptr) return Invalid(absl::StrCat(what, " has no key"));
    entry.key.assign(key->c_str(), key->size());
    if (!file_.index.try_emplace(entry.key, file_.entries.size()).second) {
      return Invalid(absl::StrCat(what, ": key ", Quoted(entry.key), " is given twice"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckSegmentIndex(absl::string_view what, uint32_t index) const {
    if (index >= file_.segments.size()) {
      return Invalid(absl::StrCat(what, " is in segment ", index, ", but the file has ",
                                  file_.segments.size(), " segments"));
    }
    return absl::OkStatus();
  }

  absl::Status ReadNamedData() {
    const auto* named = root_->named_data();
    file_.entries.reserve(Len(named));
    for (size_t i = 0; i < Len(named); ++i) {
      const fb::NamedData& n = *named->Get(static_cast<flatbuffers::uoffset_t>(i));
      std::string what = absl::StrCat("named data entry ", i);
      EtDataEntry entry;
      FERRY_RETURN_IF_ERROR(AddKey(what, n.key(), entry));
      what = absl::StrCat(what, " (", Quoted(entry.key), ")");
      FERRY_RETURN_IF_ERROR(CheckSegmentIndex(what, n.segment_index()));
      entry.segment_index = n.segment_index();
      const EtSegment& segment = file_.segments[entry.segment_index];
      entry.file_offset = segment.file_offset;
      entry.bytes = segment.bytes;
      if (const fb::TensorLayout* t = n.tensor_layout(); t != nullptr) {
        FERRY_ASSIGN_OR_RETURN(EtDataTensorLayout layout,
                               ReadLayout(what, t->scalar_type(), t->sizes(), t->dim_order()));
        if (layout.byte_size > segment.size) {
          return Invalid(absl::StrCat(what, ": a tensor of ", layout.byte_size,
                                      " bytes, but its segment ", entry.segment_index, " holds ",
                                      segment.size));
        }
        entry.bytes = segment.bytes.first(layout.byte_size);
        entry.tensor = std::move(layout);
      }
      file_.entries.push_back(std::move(entry));
    }
    return absl::OkStatus();
  }

  absl::Status ReadLegacyTensors() {
    const auto* tensors = legacy_root_->tensors();
    file_.entries.reserve(Len(tensors));
    for (size_t i = 0; i < Len(tensors); ++i) {
      const fb::LegacyTensor& t = *tensors->Get(static_cast<flatbuffers::uoffset_t>(i));
      std::string what = absl::StrCat("tensor ", i);
      EtDataEntry entry;
      FERRY_RETURN_IF_ERROR(AddKey(what, t.fully_qualified_name(), entry));
      what = absl::StrCat(what, " (", Quoted(entry.key), ")");
      FERRY_RETURN_IF_ERROR(CheckSegmentIndex(what, t.segment_index()));
      entry.segment_index = t.segment_index();
      FERRY_ASSIGN_OR_RETURN(EtDataTensorLayout layout,
                             ReadLayout(what, t.scalar_type(), t.sizes(), t.dim_order()));
      const EtSegment& segment = file_.segments[entry.segment_index];
      const std::optional<uint64_t> end = Add(t.offset(), layout.byte_size);
      if (!end.has_value() || *end > segment.size) {
        return Invalid(absl::StrCat(what, ": ", layout.byte_size, " bytes at offset ", t.offset(),
                                    " of segment ", entry.segment_index,
                                    " run past its end (", segment.size, " bytes)"));
      }
      entry.file_offset = segment.file_offset + t.offset();
      entry.bytes = segment.bytes.subspan(static_cast<size_t>(t.offset()), layout.byte_size);
      entry.tensor = std::move(layout);
      file_.entries.push_back(std::move(entry));
    }
    return absl::OkStatus();
  }

  const absl::Span<const uint8_t> bytes_;
  EtDataFile file_;
  uint64_t flatbuffer_end_ = 0;
  const fb::DataFile* root_ = nullptr;
  const fb::LegacyDataFile* legacy_root_ = nullptr;
};

}  // namespace

const EtDataEntry* EtDataFile::Find(absl::string_view key) const {
  if (index.size() == entries.size()) {
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    if (it->second < entries.size() && entries[it->second].key == key) return &entries[it->second];
  }
  for (const EtDataEntry& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

absl::StatusOr<EtDataFile> ReadExecuTorchDataFile(absl::Span<const uint8_t> bytes) {
  return DataFileReader(bytes).Run();
}

}  // namespace ferry
