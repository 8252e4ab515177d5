// A verified reader for ExecuTorch programs (.pte files), beside Ferry's own format.
//
//   FERRY_ASSIGN_OR_RETURN(EtProgram program, ReadExecuTorchProgram(bytes));
//   for (const EtMethod& method : program.methods) {
//     for (const EtInstruction& instruction : method.instructions) { ... }
//   }
//
// ReadExecuTorchProgram turns the bytes of a .pte file into plain data: per method its values,
// inputs, outputs, instructions, operators and delegates, and for the program its segments,
// constants and named data. It executes nothing and maps nothing onto Ferry's MethodDef; that is
// loader/executorch/importer.h's job.
//
// The format (loader/executorch/schema/executorch_program.fbs): a FlatBuffer with file identifier
// "ET12" at bytes 4..7, optionally followed at bytes 8.. by an extended header (magic "eh00", its
// length, the size of the FlatBuffer part and the file offset of the data segments), and data
// segments after the FlatBuffer part. Constant tensor data lives in a segment (constant_segment),
// in the FlatBuffer itself (the legacy constant_buffer), or in a separate .ptd file found by the
// tensor's fully qualified name. Delegate payloads live in the FlatBuffer or in a segment.
//
// Every byte is untrusted. The reader checks, in order: the file identifier and the extended
// header against the file size; the FlatBuffers verifier over the FlatBuffer part (bounded depth
// and table count); then a semantic pass with overflow-safe arithmetic before any index is
// followed: every value index (method inputs and outputs, instruction arguments, list items) in
// range and of the right kind, operator and delegate indices in range, union members present,
// one chain per method, known scalar types, non-negative sizes whose byte size fits in int64,
// dim orders that are permutations of the rank, planned tensors inside their arena, arena devices
// (non_const_buffer_device) naming an arena once each with a known device type and a
// non-negative index, and every constant, mutable-data, delegate and named-data reference inside
// the file. Nothing is allocated in proportion to a size the file declares before that size is
// checked against the file.
// A failure is InvalidArgument naming the element, e.g.
//   method "forward", instruction 3 (kernel call aten::add.out): argument 2 is value 40, but
//   the method has 38 values
// Formats this reader does not handle (another ExecuTorch format version, more than one chain)
// are Unimplemented.
//
// Ownership: spans in the result (constant data, delegate payloads, named data) point into
// `bytes`; an EtProgram must not outlive them. `bytes` is never written.
// Allocation: the result holds copies of names, sizes and index lists (a bounded multiple of the
// file's size), never of tensor data or payloads.
// Thread safety: a pure function.
#ifndef FERRY_LOADER_EXECUTORCH_PTE_READER_H_
#define FERRY_LOADER_EXECUTORCH_PTE_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ferry/base/tensor.h"
#include "ferry/loader/file_identifiers.h"
#include "ferry/loader/model/method_def.h"
#include "ferry/memory/device.h"

