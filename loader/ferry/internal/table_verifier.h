// The structural check of Ferry program bytes: the verdict of the verifier flatc generates for
// loader/ferry/schema/program.fbs, reached with a fraction of its work.
//
//   if (!ProgramTablesWellFormed(bytes, max_tables)) return ...;  // then accessors are safe
//
// It accepts exactly the buffers that fbs::VerifyProgramBuffer accepts with a
// flatbuffers::Verifier(bytes, size, max_depth, max_tables) whose max_depth is at least
// kSchemaDepth (alignment checks on): every table's vtable inside the buffer, every field inside
// the buffer and aligned, every offset forward and landing inside the buffer, every vector's and
// string's bytes inside the buffer (strings terminated), unions' tables verified by their type,
// and no more than `max_tables` tables visited (shared tables once per use). The generated
// verifier reaches each field through generic helpers that look the vtable up again, about 700
// instructions per node of a method and 400 per value; this one reads each vtable once, checks
// fields in place and walks the schema's tables directly. tests/loader/ferry/table_verifier_test.cc
// holds the two to the same verdict on mutated and truncated programs, and the program fuzzer
// (fuzz/) checks it on every input it runs.
//
// `bytes` must be 4-byte aligned in memory (as for any FlatBuffers access) and shorter than
// FLATBUFFERS_MAX_BUFFER_SIZE. Reads only inside `bytes`; allocates nothing.
// Thread safety: a pure function.
#ifndef FERRY_LOADER_FERRY_INTERNAL_TABLE_VERIFIER_H_
#define FERRY_LOADER_FERRY_INTERNAL_TABLE_VERIFIER_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace ferry::internal {

// The deepest nesting of tables the schema allows: Program, Method, Node, DelegateCall, then
// CompileSpec or DimOrder.
inline constexpr size_t kSchemaDepth = 5;

bool ProgramTablesWellFormed(absl::Span<const uint8_t> bytes, size_t max_tables);

// The table limit reading uses for a program of `size` bytes. A table takes at least 4 bytes, so
// a program without shared tables has fewer than size / 4; the bound keeps verification linear in
// the size even for hostile sharing.
inline size_t MaxTablesFor(size_t size) {
  return size / 4 > (size_t{1} << 16) ? size / 4 : size_t{1} << 16;
}

}  // namespace ferry::internal

#endif  // FERRY_LOADER_FERRY_INTERNAL_TABLE_VERIFIER_H_
