// The ExecuTorch mappings of the linear-algebra ops (loader/executorch/ops/linalg.cc): mm, addmm and
// linear in a linear layer as exporters write it, and _softmax, run against values computed here;
// a softmax to half refused naming the instruction.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/loader/executorch/importer.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/pte_writer.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::Bool;
using ::ferry::testing::Constant;
using ::ferry::testing::FloatTensor;
using ::ferry::testing::Int;
using ::ferry::testing::IntList;
using ::ferry::testing::KernelCall;
using ::ferry::testing::OneMethod;
using ::ferry::testing::MethodStatus;
using ::ferry::testing::StatusIs;
using ::ferry::testing::ThroughFile;
using ::testing::HasSubstr;

// The ops of a linear layer as exporters write them, and the other mapped ops around them:
//   wt = permute_copy(w, [1, 0]); y = addmm(b, x, wt); r = relu(y); v = view_copy(r, [8]);
//   l = linear(x, w, b); m = mm(x, wt); s = sub(l, m); c = clone(l); q = div(c, y)
TEST(EtLinalgOps, LinearLayerOpsRunAgainstANaiveReference) {
  const std::vector<float> w = {0.5f,  -1.0f, 2.0f, 1.5f, 0.25f, -0.75f,
                                -2.0f, 1.0f,  0.5f, 3.0f, -0.5f, 1.25f};  // [4, 3]
  const std::vector<float> b = {0.1f, -0.2f, 0.3f, 1.0f};
  EtProgram p;
  EtMethod m;
  m.name = "forward";
  m.values = {
      FloatTensor({2, 3}),  // 0 x
      Constant({4, 3}, w),  // 1 w
      Constant({4}, b),     // 2 b
      Int(1),               // 3
      Int(0),               // 4
      IntList({3, 4}),      // 5 dims (1, 0)
      FloatTensor({3, 4}),  // 6 wt
      FloatTensor({2, 4}),  // 7 y
      FloatTensor({2, 4}),  // 8 r
      Int(8),               // 9
      IntList({9}),         // 10 size (8)
      FloatTensor({8}),     // 11 v
      FloatTensor({2, 4}),  // 12 l
      FloatTensor({2, 4}),  // 13 m
      FloatTensor({2, 4}),  // 14 s
      FloatTensor({2, 4}),  // 15 c
      FloatTensor({2, 4}),  // 16 q
      EtValue{},            // 17 None
  };
  m.inputs = {0};
  m.outputs = {11, 14, 16};
  m.operators = {{"aten::permute_copy", "out"}, {"aten::addmm", "out"},  {"aten::relu", "out"},
                 {"aten::view_copy", "out"},    {"aten::linear", "out"}, {"aten::mm", "out"},
                 {"aten::sub", "out"},          {"aten::clone", "out"},  {"aten::div", "out"}};
  m.instructions = {
      KernelCall(0, {1, 5, 6, 6}),        KernelCall(1, {2, 0, 6, 3, 3, 7, 7}), KernelCall(2, {7, 8, 8}),
      KernelCall(3, {8, 10, 11, 11}),     KernelCall(4, {0, 1, 2, 12, 12}),     KernelCall(5, {0, 6, 13, 13}),
      KernelCall(6, {12, 13, 3, 14, 14}), KernelCall(7, {12, 17, 15, 15}),      KernelCall(8, {15, 7, 16, 16}),
  };
  p.methods.push_back(std::move(m));
  ASSERT_OK_AND_ASSIGN(EtImport imported, ImportExecuTorchProgram(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(imported.methods[0]));
  std::vector<float> x = {1.0f, -2.0f, 0.5f, 3.0f, 0.25f, -1.5f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  const float* v = method->Output(0).data_as<float>();
  const float* s = method->Output(1).data_as<float>();
  const float* q = method->Output(2).data_as<float>();
  for (int i = 0; i < 2; ++i) {
    for (int o = 0; o < 4; ++o) {
      float y = b[o];
      for (int k = 0; k < 3; ++k) y += x[i * 3 + k] * w[o * 3 + k];
      SCOPED_TRACE(absl::StrCat("row ", i, ", column ", o));
      EXPECT_NEAR(v[i * 4 + o], y > 0 ? y : 0, 1e-5);
      EXPECT_NEAR(s[i * 4 + o], b[o], 1e-5);
      EXPECT_NEAR(q[i * 4 + o], 1.0f, 1e-5);
    }
  }
}

// x [2, 3]: sm = _softmax(x, 1, false).
// a [2, 3, 4] @ b [2, 4, 5], batch by batch, against a naive triple loop in double.
TEST(EtLinalgOps, BmmRunsAgainstANaiveReference) {
  EtProgram p = OneMethod({FloatTensor({2, 3, 4}), FloatTensor({2, 4, 5}), FloatTensor({2, 3, 5})},
                          {0, 1}, {2}, {{"aten::bmm", "out"}}, {KernelCall(0, {0, 1, 2, 2})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> a(24), b(40);
  for (int i = 0; i < 24; ++i) a[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  for (int i = 0; i < 40; ++i) b[i] = 0.125f * static_cast<float>(i % 5) + 0.1f * (i / 20);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3, 4}, a.data())));
  ASSERT_OK(method->SetInput(1, TensorView::Host(DType::kFloat32, {2, 4, 5}, b.data())));
  ASSERT_OK(method->Execute());
  const float* y = method->Output(0).data_as<float>();
  for (int batch = 0; batch < 2; ++batch) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        double sum = 0;
        for (int k = 0; k < 4; ++k) {
          sum += double{a[batch * 12 + i * 4 + k]} * b[batch * 20 + k * 5 + j];
        }
        EXPECT_NEAR(y[batch * 15 + i * 5 + j], sum, 1e-5) << batch << " " << i << " " << j;
      }
    }
  }
}

