// ExecuTorch's network layers, onto kernels/nn_ops.cc: convolution, batch norm in inference,
// layer norm, max and average pooling.
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/nn_ops.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"

namespace ferry::internal {
namespace {

// A scalar argument as its own Ferry value, named after the ExecuTorch value.
absl::StatusOr<ValueId> ScalarArg(MethodImporter& m, int32_t v, absl::string_view what) {
  FERRY_ASSIGN_OR_RETURN(Scalar s, m.NonTensor(v, what));
  return m.AddScalar(std::move(s), absl::StrCat("value ", v));
}

// A Tensor? argument: the tensor, or a None scalar.
absl::StatusOr<ValueId> OptionalTensor(MethodImporter& m, int32_t v) {
  if (m.value(v).kind == EtValueKind::kNull) {
    return m.AddScalar(Scalar::None(), absl::StrCat("value ", v));
  }
  return m.ReadTensor(v);
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding,
// groups): conv's output into `out`, its column buffer a helper value.
// With transposed true: conv_transpose (ATen's transposed convolution, weight [C, O / groups,
// k...]).
absl::Status ImportTransposedConvolution(MethodImporter& m, absl::Span<const int32_t> args,
                                         int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId w, m.ReadTensor(args[1]));
  ValueIds node_args = {x, w};
  for (auto [index, what] : {std::pair{3, "stride"}, std::pair{4, "padding"},
                             std::pair{7, "output_padding"}, std::pair{5, "dilation"}}) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> list, m.IntList(args[index], what));
    node_args.push_back(m.AddScalar(Scalar::IntList(std::move(list)),
                                    absl::StrCat("instruction ", m.instruction(), " ", what)));
  }
  FERRY_ASSIGN_OR_RETURN(int64_t groups, m.IntValue(args[8], "groups"));
  node_args.push_back(m.AddScalar(Scalar::Int(groups), absl::StrCat("value ", args[8])));
  if (m.value(args[2]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[2]));
    node_args.push_back(b);
  }
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("conv_transpose", std::move(node_args), r);
  return absl::OkStatus();
}

