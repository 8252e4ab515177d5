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
inline bool IsPlainName(absl::string_view name) {
  if (name.size() > kMaxUntrustedTextBytes) return false;
  bool other = false;
  for (const char c : name) other |= static_cast<unsigned char>(c - 0x20) > 0x5E;  // 0x20..0x7E
  return !other;
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

}  // namespace ferry

#endif  // FERRY_BASE_TEXT_H_
