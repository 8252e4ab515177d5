// libFuzzer target: the input is an ExecuTorch data file (.ptd), read by ReadExecuTorchDataFile;
// every entry and segment of an accepted file is read whole and checked to lie inside the input,
// so that anything the reader let through that points outside it faults under ASan or aborts.
// Seeds: the .ptd files of ../shared/pte when that folder exists. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/types/span.h"
#include "ferry/loader/executorch/ptd_reader.h"

namespace {

uint8_t Touch(absl::Span<const uint8_t> span) {
  uint8_t x = 0;
  for (uint8_t b : span) x ^= b;
  return x;
}

bool Inside(absl::Span<const uint8_t> span, const uint8_t* begin, size_t size) {
  return span.empty() || (span.data() >= begin && span.size() <= size &&
                          static_cast<size_t>(span.data() - begin) <= size - span.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  // The reader needs 8-byte aligned bytes; a buffer of exactly `size` bytes so that reading past
  // the input faults.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  absl::StatusOr<ferry::EtDataFile> file =
      ferry::ReadExecuTorchDataFile(absl::MakeConstSpan(copy.get(), size));
  if (!file.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const ferry::EtSegment& segment : file->segments) {
    if (!Inside(segment.bytes, copy.get(), size)) std::abort();
    sink = sink ^ Touch(segment.bytes);
  }
  for (const ferry::EtDataEntry& entry : file->entries) {
    if (!Inside(entry.bytes, copy.get(), size)) std::abort();
    if (entry.segment_index >= file->segments.size()) std::abort();
    if (entry.tensor.has_value() && entry.bytes.size() != entry.tensor->byte_size) std::abort();
    sink = sink ^ Touch(entry.bytes);
    if (file->Find(entry.key) == nullptr) std::abort();
  }
  return 0;
}
