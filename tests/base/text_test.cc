// EscapeUntrusted (base/text.h) on names a hostile file could hold, against escapes written out by
// hand.
#include "ferry/base/text.h"

#include <string>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(EscapeUntrusted, PrintableTextPassesThrough) {
  EXPECT_EQ(EscapeUntrusted("aten::add.out"), "aten::add.out");
  EXPECT_EQ(EscapeUntrusted(""), "");
  // Valid UTF-8 stays as it is: é (C3 A9), 中 (E4 B8 AD), 😀 (F0 9F 98 80).
  EXPECT_EQ(EscapeUntrusted("caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80");
}

TEST(EscapeUntrusted, ControlsQuotesAndInvalidBytesAreEscaped) {
  EXPECT_EQ(EscapeUntrusted(std::string("at\0en", 5)), "at\\x00en");  // a NUL cuts nothing
  EXPECT_EQ(EscapeUntrusted("\x1b[31mred"), "\\x1b[31mred");          // no terminal escapes
  EXPECT_EQ(EscapeUntrusted("a\tb\nc\x7f"), "a\\x09b\\x0ac\\x7f");
  EXPECT_EQ(EscapeUntrusted("say \"hi\" \\ bye"), "say \\\"hi\\\" \\\\ bye");
  // C1 control U+0085 (C2 85), a lone continuation byte, a truncated sequence, an overlong '/'
  // (C0 AF), a surrogate (ED A0 80) and a code point past U+10FFFF (F4 90 80 80).
  EXPECT_EQ(EscapeUntrusted("\xC2\x85"), "\\xc2\\x85");
  EXPECT_EQ(EscapeUntrusted("a\x80z"), "a\\x80z");
  EXPECT_EQ(EscapeUntrusted("\xE4\xB8"), "\\xe4\\xb8");
  EXPECT_EQ(EscapeUntrusted("\xC0\xAF"), "\\xc0\\xaf");
  EXPECT_EQ(EscapeUntrusted("\xED\xA0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(EscapeUntrusted("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
}

TEST(EscapeUntrusted, LongTextIsCappedOnACharacterBoundary) {
  const std::string long_name(1000, 'x');
  EXPECT_EQ(EscapeUntrusted(long_name, 10), "xxxxxxxxxx... (1000 bytes)");
  EXPECT_EQ(EscapeUntrusted(long_name).size(), 256u + std::string("... (1000 bytes)").size());
  // Nine bytes then a 3-byte character: the character does not fit in 10, so it is left out.
  EXPECT_EQ(EscapeUntrusted("123456789\xE4\xB8\xAD", 10), "123456789... (12 bytes)");
  EXPECT_EQ(EscapeUntrusted("1234567890", 10), "1234567890");
}

TEST(SanitizeName, KeepsQuotesEscapesControlsAndCaps) {
  EXPECT_EQ(SanitizeName("a \"quoted\" \\n"), "a \"quoted\" \\n");
  EXPECT_EQ(SanitizeName(std::string("w\0\x1b", 3)), "w\\x00\\x1b");
  EXPECT_EQ(SanitizeName(std::string(300, 'n')), std::string(256, 'n') + "... (300 bytes)");
}

TEST(SanitizeName, PlainNamesAreKeptAsTheyAre) {
  const struct {
    std::string name;
    bool plain;
  } kCases[] = {{"aten::add.out", true},
                {"a \"q\" \\", true},
                {"", true},
                {std::string(256, 'a'), true},
                {std::string(257, 'a'), false},
                {"caf\xC3\xA9", false},  // UTF-8: the full check
                {"x\x7f", false},
                {std::string(1, '\0'), false}};
  for (const auto& c : kCases) {
    EXPECT_EQ(IsPlainName(c.name), c.plain) << c.name;
    if (c.plain) {
      EXPECT_EQ(SanitizeName(c.name), c.name);
    }
    std::string out = "previous";
    AssignName(c.name, &out);
    EXPECT_EQ(out, SanitizeName(c.name));
  }
}

TEST(SanitizeName, PlainCheckAgreesWithAByteByByteOneAtEveryPosition) {
  // Every byte value at every position of names of 1 to 17 bytes (the 8-byte words and tails).
  for (size_t length = 1; length <= 17; ++length) {
    for (size_t at = 0; at < length; ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string name(length, 'm');
        name[at] = static_cast<char>(b);
        const bool want = b >= 0x20 && b <= 0x7E;
        ASSERT_EQ(IsPlainName(name), want) << "length " << length << ", byte " << b << " at " << at;
      }
    }
  }
}

TEST(EscapeControls, KeepsQuotesAndLengthEscapesTheRest) {
  const std::string message = std::string("method \"m\": op \"a\0b\x1b\" \\ ok", 26);
  EXPECT_EQ(EscapeControls(message), "method \"m\": op \"a\\x00b\\x1b\" \\ ok");
  const std::string long_message(1000, 'y');
  EXPECT_EQ(EscapeControls(long_message), long_message);
}

TEST(JsonQuoted, EscapesQuotesBackslashesAndControlsOnly) {
  EXPECT_EQ(JsonQuoted(""), "\"\"");
  EXPECT_EQ(JsonQuoted("copy 2 h2d \"x\""), "\"copy 2 h2d \\\"x\\\"\"");
  EXPECT_EQ(JsonQuoted("a\\b"), "\"a\\\\b\"");
  EXPECT_EQ(JsonQuoted(std::string("n\x00\n\x1f", 4)), "\"n\\u0000\\u000a\\u001f\"");
  EXPECT_EQ(JsonQuoted("caf\xc3\xa9 /"), "\"caf\xc3\xa9 /\"");  // UTF-8 and / as they are
}

}  // namespace
}  // namespace ferry
