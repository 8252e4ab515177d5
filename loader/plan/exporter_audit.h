// The exporter's placement, audited against Ferry's: where an ExecuTorch exporter's own copies
// (et_copy::_h2d_copy.out, et_copy::_d2h_copy.out), device annotations (ExtraTensorInfo
// device_type/device_index) and arena devices (ExecutionPlan.non_const_buffer_device) disagree
// with the copies and devices Ferry's placement decided.
//
//   FERRY_ASSIGN_OR_RETURN(PlacementPlan plan, PlaceMethod(input, options));
//   for (const AuditFinding& f : AuditExporterPlacement(method, plan, options.device_map)) ...
//
// The import (loader/executorch/importer.h) drops the exporter's copies (the copy's result becomes
// the value it copies) and records them, with the device annotations, the exporter's arena of each
// planned value and the instruction each node comes from, in the MethodDef (exporter_copies,
// exporter_devices, exporter_allocations, node_instructions); the exporter's arenas and their
// devices are in exporter_arenas. Ferry's plan
// then decides its own copies (docs/placement.md), and this function lists every difference, one
// finding per line, each naming the method, the exporter's instruction and the value:
//  - kUnneededCopy: a copy the exporter made that Ferry's plan does not make (same value, same
//    direction);
//  - kCopyAroundHostDelegate: such a copy into or out of a delegate whose target_device is "cpu"
//    (the call runs on the host: nothing to copy);
//  - kMissingCopy: a host-to-device or device-to-host copy of Ferry's plan that the exporter left
//    out;
//  - kHostConstantToDevice: such a copy of a constant read by a delegate on a device: the exporter
//    hands it host memory, Ferry copies it to the device once at load;
//  - kMissingResultCopy: such a device-to-host copy of the only result of a delegate on a device;
//  - kDeviceMismatch: a tensor the exporter annotated on one device, read by a node that Ferry
//    placed on another (devices compared after the device map: an annotated cuda:0 is sim:0 when
//    the plan mapped it there). A value the exporter copies is not checked: its readers may read
//    the copy, and the copies' findings cover it;
//  - kArenaDeviceMismatch: a value the exporter planned (allocation_info) in an arena it put on
//    one device (non_const_buffer_device; an arena without an entry is on the CPU), which Ferry's
//    plan keeps on another (its home: where it is produced, or where an input is supplied),
//    compared after the device map as above. One finding per value, at the instruction that
//    writes it (-1 for a method input or a state), naming the arena and both devices. The result
//    of an exporter's copy is not a value of Ferry's (the copy's source stands for it), so the
//    arena of a copy's destination is not checked.
// A method without exporter records (Ferry's own programs, ExecuTorch programs without copies or
// annotations) is audited all the same: every copy of Ferry's plan is then one the exporter left
// out.
//
// Thread safety: a pure function of plain data. Allocates the findings.
#ifndef FERRY_LOADER_PLAN_EXPORTER_AUDIT_H_
#define FERRY_LOADER_PLAN_EXPORTER_AUDIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/loader/plan/placement.h"

namespace ferry {

struct AuditFinding {
  enum class Kind : uint8_t {
    kUnneededCopy,
    kCopyAroundHostDelegate,
    kMissingCopy,
    kHostConstantToDevice,
    kMissingResultCopy,
    kDeviceMismatch,
    kArenaDeviceMismatch,
  };
  Kind kind = Kind::kUnneededCopy;
  int32_t instruction = -1;  // the exporter's instruction, or -1 (a method input or output)
  ValueId value = -1;
  // e.g. method "forward", instruction 2 (et_copy::_h2d_copy.out): ...
  std::string message;
};

const char* AuditFindingKindName(AuditFinding::Kind kind);

// `device_map` is the map the method was placed with (PlacementOptions::device_map), so that a
// device annotation compares with the device used.
std::vector<AuditFinding> AuditExporterPlacement(
    const MethodDef& method, const PlacementPlan& plan,
    const absl::flat_hash_map<Device, Device>& device_map = {});

}  // namespace ferry

#endif  // FERRY_LOADER_PLAN_EXPORTER_AUDIT_H_
