// The ExecuTorch ops the import maps onto Ferry's, one table per op family: the stems of
// kernels/<family>_ops.cc, whose ops they map onto. Adding an op is one row in its family's table
// and one import function beside it (docs/adding_an_op.md).
//
//   const EtOpMapping* add = FindEtOp("aten::add.out");   // nullptr: not supported
//   FERRY_RETURN_IF_ERROR(add->import(importer, args, out));
#ifndef FERRY_LOADER_EXECUTORCH_OPS_OPS_H_
#define FERRY_LOADER_EXECUTORCH_OPS_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ferry::internal {

class MethodImporter;  // loader/executorch/internal/method_importer.h

// Maps one kernel call: `args` are its schema arguments without `out`, `out` the value it writes.
using EtOpImportFn = absl::Status (*)(MethodImporter& importer, absl::Span<const int32_t> args,
                                      int32_t out);

struct EtOpMapping {
  // The overload as ExecuTorch's exporter writes it: "aten::add.out", "aten::copy_".
  const char* et_name;
  int num_args;  // the schema's arguments, without `out`
  EtOpImportFn import;
  // An in-place op (copy_, index_put_): the call passes its arguments and the returned value
  // (argument 0, the written tensor), and `out` is argument 0.
  bool in_place = false;
  // An op of several outputs (native_layer_norm's out0, out1, out2): the call passes the schema's
  // arguments, the outputs, then one tensor list of the outputs (the returned tuple). The import
  // function gets `args` with the outputs after the arguments, and `out` the first output; the
  // others it may leave unwritten (a later read of one is refused naming it).
  int num_outs = 1;
};

// Each family's table (loader/executorch/ops/<family>.cc).
absl::Span<const EtOpMapping> ElementwiseEtOps();
absl::Span<const EtOpMapping> LinalgEtOps();
absl::Span<const EtOpMapping> ShapeEtOps();
absl::Span<const EtOpMapping> DTypeEtOps();
absl::Span<const EtOpMapping> ReduceEtOps();
absl::Span<const EtOpMapping> IndexEtOps();
absl::Span<const EtOpMapping> NnEtOps();
// The exporter's own copies (et_copy::*), which are not ops Ferry runs (loader/executorch/
// importer.cc).
absl::Span<const EtOpMapping> ExporterCopyEtOps();

// Every family's table, in the order above.
absl::Span<const absl::Span<const EtOpMapping>> AllEtOpTables();

// The mapping of `et_name`, from every table, by one hash lookup; nullptr when no family maps it.
const EtOpMapping* FindEtOp(absl::string_view et_name);

}  // namespace ferry::internal

#endif  // FERRY_LOADER_EXECUTORCH_OPS_OPS_H_
