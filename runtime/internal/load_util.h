// Helpers of method loading that are not a phase of their own. Internal to runtime/.
#ifndef FERRY_RUNTIME_INTERNAL_LOAD_UTIL_H_
#define FERRY_RUNTIME_INTERNAL_LOAD_UTIL_H_

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "ferry/memory/device.h"
#include "ferry/runtime/internal/method_impl.h"

namespace ferry::internal {

// A load-time copy (constant replica or state initial data) from the program's data. Runs in
// pieces of 16 MiB when the copy is dense: each piece's source pages are mapped ahead of the copy
// and, when `mapped_file` (the source is a read-only file mapping that no call reads on the host),
// dropped from the process after it (the file keeps them; dropping never changes what the memory
// reads). So host memory stays bounded however large a constant is. A copy of more than one
// piece is issued, and counted by the device, as one copy per piece.
absl::Status RunLoadCopy(const CopyExec& c, bool mapped_file);

// The device as the program declared it when the device map sent it elsewhere:
// "cuda:0 (as sim:0)"; otherwise its own name.
std::string DeviceLabel(const Device& device, const absl::flat_hash_map<Device, Device>& map);

// "16 B", "4.0 KiB", "1.5 MiB", "24.56 GiB", "128.00 TiB".
std::string FormatBytes(size_t n);

}  // namespace ferry::internal

#endif  // FERRY_RUNTIME_INTERNAL_LOAD_UTIL_H_
