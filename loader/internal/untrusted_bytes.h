// Small helpers for reading untrusted file bytes (the ExecuTorch program and data readers).
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

// A name from the file, quoted and escaped for messages.
inline std::string Quoted(absl::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(s), "\"");
}

}  // namespace ferry::internal

#endif  // FERRY_LOADER_INTERNAL_UNTRUSTED_BYTES_H_
