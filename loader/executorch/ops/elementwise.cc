// ExecuTorch's elementwise ops, onto kernels/elementwise_ops.cc.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"

namespace ferry::internal {
namespace {

// add/sub (self, other, alpha), mul/div (self, other).
template <const char* kOp, bool kAlpha>
absl::Status ImportBinary(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  if constexpr (kAlpha) FERRY_RETURN_IF_ERROR(m.RequireOne(args[2], "alpha"));
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId b, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(kOp, {a, b}, r);
  return absl::OkStatus();
}

// relu(self).
absl::Status ImportRelu(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  return m.MapUnary("relu", args[0], out);
}

// copy(self, src, non_blocking) and copy_: src broadcast into (a copy of) self.
absl::Status ImportCopy(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(ValueId target, m.WriteTarget(args[0], out));
  FERRY_ASSIGN_OR_RETURN(ValueId src, m.ReadTensor(args[1]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("copy_", {target, src}, r);
  return absl::OkStatus();
}

constexpr char kAdd[] = "add";
constexpr char kSub[] = "sub";
constexpr char kMul[] = "mul";
constexpr char kDiv[] = "div";

}  // namespace

absl::Span<const EtOpMapping> ElementwiseEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"aten::add.out", 3, &ImportBinary<kAdd, true>},
      {"aten::sub.out", 3, &ImportBinary<kSub, true>},
      {"aten::mul.out", 2, &ImportBinary<kMul, false>},
      {"aten::div.out", 2, &ImportBinary<kDiv, false>},
      {"aten::relu.out", 1, &ImportRelu},
      {"aten::copy.out", 3, &ImportCopy},
      {"aten::copy_", 3, &ImportCopy, /*in_place=*/true},
  };
  return kOps;
}

}  // namespace ferry::internal
