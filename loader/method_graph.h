// Deprecated: include "ferry/loader/model/method_def.h" instead.
// This forwarding header is removed in the next release.
#ifndef FERRY_LOADER_METHOD_GRAPH_H_
#define FERRY_LOADER_METHOD_GRAPH_H_

#include "ferry/loader/model/method_def.h"  // IWYU pragma: export

#endif  // FERRY_LOADER_METHOD_GRAPH_H_