namespace ferry {

// The magic at bytes 8..11 that marks an extended header.
inline constexpr char kExecuTorchHeaderMagic[] = "eh00";

struct EtExtendedHeader {
  uint32_t length = 0;               // bytes, counted from the magic
  uint64_t program_size = 0;         // bytes of the FlatBuffer part, from the start of the file
  uint64_t segment_base_offset = 0;  // file offset of the segments; 0 when there are none
  // Bytes of segment data; written by newer exporters (a header of 32 bytes or more).
  std::optional<uint64_t> segment_data_size;
};

// ExecuTorch's element types keep PyTorch's numbering (6 float32, 4 int64, 1 int8, ...).
// "float32", "int8", ...; "scalar type N" for a number that names no type.
std::string EtScalarTypeName(int8_t scalar_type);
// Bytes per element of ExecuTorch scalar type `scalar_type`; 0 for a number that names no type.
size_t EtScalarTypeSize(int8_t scalar_type);
// The Ferry DType of ExecuTorch scalar type `scalar_type`, or nullopt when Ferry has none for it
// (quantized, 4-bit and float8 types, uint32, uint64).
std::optional<DType> EtFerryDType(int8_t scalar_type);

enum class EtShapeDynamism : uint8_t {
  kStatic = 0,          // sizes are the shape
  kDynamicBound = 1,    // sizes are an upper bound
  kDynamicUnbound = 2,  // sizes mean nothing; memory is not planned
};

enum class EtDataKind : uint8_t {
  kNone,             // no data in the program: an input, a planned value, or a placeholder
  kConstantBuffer,   // legacy: Program.constant_buffer[index], inside the FlatBuffer part
  kConstantSegment,  // Program.constant_segment: offsets[index] inside one segment
  kMutableSegment,   // initial data of a planned tensor, in Program.mutable_data_segments
  kExternal,         // in a separate data file (.ptd), found by the fully qualified name
};

const char* EtDataKindName(EtDataKind kind);

struct EtTensorData {
  EtDataKind kind = EtDataKind::kNone;
  uint32_t index = 0;  // the tensor's data_buffer_idx (0 for kNone and kExternal)
  // kConstantSegment / kMutableSegment: the segment (an index into EtProgram::segments).
  uint32_t segment = 0;
  // Not kNone or kExternal: the tensor's bytes, exactly EtTensor::byte_size of them, and where
  // they start in the file.
  uint64_t file_offset = 0;
  absl::Span<const uint8_t> bytes;
};

// Where a planned tensor lives: arena memory_id (1-based; EtMethod::non_const_buffer_sizes is
// indexed by it), at a byte offset.
struct EtAllocation {
  uint32_t memory_id = 0;
  uint64_t offset = 0;
};

struct EtTensor {
  int8_t scalar_type = 0;          // ExecuTorch's (PyTorch's) number
  std::optional<DType> dtype;      // the Ferry DType, or nullopt when Ferry has none for it
  size_t element_size = 0;         // bytes per element
  std::vector<int64_t> sizes;      // non-negative (int32 in the file)
  std::vector<uint8_t> dim_order;  // empty, or a permutation of 0..rank-1
  EtShapeDynamism dynamism = EtShapeDynamism::kStatic;
  uint64_t numel = 0;
  size_t byte_size = 0;  // numel * element_size; fits in int64
  bool requires_grad = false;
  int8_t layout = 0;  // 0: strided, the only layout ExecuTorch writes
  std::optional<EtAllocation> allocation;
  EtTensorData data;
  std::string fully_qualified_name;  // may be empty; never empty for kExternal data
  // ExtraTensorInfo's device (newer exporters): 0 CPU, 1 CUDA.
  int8_t device_type = 0;
  int8_t device_index = 0;
};

enum class EtValueKind : uint8_t {
  kNull = 0,
  kInt,
  kBool,
  kDouble,
  kTensor,
  kString,
  kIntList,  // items: value indices of Int values
  kDoubleList,
  kBoolList,
  kTensorList,          // items: value indices of Tensor values
  kOptionalTensorList,  // items: value indices of Tensor or Null values, or -1 for None
};

const char* EtValueKindName(EtValueKind kind);
// "an" for int, "a" for the others: "an int", "a tensor list".
const char* EtValueKindArticle(EtValueKind kind);

struct EtValue {
  EtValueKind kind = EtValueKind::kNull;
  int64_t int_value = 0;
  bool bool_value = false;
  double double_value = 0;
  std::string string_value;
  EtTensor tensor;              // kTensor
  std::vector<int32_t> items;   // kIntList, kTensorList, kOptionalTensorList
  std::vector<double> doubles;  // kDoubleList
  std::vector<bool> bools;      // kBoolList
};

enum class EtInstructionKind : uint8_t {
  kKernelCall = 0,
  kDelegateCall,
  kMove,
  kJumpFalse,
  kFree,
};

const char* EtInstructionKindName(EtInstructionKind kind);

struct EtInstruction {
  EtInstructionKind kind = EtInstructionKind::kKernelCall;
  int32_t op_index = -1;        // kKernelCall: into EtMethod::operators
  int32_t delegate_index = -1;  // kDelegateCall: into EtMethod::delegates
  // kKernelCall: the .out overload's full positional schema, then `out`, then the returned value
  // (the same index as `out`). kDelegateCall: inputs, then outputs, in one list.
  std::vector<int32_t> args;
  int32_t move_from = -1;    // kMove
  int32_t move_to = -1;      // kMove
  int32_t cond_value = -1;   // kJumpFalse: a Bool value or a bool tensor
  int32_t destination = -1;  // kJumpFalse: an instruction index
  int32_t free_value = -1;   // kFree: a tensor value
};

struct EtOperator {
  std::string name;      // e.g. "aten::add"
  std::string overload;  // e.g. "out"; may be empty

