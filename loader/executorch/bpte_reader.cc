#include "ferry/loader/executorch/bpte_reader.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/internal/untrusted_bytes.h"
#include "ferry/loader/model/checks.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/bundled_program_generated.h"

namespace ferry {
namespace {

namespace fb = ::ferry::et::bundled::fbs;

static_assert(FLATBUFFERS_LITTLEENDIAN,
              "Ferry reads bundled programs in place on little-endian hosts");

// BundledProgram/method_test_suites/BundledMethodTestSuite/test_cases/BundledMethodTestCase/
// inputs/Value/Tensor/sizes is the deepest path; the margin tolerates new fields.
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
// ExecuTorch's runtime limit on tensor rank (kTensorDimensionLimit).
constexpr size_t kMaxRank = 16;
// The program is read in place: its FlatBuffer needs 8-byte alignment for its scalars, and
// ExecuTorch's writer aligns it to 32.
constexpr uint64_t kProgramAlignment = 16;

using ::ferry::internal::CopyBudget;
using ::ferry::internal::Quoted;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("bundled program: ", what));
}

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

std::string Shape(absl::Span<const int64_t> sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

class BundleReader {
 public:
  explicit BundleReader(absl::Span<const uint8_t> bytes) : bytes_(bytes), budget_(bytes.size()) {}

  absl::StatusOr<EtBundle> Run() {
    FERRY_RETURN_IF_ERROR(Verify());
    const fb::BundledProgram* root = fb::GetBundledProgram(bytes_.data());
    bundle_.version = root->version();
    FERRY_RETURN_IF_ERROR(ReadProgramBytes(root->program()));
    const auto* suites = root->method_test_suites();
    if (!budget_.SpendEntries(Len(suites))) return OverBudget("its test suites");
    bundle_.suites.resize(Len(suites));
    for (size_t s = 0; s < Len(suites); ++s) {
      FERRY_RETURN_IF_ERROR(ReadSuite(s, *suites->Get(static_cast<flatbuffers::uoffset_t>(s))));
    }
    return std::move(bundle_);
  }

 private:
  absl::Status Verify() {
    if (bytes_.size() < 8 || std::memcmp(bytes_.data() + 4, kExecuTorchBundleFileIdentifier, 4)) {
      return Invalid(absl::StrCat("the file identifier (bytes 4..7) is not \"",
                                  kExecuTorchBundleFileIdentifier, "\""));
    }
    if (bytes_.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
      return Invalid(
          absl::StrCat("the file is ", bytes_.size(), " bytes; the format holds less than 2 GiB"));
    }
    // A table takes at least 4 bytes, so a bundle without shared tables has fewer than size / 4;
    // the bound keeps the verifier's work linear in the size even for hostile sharing.
    const auto max_tables =
        static_cast<flatbuffers::uoffset_t>(std::max<size_t>(bytes_.size() / 4, size_t{1} << 16));
    flatbuffers::Verifier verifier(bytes_.data(), bytes_.size(), kMaxDepth, max_tables);
    if (!fb::VerifyBundledProgramBuffer(verifier)) {
      return Invalid(absl::StrCat(
          "the FlatBuffers verifier rejected its ", bytes_.size(),
          " bytes: an offset or length points outside them, a field is misaligned, or its "
          "tables nest deeper than ",
          kMaxDepth, " or number more than ", max_tables));
    }
    return absl::OkStatus();
  }

  absl::Status ReadProgramBytes(const flatbuffers::Vector<uint8_t>* program) {
    if (program == nullptr || program->size() == 0) {
      return Invalid("it holds no program (its program field is missing or empty)");
    }
    bundle_.program_offset = static_cast<uint64_t>(program->data() - bytes_.data());
    if (bundle_.program_offset % kProgramAlignment != 0) {
      return Invalid(absl::StrCat("its program starts at byte ", bundle_.program_offset,
                                  ", not a multiple of ", kProgramAlignment,
                                  " (ExecuTorch's writer aligns it to 32 bytes)"));
    }
    bundle_.program = absl::MakeConstSpan(program->data(), program->size());
    return absl::OkStatus();
  }

  absl::Status ReadSuite(size_t index, const fb::BundledMethodTestSuite& in) {
    TestSuite& suite = bundle_.suites[index];
    const flatbuffers::String* name = in.method_name();
    where_suite_ = absl::StrCat("suite ", index);
    if (name == nullptr) return Invalid(absl::StrCat(where_suite_, " names no method"));
    if (!budget_.SpendBytes(name->size())) return OverBudget("its method names");
    suite.method_name.assign(name->c_str(), name->size());
    absl::StrAppend(&where_suite_, " (method ", Quoted(suite.method_name), ")");
    const auto* cases = in.test_cases();
    if (!budget_.SpendEntries(Len(cases))) return OverBudget("its test cases");
    suite.cases.resize(Len(cases));
    for (size_t c = 0; c < Len(cases); ++c) {
      const fb::BundledMethodTestCase& tc = *cases->Get(static_cast<flatbuffers::uoffset_t>(c));
      FERRY_RETURN_IF_ERROR(ReadValues(c, "input", tc.inputs(), suite.cases[c].inputs));
      FERRY_RETURN_IF_ERROR(
          ReadValues(c, "expected output", tc.expected_outputs(), suite.cases[c].expected_outputs));
    }
    return absl::OkStatus();
  }

  absl::Status ReadValues(size_t case_index, absl::string_view what,
                          const flatbuffers::Vector<flatbuffers::Offset<fb::Value>>* in,
                          std::vector<TestValue>& out) {
    if (!budget_.SpendEntries(Len(in))) return OverBudget("its test values");
    out.resize(Len(in));
    for (size_t i = 0; i < Len(in); ++i) {
      auto where = [&] {
        return absl::StrCat(where_suite_, ", case ", case_index, ", ", what, " ", i);
      };
      const fb::Value& value = *in->Get(static_cast<flatbuffers::uoffset_t>(i));
      TestValue& v = out[i];
      switch (value.val_type()) {
        case fb::ValueUnion::Int:
          if (value.val_as_Int() == nullptr) break;
          v.scalar = Scalar::Int(value.val_as_Int()->int_val());
          continue;
        case fb::ValueUnion::Bool:
          if (value.val_as_Bool() == nullptr) break;
          v.scalar = Scalar::Bool(value.val_as_Bool()->bool_val());
          continue;
        case fb::ValueUnion::Double:
          if (value.val_as_Double() == nullptr) break;
          v.scalar = Scalar::Double(value.val_as_Double()->double_val());
          continue;
        case fb::ValueUnion::Tensor:
          if (value.val_as_Tensor() == nullptr) break;
          v.is_tensor = true;
          FERRY_RETURN_IF_ERROR(ReadTensor(where, *value.val_as_Tensor(), v));
          continue;
        default:
          return Invalid(absl::StrCat(where(), ": value type ", static_cast<int>(value.val_type()),
                                      " is none of tensor (1), int (2), bool (3) and double (4)"));
      }
      return Invalid(
          absl::StrCat(where(), ": its ", fb::EnumNameValueUnion(value.val_type()), " is missing"));
    }
    return absl::OkStatus();
  }

  template <typename Where>
  absl::Status ReadTensor(const Where& where, const fb::Tensor& t, TestValue& v) {
    const std::optional<DType> dtype = EtFerryDType(t.scalar_type());
    if (!dtype.has_value()) {
      return Invalid(absl::StrCat(where(), ": a tensor of ", EtScalarTypeName(t.scalar_type()),
                                  ", which Ferry does not have"));
    }
    v.dtype = *dtype;
    const auto* sizes = t.sizes();
    if (Len(sizes) > kMaxRank) {
      return Invalid(
          absl::StrCat(where(), ": a tensor of rank ", Len(sizes), ", above ", kMaxRank));
    }
    if (!budget_.SpendEntries(Len(sizes) + Len(t.dim_order()))) return OverBudget("its sizes");
    for (size_t d = 0; d < Len(sizes); ++d) v.sizes.push_back(sizes->Get(d));
    const std::optional<size_t> bytes = CheckedByteSize(*dtype, v.sizes);
    if (!bytes.has_value()) {
      return Invalid(absl::StrCat(where(), ": sizes ", Shape(v.sizes),
                                  " are negative or their byte size overflows"));
    }
    if (const auto* order = t.dim_order(); order != nullptr) {
      v.dim_order.assign(order->begin(), order->end());
      if (!IsDimOrder<uint8_t>(v.dim_order, v.sizes.size())) {
        return Invalid(absl::StrCat(where(), ": dim order (", absl::StrJoin(v.dim_order, ", "),
                                    ") is not a permutation of 0..", v.sizes.size(), "-1"));
      }
    }
    const size_t have = Len(t.data());
    if (have != *bytes) {
      return Invalid(absl::StrCat(where(), ": a ", DTypeName(*dtype), " tensor of sizes ",
                                  Shape(v.sizes), " takes ", *bytes, " bytes, but its data has ",
                                  have));
    }
    if (have > 0) v.data = absl::MakeConstSpan(t.data()->data(), have);
    return absl::OkStatus();
  }

  absl::Status OverBudget(absl::string_view what) {
    return Invalid(absl::StrCat(what, " take more entries than a file of ", bytes_.size(),
                                " bytes can hold without sharing its tables"));
  }

  absl::Span<const uint8_t> bytes_;
  CopyBudget budget_;
  EtBundle bundle_;
  std::string where_suite_;
};

}  // namespace

absl::StatusOr<EtBundle> ReadExecuTorchBundle(absl::Span<const uint8_t> bytes) {
  return BundleReader(bytes).Run();
}

}  // namespace ferry
