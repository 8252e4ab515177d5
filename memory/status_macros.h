// Deprecated: include "ferry/base/status_macros.h" instead.
// This forwarding header is removed in the next release.
#ifndef FERRY_MEMORY_STATUS_MACROS_H_
#define FERRY_MEMORY_STATUS_MACROS_H_

#include "ferry/base/status_macros.h"  // IWYU pragma: export

#endif  // FERRY_MEMORY_STATUS_MACROS_H_
