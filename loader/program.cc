#include "ferry/loader/program.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/huge_pages.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/bpte_reader.h"
#include "ferry/loader/executorch/importer.h"
#include "ferry/loader/executorch/ptd_reader.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/ferry/internal/reader.h"
#include "ferry/loader/ferry/internal/writer.h"
#include "ferry/loader/model/checks.h"
#include "ferry/loader/program_mapping.h"
#include "flatbuffers/idl.h"

namespace ferry {
namespace {

// Frees a program's or data file's bytes: a mapping on huge pages for large ones
// (base/huge_pages.h: reading them faults once per 2 MiB), else heap memory.
struct BytesDeleter {
  size_t mapped_bytes = 0;  // 0: heap memory
  void operator()(uint8_t* p) const {
    if (mapped_bytes != 0) {
      internal::UnmapLargeTable(p, mapped_bytes);
    } else {
      std::free(p);
    }
  }
};
using AlignedBytes = std::unique_ptr<uint8_t, BytesDeleter>;

// `size` bytes at a 64-byte aligned address, so that data segments that are aligned from the start
// of the program are aligned in memory too.
absl::StatusOr<AlignedBytes> AllocateAligned(size_t size) {
  const size_t a = internal::kSegmentAlignment;
  const size_t rounded = size == 0 ? a : (size + a - 1) / a * a;
  if (internal::MapsLargeTable(rounded)) {
    try {
      return AlignedBytes(static_cast<uint8_t*>(internal::MapLargeTable(rounded)),
                          BytesDeleter{rounded});
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " bytes for the program"));
    }
  }
  AlignedBytes bytes(static_cast<uint8_t*>(std::aligned_alloc(a, rounded)));
  if (bytes == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", size, " bytes for the program"));
  }
  return bytes;
}

absl::StatusOr<AlignedBytes> CopyAligned(absl::Span<const uint8_t> bytes) {
  FERRY_ASSIGN_OR_RETURN(AlignedBytes copy, AllocateAligned(bytes.size()));
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  return copy;
}

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r: returns the message, which may or may not be in `buf`.
  return strerror_r(err, buf, sizeof(buf));
}

absl::Status OpenError(const std::string& path, int err) {
  std::string message = absl::StrCat("cannot open program \"", path, "\": ", ErrnoText(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InvalidArgumentError(message);
  }
}

// Closes a file descriptor on every path out of Load.
class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() { ::close(fd_); }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

 private:
  int fd_;
};

absl::Status ReadAll(int fd, const std::string& path, size_t size, uint8_t* out) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read program \"", path, "\": ", ErrnoText(errno)));
    }
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("program \"", path, "\" shrank while it was read"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads the data file at `path` into 64-byte aligned memory; returns its size.
absl::StatusOr<size_t> ReadDataFile(const std::string& path, AlignedBytes& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message =
        absl::StrCat("cannot open data file \"", path, "\": ", ErrnoText(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  FileCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load data file \"", path, "\": it is not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("data file \"", path, "\" is empty (0 bytes)"));
  }
  FERRY_ASSIGN_OR_RETURN(out, AllocateAligned(size));
  if (absl::Status s = ReadAll(fd, path, size, out.get()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("data file: ", s.message()));
  }
  return size;
}

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("program \"", path, "\": ", status.message()));
}

// A parser holding Ferry's schema; `strict_json` for output.
absl::Status MakeParser(flatbuffers::Parser& parser) {
  if (!parser.Parse(internal::kProgramSchemaText)) {
    return absl::InternalError(absl::StrCat("the built-in schema does not parse: ", parser.error_));
  }
  return absl::OkStatus();
}

}  // namespace

// ProgramLoadOptions::verify_methods when unset: FERRY_VERIFY_METHODS, else the build type.
static bool VerifyMethodsByDefault() {
  static const bool verify = [] {
    if (const char* env = std::getenv("FERRY_VERIFY_METHODS"); env != nullptr) {
      return std::strcmp(env, "0") != 0;
    }
#ifdef NDEBUG
    return false;
#else
    return true;
#endif
  }();
  return verify;
}

struct Program::Storage {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::unique_ptr<ProgramMapping> mapping;  // the file's mapping, when mapped
  AlignedBytes owned;
  // An ExecuTorch program's constants, copied to 64-byte alignment by the import.
  std::unique_ptr<uint8_t, EtImport::FreeDeleter> imported_constants;
};

