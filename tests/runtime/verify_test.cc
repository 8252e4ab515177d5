// Running a bundled program's test cases (runtime/verify.h) on the sample program of
// tests/testing/bundled_sample.h: right and wrong expectations for float, int64 and int outputs,
// ExecuTorch's tolerance rule, NaN, memory order, and cases that cannot run. Every expected value
// is computed in the test (double precision) or written by hand.
#include "ferry/runtime/verify.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/bundle_builder.h"
#include "tests/testing/bundled_sample.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::BuildBundle;
using ::ferry::testing::BundleCase;
using ::ferry::testing::BundleSuite;
using ::ferry::testing::FloatValue;
using ::ferry::testing::Int64Value;
using ::ferry::testing::IntScalar;
using ::ferry::testing::RightCount;
using ::ferry::testing::RightForward;
using ::ferry::testing::RightSize;
using ::ferry::testing::SampleBundlePte;
using ::ferry::testing::SampleForward;
using ::ferry::testing::SampleX;
using ::ferry::testing::SampleY;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<std::vector<CaseResult>> VerifyBundle(const std::vector<BundleSuite>& suites,
                                                     VerifyOptions options = {}) {
  Runtime rt;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Program> program,
                         Program::FromBytes(BuildBundle(SampleBundlePte(), suites)));
  return VerifyTestSuites(rt, *program, options);
}

TEST(Verify, RightCasesOfEveryMethodPass) {
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> results,
                       VerifyBundle({{"forward", {RightForward(), RightForward()}},
                                     {"count", {RightCount()}},
                                     {"size", {RightSize()}}}));
  ASSERT_EQ(results.size(), 4u);
  const char* methods[] = {"forward", "forward", "count", "size"};
  const size_t indices[] = {0, 1, 0, 0};
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(FormatCaseResult(results[i]));
    EXPECT_OK(results[i].status);
    EXPECT_TRUE(results[i].passed);
    EXPECT_EQ(results[i].method, methods[i]);
    EXPECT_EQ(results[i].case_index, indices[i]);
    EXPECT_EQ(results[i].mismatched_elements, 0u);
    EXPECT_FALSE(results[i].first_mismatch.has_value());
  }
  EXPECT_THAT(FormatCaseResult(results[0]), HasSubstr("forward case 0: PASS"));
}

TEST(Verify, AWrongFloatNamesTheFirstDifferingElement) {
  BundleCase wrong = RightForward();
  std::vector<float> expected = SampleForward(SampleX(), SampleY());
  // Elements 4 ([1, 1]: 10 + 2 * 2 = 14) and 5 ([1, 2]: -0.5 + 12 = 11.5), off by 0.5 and 2.
  expected[4] = 14.5f;
  expected[5] = 9.5f;
  wrong.expected[0] = FloatValue({2, 3}, expected);
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> results,
                       VerifyBundle({{"forward", {RightForward(), wrong}}}));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].passed);
  const CaseResult& r = results[1];
  EXPECT_OK(r.status);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatched_elements, 2u);
  EXPECT_DOUBLE_EQ(r.max_abs_error, 2.0);
  EXPECT_DOUBLE_EQ(r.max_rel_error, 2.0 / 9.5);
  ASSERT_TRUE(r.first_mismatch.has_value());
  EXPECT_EQ(r.first_mismatch->output, 0u);
  EXPECT_EQ(r.first_mismatch->element, 4);
  EXPECT_THAT(r.first_mismatch->index, ElementsAre(1, 1));
  EXPECT_EQ(r.first_mismatch->actual, 14.0);
  EXPECT_EQ(r.first_mismatch->expected, 14.5);
  EXPECT_EQ(FormatCaseResult(r),
            "forward case 1: FAIL (max abs error 2, max rel error 0.211; 2 elements differ; "
            "first: output 0 [1, 1]: 14, expected 14.5)");
}

