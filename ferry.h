// Ferry's public API in one include: "ferry/ferry.h".
//
//   #include "ferry/ferry.h"
//
//   ferry::Runtime rt;
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Program> program, ferry::Program::Load(path));
//   FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Method> method,
//                          rt.LoadMethod(*program, "forward"));
//
// It brings the runtime (Runtime, Method, TensorView, Backend), programs (Program, the
// ProgramBuilder that writes them, the method model and its placement plan), devices and their
// runtimes, the huge-page tables loading builds (ReleaseCachedLargeTables), the op registry, and
// the status macros FERRY_RETURN_IF_ERROR and FERRY_ASSIGN_OR_RETURN. Each header states its own
// contract; docs/placement.md states the rules the plan follows.
#ifndef FERRY_FERRY_H_
#define FERRY_FERRY_H_

#include "ferry/base/huge_pages.h"
#include "ferry/base/status_macros.h"
#include "ferry/base/tensor.h"
#include "ferry/kernels/device_kernels.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/loader/plan/placement.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/device_registry.h"
#include "ferry/memory/device_runtime.h"
#include "ferry/memory/device_type.h"
#include "ferry/runtime/backend.h"
#include "ferry/runtime/method.h"
#include "ferry/runtime/plan_printer.h"
#include "ferry/runtime/runtime.h"
#include "ferry/runtime/tensor_view.h"

#endif  // FERRY_FERRY_H_
