// ExecuTorch's reductions, onto kernels/reduce_ops.cc.
#include <cstdint>
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

constexpr int64_t kEtFloat = 6;  // ExecuTorch's ScalarType for float32

constexpr char kMean[] = "mean";
constexpr char kSum[] = "sum";

// mean.out and sum.IntList_out (self, dim or None, keepdim, dtype or None): None dims reduce
// every dim; dtype must be None or float32.
template <const char* kOp>
absl::Status ImportReduce(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  std::vector<int64_t> dims;
  if (m.value(args[1]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(dims, m.IntList(args[1], "dim"));
  }
  FERRY_ASSIGN_OR_RETURN(bool keepdim, m.BoolValue(args[2], "keepdim"));
  if (m.value(args[3]).kind != EtValueKind::kNull) {
    FERRY_ASSIGN_OR_RETURN(int64_t dtype, m.IntValue(args[3], "dtype"));
    if (dtype != kEtFloat) {
      return m.Unimplemented(absl::StrCat("dtype is ", EtScalarTypeName(static_cast<int8_t>(dtype)),
                                          "; only a float32 ", kOp, " is supported"));
    }
  }
  FERRY_ASSIGN_OR_RETURN(ValueId a, m.ReadTensor(args[0]));
  const ValueId d = m.AddScalar(Scalar::IntList(std::move(dims)),
                                absl::StrCat("instruction ", m.instruction(), " dims"));
  const ValueId k = m.AddScalar(Scalar::Bool(keepdim), absl::StrCat("value ", args[2]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode(kOp, {a, d, k}, r);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const EtOpMapping> ReduceEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"aten::mean.out", 4, &ImportReduce<kMean>},
      {"aten::sum.IntList_out", 4, &ImportReduce<kSum>},
  };
  return kOps;
}

}  // namespace ferry::internal