TEST(Verify, FloatsFollowExecuTorchsToleranceRule) {
  // Element 0 is 2.5; expected 2.5 * (1 + 1e-3): |diff| = 2.5e-3.
  std::vector<float> expected = SampleForward(SampleX(), SampleY());
  expected[0] = 2.5f * 1.001f;
  BundleCase off = RightForward();
  off.expected[0] = FloatValue({2, 3}, expected);
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> strict, VerifyBundle({{"forward", {off}}}));
  EXPECT_FALSE(strict[0].passed);
  VerifyOptions loose;
  loose.tolerance.rtol = 1e-2;  // allowed: 1e-8 + 1e-2 * 2.5025
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> relative, VerifyBundle({{"forward", {off}}}, loose));
  EXPECT_TRUE(relative[0].passed) << FormatCaseResult(relative[0]);
  VerifyOptions absolute;
  absolute.tolerance.rtol = 0;
  absolute.tolerance.atol = 3e-3;
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> abs_ok,
                       VerifyBundle({{"forward", {off}}}, absolute));
  EXPECT_TRUE(abs_ok[0].passed) << FormatCaseResult(abs_ok[0]);
  absolute.tolerance.atol = 2e-3;
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> abs_no,
                       VerifyBundle({{"forward", {off}}}, absolute));
  EXPECT_FALSE(abs_no[0].passed);
  // Zero tolerances compare exactly: the right case still passes.
  VerifyOptions exact;
  exact.tolerance.rtol = exact.tolerance.atol = 0;
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> same,
                       VerifyBundle({{"forward", {RightForward()}}}, exact));
  EXPECT_TRUE(same[0].passed);
}

TEST(Verify, NanEqualsNanAndInfinitiesMustMatch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = SampleX();
  x[0] = nan;
  x[1] = inf;
  std::vector<float> expected = SampleForward(x, SampleY());  // nan, inf, ...
  BundleCase with_nan{{FloatValue({2, 3}, x), FloatValue({2, 3}, SampleY())},
                      {FloatValue({2, 3}, expected)}};
  expected[1] = -inf;
  BundleCase wrong_inf{{FloatValue({2, 3}, x), FloatValue({2, 3}, SampleY())},
                       {FloatValue({2, 3}, expected)}};
  VerifyOptions loose;
  loose.tolerance.atol = 1e30;
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> r,
                       VerifyBundle({{"forward", {with_nan, wrong_inf}}}, loose));
  EXPECT_TRUE(r[0].passed) << FormatCaseResult(r[0]);
  EXPECT_FALSE(r[1].passed);
  EXPECT_EQ(r[1].first_mismatch->element, 1);
}

TEST(Verify, IntegersCompareExactlyWhateverTheTolerance) {
  BundleCase wrong{{Int64Value({4}, {1, -2, 3, 4000000000})},
                   {Int64Value({4}, {2, -4, 6, 8000000001})}};
  VerifyOptions loose;
  loose.tolerance.atol = 10;
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> r,
                       VerifyBundle({{"count", {RightCount(), wrong}},
                                     {"size", {RightSize(), {{}, {IntScalar(8)}}}}},
                                    loose));
  ASSERT_EQ(r.size(), 4u);
  EXPECT_TRUE(r[0].passed);
  EXPECT_FALSE(r[1].passed);
  EXPECT_EQ(r[1].first_mismatch->element, 3);
  EXPECT_EQ(r[1].first_mismatch->expected, 8000000001.0);
  EXPECT_TRUE(r[2].passed);
  EXPECT_FALSE(r[3].passed);
  EXPECT_EQ(r[3].first_mismatch->actual, 7);
  EXPECT_EQ(r[3].first_mismatch->expected, 8);
  EXPECT_THAT(FormatCaseResult(r[3]), HasSubstr("size case 1: FAIL"));
}