Program::Program(std::unique_ptr<Storage> storage, std::vector<MethodDef> methods,
                 std::vector<std::pair<std::string, absl::Status>> refused,
                 std::vector<std::string> order)
    : storage_(std::move(storage)),
      methods_(std::move(methods)),
      refused_(std::move(refused)),
      order_(std::move(order)) {
  method_index_.reserve(methods_.size());
  for (size_t i = 0; i < methods_.size(); ++i) method_index_.try_emplace(methods_[i].name, i);
  for (size_t i = 0; i < refused_.size(); ++i) refused_index_.try_emplace(refused_[i].first, i);
  if (order_.empty()) {
    order_.reserve(methods_.size());
    for (const MethodDef& m : methods_) order_.push_back(m.name);
  }
}

Program::~Program() = default;

absl::StatusOr<std::unique_ptr<Program>> Program::Create(std::unique_ptr<Storage> storage,
                                                         const absl::Span<const uint8_t>* data,
                                                         size_t memory_limit, bool verify) {
  if (storage->size >= 8 && std::memcmp(storage->data + 4, kExecuTorchFileIdentifier, 4) == 0) {
    return CreateFromExecuTorch(std::move(storage), data, memory_limit, verify);
  }
  if (storage->size >= 8 &&
      std::memcmp(storage->data + 4, kExecuTorchBundleFileIdentifier, 4) == 0) {
    return CreateFromBundle(std::move(storage), data, memory_limit, verify);
  }
  if (data != nullptr) {
    return absl::InvalidArgumentError(
        "a data file (.ptd) was given, but only ExecuTorch programs (.pte) use one");
  }
  // A file of neither format is named against both; Ferry's reader checks the rest.
  if (storage->size >= 8 && std::memcmp(storage->data + 4, kProgramFileIdentifier, 4) != 0) {
    const absl::string_view id(reinterpret_cast<const char*>(storage->data) + 4, 4);
    if (id == kExecuTorchDataFileIdentifier) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an ExecuTorch data file (.ptd, file identifier \"", kExecuTorchDataFileIdentifier,
          "\"), not a program: give it as the program's data file (--data, "
          "ProgramLoadOptions::data_path)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "not a program Ferry reads: the file identifier (bytes 4..7) is \"", absl::CHexEscape(id),
        "\", expected \"", kProgramFileIdentifier, "\" (a Ferry program), \"",
        kExecuTorchFileIdentifier, "\" (an ExecuTorch program, .pte) or \"",
        kExecuTorchBundleFileIdentifier, "\" (an ExecuTorch bundled program, .bpte)"));
  }
  FERRY_ASSIGN_OR_RETURN(
      std::vector<MethodDef> methods,
      internal::ReadProgram(absl::MakeConstSpan(storage->data, storage->size), {}, memory_limit));
  if (verify) FERRY_RETURN_IF_ERROR(VerifyReaderOutput(methods, "Ferry program reader"));
  for (MethodDef& m : methods) m.mapping = storage->mapping.get();
  return std::unique_ptr<Program>(new Program(std::move(storage), std::move(methods)));
}

absl::StatusOr<std::unique_ptr<Program>> Program::CreateFromExecuTorch(
    std::unique_ptr<Storage> storage, const absl::Span<const uint8_t>* data, size_t memory_limit,
    bool verify) {
  FERRY_ASSIGN_OR_RETURN(
      EtProgram et,
      ReadExecuTorchProgram(absl::MakeConstSpan(storage->data, storage->size), memory_limit));
  std::optional<EtDataFile> data_file;
  if (data != nullptr) {
    absl::StatusOr<EtDataFile> read = ReadExecuTorchDataFile(*data);
    if (!read.ok()) {
      return absl::Status(read.status().code(),
                          absl::StrCat("data file: ", read.status().message()));
    }
    data_file = *std::move(read);
  }
  EtImportOptions import_options;
  import_options.data = data_file.has_value() ? &*data_file : nullptr;
  FERRY_ASSIGN_OR_RETURN(EtImport imported, ImportExecuTorchProgram(et, import_options));
  if (verify) FERRY_RETURN_IF_ERROR(VerifyReaderOutput(imported.methods, "ExecuTorch importer"));
  // The methods point into the copied constants only, never into the file's bytes.
  storage->imported_constants = std::move(imported.constant_data);
  std::vector<std::pair<std::string, absl::Status>> refused;
  for (EtImport::Refused& r : imported.refused) {
    refused.emplace_back(std::move(r.name), std::move(r.status));
  }
  std::unique_ptr<Program> program(new Program(std::move(storage), std::move(imported.methods),
                                               std::move(refused),
                                               std::move(imported.method_order)));
  // Named data views the program's own bytes, which the Program keeps. A data file's blobs
  // (entries without a tensor layout: what delegates store there) are copied; its tensors were
  // imported as constants already. The program's own entry wins a key both have, as in
  // ExecuTorch's merged data map.
  for (const EtNamedData& entry : et.named_data) {
    program->named_data_.AddView(entry.key, entry.bytes);
  }
  if (data_file.has_value()) {
    for (const EtDataEntry& entry : data_file->entries) {
      if (!entry.tensor.has_value()) program->named_data_.AddCopy(entry.key, entry.bytes);
    }
  }
  if (program->named_data_.size() > 0) {
    for (MethodDef& m : program->methods_) m.named_data = &program->named_data_;
  }
  return program;
}

