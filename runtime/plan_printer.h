// Human-readable views of a loaded method's plan: text for terminals and logs, Graphviz DOT for
// pictures (`ferry plan --dot | dot -Tpng`).
//
// The text lists inputs and outputs (dtype, shape, bytes, device), nodes with their devices, the
// copy manifest (direction, value, source and destination devices, bytes, once or per call, why),
// arenas with their lower bounds, and the diagnostics. The DOT graph draws nodes coloured by
// device and every copy as its own vertex between the producer and the reader.
#ifndef FERRY_RUNTIME_PLAN_PRINTER_H_
#define FERRY_RUNTIME_PLAN_PRINTER_H_

#include <string>

#include "ferry/runtime/method.h"

namespace ferry {

std::string FormatPlanText(const Method& method);
std::string FormatPlanDot(const Method& method);

}  // namespace ferry

#endif  // FERRY_RUNTIME_PLAN_PRINTER_H_
