// Deprecated: include "ferry/base/huge_pages.h" instead.
// This forwarding header is removed in the next release.
#ifndef FERRY_MEMORY_HUGE_PAGES_H_
#define FERRY_MEMORY_HUGE_PAGES_H_

#include "ferry/base/huge_pages.h"  // IWYU pragma: export

#endif  // FERRY_MEMORY_HUGE_PAGES_H_
