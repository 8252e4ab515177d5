// Small helpers for reading untrusted file bytes (the program readers and the ExecuTorch data
// reader).
#ifndef FERRY_LOADER_INTERNAL_UNTRUSTED_BYTES_H_
#define FERRY_LOADER_INTERNAL_UNTRUSTED_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ferry::internal {

// The little-endian unsigned integer in the `n` (at most 8) bytes at `p`.
inline uint64_t ReadLE(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// a + b, or nullopt when it overflows.
inline std::optional<uint64_t> Add(uint64_t a, uint64_t b) {
  if (a > std::numeric_limits<uint64_t>::max() - b) return std::nullopt;
  return a + b;
}

// Takes `n` from `*left`; false (nothing taken) when fewer are left.
inline bool Spend(size_t* left, size_t n) {
  if (n > *left) return false;
  *left -= n;
  return true;
}

// What parsing may copy out of a file of `file_bytes` bytes. FlatBuffers lets any number of
// tables reference one vector or string, so copying it once per table that references it could
// take the square of the file's size. Unshared, each list entry takes at least 4 bytes of the
// file and each string byte one; strings get twice that, since a name may be copied twice (a
// node without a name is reported under its op's). A file over the budget shares its data.
class CopyBudget {
 public:
  explicit CopyBudget(size_t file_bytes)
      : file_bytes_(file_bytes), list_entries_(file_bytes / 4), string_bytes_(2 * file_bytes) {}
  size_t file_bytes() const { return file_bytes_; }
  // False (nothing taken) when `n` more list entries, or string bytes, would go over it.
  bool SpendEntries(size_t n) { return Spend(&list_entries_, n); }
  bool SpendBytes(size_t n) { return Spend(&string_bytes_, n); }

 private:
  size_t file_bytes_;
  size_t list_entries_;
  size_t string_bytes_;
};

// The length of a header that starts at byte `offset` of `file` with a 4-byte magic and a 4-byte
// little-endian length counted from the magic, and whose fields take `min_length` bytes: nullopt,
// with the reason in `*error` (starting with `name`, e.g. "the header"), when the fields run past
// the file, the length does not cover them, or the length runs past the file.
inline std::optional<uint32_t> ReadHeaderLength(absl::string_view name, const uint8_t* file,
                                                uint64_t file_size, uint64_t offset,
                                                uint32_t min_length, std::string* error) {
  if (file_size < offset + min_length) {
    *error = absl::StrCat(name, " is cut short: the file is ", file_size,
                          " bytes, and the header's fields end at byte ", offset + min_length);
    return std::nullopt;
  }
  const uint32_t length = static_cast<uint32_t>(ReadLE(file + offset + 4, 4));
  if (length < min_length) {
    *error = absl::StrCat(name, "'s length is ", length, " bytes, less than the ", min_length,
                          " bytes of its fields");
    return std::nullopt;
  }
  if (offset + uint64_t{length} > file_size) {
    *error = absl::StrCat(name, "'s length, ", length,
                          " bytes, runs past the end of the file (", file_size, " bytes)");
    return std::nullopt;
  }
  return length;
}

// A name from the file, quoted and escaped for messages.
inline std::string Quoted(absl::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(s), "\"");
}

}  // namespace ferry::internal

#endif  // FERRY_LOADER_INTERNAL_UNTRUSTED_BYTES_H_