  // "aten::add.out", or the name alone without an overload.
  std::string FullName() const;
};

enum class EtPayloadLocation : uint8_t { kInline = 0, kSegment = 1 };

struct EtDelegate {
  std::string backend_id;                                          // e.g. "XnnpackBackend"
  std::vector<std::pair<std::string, std::string>> compile_specs;  // key, value bytes
  EtPayloadLocation location = EtPayloadLocation::kInline;
  uint32_t index = 0;  // into Program.backend_delegate_data, or EtProgram::segments
  uint64_t file_offset = 0;
  absl::Span<const uint8_t> payload;
};

// The device an exporter put one arena on (ExecutionPlan.non_const_buffer_device, newer exporters).
struct EtBufferDevice {
  uint32_t buffer_idx = 0;  // the arena: a memory_id, 1 .. non_const_buffer_sizes.size() - 1
  int8_t device_type = 0;   // ExecuTorch's DeviceType: 0 CPU, 1 CUDA
  int8_t device_index = 0;  // non-negative
};

// The Ferry device ExecuTorch's (device_type, device_index) names, as declared (before any device
// map): the host for CPU (0), `cuda:N` for CUDA (1); nullopt for a type Ferry's device types do
// not name.
std::optional<Device> EtDevice(int8_t device_type, int8_t device_index);

struct EtMethod {
  std::string name;
  std::vector<EtValue> values;
  std::vector<int32_t> inputs;              // value indices
  std::vector<int32_t> outputs;             // value indices
  std::vector<EtInstruction> instructions;  // of the method's only chain, in order
  std::vector<EtOperator> operators;
  std::vector<EtDelegate> delegates;
  // Arena sizes in bytes, by memory_id; entry 0 is reserved.
  std::vector<int64_t> non_const_buffer_sizes;
  // The arenas the exporter put on a device, as the file lists them (sparse, usually only the
  // non-CPU ones); an arena without an entry is on the CPU.
  std::vector<EtBufferDevice> non_const_buffer_devices;
};

struct EtSegment {
  uint64_t offset = 0;  // relative to the extended header's segment_base_offset
  uint64_t size = 0;
  uint64_t file_offset = 0;  // segment_base_offset + offset; 0 for an empty segment
  absl::Span<const uint8_t> bytes;
};

struct EtSubsegments {
  uint32_t segment_index = 0;     // into EtProgram::segments
  std::vector<uint64_t> offsets;  // byte offsets inside that segment; entry 0 is reserved
};

struct EtNamedData {
  std::string key;
  uint32_t segment_index = 0;
  absl::Span<const uint8_t> bytes;
};

struct EtProgram {
  uint32_t version = 0;
  std::optional<EtExtendedHeader> extended_header;
  uint64_t program_size = 0;  // bytes of the FlatBuffer part (the file size without a header)
  std::vector<EtMethod> methods;
  size_t constant_buffer_count = 0;  // legacy inline constants, entry 0 reserved
  std::vector<EtSegment> segments;
  // Present when the program stores its constants in a segment (more than the reserved offset).
  std::optional<EtSubsegments> constant_segment;
  std::vector<EtSubsegments> mutable_data_segments;
  std::vector<EtNamedData> named_data;

  std::vector<std::string> method_names() const;
  // nullptr when there is no such method.
  const EtMethod* method(absl::string_view name) const;
};

// The exporter's memory plan of a read method, per arena (memory_id 1, 2, ...): its declared size
// and device, and the end of the furthest tensor and the number of tensors placed in it. The reader
// has checked that every planned tensor lies inside its arena, so used_bytes <= declared_bytes.
std::vector<ExporterArena> EtExporterArenas(const EtMethod& method);

// Reads and verifies the bytes of a .pte file. `bytes` must be 8-byte aligned in memory (the
// FlatBuffer's scalars are read in place); an unaligned buffer is InvalidArgument. Before reading
// any method, the structures its values and instructions become (here and in the import that
// follows) are counted against `memory_limit` (ProgramLoadOptions::memory_limit_bytes) and the
// host's available memory; a program over either is ResourceExhausted.
absl::StatusOr<EtProgram> ReadExecuTorchProgram(absl::Span<const uint8_t> bytes,
                                                size_t memory_limit = SIZE_MAX);

}  // namespace ferry

#endif  // FERRY_LOADER_EXECUTORCH_PTE_READER_H_
