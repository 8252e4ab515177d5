// Deprecated: include "ferry/loader/plan/placement.h" instead.
// This forwarding header is removed in the next release.
#ifndef FERRY_LOADER_PLACEMENT_H_
#define FERRY_LOADER_PLACEMENT_H_

#include "ferry/loader/plan/placement.h"  // IWYU pragma: export

#endif  // FERRY_LOADER_PLACEMENT_H_