absl::StatusOr<std::unique_ptr<Program>> Program::CreateFromBundle(
    std::unique_ptr<Storage> storage, const absl::Span<const uint8_t>* data, size_t memory_limit,
    bool verify) {
  FERRY_ASSIGN_OR_RETURN(EtBundle bundle,
                         ReadExecuTorchBundle(absl::MakeConstSpan(storage->data, storage->size)));
  const absl::Span<const uint8_t> inner = bundle.program;
  if (inner.size() < 8 || std::memcmp(inner.data() + 4, kExecuTorchFileIdentifier, 4) != 0) {
    const absl::string_view id =
        inner.size() < 8 ? absl::string_view()
                         : absl::string_view(reinterpret_cast<const char*>(inner.data()) + 4, 4);
    return absl::InvalidArgumentError(absl::StrCat(
        "bundled program: the program inside (", inner.size(), " bytes at byte ",
        bundle.program_offset, ") is not an ExecuTorch program: its file identifier is \"",
        absl::CHexEscape(id), "\", expected \"", kExecuTorchFileIdentifier, "\""));
  }
  // The program is read where it lies in the bundle; the storage keeps the whole bundle, which
  // the test cases' tensors point into.
  storage->data = inner.data();
  storage->size = inner.size();
  absl::StatusOr<std::unique_ptr<Program>> program =
      CreateFromExecuTorch(std::move(storage), data, memory_limit, verify);
  if (!program.ok()) {
    return absl::Status(program.status().code(), absl::StrCat("the program inside the bundle: ",
                                                              program.status().message()));
  }
  (*program)->test_suites_ = std::move(bundle.suites);
  return program;
}

absl::StatusOr<std::unique_ptr<Program>> Program::Load(const std::string& path) {
  return Load(path, ProgramLoadOptions{});
}

absl::StatusOr<std::unique_ptr<Program>> Program::Load(const std::string& path,
                                                       const ProgramLoadOptions& options) {
  // The data file is read whole into aligned memory: it is needed during the load only.
  AlignedBytes data_bytes;
  absl::Span<const uint8_t> data;
  if (!options.data_path.empty()) {
    if (absl::EndsWith(path, ".json")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "program \"", path, "\": a data file (.ptd) was given, but only ExecuTorch programs "
          "(.pte) use one"));
    }
    FERRY_ASSIGN_OR_RETURN(size_t data_size, ReadDataFile(options.data_path, data_bytes));
    data = absl::MakeConstSpan(data_bytes.get(), data_size);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  FileCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return OpenError(path, errno);
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load program \"", path, "\": it is a directory"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load program \"", path, "\": it is not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("program \"", path, "\" is empty (0 bytes)"));
  }

  if (absl::EndsWith(path, ".json")) {
    std::string text(size, '\0');
    FERRY_RETURN_IF_ERROR(ReadAll(fd, path, size, reinterpret_cast<uint8_t*>(text.data())));
    absl::StatusOr<std::unique_ptr<Program>> program = FromJson(text);
    if (!program.ok()) return WithPath(path, program.status());
    return program;
  }

  auto storage = std::make_unique<Storage>();
  storage->size = size;
  // Small programs are read: a copy costs little and makes the program independent of the file
  // from then on. Large ones are mapped, so that their constants are never all resident at once.
  if (size >= kProgramMapThresholdBytes) storage->mapping = ProgramMapping::Map(fd, size);
  if (storage->mapping != nullptr) {
    storage->data = storage->mapping->data();
  } else {
    // Small programs, and files that cannot be mapped.
    FERRY_ASSIGN_OR_RETURN(storage->owned, AllocateAligned(size));
    FERRY_RETURN_IF_ERROR(ReadAll(fd, path, size, storage->owned.get()));
    storage->data = storage->owned.get();
  }
  absl::StatusOr<std::unique_ptr<Program>> program =
      Create(std::move(storage), options.data_path.empty() ? nullptr : &data,
             options.memory_limit_bytes, options.verify_methods.value_or(VerifyMethodsByDefault()));
  if (!program.ok()) {
    if (options.data_path.empty()) return WithPath(path, program.status());
    return absl::Status(program.status().code(),
                        absl::StrCat("program \"", path, "\" with data file \"", options.data_path,
                                     "\": ", program.status().message()));
  }
  return program;
}

