// Deprecated: include "ferry/loader/ferry/program_builder.h" instead.
// This forwarding header is removed in the next release.
#ifndef FERRY_LOADER_PROGRAM_BUILDER_H_
#define FERRY_LOADER_PROGRAM_BUILDER_H_

#include "ferry/loader/ferry/program_builder.h"  // IWYU pragma: export

#endif  // FERRY_LOADER_PROGRAM_BUILDER_H_
