// GoogleTest helpers for absl::Status and absl::StatusOr.
//
//   EXPECT_OK(program.status());
//   ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("value 40")));
#ifndef FERRY_TESTS_TESTING_STATUS_MATCHERS_H_
#define FERRY_TESTS_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has code ") + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::ferry::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

// The code alone, whatever the message.
MATCHER_P(StatusIs, code, std::string("has code ") + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::ferry::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code;
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = ::ferry::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.ok();
}

// An OK absl::StatusOr whose value matches `value_matcher`.
MATCHER_P(IsOkAndHolds, value_matcher, "is OK and holds a matching value") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status().ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(value_matcher, *arg, result_listener);
}

}  // namespace ferry::testing

#define FERRY_TESTING_CONCAT_INNER(a, b) a##b
#define FERRY_TESTING_CONCAT(a, b) FERRY_TESTING_CONCAT_INNER(a, b)

#define EXPECT_OK(expr) EXPECT_THAT((expr), ::ferry::testing::IsOk())
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::ferry::testing::IsOk())

#define FERRY_TESTING_ASSIGN_OR_FAIL(tmp, lhs, expr)         \
  auto tmp = (expr);                                         \
  ASSERT_TRUE(tmp.ok()) << #expr << ": " << tmp.status(); \
  lhs = std::move(tmp).value()

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  FERRY_TESTING_ASSIGN_OR_FAIL(FERRY_TESTING_CONCAT(ferry_statusor_, __LINE__), lhs, expr)

#endif  // FERRY_TESTS_TESTING_STATUS_MATCHERS_H_