// upsample_bilinear2d.vec(input, output_size?, align_corners, scale_factors?): the output's
// sizes are out's; the scales, when given, set the coordinate ratio as ATen's do.
absl::Status ImportUpsampleBilinear(MethodImporter& m, absl::Span<const int32_t> args,
                                    int32_t out) {
  FERRY_ASSIGN_OR_RETURN(TensorMeta out_meta, m.MetaOf(out));
  if (out_meta.rank() != 4) {
    return m.Invalid(absl::StrCat("out has ", out_meta.rank(), " dimensions; expected 4"));
  }
  FERRY_ASSIGN_OR_RETURN(bool align_corners, m.BoolValue(args[2], "align_corners"));
  double scales[2] = {0, 0};
  if (m.value(args[3]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(Scalar list, m.NonTensor(args[3], "scale_factors"));
    const absl::Span<const double> given = list.doubles();
    if (list.kind != Scalar::Kind::kDoubleList || given.size() != 2) {
      return m.Invalid("scale_factors is not a list of two doubles");
    }
    scales[0] = given[0];
    scales[1] = given[1];
  }
  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  const std::string name = absl::StrCat("instruction ", m.instruction(), " ");
  ValueIds node_args = {
      x, m.AddScalar(Scalar::IntList({out_meta.sizes[2], out_meta.sizes[3]}), name + "output_size"),
      m.AddScalar(Scalar::Bool(align_corners), name + "align_corners"),
      m.AddScalar(Scalar::Double(scales[0]), name + "scale_h"),
      m.AddScalar(Scalar::Double(scales[1]), name + "scale_w")};
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("upsample_bilinear2d", std::move(node_args), r);
  return absl::OkStatus();
}

absl::Status ImportConvolution(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(bool transposed, m.BoolValue(args[6], "transposed"));
  if (transposed) return ImportTransposedConvolution(m, args, out);
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> stride, m.IntList(args[3], "stride"));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> padding, m.IntList(args[4], "padding"));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> dilation, m.IntList(args[5], "dilation"));
  FERRY_ASSIGN_OR_RETURN(int64_t groups, m.IntValue(args[8], "groups"));
  FERRY_ASSIGN_OR_RETURN(TensorMeta w_meta, m.MetaOf(args[1]));
  FERRY_ASSIGN_OR_RETURN(TensorMeta out_meta, m.MetaOf(out));
  if (w_meta.rank() < 3 || out_meta.rank() != w_meta.rank()) {
    return m.Invalid(absl::StrCat("weight has ", w_meta.rank(), " dimensions and out ",
                                  out_meta.rank(),
                                  "; convolution takes 1-D or 2-D ones of equal "
                                  "rank"));
  }
  // The column buffer's size, as conv's shape rule gives it (kernels/nn_ops.h).
  int64_t kernel_elements = 1;
  int64_t out_spatial = 1;
  for (int d = 2; d < w_meta.rank(); ++d) {
    kernel_elements *= w_meta.sizes[d];
    out_spatial *= out_meta.sizes[d];
  }
  bool unit_stride_unpadded = true;
  for (int64_t s : stride) unit_stride_unpadded &= s == 1;
  for (int64_t p : padding) unit_stride_unpadded &= p == 0;
  TensorMeta columns;
  columns.dtype = DType::kFloat32;
  columns.sizes = {
      ConvWorkspaceElements(w_meta.sizes[1], kernel_elements, unit_stride_unpadded, out_spatial)};

  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId w, m.ReadTensor(args[1]));
  ValueIds node_args = {x, w};
  for (auto [list, what] : {std::pair{&stride, "stride"}, std::pair{&padding, "padding"},
                            std::pair{&dilation, "dilation"}}) {
    node_args.push_back(m.AddScalar(Scalar::IntList(std::move(*list)),
                                    absl::StrCat("instruction ", m.instruction(), " ", what)));
  }
  node_args.push_back(m.AddScalar(Scalar::Int(groups), absl::StrCat("value ", args[8])));
  if (m.value(args[2]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[2]));
    node_args.push_back(b);
  }
  const ValueId col = m.NewIntermediate(out, std::move(columns), "im2col columns");
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("conv", std::move(node_args), ValueIds{r, col});
  return absl::OkStatus();
}

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var,
// momentum, eps) -> (out, save_mean, save_invstd): in inference the two saved statistics are
// empty tensors, which nothing reads.
absl::Status ImportBatchNorm(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(Scalar eps, m.NumberValue(args[6], "eps"));
  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId w, OptionalTensor(m, args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId b, OptionalTensor(m, args[2]));
  FERRY_ASSIGN_OR_RETURN(ValueId mean, m.ReadTensor(args[3]));
  FERRY_ASSIGN_OR_RETURN(ValueId var, m.ReadTensor(args[4]));
  const ValueId e = m.AddScalar(eps, absl::StrCat("value ", args[6]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("batch_norm", {x, w, b, mean, var, e}, r);
  return absl::OkStatus();
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd): the
// normalized output; mean and rstd, which only training reads, are not written.
absl::Status ImportLayerNorm(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId shape, ScalarArg(m, args[1], "normalized_shape"));
  FERRY_ASSIGN_OR_RETURN(Scalar eps, m.NumberValue(args[4], "eps"));
  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId w, OptionalTensor(m, args[2]));
  FERRY_ASSIGN_OR_RETURN(ValueId b, OptionalTensor(m, args[3]));
  const ValueId e = m.AddScalar(eps, absl::StrCat("value ", args[4]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("layer_norm", {x, shape, w, b, e}, r);
  return absl::OkStatus();
}

// Ferry op `op`(self, scalars...): argument 0 a tensor, the others scalars named by `what`.
absl::Status ImportPool(MethodImporter& m, const char* op, absl::Span<const int32_t> args,
                        std::initializer_list<const char*> what, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId x, m.ReadTensor(args[0]));
  ValueIds node_args = {x};
  int i = 1;
  for (const char* name : what) {
    FERRY_ASSIGN_OR_RETURN(ValueId s, ScalarArg(m, args[i++], name));
    node_args.push_back(s);
  }
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(op, std::move(node_args), r);
  return absl::OkStatus();
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
// -> (out, indices): the maxima; the indices, which only max_unpool reads, are not written.
absl::Status ImportMaxPool(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return ImportPool(m, "max_pool2d", args,
                    {"kernel_size", "stride", "padding", "dilation", "ceil_mode"}, out);
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override?).
absl::Status ImportAvgPool(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return ImportPool(
      m, "avg_pool2d", args,
      {"kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"},
      out);
}

// _adaptive_avg_pool2d(self, output_size).
absl::Status ImportAdaptiveAvgPool(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return ImportPool(m, "adaptive_avg_pool2d", args, {"output_size"}, out);
}

}  // namespace

absl::Span<const EtOpMapping> NnEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"aten::convolution.out", 9, &ImportConvolution},
      {"aten::upsample_bilinear2d.vec_out", 4, &ImportUpsampleBilinear},
      {"aten::_native_batch_norm_legit_no_training.out", 7, &ImportBatchNorm, false, 3},
      {"aten::native_layer_norm.out", 5, &ImportLayerNorm, false, 3},
      {"aten::max_pool2d_with_indices.out", 6, &ImportMaxPool, false, 2},
      {"aten::avg_pool2d.out", 7, &ImportAvgPool},
      {"aten::_adaptive_avg_pool2d.out", 2, &ImportAdaptiveAvgPool},
  };
  return kOps;
}

}  // namespace ferry::internal
