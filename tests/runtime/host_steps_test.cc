// A host op's inference checked against its node (runtime/internal/host_steps.h, InferAndCheck):
// argument and result counts, the op's own refusals, and declared results that disagree with
// what the op produces, each message prefixed with the node's context; the context is built only
// on error.
#include "ferry/runtime/internal/host_steps.h"

#include <string>
#include <vector>

#include "ferry/kernels/op_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::internal {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class InferAndCheckTest : public ::testing::Test {
 protected:
  absl::Status Check(const std::vector<TensorRef*>& tensors,
                     const std::vector<const TensorMeta*>& declared) {
    std::vector<OpArg> args(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) args[i].tensor = tensors[i];
    return InferAndCheck(*add_, args, declared, &results_, [this] {
      ++contexts_;
      return std::string("node 3 (add)");
    });
  }
  const OpRegistry registry_ = OpRegistry::WithBuiltIns();
  const OpSchema* add_ = registry_.Find("add");
  std::vector<InferredResult> results_;
  int contexts_ = 0;
  TensorRef f23_ = TensorRef::Contiguous(DType::kFloat32, {2, 3});
  TensorRef i23_ = TensorRef::Contiguous(DType::kInt64, {2, 3});
  TensorMeta meta23_{DType::kFloat32, {2, 3}, {}};
  TensorMeta meta32_{DType::kFloat32, {3, 2}, {}};
};

TEST_F(InferAndCheckTest, AMatchingNodeInfersItsResult) {
  ASSERT_NE(add_, nullptr);
  ASSERT_OK(Check({&f23_, &f23_}, {&meta23_}));
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_EQ(results_[0].layout.dtype, DType::kFloat32);
  EXPECT_THAT(std::vector<int64_t>(results_[0].layout.sizes.begin(),
                                   results_[0].layout.sizes.begin() + results_[0].layout.rank),
              ElementsAre(2, 3));
  EXPECT_EQ(contexts_, 0);
}

TEST_F(InferAndCheckTest, CountsThatDisagreeWithTheOpAreRefused) {
  EXPECT_THAT(Check({&f23_}, {&meta23_}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 3 (add): op \"add\" takes 2 arguments, but the node "
                                 "passes 1")));
  EXPECT_THAT(Check({&f23_, &f23_}, {&meta23_, &meta23_}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op \"add\" has 1 results, but the node declares 2")));
}

TEST_F(InferAndCheckTest, TheOpsOwnRefusalIsPrefixedWithTheNode) {
  EXPECT_THAT(Check({&f23_, &i23_}, {&meta23_}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 3 (add): add: ")));
  EXPECT_EQ(contexts_, 1);
}

TEST_F(InferAndCheckTest, ADeclaredResultThatDisagreesIsRefusedNamingBoth) {
  EXPECT_THAT(Check({&f23_, &f23_}, {&meta32_}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("node 3 (add): result 0 is declared"),
                             HasSubstr(meta32_.ToString()),
                             HasSubstr("but op \"add\" produces " + meta23_.ToString()))));
}

}  // namespace
}  // namespace ferry::internal
