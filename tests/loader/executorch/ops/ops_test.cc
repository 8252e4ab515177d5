// The ExecuTorch op tables (loader/executorch/ops/ops.h): every family lists the overloads it
// maps with the argument counts of ATen's schemas (written out here from the schemas, without
// `out`), no overload is mapped twice, and the lookup finds each through one table.
#include "ferry/loader/executorch/ops/ops.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::internal {
namespace {

using ::testing::UnorderedElementsAreArray;

using Rows = std::vector<std::pair<std::string, int>>;

Rows RowsOf(absl::Span<const EtOpMapping> table) {
  Rows rows;
  for (const EtOpMapping& m : table) rows.emplace_back(m.et_name, m.num_args);
  return rows;
}

TEST(EtOpTables, EachFamilyMapsItsOverloadsWithTheirSchemaArguments) {
  // add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out), and so on.
  EXPECT_THAT(RowsOf(ElementwiseEtOps()),
              UnorderedElementsAreArray(Rows{{"aten::add.out", 3},
                                             {"aten::sub.out", 3},
                                             {"aten::mul.out", 2},
                                             {"aten::div.out", 2},
                                             {"aten::add.Scalar_out", 3},
                                             {"aten::sub.Scalar_out", 3},
                                             {"aten::mul.Scalar_out", 2},
                                             {"aten::div.Scalar_out", 2},
                                             {"aten::pow.Tensor_Scalar_out", 2},
                                             {"aten::full_like.out", 3},
                                             // zeros_like(self, *, memory_format)
                                             {"aten::zeros_like.out", 2},
                                             {"aten::ones_like.out", 2},
                                             {"aten::relu.out", 1},
                                             {"aten::neg.out", 1},
                                             {"aten::abs.out", 1},
                                             {"aten::exp.out", 1},
                                             {"aten::log.out", 1},
                                             {"aten::sin.out", 1},
                                             {"aten::cos.out", 1},
                                             {"aten::tanh.out", 1},
                                             {"aten::sigmoid.out", 1},
                                             {"aten::silu.out", 1},
                                             {"aten::sqrt.out", 1},
                                             {"aten::rsqrt.out", 1},
                                             {"aten::floor.out", 1},
                                             {"aten::ceil.out", 1},
                                             {"aten::gelu.out", 2},
                                             {"aten::hardswish.out", 1},
                                             {"aten::hardsigmoid.out", 1},
                                             // leaky_relu(self, negative_slope),
                                             // elu(self, alpha, scale, input_scale)
                                             {"aten::leaky_relu.out", 2},
                                             {"aten::elu.out", 4},
                                             {"aten::clamp.out", 3},
                                             {"aten::hardtanh.out", 3},
                                             {"aten::copy.out", 3},
                                             {"aten::copy_", 3}}));
  EXPECT_THAT(RowsOf(LinalgEtOps()),
              UnorderedElementsAreArray(Rows{{"aten::mm.out", 2},
                                             {"aten::bmm.out", 2},
                                             {"aten::addmm.out", 5},
                                             {"aten::linear.out", 3},
                                             {"aten::_softmax.out", 3},
                                             {"aten::_log_softmax.out", 3}}));
  EXPECT_THAT(RowsOf(ShapeEtOps()),
              UnorderedElementsAreArray(Rows{{"aten::clone.out", 2},
                                             {"aten::alias_copy.out", 1},
                                             {"aten::permute_copy.out", 2},
                                             {"aten::view_copy.out", 2},
                                             {"aten::expand_copy.out", 3},
                                             {"aten::slice_copy.Tensor_out", 5},
                                             {"aten::squeeze_copy.dim_out", 2},
                                             {"aten::squeeze_copy.dims_out", 2},
                                             {"aten::unsqueeze_copy.out", 2},
                                             {"aten::select_copy.int_out", 3},
                                             {"aten::cat.out", 2},
                                             {"aten::constant_pad_nd.out", 3}}));
  EXPECT_THAT(RowsOf(DTypeEtOps()),
              UnorderedElementsAreArray(
                  Rows{{"dim_order_ops::_to_dim_order_copy.out", 3},
                       {"dim_order_ops::_clone_dim_order.out", 3},
                       {"aten::eq.Scalar_out", 2},
                       {"aten::ne.Scalar_out", 2},
                       {"aten::lt.Scalar_out", 2},
                       {"aten::le.Scalar_out", 2},
                       {"aten::gt.Scalar_out", 2},
                       {"aten::ge.Scalar_out", 2},
                       {"aten::eq.Tensor_out", 2},
                       {"aten::ne.Tensor_out", 2},
                       {"aten::lt.Tensor_out", 2},
                       {"aten::le.Tensor_out", 2},
                       {"aten::gt.Tensor_out", 2},
                       {"aten::ge.Tensor_out", 2},
                       {"aten::where.self_out", 3},
                       // input, scale, zero_point, quant_min, quant_max,
                       // dtype (dequantize: and out_dtype)
                       {"quantized_decomposed::quantize_per_tensor.out", 6},
                       {"quantized_decomposed::quantize_per_tensor.Tensor_out", 6},
                       {"quantized_decomposed::dequantize_per_tensor.out", 7},
                       {"quantized_decomposed::dequantize_per_tensor.Tensor_out", 7}}));
  EXPECT_THAT(RowsOf(ReduceEtOps()),
              UnorderedElementsAreArray(Rows{{"aten::mean.out", 4}, {"aten::sum.IntList_out", 4}}));
  EXPECT_THAT(RowsOf(IndexEtOps()), UnorderedElementsAreArray(Rows{{"aten::index_put.out", 4},
                                                                   {"aten::index_put_", 4}}));
  EXPECT_THAT(RowsOf(ExporterCopyEtOps()),
              UnorderedElementsAreArray(Rows{{"et_copy::_h2d_copy.out", 1},
                                             {"et_copy::_d2h_copy.out", 1}}));
  // convolution.out(input, weight, bias?, stride, padding, dilation, transposed, output_padding,
  // groups, *, out); avg_pool2d.out(self, kernel_size, stride, padding, ceil_mode,
  // count_include_pad, divisor_override, *, out).
  EXPECT_THAT(RowsOf(NnEtOps()),
              UnorderedElementsAreArray(Rows{{"aten::convolution.out", 9},
                                             {"aten::upsample_bilinear2d.vec_out", 4},
                                             {"aten::_native_batch_norm_legit_no_training.out", 7},
                                             {"aten::native_layer_norm.out", 5},
                                             {"aten::max_pool2d_with_indices.out", 6},
                                             {"aten::avg_pool2d.out", 7},
                                             {"aten::_adaptive_avg_pool2d.out", 2}}));
}

// The outputs of ATen's multi-output overloads: out0, out1, out2 of the norms, out and indices
// of max_pool2d_with_indices; every other row writes one `out`.
TEST(EtOpTables, MultiOutputOverloadsCountTheirOutputs) {
  for (absl::Span<const EtOpMapping> table : AllEtOpTables()) {
    for (const EtOpMapping& m : table) {
      const std::string name = m.et_name;
      const int want = absl::StrContains(name, "norm")            ? 3
                       : absl::StrContains(name, "_with_indices") ? 2
                                                                  : 1;
      EXPECT_EQ(m.num_outs, want) << name;
    }
  }
}

TEST(EtOpTables, InPlaceOverloadsAreMarked) {
  for (absl::Span<const EtOpMapping> table : AllEtOpTables()) {
    for (const EtOpMapping& m : table) {
      const std::string name = m.et_name;
      // ATen's in-place overloads end in "_" and have no `out`.
      EXPECT_EQ(m.in_place, name.back() == '_') << name;
      EXPECT_NE(m.import, nullptr) << name;
    }
  }
}

TEST(EtOpTables, NoOverloadIsMappedTwiceAndEachIsFound) {
  std::set<std::string> seen;
  size_t rows = 0;
  for (absl::Span<const EtOpMapping> table : AllEtOpTables()) {
    for (const EtOpMapping& m : table) {
      ++rows;
      EXPECT_TRUE(seen.insert(m.et_name).second) << m.et_name << " is in two tables";
      EXPECT_EQ(FindEtOp(m.et_name), &m) << m.et_name;
    }
  }
  EXPECT_EQ(rows, 85u);
  EXPECT_EQ(FindEtOp("aten::add"), nullptr);  // the functional overload is not mapped
  EXPECT_EQ(FindEtOp("aten::convolution_backward.out"), nullptr);
  EXPECT_EQ(FindEtOp(""), nullptr);
}

}  // namespace
}  // namespace ferry::internal
