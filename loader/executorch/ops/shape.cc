// ExecuTorch's view and copy ops, onto kernels/shape_ops.cc. ExecuTorch's *_copy ops return fresh
// tensors, where Ferry's views alias their argument: each becomes the view and a clone.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"

namespace ferry::internal {
namespace {

// clone(self, memory_format) and alias_copy(self): a fresh copy of self.
absl::Status ImportClone(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return m.MapUnary("clone", args[0], out);
}

// permute_copy(self, dims): Ferry's permute is a view, so a clone makes the copy.
absl::Status ImportPermuteCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> dims, m.IntList(args[1], "dims"));
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(TensorMeta meta, m.MetaOf(out));
  const ValueId d =
      m.AddScalar(Scalar::IntList(std::move(dims)), absl::StrCat("value ", args[1]));
  const ValueId view = m.NewIntermediate(out, meta, "permuted view");
  m.AddNode("permute", {a, d}, view);
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("clone", {view}, r);
  return absl::OkStatus();
}

// view_copy(self, size): Ferry's reshape copies.
absl::Status ImportViewCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> size, m.IntList(args[1], "size"));
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  const ValueId s =
      m.AddScalar(Scalar::IntList(std::move(size)), absl::StrCat("value ", args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("reshape", {a, s}, r);
  return absl::OkStatus();
}

// expand_copy(self, size, implicit).
absl::Status ImportExpandCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> size, m.IntList(args[1], "size"));
  return m.ViewThenClone("expand", args[0], {Scalar::IntList(std::move(size))}, out);
}

// slice_copy.Tensor(self, dim, start or None, end or None, step).
absl::Status ImportSliceCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(int64_t dim, m.IntValue(args[1], "dim"));
  FERRY_ASSIGN_OR_RETURN(int64_t start, m.OptionalIntValue(args[2], "start", 0));
  FERRY_ASSIGN_OR_RETURN(int64_t end, m.OptionalIntValue(args[3], "end",
                                                         std::numeric_limits<int64_t>::max()));
  FERRY_ASSIGN_OR_RETURN(int64_t step, m.IntValue(args[4], "step"));
  return m.ViewThenClone(
      "slice", args[0],
      {Scalar::Int(dim), Scalar::Int(start), Scalar::Int(end), Scalar::Int(step)}, out);
}

// constant_pad_nd(self, pad, value).
absl::Status ImportConstantPad(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> pad, m.IntList(args[1], "pad"));
  FERRY_ASSIGN_OR_RETURN(Scalar value, m.NumberValue(args[2], "value"));
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  const ValueId p = m.AddScalar(Scalar::IntList(std::move(pad)), absl::StrCat("value ", args[1]));
  const ValueId v = m.AddScalar(std::move(value), absl::StrCat("value ", args[2]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("constant_pad", {a, p, v}, r);
  return absl::OkStatus();
}

// select_copy.int(self, dim, index).
absl::Status ImportSelectCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(int64_t dim, m.IntValue(args[1], "dim"));
  FERRY_ASSIGN_OR_RETURN(int64_t index, m.IntValue(args[2], "index"));
  return m.ViewThenClone("select", args[0], {Scalar::Int(dim), Scalar::Int(index)}, out);
}

// unsqueeze_copy(self, dim).
absl::Status ImportUnsqueezeCopy(MethodImporter& m, absl::Span<const int32_t> args,
                                 int32_t out) {
  FERRY_ASSIGN_OR_RETURN(int64_t dim, m.IntValue(args[1], "dim"));
  return m.ViewThenClone("unsqueeze", args[0], {Scalar::Int(dim)}, out);
}

// squeeze_copy.dim(self, dim) and squeeze_copy.dims(self, dims): one squeeze view per dim,
// highest first so that the lower ones keep their numbers, then a clone.
absl::Status ImportSqueezeCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  std::vector<int64_t> dims;
  if (m.value(args[1]).kind == EtValueKind::kIntList) {
    FERRY_ASSIGN_OR_RETURN(dims, m.IntList(args[1], "dims"));
  } else {
    FERRY_ASSIGN_OR_RETURN(int64_t dim, m.IntValue(args[1], "dim"));
    dims.push_back(dim);
  }
  FERRY_ASSIGN_OR_RETURN(TensorMeta in, m.MetaOf(args[0]));
  const int64_t rank = in.rank();
  // A rank-0 tensor takes dim 0 or -1 and stays as it is.
  const int64_t bound = std::max<int64_t>(rank, 1);
  for (int64_t& d : dims) {
    if (d < -bound || d >= bound) {
      return m.Invalid(absl::StrCat("dim ", d, " is out of range for a tensor of rank ", rank));
    }
    if (d < 0) d += bound;
  }
  std::sort(dims.begin(), dims.end(), std::greater<int64_t>());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  if (rank == 0) dims.clear();
  FERRY_ASSIGN_OR_RETURN(ValueId current, m.ReadTensor(args[0]));
  TensorMeta meta = in;
  for (int64_t d : dims) {
    if (meta.sizes[d] != 1) continue;  // as in PyTorch, a dim whose size is not 1 stays
    meta.sizes.erase(meta.sizes.begin() + d);
    meta.dim_order.clear();
    const ValueId dim_value = m.AddScalar(
        Scalar::Int(d), absl::StrCat("instruction ", m.instruction(), " squeeze dim ", d));
    const ValueId view = m.NewIntermediate(out, meta, absl::StrCat("squeeze view of dim ", d));
    m.AddNode("squeeze", {current, dim_value}, view);
    current = view;
  }
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("clone", {current}, r);
  return absl::OkStatus();
}

// cat(tensors, dim).
absl::Status ImportCat(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(std::vector<int32_t> tensors, m.TensorListValue(args[0], "tensors"));
  FERRY_ASSIGN_OR_RETURN(int64_t dim, m.IntValue(args[1], "dim"));
  if (tensors.empty()) return m.Invalid(absl::StrCat("tensors (value ", args[0], ") is empty"));
  ValueIds node_args = {m.AddScalar(Scalar::Int(dim), absl::StrCat("value ", args[1]))};
  for (int32_t t : tensors) {
    FERRY_ASSIGN_OR_RETURN(ValueId id, m.ReadTensor(t));
    node_args.push_back(id);
  }
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("cat", std::move(node_args), r);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const EtOpMapping> ShapeEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"aten::clone.out", 2, &ImportClone},
      {"aten::alias_copy.out", 1, &ImportClone},
      {"aten::permute_copy.out", 2, &ImportPermuteCopy},
      {"aten::view_copy.out", 2, &ImportViewCopy},
      {"aten::expand_copy.out", 3, &ImportExpandCopy},
      {"aten::slice_copy.Tensor_out", 5, &ImportSliceCopy},
      {"aten::squeeze_copy.dim_out", 2, &ImportSqueezeCopy},
      {"aten::squeeze_copy.dims_out", 2, &ImportSqueezeCopy},
      {"aten::unsqueeze_copy.out", 2, &ImportUnsqueezeCopy},
      {"aten::select_copy.int_out", 3, &ImportSelectCopy},
      {"aten::cat.out", 2, &ImportCat},
      {"aten::constant_pad_nd.out", 3, &ImportConstantPad},
  };
  return kOps;
}

}  // namespace ferry::internal
