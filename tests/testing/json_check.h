// A strict syntax check of JSON text (RFC 8259): objects, arrays, strings with escapes, numbers,
// true/false/null, nothing after the value but whitespace. For tests of tools that print JSON.
//
//   std::string where;
//   EXPECT_TRUE(IsValidJson(output, &where)) << where;
#ifndef FERRY_TESTS_TESTING_JSON_CHECK_H_
#define FERRY_TESTS_TESTING_JSON_CHECK_H_

#include <cctype>
#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ferry::testing {

class JsonChecker {
 public:
  explicit JsonChecker(absl::string_view text) : s_(text) {}

  bool Check(std::string* error) {
    Space();
    bool ok = Value(0);
    Space();
    if (ok && i_ != s_.size()) ok = Fail("text after the value");
    if (!ok && error != nullptr) *error = error_;
    return ok;
  }

 private:
  bool Fail(const char* what) {
    if (error_.empty()) {
      error_ = absl::StrCat(what, " at byte ", i_, ": \"", s_.substr(i_, 20), "\"");
    }
    return false;
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Literal(absl::string_view word) {
    if (s_.substr(i_, word.size()) != word) return Fail("bad literal");
    i_ += word.size();
    return true;
  }
  bool String() {
    if (!Eat('"')) return Fail("expected a string");
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return Fail("control character in a string");
      if (c != '\\') continue;
      if (i_ >= s_.size()) break;
      const char e = s_[i_++];
      if (e == 'u') {
        for (int k = 0; k < 4; ++k) {
          if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_++]))) {
            return Fail("bad \\u escape");
          }
        }
      } else if (absl::string_view("\"\\/bfnrt").find(e) == absl::string_view::npos) {
        return Fail("bad escape");
      }
    }
    return Fail("unterminated string");
  }
  bool Digits() {
    const size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ > start;
  }
  bool Number() {
    Eat('-');
    if (Eat('0')) {
      // no leading zeros
    } else if (!Digits()) {
      return Fail("expected a number");
    }
    if (Eat('.') && !Digits()) return Fail("expected digits after '.'");
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!Digits()) return Fail("expected an exponent");
    }
    return true;
  }
  bool Value(int depth) {
    if (depth > 64) return Fail("nesting too deep");
    if (i_ >= s_.size()) return Fail("expected a value");
    switch (s_[i_]) {
      case '{': {
        ++i_;
        Space();
        if (Eat('}')) return true;
        do {
          Space();
          if (!String()) return false;
          Space();
          if (!Eat(':')) return Fail("expected ':'");
          Space();
          if (!Value(depth + 1)) return false;
          Space();
        } while (Eat(','));
        return Eat('}') || Fail("expected ',' or '}'");
      }
      case '[': {
        ++i_;
        Space();
        if (Eat(']')) return true;
        do {
          Space();
          if (!Value(depth + 1)) return false;
          Space();
        } while (Eat(','));
        return Eat(']') || Fail("expected ',' or ']'");
      }
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  absl::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

inline bool IsValidJson(absl::string_view text, std::string* error = nullptr) {
  return JsonChecker(text).Check(error);
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_JSON_CHECK_H_
