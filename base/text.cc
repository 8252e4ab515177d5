#include "ferry/base/text.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry {
namespace {

// The length of the valid UTF-8 sequence at `s[i]` (1 to 4), or 0 when it is not one (overlong
// forms, surrogates and code points past U+10FFFF are not valid).
size_t Utf8Length(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  if (n == 2 && cp < 0xA0) return 0;  // C1 controls (U+0080..U+009F): escaped
  return n;
}

}  // namespace

namespace {

std::string Escape(absl::string_view text, size_t max_bytes, bool quotes) {
  // The common case, printable ASCII that needs nothing, in one pass and one copy.
  if (text.size() <= max_bytes) {
    bool plain = true;
    for (const char c : text) {
      const auto b = static_cast<uint8_t>(c);
      plain = plain && b >= 0x20 && b < 0x7F && (!quotes || (c != '"' && c != '\\'));
    }
    if (plain) return std::string(text);
  }
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = Utf8Length(text, i);
    const size_t taken = n == 0 ? 1 : n;
    if (i + taken > max_bytes) break;
    const char c = text[i];
    if (n == 0 || (n == 1 && (static_cast<uint8_t>(c) < 0x20 || c == 0x7F))) {
      constexpr char kHex[] = "0123456789abcdef";
      const uint8_t b = static_cast<uint8_t>(c);
      out.append({'\\', 'x', kHex[b >> 4], kHex[b & 15]});
    } else if (quotes && n == 1 && (c == '\\' || c == '"')) {
      out.push_back('\\');
      out.push_back(c);
    } else {
      out.append(text.data() + i, n);
    }
    i += taken;
  }
  if (i < text.size()) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

}  // namespace

std::string EscapeUntrusted(absl::string_view text, size_t max_bytes) {
  return Escape(text, max_bytes, /*quotes=*/true);
}

std::string SanitizeName(absl::string_view name) {
  return Escape(name, kMaxUntrustedTextBytes, /*quotes=*/false);
}

std::string EscapeControls(absl::string_view text) {
  return Escape(text, text.size(), /*quotes=*/false);
}

std::string JsonQuoted(absl::string_view text) {
  std::string s = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      s.push_back('\\');
      s.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&s, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      s.push_back(c);
    }
  }
  s.push_back('"');
  return s;
}

}  // namespace ferry
