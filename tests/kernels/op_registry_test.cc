#include "ferry/kernels/op_registry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/op_test_util.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::RunOp;
using ::ferry::testing::StatusIs;
using ::ferry::testing::T;
using ::ferry::testing::TestTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::Status PassInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  for (InferredResult& r : results) r.layout = *args[0].tensor;
  return absl::OkStatus();
}

// A user op: doubles a float32 tensor (contiguous only, enough for the test).
absl::Status TwiceKernel(absl::Span<const OpArg> args, absl::Span<TensorRef* const> results) {
  const float* in = args[0].tensor->data_as<const float>();
  float* out = results[0]->data_as<float>();
  for (int64_t i = 0; i < results[0]->numel(); ++i) out[i] = 2 * in[i];
  return absl::OkStatus();
}

OpSchema UserOp(std::string name) {
  OpSchema s;
  s.name = std::move(name);
  s.min_args = 1;
  s.max_args = 1;
  s.num_results = 1;
  s.view_of = {-1};
  s.infer = &PassInfer;
  s.kernel = &TwiceKernel;
  return s;
}

TEST(OpRegistryTest, BuiltInsHoldTheWholeOpSet) {
  OpRegistry registry = OpRegistry::WithBuiltIns();
  std::vector<std::string> want = {
      "add", "sub", "mul", "div", "maximum", "minimum", "add_", "sub_", "mul_", "div_",
      "relu", "neg", "abs", "exp", "log", "sin", "cos", "tanh", "sigmoid", "silu", "gelu",
      "sqrt", "rsqrt", "fill_", "matmul", "linear", "softmax", "rms_norm", "view",
      "transpose", "permute", "slice", "unsqueeze", "squeeze", "expand", "reshape", "clone",
      "cat", "sym_size", "copy_", "index_put_"};
  for (const char* unary : {"relu", "neg", "abs", "exp", "log", "sin", "cos", "tanh", "sigmoid",
                            "silu", "gelu", "sqrt", "rsqrt"}) {
    want.push_back(std::string(unary) + "_");
  }
  for (const std::string& name : want) EXPECT_NE(registry.Find(name), nullptr) << name;
  std::vector<std::string> names = registry.Names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_GE(names.size(), want.size());
}

TEST(OpRegistryTest, BuiltInSchemasDeclarePlacementFlags) {
  OpRegistry registry = OpRegistry::WithBuiltIns();
  const OpSchema* add = registry.Find("add");
  EXPECT_THAT(add->written_args, IsEmpty());
  EXPECT_EQ(add->ViewOf(0), -1);
  EXPECT_NE(add->kernel, nullptr);
  const OpSchema* relu_ = registry.Find("relu_");
  EXPECT_TRUE(relu_->Writes(0));
  EXPECT_EQ(relu_->ViewOf(0), 0);
  const OpSchema* view = registry.Find("view");
  EXPECT_EQ(view->kernel, nullptr);
  EXPECT_FALSE(view->Writes(0));
  EXPECT_EQ(view->ViewOf(0), 0);
  EXPECT_TRUE(registry.Find("sym_size")->ShapeOnly(0));
  EXPECT_FALSE(registry.Find("add")->ShapeOnly(0));
  EXPECT_EQ(registry.Find("cat")->min_args, 2);
  EXPECT_EQ(registry.Find("cat")->max_args, -1);
  EXPECT_THAT(registry.Find("copy_")->written_args, ElementsAre(0));
  EXPECT_THAT(registry.Find("index_put_")->written_args, ElementsAre(0));
  EXPECT_EQ(registry.Find("linear")->min_args, 2);
  EXPECT_EQ(registry.Find("linear")->max_args, 3);
  EXPECT_EQ(registry.Find("relu")->ViewOf(5), -1);  // out of range: not a view
}

TEST(OpRegistryTest, FindReturnsNullForUnknownOp) {
  OpRegistry registry = OpRegistry::WithBuiltIns();
  EXPECT_EQ(registry.Find("no_such_op"), nullptr);
  EXPECT_EQ(OpRegistry().Find("add"), nullptr);
}

