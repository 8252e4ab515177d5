// The built-in host op set (kernels/host_ops.cc): every op the contract in kernels/op_registry.h
// lists is registered under its name with the argument counts the contract gives, the in-place
// forms write their first argument, and registering the set twice into one registry is refused.
#include <string>
#include <tuple>
#include <vector>

#include "ferry/kernels/op_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;

// name, min_args, max_args (-1: variadic), as kernels/op_registry.h's contract writes them.
const std::vector<std::tuple<std::string, int, int>>& Contract() {
  static const auto* rows = new std::vector<std::tuple<std::string, int, int>>{
      {"add", 2, 2},        {"sub", 2, 2},         {"mul", 2, 2},
      {"div", 2, 2},        {"maximum", 2, 2},     {"minimum", 2, 2},
      {"add_", 2, 2},       {"sub_", 2, 2},        {"mul_", 2, 2},
      {"div_", 2, 2},       {"maximum_", 2, 2},    {"minimum_", 2, 2},
      {"relu", 1, 1},       {"neg", 1, 1},         {"abs", 1, 1},
      {"exp", 1, 1},        {"log", 1, 1},         {"sin", 1, 1},
      {"cos", 1, 1},        {"tanh", 1, 1},        {"sigmoid", 1, 1},
      {"silu", 1, 1},       {"gelu", 1, 1},        {"sqrt", 1, 1},
      {"rsqrt", 1, 1},      {"relu_", 1, 1},       {"clamp", 3, 3},
      {"exp_", 1, 1},       {"fill_", 2, 2},       {"copy_", 2, 2},
      {"matmul", 2, 2},     {"linear", 2, 3},      {"softmax", 2, 2},
      {"rms_norm", 3, 3},   {"view", 2, 2},        {"transpose", 3, 3},
      {"permute", 2, 2},    {"unsqueeze", 2, 2},   {"squeeze", 2, 2},
      {"slice", 5, 5},      {"expand", 2, 2},      {"reshape", 2, 2},
      {"clone", 1, 1},      {"cat", 2, -1},        {"sym_size", 2, 2},
      {"index_put_", 3, 3}, {"embedding", 2, 2},   {"mean", 3, 3},
      {"eq", 2, 2},         {"where", 3, 3},       {"to_dtype", 2, 2},
      {"gelu_tanh", 1, 1},  {"batch_norm", 6, 6},  {"layer_norm", 5, 5},
      {"max_pool2d", 6, 6}, {"avg_pool2d", 7, 7},  {"adaptive_avg_pool2d", 2, 2},
      {"hardswish", 1, 1},  {"hardsigmoid", 1, 1}, {"leaky_relu", 2, 2},
      {"elu", 4, 4},        {"log_softmax", 2, 2}, {"quantize", 6, 6},
      {"dequantize", 5, 5},
  };
  return *rows;
}

TEST(HostOps, EveryOpOfTheContractIsRegisteredWithItsArgumentCounts) {
  OpRegistry registry;
  ASSERT_OK(RegisterBuiltInOps(registry));
  for (const auto& [name, min_args, max_args] : Contract()) {
    const OpSchema* op = registry.Find(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->min_args, min_args) << name;
    EXPECT_EQ(op->max_args, max_args) << name;
    EXPECT_EQ(op->num_results, 1) << name;
  }
  // conv's second result is its im2col buffer; neither is a view.
  const OpSchema* conv = registry.Find("conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->min_args, 6);
  EXPECT_EQ(conv->max_args, 7);
  EXPECT_EQ(conv->num_results, 2);
  EXPECT_EQ(conv->ViewOf(0), -1);
  EXPECT_EQ(conv->ViewOf(1), -1);
}

TEST(HostOps, InPlaceFormsWriteTheirFirstArgumentAndReturnAViewOfIt) {
  OpRegistry registry;
  ASSERT_OK(RegisterBuiltInOps(registry));
  for (const char* name : {"add_", "mul_", "relu_", "fill_", "copy_", "index_put_"}) {
    const OpSchema* op = registry.Find(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_TRUE(op->Writes(0)) << name;
    EXPECT_FALSE(op->Writes(1)) << name;
    EXPECT_EQ(op->ViewOf(0), 0) << name;
  }
  for (const char* name : {"add", "relu", "clone", "reshape", "matmul"}) {
    const OpSchema* op = registry.Find(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_FALSE(op->Writes(0)) << name;
    EXPECT_EQ(op->ViewOf(0), -1) << name;  // a fresh tensor
  }
  // sym_size reads only its tensor's shape.
  EXPECT_TRUE(registry.Find("sym_size")->ShapeOnly(0));
}

TEST(HostOps, RegisteringTheSetTwiceIsRefused) {
  OpRegistry registry;
  ASSERT_OK(RegisterBuiltInOps(registry));
  const size_t count = registry.Names().size();
  EXPECT_THAT(RegisterBuiltInOps(registry),
              StatusIs(absl::StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_EQ(registry.Names().size(), count);
}

}  // namespace
}  // namespace ferry
