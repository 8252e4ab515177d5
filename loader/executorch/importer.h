// ExecuTorch methods mapped onto Ferry's method model (loader/model/method_def.h).
//
//   FERRY_ASSIGN_OR_RETURN(EtProgram et, ReadExecuTorchProgram(bytes));
//   FERRY_ASSIGN_OR_RETURN(EtImport imported, ImportExecuTorchProgram(et));
//   for (const MethodDef& m : imported.methods) { ... }
//   for (const EtImport::Refused& r : imported.refused) { ... r.name, r.status ... }
//
// Each method is imported on its own: a method the import refuses is listed in `refused` with
// why, and leaves the others whole (Program::method returns that reason for it).
//
// Program::Load and Program::FromBytes call this for files with the identifier "ET12"; most
// callers never see it.
//
// What becomes what:
//  - tensor inputs become kInput values, in the method's order; an input or output that is not a
//    tensor (Int, Double, Bool, String, None, IntList, DoubleList, BoolList) becomes one kScalar
//    value however often it is listed, an input holding the value the program was traced with
//    (the only one a call may pass, as in ExecuTorch); tensor lists as inputs or outputs are
//    refused naming them;
//  - planned tensors with initial data (mutable_data_segments) become kState values, which
//    persist across calls; when a method's last write of one is a value of its own (an `out`),
//    a copy_ node at the end of the method writes it back into the state;
//  - tensors with data in the program (constant segment, legacy constant_buffer) become kConstant
//    values; their bytes are copied into 64-byte aligned storage owned by the EtImport, since
//    ExecuTorch aligns constants to 16 bytes only;
//  - Int, Double, Bool values and IntLists (whose items are value indices of Int values) become
//    kScalar values where an op reads them;
//  - each kernel call becomes one or a few host op nodes (one table per op family,
//    loader/executorch/ops/); ExecuTorch writes results into preallocated `out` values and reuses
// them, Ferry produces
//    each intermediate once, so every result gets its own value and a later read of the ExecuTorch
//    value (and a method output) refers to its latest producer;
//  - ExecuTorch's *_copy ops (permute, expand, slice, squeeze, unsqueeze) become Ferry's view op
//    and a clone, so their results are fresh tensors as ExecuTorch's semantics require;
//    index_put and copy (functional) clone their argument 0 first, index_put_ and copy_ write it;
//  - tensors whose data is external (ExtraTensorInfo location EXTERNAL) are looked up by their
//    fully qualified name in the data file (.ptd) given in EtImportOptions, and become kConstant
//    values like the others: their dtype and sizes must match the data file's entry, and their
//    bytes are copied, so the data file's bytes need not outlive the import;
//  - a cast between float32 and int64 of a constant (`_to_dim_order_copy` to another dtype) is
//    done here, once, into a new constant; every other cast becomes a to_dtype node.
//  - a delegate call becomes one delegate node (NodeKind::kDelegate) named
//    "<backend id> (instruction N)", whose backend is the ExecuTorch backend id (e.g.
//    "XnnpackBackend"), with the delegate's compile specs as given and a copy of its payload
//    (inline or from a segment). A "target_device" compile spec ("cuda:0", "cpu" for the host)
//    places the call exactly as in Ferry's own programs; without one it runs on the host. The
//    call lists its arguments and results in one list: its results are the values nothing has
//    written before it (not an input, a constant or an earlier result), its arguments the others
//    (tensors, and Int, Double, Bool and IntList values passed as scalars). The results must all
//    follow the arguments, be tensors and appear once; anything else is refused (no result at
//    all; an already-written value after the first result, which could be an argument or a
//    result written in place; a non-tensor after the first result; a result listed twice).
//    Results take their dtype and sizes from the program's tensors.
//  - the exporter's own copies between the host and a device (et_copy::_h2d_copy.out,
//    _d2h_copy.out) are dropped: their result is the value they copy, and Ferry's placement
//    decides the copies. They are recorded in MethodDef::exporter_copies, the exporter's device
//    annotations (ExtraTensorInfo device_type CUDA, device_index) in exporter_devices, and each
//    node's instruction in node_instructions, for the audit (loader/plan/exporter_audit.h,
//    `ferry plan --audit`).
// Importing needs no backend: planning (`ferry plan`) works on any program. Running a method
// with a delegate needs a Backend (runtime/backend.h) registered under the backend id, e.g.
//   rt.RegisterBackend(std::make_unique<MyXnnpackBackend>());  // name() == "XnnpackBackend"
// before Runtime::LoadMethod, which otherwise fails with NotFound naming the backend, the method
// and the instruction. docs/executorch_delegates.md shows a backend that runs Ferry's graph
// payloads under an ExecuTorch-style id.
// ExecuTorch's memory plan (memory_id, offsets, arena devices) is read and shown, not used:
// Ferry plans its own arenas. The import records it with the exporter's other records: the
// arenas (EtExporterArenas) in MethodDef::exporter_arenas, and the arena of each value made from
// a planned tensor in MethodDef::exporter_allocations, for the audit.
//
// A method's errors (its entry in `refused`): Unimplemented naming the method and instruction for
// an op, dtype, dynamic shape or
// scalar value Ferry does not support (`etnp::lstm.out`, a delegate call whose results are
// ambiguous, alpha != 1, _softmax with half_to_float, a mean to another dtype than float32,
// index_put with accumulate);
// for an external tensor, FailedPrecondition when no data file is given, NotFound when the
// data file has no entry of its name, InvalidArgument when the entry's dtype, sizes or byte size
// differ from the program's tensor; InvalidArgument for a call whose arguments do not fit its
// op's schema or that reads a value nothing has written. The call itself fails only for what
// concerns the whole program: constants that overlap in the file so that copying them would
// take more than twice their span (InvalidArgument), or memory for them (ResourceExhausted).
// Ownership: the MethodDefs' constant and payload spans point into `constant_data` (moving an
// EtImport keeps them valid); nothing points into the EtProgram or its file.
// Thread safety: a pure function. Allocates the MethodDefs and a copy of the constants.
#ifndef FERRY_LOADER_EXECUTORCH_IMPORTER_H_
#define FERRY_LOADER_EXECUTORCH_IMPORTER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/loader/executorch/ptd_reader.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/model/method_def.h"

namespace ferry {

struct EtImport {
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<MethodDef> methods;  // the methods imported, in the program's order
  // A method the import refused, and why (its status names the method and the instruction).
  struct Refused {
    std::string name;
    absl::Status status;
  };
  std::vector<Refused> refused;  // in the program's order
  std::vector<std::string> method_order;  // every method's name, imported or refused, in order
  // The constants and delegate payloads of every method, each at a multiple of 64 bytes; null
  // when there are none.
  std::unique_ptr<uint8_t, FreeDeleter> constant_data;
  size_t constant_bytes = 0;
};

struct EtImportOptions {
  // The program's data file (.ptd), read by ReadExecuTorchDataFile; null when there is none.
  // Only read during the call.
  const EtDataFile* data = nullptr;
};

absl::StatusOr<EtImport> ImportExecuTorchProgram(const EtProgram& program,
                                                 const EtImportOptions& options = {});

}  // namespace ferry

#endif  // FERRY_LOADER_EXECUTORCH_IMPORTER_H_
