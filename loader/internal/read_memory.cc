#include "ferry/loader/internal/read_memory.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "ferry/memory/devices/host/host_device.h"

namespace ferry::internal {
namespace {

// a * b + c, saturating at SIZE_MAX.
size_t MulAdd(size_t a, size_t b, size_t c) {
  size_t product = 0;
  size_t sum = 0;
  if (__builtin_mul_overflow(a, b, &product) || __builtin_add_overflow(product, c, &sum)) {
    return SIZE_MAX;
  }
  return sum;
}

}  // namespace

void ReadMemory::Add(size_t v, size_t value_bytes, size_t n, size_t node_bytes) {
  values = MulAdd(v, 1, values);
  nodes = MulAdd(n, 1, nodes);
  bytes = MulAdd(n, node_bytes, MulAdd(v, value_bytes, bytes));
}

absl::Status CheckReadMemory(const ReadMemory& need, size_t limit) {
  const size_t available = HostAvailableBytesFor(need.bytes);
  if (need.bytes <= limit && need.bytes <= available) return absl::OkStatus();
  const std::string over =
      limit < available
          ? absl::StrCat("the ", FormatBytes(limit), " that ProgramLoadOptions::memory_limit_bytes "
                         "allows")
          : absl::StrCat("the ", FormatBytes(available), " the host has available");
  return absl::ResourceExhaustedError(absl::StrCat(
      "reading the program's ", need.values, " values and ", need.nodes, " nodes takes ",
      FormatBytes(need.bytes), " of host memory, more than ", over,
      "; nothing was built (a small file can list many values or nodes when its lists share "
      "tables)"));
}

}  // namespace ferry::internal
