// ExecuTorch's indexing ops, onto kernels/index_ops.cc.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/method_importer.h"
#include "ferry/loader/executorch/ops/ops.h"

namespace ferry::internal {
namespace {

// index_put(self, indices, values, accumulate) and index_put_: one index tensor, over dim 0;
// accumulate must be false.
absl::Status ImportIndexPut(MethodImporter& m, absl::Span<const int32_t> args, int32_t out) {
  FERRY_ASSIGN_OR_RETURN(std::vector<int32_t> indices, m.TensorListValue(args[1], "indices"));
  if (indices.size() != 1) {
    return m.Unimplemented(absl::StrCat("indices (value ", args[1], ") has ", indices.size(),
                                        " tensors; only one index tensor (over dim 0) is "
                                        "supported"));
  }
  FERRY_ASSIGN_OR_RETURN(bool accumulate, m.BoolValue(args[3], "accumulate"));
  if (accumulate) {
    return m.Unimplemented("accumulate is true; only accumulate = false is supported");
  }
  FERRY_ASSIGN_OR_RETURN(ValueId target, m.WriteTarget(args[0], out));
  FERRY_ASSIGN_OR_RETURN(ValueId index, m.ReadTensor(indices[0]));
  FERRY_ASSIGN_OR_RETURN(ValueId values, m.ReadTensor(args[2]));
  FERRY_ASSIGN_OR_RETURN(ValueId r, m.Produce(out));
  m.AddNode("index_put_", {target, index, values}, r);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const EtOpMapping> IndexEtOps() {
  static constexpr EtOpMapping kOps[] = {
      {"aten::index_put.out", 4, &ImportIndexPut},
      {"aten::index_put_", 4, &ImportIndexPut, /*in_place=*/true},
  };
  return kOps;
}

}  // namespace ferry::internal