TEST(OpRegistryTest, DuplicateNameRejected) {
  OpRegistry registry = OpRegistry::WithBuiltIns();
  EXPECT_THAT(registry.Register(UserOp("relu")),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("\"relu\"")));
  // The original is untouched.
  EXPECT_NE(registry.Find("relu")->kernel, &TwiceKernel);
}

TEST(OpRegistryTest, InconsistentSchemasRejected) {
  OpRegistry registry;
  auto expect_rejected = [&](OpSchema s, const std::string& message) {
    const std::string name = s.name;
    EXPECT_THAT(registry.Register(std::move(s)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)))
        << name;
    EXPECT_EQ(registry.Find(name), nullptr) << name;
  };
  OpSchema s = UserOp("no_infer");
  s.infer = nullptr;
  expect_rejected(s, "no infer function");

  s = UserOp("bad_written");
  s.written_args = {1};
  expect_rejected(s, "written_args names argument 1");

  s = UserOp("bad_view");
  s.view_of = {2};
  expect_rejected(s, "result 0 is a view of argument 2");

  s = UserOp("view_count");
  s.view_of = {-1, -1};
  expect_rejected(s, "view_of has 2 entries for 1 results");

  s = UserOp("null_kernel_functional");
  s.kernel = nullptr;
  expect_rejected(s, "null kernel");

  s = UserOp("null_kernel_writes");
  s.kernel = nullptr;
  s.view_of = {0};
  s.written_args = {0};
  expect_rejected(s, "null kernel");

  s = UserOp("written_and_shape_only");
  s.written_args = {0};
  s.shape_only_args = {0};
  expect_rejected(s, "both written and shape-only");

  s = UserOp("bad_arity");
  s.min_args = 3;
  s.max_args = 1;
  expect_rejected(s, "below min_args");

  s = UserOp("");
  EXPECT_THAT(registry.Register(s),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty name")));
  EXPECT_THAT(registry.Names(), IsEmpty());
}

TEST(OpRegistryTest, UserOpRegisteredFoundAndRun) {
  OpRegistry registry = OpRegistry::WithBuiltIns();
  ASSERT_OK(registry.Register(UserOp("twice")));
  const OpSchema* twice = registry.Find("twice");
  ASSERT_NE(twice, nullptr);
  EXPECT_EQ(twice->kernel, &TwiceKernel);
  TestTensor x = TestTensor::Float({3}, {1, 2, 3.5f});
  ferry::testing::OpRun run = RunOp(*twice, {T(x)});
  ASSERT_OK(run.kernel_status);
  EXPECT_EQ(ferry::testing::Get(run.results[0], {2}), 7.0);
  // A view-only user op with no kernel is accepted.
  OpSchema alias = UserOp("alias");
  alias.kernel = nullptr;
  alias.view_of = {0};
  EXPECT_OK(registry.Register(alias));
  // view_of may be left empty: no result is a view.
  OpSchema plain = UserOp("plain");
  plain.view_of.clear();
  ASSERT_OK(registry.Register(plain));
  EXPECT_EQ(registry.Find("plain")->ViewOf(0), -1);
}

TEST(OpRegistryTest, CopiesAreIndependent) {
  OpRegistry original = OpRegistry::WithBuiltIns();
  OpRegistry copy(original);
  ASSERT_OK(copy.Register(UserOp("only_in_copy")));
  EXPECT_EQ(original.Find("only_in_copy"), nullptr);
  EXPECT_NE(copy.Find("only_in_copy"), nullptr);
  // Each holds its own schemas.
  EXPECT_NE(copy.Find("add"), original.Find("add"));
  EXPECT_EQ(copy.Find("add")->infer, original.Find("add")->infer);

  OpRegistry assigned;
  assigned = original;
  ASSERT_OK(original.Register(UserOp("only_in_original")));
  EXPECT_EQ(assigned.Find("only_in_original"), nullptr);
  EXPECT_EQ(assigned.Names().size() + 1, original.Names().size());

  // Pointers stay valid when the registry is moved.
  const OpSchema* add = original.Find("add");
  OpRegistry moved = std::move(original);
  EXPECT_EQ(moved.Find("add"), add);
}

}  // namespace
}  // namespace ferry
