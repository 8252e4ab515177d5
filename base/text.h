// Text from untrusted files (operator, method, value and backend names) made safe to put in a
// message or on a terminal. The readers keep names as SanitizeName makes them, so every message
// that names a method, value or node is safe; EscapeUntrusted is for a file's string put straight
// into a message, EscapeControls for a whole message about to be printed.
//
//   absl::StrCat("op \"", EscapeUntrusted(name), "\" is not supported")
//
// Valid UTF-8 passes through, except control characters (C0, DEL, C1), which become \xNN with
// every byte that is not valid UTF-8; a backslash and a double quote are escaped (\\, \"), so
// that a name quoted in a message cannot end the quote. A NUL cannot cut the message short, and
// no escape sequence reaches a terminal. At most `max_bytes` of the input are kept (on a
// character boundary), followed by "... (N bytes)".
#ifndef FERRY_BASE_TEXT_H_
#define FERRY_BASE_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace ferry {

inline constexpr size_t kMaxUntrustedTextBytes = 256;

std::string EscapeUntrusted(absl::string_view text, size_t max_bytes = kMaxUntrustedTextBytes);

// For names kept in the program model (read once, shown in many messages and plans): as above,
// capped, but quotes and backslashes kept, since a name is text, not a quoted literal.
std::string SanitizeName(absl::string_view name);

// Whether SanitizeName would return `name` as it is (printable ASCII, within the cap): readers
// test this inline and copy the name straight, so that the common case costs one pass.
// Eight bytes at a time: a byte is outside 0x20..0x7E when it is below 0x20 (it borrows when
// 0x20 is subtracted) or above 0x7E (it carries into bit 7 when 1 is added, or has bit 7 set).
inline bool IsPlainName(absl::string_view name) {
  if (name.size() > kMaxUntrustedTextBytes) return false;
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  uint64_t bad = 0;
  size_t i = 0;
  const auto check = [&](uint64_t w) { bad |= ((w - 0x20 * kOnes) & ~w) | ((w + kOnes) | w); };
  for (; i + 8 <= name.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, name.data() + i, 8);
    check(w);
  }
  if (i < name.size()) {
    uint64_t w = 0x4141414141414141ull;  // 'A's in the bytes past the end
    std::memcpy(&w, name.data() + i, name.size() - i);
    check(w);
  }
  return (bad & kHigh) == 0;
}

// `*out` = SanitizeName(name), reusing `*out`'s storage when the name is plain.
inline void AssignName(absl::string_view name, std::string* out) {
  if (IsPlainName(name)) {
    out->assign(name.data(), name.size());
  } else {
    *out = SanitizeName(name);
  }
}

// For whole messages about to be printed: control characters and invalid UTF-8 as \xNN, as
// above, but quotes and backslashes kept and nothing cut.
std::string EscapeControls(absl::string_view text);

// `text` as a JSON string: in double quotes, with quotes, backslashes and control characters
// escaped (\uXXXX); other bytes as they are.
std::string JsonQuoted(absl::string_view text);

}  // namespace ferry

#endif  // FERRY_BASE_TEXT_H_
