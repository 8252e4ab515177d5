// Helpers of method loading that are not a phase of their own. Internal to runtime/.
#ifndef FERRY_RUNTIME_INTERNAL_LOAD_UTIL_H_
#define FERRY_RUNTIME_INTERNAL_LOAD_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ferry/loader/program_mapping.h"
#include "ferry/memory/device.h"
#include "ferry/memory/devices/host/host_device.h"  // FormatBytes
#include "ferry/runtime/internal/method_impl.h"

namespace ferry::internal {

// A load-time copy (constant replica or state initial data) from the program's data. Runs in
// pieces of 16 MiB when the copy is dense. With a `mapping` (the source lies in that file
// mapping and no call reads it on the host), each piece's pages are mapped ahead of the copy and
// dropped from the process after it (loader/program_mapping.h), so host memory stays bounded
// however large a constant is. A copy of more than one piece is issued, and counted by the
// device, as one copy per piece.
absl::Status RunLoadCopy(const CopyExec& c, const ProgramMapping* mapping);

// The device as the program declared it when the device map sent it elsewhere:
// "cuda:0 (as sim:0)"; otherwise its own name.
std::string DeviceLabel(const Device& device, const absl::flat_hash_map<Device, Device>& map);

// The host memory loading builds for its own tables (layouts, placement, the plan, the steps) per
// value, per node and per entry of a node's argument and result lists, at the load's peak:
// BM_LoadPeakMemory measures it, and the test LoadTables.EstimateCoversThePeak holds these
// figures to it. The lists count apart from the nodes because a file can give a node thousands of
// arguments at 4 bytes each (loading takes about 18 bytes per entry beyond a node's own tables).
inline constexpr size_t kLoadTableBytesPerValue = 640;
inline constexpr size_t kLoadTableBytesPerNode = 448;
inline constexpr size_t kLoadTableBytesPerArgument = 24;
// A delegate's backend builds its own structures from its payload at init (the graph backend
// reads it as a program and plans it: about 4.5 bytes per payload byte for long argument lists).
inline constexpr size_t kLoadTableBytesPerPayloadByte = 5;
// The estimate for `m`, saturating at SIZE_MAX.
size_t LoadTableBytes(const MethodDef& m);
// The same from the counts: values, nodes, entries of all argument and result lists, and bytes
// of all delegate payloads.
size_t LoadTableBytes(size_t values, size_t nodes, size_t list_entries, size_t payload_bytes);

// A layout as placement records it: nothing for a dense row-major layout, a dim order for
// another dense one, the strides otherwise.
ValueLayout LayoutOf(const TensorRef& ref);

// "f32[2, 3]": a dtype and sizes as messages show them.
std::string SpecString(DType dtype, absl::Span<const int64_t> sizes);

}  // namespace ferry::internal

#endif  // FERRY_RUNTIME_INTERNAL_LOAD_UTIL_H_