absl::StatusOr<std::unique_ptr<Program>> Program::FromBytes(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("the program is empty (0 bytes)");
  auto storage = std::make_unique<Storage>();
  FERRY_ASSIGN_OR_RETURN(storage->owned, CopyAligned(bytes));
  storage->data = storage->owned.get();
  storage->size = bytes.size();
  return Create(std::move(storage), nullptr, SIZE_MAX, VerifyMethodsByDefault());
}

absl::StatusOr<std::unique_ptr<Program>> Program::FromBytes(absl::Span<const uint8_t> bytes,
                                                            absl::Span<const uint8_t> data) {
  if (bytes.empty()) return absl::InvalidArgumentError("the program is empty (0 bytes)");
  auto storage = std::make_unique<Storage>();
  FERRY_ASSIGN_OR_RETURN(storage->owned, CopyAligned(bytes));
  storage->data = storage->owned.get();
  storage->size = bytes.size();
  // The data file's FlatBuffer is read in place, so it needs the alignment of its scalars.
  FERRY_ASSIGN_OR_RETURN(AlignedBytes data_copy, CopyAligned(data));
  const absl::Span<const uint8_t> aligned(data_copy.get(), data.size());
  return Create(std::move(storage), &aligned, SIZE_MAX, VerifyMethodsByDefault());
}

absl::StatusOr<std::unique_ptr<Program>> Program::FromJson(absl::string_view json) {
  flatbuffers::Parser parser;
  FERRY_RETURN_IF_ERROR(MakeParser(parser));
  const std::string text(json);  // the parser needs a terminating NUL
  if (!parser.Parse(text.c_str())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program's JSON does not parse: ", parser.error_));
  }
  if (parser.builder_.GetSize() == 0) {
    return absl::InvalidArgumentError("the program's JSON holds no program");
  }
  FERRY_ASSIGN_OR_RETURN(AlignedBytes parsed,
                         CopyAligned(absl::MakeConstSpan(parser.builder_.GetBufferPointer(),
                                                         parser.builder_.GetSize())));
  const absl::Span<const uint8_t> span(parsed.get(), parser.builder_.GetSize());
  // The parser does not align data segments (FlatBuffers' force_align stops at 32 bytes), so the
  // parsed program is checked without alignment, re-packed by Ferry's writer and loaded from that.
  internal::VerifyOptions options;
  options.check_alignment = false;
  FERRY_ASSIGN_OR_RETURN(std::vector<MethodDef> methods,
                         internal::ReadProgram(span, options, SIZE_MAX));
  std::vector<const MethodDef*> pointers;
  for (const MethodDef& m : methods) pointers.push_back(&m);
  FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> packed, internal::SerializeProgram(pointers));
  return FromBytes(packed);
}

absl::StatusOr<std::string> Program::ToJson(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("the program is empty (0 bytes)");
  FERRY_ASSIGN_OR_RETURN(AlignedBytes copy, CopyAligned(bytes));
  const absl::Span<const uint8_t> span(copy.get(), bytes.size());
  // Text generation walks the program without checks of its own, so it is verified first; the
  // alignment does not matter for the text.
  internal::VerifyOptions options;
  options.check_alignment = false;
  FERRY_RETURN_IF_ERROR(internal::VerifyProgram(span, options).status());
  flatbuffers::Parser parser;
  parser.opts.strict_json = true;
  FERRY_RETURN_IF_ERROR(MakeParser(parser));
  std::string json;
  if (!flatbuffers::GenerateText(parser, span.data(), &json)) {
    return absl::InvalidArgumentError(
        "the program cannot be written as JSON (a string in it is not valid UTF-8)");
  }
  return json;
}

std::vector<std::string> Program::method_names() const { return order_; }

absl::StatusOr<const MethodDef*> Program::method(absl::string_view name) const {
  if (auto it = method_index_.find(name); it != method_index_.end()) return &methods_[it->second];
  if (auto it = refused_index_.find(name); it != refused_index_.end()) {
    return refused_[it->second].second;
  }
  return absl::NotFoundError(absl::StrCat("the program has no method \"", name,
                                          "\"; its methods are: \"",
                                          absl::StrJoin(method_names(), "\", \""), "\""));
}

absl::Span<const TestSuite> Program::test_suites() const { return test_suites_; }

absl::Span<const uint8_t> Program::bytes() const {
  return absl::MakeConstSpan(storage_->data, storage_->size);
}

}  // namespace ferry
