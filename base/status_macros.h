// Status propagation macros used across Ferry.
//
// The Abseil release that Debian ships predates absl's own RETURN_IF_ERROR / ASSIGN_OR_RETURN,
// so Ferry carries these two. They evaluate their argument once and never throw.
//
//   FERRY_RETURN_IF_ERROR(device.Synchronize());
//   FERRY_ASSIGN_OR_RETURN(void* p, device.Allocate(bytes, 64));
#ifndef FERRY_BASE_STATUS_MACROS_H_
#define FERRY_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FERRY_INTERNAL_CONCAT_INNER(a, b) a##b
#define FERRY_INTERNAL_CONCAT(a, b) FERRY_INTERNAL_CONCAT_INNER(a, b)

#define FERRY_RETURN_IF_ERROR(expr)                    \
  do {                                                 \
    ::absl::Status ferry_status_ = (expr);             \
    if (!ferry_status_.ok()) return ferry_status_;     \
  } while (false)

#define FERRY_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return std::move(tmp).status();        \
  lhs = std::move(tmp).value()

#define FERRY_ASSIGN_OR_RETURN(lhs, expr) \
  FERRY_INTERNAL_ASSIGN_OR_RETURN(FERRY_INTERNAL_CONCAT(ferry_statusor_, __LINE__), lhs, expr)

#endif  // FERRY_BASE_STATUS_MACROS_H_
