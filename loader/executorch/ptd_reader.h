// A verified reader for ExecuTorch data files (.ptd, the "FlatTensor" format): tensors that a .pte
// program refers to by fully qualified name instead of holding them itself.
//
//   FERRY_ASSIGN_OR_RETURN(EtDataFile data, ReadExecuTorchDataFile(bytes));
//   const EtDataEntry* weight = data.Find("linear.weight");  // nullptr when absent
//
// Program::Load(path, options) reads the data file named in ProgramLoadOptions::data_path with
// this reader, and loader/executorch/importer.h resolves a program's external tensors against the
// result; most callers never see it.
//
// The format (loader/executorch/schema/executorch_data.fbs): a FlatBuffer with file identifier
// "FT01" at bytes 4..7, a header at bytes 8.. (magic "FH01", its length, the offset and size of the
// FlatBuffer data, the file offset and size of the segment data), and data segments after the
// FlatBuffer part. Two layouts share the identifier: the current one, whose named_data entries
// each own a whole segment (with an optional tensor layout), and an older one (early 2025), whose
// tensor entries lie at an offset inside a segment. Both are read into the same EtDataFile.
//
// Every byte is untrusted. The reader checks, in order: the identifier and the header against the
// file size (overflow-safe); the FlatBuffers verifier over the FlatBuffer part (bounded depth and
// table count); then every segment inside the segment data, every entry's segment index in range,
// its bytes inside its segment, its scalar type known, its sizes non-negative with a byte size
// that fits in int64, its dim order a permutation of its rank, and no key given twice. Nothing is
// allocated in proportion to a size the file declares before that size is checked against the
// file. A failure is InvalidArgument naming the element, e.g.
//   ExecuTorch data file: tensor 1 ("linear.bias"): 12 bytes at offset 56 of segment 0 run past
//   its end (64 bytes)
// An identifier "FT" and two other digits (a newer format) is Unimplemented.
//
// Ownership: the spans in the result point into `bytes`; an EtDataFile must not outlive them.
// `bytes` is never written.
// Allocation: the result holds copies of keys, sizes and dim orders, never of the data.
// Thread safety: a pure function.
#ifndef FERRY_LOADER_EXECUTORCH_PTD_READER_H_
#define FERRY_LOADER_EXECUTORCH_PTD_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/loader/executorch/pte_reader.h"

namespace ferry {

// The magic of an ExecuTorch data file's header (bytes 8..11); its file identifier is in
// loader/file_identifiers.h.
inline constexpr char kExecuTorchDataHeaderMagic[] = "FH01";

struct EtDataHeader {
  uint32_t length = 0;               // bytes, counted from the magic
  uint64_t flatbuffer_offset = 0;    // the FlatBuffer part is the first
  uint64_t flatbuffer_size = 0;      //   flatbuffer_offset + flatbuffer_size bytes
  uint64_t segment_base_offset = 0;  // file offset of the segments
  uint64_t segment_data_size = 0;    // bytes of segment data
};

enum class EtDataLayout : uint8_t {
  kNamedData = 0,      // current: named_data entries, one segment each
  kLegacyTensors = 1,  // early 2025: tensors at an offset inside a segment
};

// A tensor's description in a data file.
struct EtDataTensorLayout {
  int8_t scalar_type = 0;          // ExecuTorch's (PyTorch's) number; a known type
  std::vector<int64_t> sizes;      // non-negative
  std::vector<uint8_t> dim_order;  // empty, or a permutation of 0..rank-1
  size_t byte_size = 0;            // product of sizes * element size; fits in int64
};

struct EtDataEntry {
  std::string key;  // the fully qualified name programs use; unique in the file
  uint32_t segment_index = 0;
  // Absent for a named_data entry that is not a tensor; always present in the legacy layout.
  std::optional<EtDataTensorLayout> tensor;
  uint64_t file_offset = 0;  // where `bytes` start in the file
  // The entry's bytes: its whole segment (kNamedData), or byte_size bytes at its offset inside
  // its segment (kLegacyTensors).
  absl::Span<const uint8_t> bytes;
};

struct EtDataFile {
  EtDataHeader header;
  EtDataLayout layout = EtDataLayout::kNamedData;
  uint32_t version = 0;
  std::vector<EtSegment> segments;
  std::vector<EtDataEntry> entries;  // in the file's order
  // Key -> index in `entries`, made by the reader. Find scans `entries` instead when the index
  // does not cover them (a file assembled by hand).
  absl::flat_hash_map<std::string, size_t> index;

  // The entry named `key`, or nullptr. O(1) through `index`.
  const EtDataEntry* Find(absl::string_view key) const;
};

// Reads and verifies the bytes of a .ptd file. `bytes` must be 8-byte aligned in memory (the
// FlatBuffer's scalars are read in place); an unaligned buffer is InvalidArgument.
absl::StatusOr<EtDataFile> ReadExecuTorchDataFile(absl::Span<const uint8_t> bytes);

}  // namespace ferry

#endif  // FERRY_LOADER_EXECUTORCH_PTD_READER_H_
