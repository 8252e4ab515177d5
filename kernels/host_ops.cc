#include "kernels/internal/host_ops.h"
#include "kernels/op_registry.h"
#include "memory/status_macros.h"

namespace ferry {

absl::Status RegisterBuiltInOps(OpRegistry& registry) {
  FERRY_RETURN_IF_ERROR(internal::RegisterElementwiseOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterLinalgOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterShapeOps(registry));
  FERRY_RETURN_IF_ERROR(internal::RegisterIndexOps(registry));
  return absl::OkStatus();
}

}  // namespace ferry
