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

// For whole messages about to be printed: control characters and invalid UTF-8 as \xNN, as
// above, but quotes and backslashes kept and nothing cut.
std::string EscapeControls(absl::string_view text);

}  // namespace ferry

#endif  // FERRY_BASE_TEXT_H_
