#include "ferry/loader/executorch/pte_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/internal/pte_read.h"
#include "ferry/loader/file_identifiers.h"
#include "ferry/loader/internal/read_memory.h"
#include "ferry/loader/internal/untrusted_bytes.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/executorch_program_generated.h"

namespace ferry {
namespace {

namespace fb = ::ferry::et::fbs;

static_assert(FLATBUFFERS_LITTLEENDIAN, "Ferry reads programs in place on little-endian hosts");

// The program's FlatBuffer nests at most 9 levels (Program/execution_plan/ExecutionPlan/chains/
// Chain/stacktrace/FrameList/items/Frame); the margin tolerates new fields, the bound stops
// hostile nesting.
constexpr flatbuffers::uoffset_t kMaxDepth = 32;
// The extended header: magic, length (uint32), program_size and segment_base_offset (uint64),
// then, from 32 bytes on, segment_data_size (uint64). All little-endian.
constexpr size_t kHeaderOffset = 8;
constexpr uint32_t kMinHeaderLength = 24;
constexpr uint32_t kHeaderLengthWithDataSize = 32;
constexpr size_t kFlatBufferPrefix =
    sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength;

struct ScalarTypeInfo {
  const char* name;
  size_t element_size;  // 0: not a type
};

// By ExecuTorch's (PyTorch's) number.
constexpr std::array<ScalarTypeInfo, 30> kScalarTypes = {{
    {"uint8", 1},           {"int8", 1},
    {"int16", 2},           {"int32", 4},
    {"int64", 8},           {"float16", 2},
    {"float32", 4},         {"float64", 8},
    {"complex32", 4},       {"complex64", 8},
    {"complex128", 16},     {"bool", 1},
    {"qint8", 1},           {"quint8", 1},
    {"qint32", 4},          {"bfloat16", 2},
    {"quint4x2", 1},        {"quint2x4", 1},
    {"bits1x8", 1},         {"bits2x4", 1},
    {"bits4x2", 1},         {"bits8", 1},
    {"bits16", 2},          {"float8_e5m2", 1},
    {"float8_e4m3fn", 1},   {"float8_e5m2fnuz", 1},
    {"float8_e4m3fnuz", 1}, {"uint16", 2},
    {"uint32", 4},          {"uint64", 8},
}};

size_t ElementSize(int8_t scalar_type) {
  if (scalar_type < 0 || static_cast<size_t>(scalar_type) >= kScalarTypes.size()) return 0;
  return kScalarTypes[scalar_type].element_size;
}

using ::ferry::internal::Add;
using ::ferry::internal::CheckReadMemory;
using ::ferry::internal::CopyBudget;
using ::ferry::internal::Quoted;
using ::ferry::internal::ReadLE;
using ::ferry::internal::ReadMemory;
using ::ferry::internal::pte::Aligned8;
using ::ferry::internal::pte::Invalid;
using ::ferry::internal::pte::Len;
using ::ferry::internal::pte::OverCopyBudget;
using ::ferry::internal::pte::ProgramContext;
using ::ferry::internal::pte::View;

}  // namespace

std::string EtScalarTypeName(int8_t scalar_type) {
  if (ElementSize(scalar_type) == 0) return absl::StrCat("scalar type ", scalar_type);
  return kScalarTypes[scalar_type].name;
}

size_t EtScalarTypeSize(int8_t scalar_type) { return ElementSize(scalar_type); }

std::optional<DType> EtFerryDType(int8_t scalar_type) {
  switch (static_cast<fb::ScalarType>(scalar_type)) {
    case fb::ScalarType::FLOAT:
      return DType::kFloat32;
    case fb::ScalarType::LONG:
      return DType::kInt64;
    case fb::ScalarType::INT:
      return DType::kInt32;
    case fb::ScalarType::BOOL:
      return DType::kBool;
    case fb::ScalarType::CHAR:
      return DType::kInt8;
    case fb::ScalarType::BYTE:
      return DType::kUInt8;
    case fb::ScalarType::SHORT:
      return DType::kInt16;
    case fb::ScalarType::UINT16:
      return DType::kUInt16;
    case fb::ScalarType::HALF:
      return DType::kFloat16;
    case fb::ScalarType::BFLOAT16:
      return DType::kBFloat16;
    case fb::ScalarType::DOUBLE:
      return DType::kFloat64;
    default:
      return std::nullopt;
  }
}

const char* EtDataKindName(EtDataKind kind) {
  switch (kind) {
    case EtDataKind::kNone:
      return "none";
    case EtDataKind::kConstantBuffer:
      return "constant buffer";
    case EtDataKind::kConstantSegment:
      return "constant segment";
    case EtDataKind::kMutableSegment:
      return "mutable data segment";
    case EtDataKind::kExternal:
      return "external";
  }
  return "?";
}

const char* EtValueKindName(EtValueKind kind) {
  switch (kind) {
    case EtValueKind::kNull:
      return "null";
    case EtValueKind::kInt:
      return "int";
    case EtValueKind::kBool:
      return "bool";
    case EtValueKind::kDouble:
      return "double";
    case EtValueKind::kTensor:
      return "tensor";
    case EtValueKind::kString:
      return "string";
    case EtValueKind::kIntList:
      return "int list";
    case EtValueKind::kDoubleList:
      return "double list";
    case EtValueKind::kBoolList:
      return "bool list";
    case EtValueKind::kTensorList:
      return "tensor list";
    case EtValueKind::kOptionalTensorList:
      return "optional tensor list";
  }
  return "?";
}

const char* EtValueKindArticle(EtValueKind kind) {
  switch (kind) {
    case EtValueKind::kInt:
    case EtValueKind::kIntList:
    case EtValueKind::kOptionalTensorList:
      return "an";
    default:
      return "a";
  }
}

const char* EtInstructionKindName(EtInstructionKind kind) {
  switch (kind) {
    case EtInstructionKind::kKernelCall:
      return "kernel call";
    case EtInstructionKind::kDelegateCall:
      return "delegate call";
    case EtInstructionKind::kMove:
      return "move";
    case EtInstructionKind::kJumpFalse:
      return "jump if false";
    case EtInstructionKind::kFree:
      return "free";
  }
  return "?";
}

std::optional<Device> EtDevice(int8_t device_type, int8_t device_index) {
  if (device_type == static_cast<int8_t>(fb::DeviceType::CPU)) return Device::Host();
  if (device_type < static_cast<int8_t>(fb::DeviceType::MIN) ||
      device_type > static_cast<int8_t>(fb::DeviceType::MAX) || device_index < 0) {
    return std::nullopt;
  }
  // ExecuTorch's device type names are those of Ferry's device type plug-ins.
  absl::StatusOr<Device> device =
      ParseDevice(absl::StrCat(fb::EnumNameDeviceType(static_cast<fb::DeviceType>(device_type)),
                               ":", static_cast<int>(device_index)));
  if (!device.ok()) return std::nullopt;
  return *device;
}

std::string EtOperator::FullName() const {
  return overload.empty() ? name : absl::StrCat(name, ".", overload);
}

std::vector<std::string> EtProgram::method_names() const {
  std::vector<std::string> names;
  names.reserve(methods.size());
  for (const EtMethod& m : methods) names.push_back(m.name);
  return names;
}

const EtMethod* EtProgram::method(absl::string_view name) const {
  for (const EtMethod& m : methods) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

namespace {

// ---------------------------------------------------------------------------------------------
// The file: identifier, extended header, FlatBuffer, segments, then the methods.

class ProgramReader {
 public:
  ProgramReader(absl::Span<const uint8_t> bytes, size_t memory_limit)
      : bytes_(bytes), memory_limit_(memory_limit), budget_(bytes.size()) {}

  absl::StatusOr<EtProgram> Run() {
    FERRY_RETURN_IF_ERROR(CheckIdentifier());
    FERRY_RETURN_IF_ERROR(ReadExtendedHeader());
    FERRY_RETURN_IF_ERROR(VerifyFlatBuffer());
    FERRY_RETURN_IF_ERROR(ReadSegments());
    FERRY_RETURN_IF_ERROR(ReadSubsegmentTables());
    FERRY_RETURN_IF_ERROR(ReadNamedData());
    FERRY_RETURN_IF_ERROR(ReadMethods());
    return std::move(program_);
  }

 private:
  absl::Status CheckIdentifier() const {
    if (bytes_.size() < kFlatBufferPrefix) {
      return Invalid(absl::StrCat("the file is ", bytes_.size(),
                                  " bytes, too short for an ExecuTorch program"));
    }
    if (reinterpret_cast<uintptr_t>(bytes_.data()) % 8 != 0) {
      return Invalid(
          "the program's bytes are not 8-byte aligned in memory; copy them to an "
          "aligned buffer");
    }
    const absl::string_view id(reinterpret_cast<const char*>(bytes_.data()) + 4, 4);
    if (id == kExecuTorchFileIdentifier) return absl::OkStatus();
    if (id == kProgramFileIdentifier) {
      return Invalid(
          "this is a Ferry program (file identifier \"FRRY\"), not an ExecuTorch "
          "one: load it with Program::Load");
    }
    if (id.substr(0, 2) == "FT") {
      return Invalid(absl::StrCat(
          "this is an ExecuTorch data file (.ptd, file identifier ", Quoted(id),
          "), not a program: a program finds its tensors in it by fully qualified name"));
    }
    // "ET" and a two-digit version: another release of the format.
    if (id.substr(0, 2) == "ET" && absl::ascii_isdigit(static_cast<unsigned char>(id[2])) &&
        absl::ascii_isdigit(static_cast<unsigned char>(id[3]))) {
      return absl::UnimplementedError(absl::StrCat("ExecuTorch program format ", Quoted(id),
                                                   " is not supported; this reader reads \"",
                                                   kExecuTorchFileIdentifier, "\""));
    }
    return Invalid(absl::StrCat("not an ExecuTorch program: the file identifier (bytes 4..7) is ",
                                Quoted(id), ", expected \"", kExecuTorchFileIdentifier, "\""));
  }

  absl::Status ReadExtendedHeader() {
    const uint64_t file_size = bytes_.size();
    program_.program_size = file_size;
    if (file_size < kHeaderOffset + 4 ||
        std::memcmp(bytes_.data() + kHeaderOffset, kExecuTorchHeaderMagic, 4) != 0) {
      return absl::OkStatus();  // no extended header: the FlatBuffer is the whole file
    }
    std::string error;
    const std::optional<uint32_t> length = internal::ReadHeaderLength(
        "the extended header", bytes_.data(), file_size, kHeaderOffset, kMinHeaderLength, &error);
    if (!length.has_value()) return Invalid(error);
    const uint8_t* h = bytes_.data() + kHeaderOffset;
    EtExtendedHeader header;
    header.length = *length;
    header.program_size = ReadLE(h + 8, 8);
    header.segment_base_offset = ReadLE(h + 16, 8);
    const uint64_t header_end = kHeaderOffset + uint64_t{header.length};
    if (header.length >= kHeaderLengthWithDataSize) header.segment_data_size = ReadLE(h + 24, 8);
    if (header.program_size < header_end) {
      return Invalid(absl::StrCat("the extended header's program_size, ", header.program_size,
                                  " bytes, does not cover the header itself (", header_end,
                                  " bytes)"));
    }
    if (header.program_size > file_size) {
      return Invalid(absl::StrCat("the extended header says the program is ", header.program_size,
                                  " bytes, but the file is ", file_size,
                                  " bytes: it is truncated"));
    }
    if (header.segment_base_offset > file_size) {
      return Invalid(absl::StrCat("the extended header's segment_base_offset, ",
                                  header.segment_base_offset, ", is past the end of the file (",
                                  file_size, " bytes)"));
    }
    if (header.segment_base_offset != 0 && header.segment_base_offset < header.program_size) {
      return Invalid(absl::StrCat("the extended header's segment_base_offset, ",
                                  header.segment_base_offset, ", lies inside the program (",
                                  header.program_size, " bytes)"));
    }
    if (header.segment_data_size.has_value()) {
      const std::optional<uint64_t> end =
          Add(header.segment_base_offset, *header.segment_data_size);
      if (!end.has_value() || *end > file_size) {
        return Invalid(absl::StrCat(
            "the extended header's segment data (", *header.segment_data_size, " bytes from byte ",
            header.segment_base_offset, ") runs past the end of the file (", file_size, " bytes)"));
      }
    }
    program_.program_size = header.program_size;
    program_.extended_header = header;
    return absl::OkStatus();
  }

  absl::Status VerifyFlatBuffer() {
    const uint64_t size = program_.program_size;
    if (size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
      return Invalid(
          absl::StrCat("the program is ", size, " bytes; the format holds less than 2 GiB"));
    }
    // A table takes at least 4 bytes, so a program without shared tables has fewer than
    // size / 4; the bound keeps the verifier's work linear in the size even for hostile sharing.
    const auto max_tables =
        static_cast<flatbuffers::uoffset_t>(std::max<uint64_t>(size / 4, uint64_t{1} << 16));
    flatbuffers::Verifier verifier(bytes_.data(), static_cast<size_t>(size), kMaxDepth, max_tables);
    if (!fb::VerifyProgramBuffer(verifier)) {
      const std::optional<std::string> at = internal::pte::LocateVerifierFailure(
          bytes_.first(static_cast<size_t>(size)), kMaxDepth, max_tables);
      if (!at.has_value()) {
        return Invalid(absl::StrCat(
            "the program is malformed: the FlatBuffers verifier rejected its ", size,
            " bytes, though each of its parts passes on its own: its tables nest deeper than ",
            kMaxDepth, " or number more than ", max_tables,
            ", or a scalar field of its Program table is misaligned"));
      }
      return Invalid(
          absl::StrCat("the program is malformed: the FlatBuffers verifier rejected its ", size,
                       " bytes at ", *at,
                       " (an offset or length there points outside them, or a field "
                       "is misaligned)"));
    }
    root_ = fb::GetProgram(bytes_.data());
    program_.version = root_->version();
    return absl::OkStatus();
  }

  // Segments lie after the FlatBuffer, at the extended header's segment_base_offset + offset.
  absl::Status ReadSegments() {
    const auto* segments = root_->segments();
    const std::optional<EtExtendedHeader>& header = program_.extended_header;
    const uint64_t base = header.has_value() ? header->segment_base_offset : 0;
    std::optional<uint64_t> limit;  // the end of the segment data, when the header says it
    if (header.has_value() && header->segment_data_size.value_or(0) != 0) {
      limit = base + *header->segment_data_size;  // checked against the file size
    }
    program_.segments.reserve(Len(segments));
    for (size_t i = 0; i < Len(segments); ++i) {
      EtSegment segment;
      segment.offset = segments->Get(i)->offset();
      segment.size = segments->Get(i)->size();
      if (segment.size != 0) {
        if (base == 0) {
          return Invalid(absl::StrCat(
              "segment ", i, " holds ", segment.size, " bytes, but ",
              header.has_value() ? "the extended header's segment_base_offset is 0 (no segments)"
                                 : "the file has no extended header to say where segments "
                                   "start"));
        }
        const std::optional<uint64_t> start = Add(base, segment.offset);
        const std::optional<uint64_t> end =
            start.has_value() ? Add(*start, segment.size) : std::nullopt;
        const uint64_t last = limit.value_or(bytes_.size());
        if (!end.has_value() || *end > last) {
          return Invalid(
              absl::StrCat("segment ", i, " (", segment.size, " bytes at offset ", segment.offset,
                           " from the segment base ", base, ") runs past the end of the ",
                           limit.has_value() ? "segment data" : "file", " (byte ", last, ")"));
        }
        segment.file_offset = *start;
        segment.bytes =
            bytes_.subspan(static_cast<size_t>(*start), static_cast<size_t>(segment.size));
      }
      program_.segments.push_back(segment);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<EtSubsegments> ReadSubsegments(absl::string_view what,
                                                const fb::SubsegmentOffsets& s) {
    if (!Aligned8(s.offsets())) {
      return Invalid(absl::StrCat(what, ": the offsets are not 8-byte aligned"));
    }
    if (s.segment_index() >= program_.segments.size()) {
      return Invalid(absl::StrCat(what, " is segment ", s.segment_index(), ", but the program has ",
                                  program_.segments.size(), " segments"));
    }
    if (!budget_.SpendEntries(Len(s.offsets()))) {
      return Invalid(absl::StrCat(what, ": ", OverCopyBudget(Len(s.offsets()), "offsets")));
    }
    EtSubsegments out;
    out.segment_index = s.segment_index();
    if (s.offsets() != nullptr) out.offsets.assign(s.offsets()->begin(), s.offsets()->end());
    return out;
  }

  // Constants are in the constant segment when it lists more than its reserved entry 0, else in
  // the legacy constant_buffer; never in both.
  absl::Status ReadSubsegmentTables() {
    program_.constant_buffer_count = Len(root_->constant_buffer());
    const fb::SubsegmentOffsets* constants = root_->constant_segment();
    if (constants != nullptr && Len(constants->offsets()) > 1) {
      if (program_.constant_buffer_count != 0) {
        return Invalid(
            absl::StrCat("the program keeps constants both in constant_buffer (",
                         program_.constant_buffer_count, " entries) and in a constant segment (",
                         Len(constants->offsets()), " offsets); ExecuTorch uses one or the other"));
      }
      FERRY_ASSIGN_OR_RETURN(EtSubsegments sub,
                             ReadSubsegments("the constant segment", *constants));
      program_.constant_segment = std::move(sub);
    }
    const auto* mutable_segments = root_->mutable_data_segments();
    for (size_t i = 0; i < Len(mutable_segments); ++i) {
      FERRY_ASSIGN_OR_RETURN(
          EtSubsegments sub,
          ReadSubsegments(absl::StrCat("mutable data segment ", i), *mutable_segments->Get(i)));
      program_.mutable_data_segments.push_back(std::move(sub));
    }
    return absl::OkStatus();
  }

  absl::Status ReadNamedData() {
    const auto* named = root_->named_data();
    for (size_t i = 0; i < Len(named); ++i) {
      const fb::NamedData* entry = named->Get(i);
      const absl::string_view key = View(entry->key());
      if (key.empty()) return Invalid(absl::StrCat("named data ", i, " has no key"));
      const uint32_t segment = entry->segment_index();
      if (segment >= program_.segments.size()) {
        return Invalid(absl::StrCat("named data ", i, " (", Quoted(key), ") is segment ", segment,
                                    ", but the program has ", program_.segments.size(),
                                    " segments"));
      }
      if (!budget_.SpendBytes(key.size())) {
        return Invalid(absl::StrCat("named data ", i, ": ", OverCopyBudget(key.size(), "bytes")));
      }
      program_.named_data.push_back({std::string(key), segment, program_.segments[segment].bytes});
    }
    return absl::OkStatus();
  }

  absl::Status ReadMethods() {
    const auto* plans = root_->execution_plan();
    if (Len(plans) == 0) {
      return Invalid("the program has no methods (its execution_plan is empty)");
    }
    // What the values and instructions of every method become, here and in the import (a
    // ValueDef per value and a NodeDef per instruction), before any is read.
    ReadMemory need;
    for (const fb::ExecutionPlan* plan : *plans) {
      size_t instructions = 0;
      for (size_t c = 0; c < Len(plan->chains()); ++c) {
        instructions += Len(plan->chains()->Get(c)->instructions());
      }
      need.Add(Len(plan->values()), sizeof(EtValue) + sizeof(ValueDef), instructions,
               sizeof(EtInstruction) + sizeof(NodeDef));
    }
    FERRY_RETURN_IF_ERROR(CheckReadMemory(need, memory_limit_));
    const ProgramContext context{bytes_, root_, &program_};
    absl::flat_hash_set<absl::string_view> names;
    program_.methods.reserve(Len(plans));
    for (size_t m = 0; m < Len(plans); ++m) {
      const fb::ExecutionPlan* plan = plans->Get(m);
      const absl::string_view name = View(plan->name());
      if (name.empty()) return Invalid(absl::StrCat("method ", m, " has no name"));
      if (!names.insert(name).second) {
        return Invalid(absl::StrCat("method ", Quoted(name), " is defined more than once"));
      }
      FERRY_ASSIGN_OR_RETURN(EtMethod method,
                             internal::pte::ReadMethod(
                                 context, *plan, absl::StrCat("method ", Quoted(name)), &budget_));
      program_.methods.push_back(std::move(method));
    }
    return absl::OkStatus();
  }

  const absl::Span<const uint8_t> bytes_;
  const size_t memory_limit_;
  CopyBudget budget_;
  const fb::Program* root_ = nullptr;
  EtProgram program_;
};

}  // namespace

std::vector<ExporterArena> EtExporterArenas(const EtMethod& method) {
  std::vector<ExporterArena> arenas;
  for (size_t id = 1; id < method.non_const_buffer_sizes.size(); ++id) {
    ExporterArena arena;
    arena.memory_id = static_cast<uint32_t>(id);
    arena.declared_bytes = method.non_const_buffer_sizes[id];
    arenas.push_back(arena);
  }
  for (const EtBufferDevice& d : method.non_const_buffer_devices) {
    if (d.buffer_idx == 0 || d.buffer_idx > arenas.size()) continue;  // the reader refuses these
    if (std::optional<Device> device = EtDevice(d.device_type, d.device_index)) {
      arenas[d.buffer_idx - 1].device = *device;
    }
  }
  for (const EtValue& value : method.values) {
    if (value.kind != EtValueKind::kTensor || !value.tensor.allocation.has_value()) continue;
    const EtAllocation& a = *value.tensor.allocation;
    if (a.memory_id == 0 || a.memory_id > arenas.size()) continue;  // the reader refuses these
    ExporterArena& arena = arenas[a.memory_id - 1];
    arena.used_bytes = std::max<int64_t>(arena.used_bytes,
                                         static_cast<int64_t>(a.offset + value.tensor.byte_size));
    ++arena.tensors;
  }
  return arenas;
}

absl::StatusOr<EtProgram> ReadExecuTorchProgram(absl::Span<const uint8_t> bytes,
                                                size_t memory_limit) {
  return ProgramReader(bytes, memory_limit).Run();
}

}  // namespace ferry