TEST(EtLinalgOps, BmmOfUnequalBatchesIsRefused) {
  // matmul would broadcast the batch of 1; bmm does not.
  EtProgram p = OneMethod({FloatTensor({1, 3, 4}), FloatTensor({2, 4, 5}), FloatTensor({2, 3, 5})},
                          {0, 1}, {2}, {{"aten::bmm", "out"}}, {KernelCall(0, {0, 1, 2, 2})});
  EXPECT_THAT(MethodStatus(ThroughFile(p)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instruction 0 (aten::bmm.out): self is [1, 3, 4] and mat2 [2, "
                                 "4, 5]; bmm takes [b, n, k] and [b, k, m] of one batch size b")));
}

TEST(EtLinalgOps, SoftmaxRunsAgainstANaiveReference) {
  EtProgram p = OneMethod({FloatTensor({2, 3}), Int(1), Bool(false), FloatTensor({2, 3})}, {0}, {3},
                          {{"aten::_softmax", "out"}}, {KernelCall(0, {0, 1, 2, 3, 3})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.0f, 0.5f, 0.5f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  const float* sm = method->Output(0).data_as<float>();
  for (int i = 0; i < 2; ++i) {
    double sum_exp = 0;
    for (int k = 0; k < 3; ++k) sum_exp += std::exp(static_cast<double>(x[i * 3 + k]));
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(absl::StrCat("row ", i, ", column ", k));
      EXPECT_NEAR(sm[i * 3 + k], std::exp(static_cast<double>(x[i * 3 + k])) / sum_exp, 1e-6);
    }
  }
}

// x [2, 3]: s = _softmax(x, 1); l = _log_softmax(x, -1).
TEST(EtLinalgOps, LogSoftmaxRunsAgainstANaiveReference) {
  EtProgram p = OneMethod({FloatTensor({2, 3}), Int(-1), Bool(false), FloatTensor({2, 3})}, {0},
                          {3}, {{"aten::_log_softmax", "out"}}, {KernelCall(0, {0, 1, 2, 3, 3})});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, ThroughFile(p));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.0f, 0.5f, 0.5f};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 3}, x.data())));
  ASSERT_OK(method->Execute());
  const float* ls = method->Output(0).data_as<float>();
  for (int i = 0; i < 2; ++i) {
    double sum_exp = 0;
    for (int k = 0; k < 3; ++k) sum_exp += std::exp(static_cast<double>(x[i * 3 + k]));
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(ls[i * 3 + k], x[i * 3 + k] - std::log(sum_exp), 1e-6) << i << ", " << k;
    }
  }
}

TEST(EtLinalgOps, SoftmaxToHalfIsRefused) {
  EtProgram softmax = OneMethod({FloatTensor({2}), Int(0), Bool(true), FloatTensor({2})}, {0},
                                {3}, {{"aten::_softmax", "out"}}, {KernelCall(0, {0, 1, 2, 3, 3})});
  EXPECT_THAT(MethodStatus(ThroughFile(softmax)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("method \"forward\", instruction 0 (aten::_softmax.out): "
                                 "half_to_float is true; only half_to_float = false is "
                                 "supported")));
}

}  // namespace
}  // namespace ferry
