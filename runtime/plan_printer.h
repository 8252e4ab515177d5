// Human-readable views of a loaded method's plan: text for terminals and logs, Graphviz DOT for
// pictures (`ferry plan --dot | dot -Tpng`).
//
// The text lists inputs and outputs (dtype, shape, bytes, device), nodes with their devices, the
// copy manifest (direction, value, source and destination devices, bytes, once or per call, why),
// arenas with their lower bounds, and the diagnostics; devices are named as the program declared
// them, with the device they run on when the device map sent them elsewhere ("cuda:0 (as sim:0)").
//
// The DOT graph draws nodes as boxes coloured by device, method inputs (invhouse), constants
// (note) and states' initial data (cylinder) from the program, every copy as its own vertex (cds,
// pale yellow once at load, pink per call) between the producer and the reader, and method
// outputs (house); red edges go from a copy's source to the copy, black ones to the node or
// output that reads a value. A legend cluster explains every colour, shape and edge style the
// graph uses, and only those.
//
// FormatProgramDot draws several methods of one program (loaded together, LoadedProgram) side by
// side, one cluster each, with the values they share drawn once between them (bold): constants
// with the same data in the program, whose replica on a device is made once, and shared states.
//
// Thread safety: reads the methods' plans only. Allocates (the returned text).
#ifndef FERRY_RUNTIME_PLAN_PRINTER_H_
#define FERRY_RUNTIME_PLAN_PRINTER_H_

#include <string>

#include "absl/types/span.h"
#include "ferry/runtime/method.h"

namespace ferry {

std::string FormatPlanText(const Method& method);
std::string FormatPlanDot(const Method& method);
std::string FormatProgramDot(absl::Span<const Method* const> methods);

}  // namespace ferry

#endif  // FERRY_RUNTIME_PLAN_PRINTER_H_