TEST(Verify, TensorsCompareInLogicalOrderWhateverTheirDimOrder) {
  // The expected [2, 3] output stored column-major: dim order (1, 0).
  const std::vector<float> row_major = SampleForward(SampleX(), SampleY());
  std::vector<float> column_major;
  for (int c = 0; c < 3; ++c) {
    for (int r = 0; r < 2; ++r) column_major.push_back(row_major[r * 3 + c]);
  }
  BundleCase permuted = RightForward();
  permuted.expected[0] = FloatValue({2, 3}, column_major);
  permuted.expected[0].dim_order = {1, 0};
  BundleCase unpermuted = permuted;  // the same bytes read row-major: wrong
  unpermuted.expected[0].dim_order.clear();
  ASSERT_OK_AND_ASSIGN(std::vector<CaseResult> r,
                       VerifyBundle({{"forward", {permuted, unpermuted}}}));
  EXPECT_TRUE(r[0].passed) << FormatCaseResult(r[0]);
  EXPECT_FALSE(r[1].passed);
}

TEST(Verify, CasesThatCannotRunSayWhy) {
  BundleCase missing_input = RightForward();
  missing_input.inputs.pop_back();
  BundleCase wrong_dtype = RightForward();
  wrong_dtype.inputs[1] = Int64Value({2, 3}, {1, 2, 3, 4, 5, 6});
  BundleCase extra_output = RightForward();
  extra_output.expected.push_back(IntScalar(1));
  BundleCase wrong_shape = RightForward();
  wrong_shape.expected[0] = FloatValue({3, 2}, SampleForward(SampleX(), SampleY()));
  BundleCase wrong_kind = RightForward();
  wrong_kind.expected[0] = IntScalar(3);
  ASSERT_OK_AND_ASSIGN(
      std::vector<CaseResult> r,
      VerifyBundle(
          {{"forward", {missing_input, wrong_dtype, extra_output, wrong_shape, wrong_kind}},
           {"backward", {RightForward()}}}));
  ASSERT_EQ(r.size(), 6u);
  EXPECT_THAT(r[0].status, StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("the test case has 1 inputs, but method \"forward\" "
                                              "takes 2")));
  EXPECT_THAT(r[1].status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input 1")));
  EXPECT_THAT(r[1].status.message(), HasSubstr("int64"));
  EXPECT_THAT(r[2].status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expects 2 outputs, but method \"forward\" returns 1")));
  // A shape or kind that differs is a failed comparison, not an error.
  EXPECT_OK(r[3].status);
  EXPECT_FALSE(r[3].passed);
  EXPECT_EQ(r[3].first_mismatch->detail, "shape [2, 3], expected [3, 2]");
  EXPECT_FALSE(r[4].passed);
  EXPECT_EQ(r[4].first_mismatch->detail, "a tensor, expected an int");
  // A suite for a method the program lacks: its cases cannot run.
  EXPECT_THAT(r[5].status, StatusIs(absl::StatusCode::kNotFound, HasSubstr("backward")));
  EXPECT_FALSE(r[5].passed);
  EXPECT_THAT(FormatCaseResult(r[5]), HasSubstr("backward case 0: ERROR: "));
  for (const CaseResult& c : r) EXPECT_FALSE(c.passed);
}

TEST(Verify, OneMethodsSuiteOrNone) {
  VerifyOptions only;
  only.method = "count";
  ASSERT_OK_AND_ASSIGN(
      std::vector<CaseResult> r,
      VerifyBundle({{"forward", {RightForward()}}, {"count", {RightCount()}}}, only));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].method, "count");
  only.method = "size";
  EXPECT_THAT(VerifyBundle({{"forward", {RightForward()}}, {"count", {RightCount()}}}, only),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no test cases for method \"size\"; it has them for "
                                 "\"forward\", \"count\"")));
  // A program without test cases.
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> plain, Program::FromBytes(SampleBundlePte()));
  EXPECT_THAT(VerifyTestSuites(rt, *plain, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no test cases")));
}

}  // namespace
}  // namespace ferry
