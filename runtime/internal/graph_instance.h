// The graph backend's instance, for backends that translate their payload into a Ferry sub-program
// and run it the graph backend's way (runtime/xnnpack_backend.cc): the sub-program's method
// "main" takes the call's tensor arguments and returns its results (runtime/backend.h,
// MakeGraphBackend).
#ifndef FERRY_RUNTIME_INTERNAL_GRAPH_INSTANCE_H_
#define FERRY_RUNTIME_INTERNAL_GRAPH_INSTANCE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/backend.h"

namespace ferry::internal {

// Sub-programs and their constants per device, shared by the instances a backend makes: a
// sub-program's constants are copied to a device once for all its instances there.
class GraphProgramCache;
std::shared_ptr<GraphProgramCache> MakeGraphProgramCache();

// An instance that runs `program`'s method "main" for the call `init` describes; its constants
// are shared through `cache` with the other instances of the same program object.
absl::StatusOr<std::unique_ptr<DelegateInstance>> InitGraphInstance(
    const DelegateInit& init, std::shared_ptr<const Program> program, GraphProgramCache& cache);

}  // namespace ferry::internal

#endif  // FERRY_RUNTIME_INTERNAL_GRAPH_INSTANCE_H_
