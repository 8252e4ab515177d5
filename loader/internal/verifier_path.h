// Where a FlatBuffers verifier said no: the verifier flatc generates answers yes or no for a
// whole buffer. After a no, a reader walks its schema's tables with a VerifierPath, in the
// verifier's own order, checking each field on its own (its offset, then its vector, string or
// table) with a fresh verifier of the same limits, and descends into the first part that fails,
// building a path of the schema's field names:
//
//   VerifierPath at(bytes, kMaxDepth, max_tables);
//   std::optional<std::string> where = at.Tables(root, fbs::Program::VT_METHODS, "methods",
//                                                &fbs::Program::methods, &MethodInside);
//   // "methods[1] (method \"decode\").nodes[4].args"
//
// Every accessor is called only after the check that makes it safe has passed, as the generated
// verifier does, so a walk reads only inside `bytes`. A walk that finds no failing part (each part
// passes alone) means the whole failed on the verifier's limits: depth or table count.
// Thread safety: const; allocates only the strings it returns.
#ifndef FERRY_LOADER_INTERNAL_VERIFIER_PATH_H_
#define FERRY_LOADER_INTERNAL_VERIFIER_PATH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "flatbuffers/flatbuffers.h"

namespace ferry::internal {

class VerifierPath {
 public:
  using Where = std::optional<std::string>;  // nullopt: the part passed
  // What a failing table of type T holds that fails: `*label` may describe the table itself
  // (" (method \"forward\")"), the result the field inside it (without a leading '.').
  template <typename T>
  using Inside = Where (*)(const VerifierPath& at, const T* table, std::string* label);

  VerifierPath(absl::Span<const uint8_t> bytes, size_t max_depth, size_t max_tables)
      : bytes_(bytes), max_depth_(max_depth), max_tables_(max_tables) {}

  // `check` run on a fresh verifier over the whole buffer.
  template <typename F>
  bool Ok(F check) const {
    flatbuffers::Verifier v(bytes_.data(), bytes_.size(),
                            static_cast<flatbuffers::uoffset_t>(max_depth_),
                            static_cast<flatbuffers::uoffset_t>(max_tables_));
    return check(v);
  }
  bool RootOffset() const {
    return Ok([&](flatbuffers::Verifier& v) { return v.VerifyOffset(size_t{0}) != 0; });
  }
  // Generated tables derive from flatbuffers::Table privately; the table is at the same address.
  template <typename T>
  static const flatbuffers::Table* AsTable(const T* t) {
    return reinterpret_cast<const flatbuffers::Table*>(t);
  }
  template <typename T>
  bool TableStart(const T* t) const {
    return Ok([&](flatbuffers::Verifier& v) { return AsTable(t)->VerifyTableStart(v); });
  }
  template <typename T>
  bool Whole(const T* t) const {
    return Ok([&](flatbuffers::Verifier& v) { return t->Verify(v); });
  }
  template <typename T>
  bool Offset(const T* t, flatbuffers::voffset_t field) const {
    return Ok([&](flatbuffers::Verifier& v) { return AsTable(t)->VerifyOffset(v, field); });
  }
  template <typename Scalar, typename T>
  bool ScalarField(const T* t, flatbuffers::voffset_t field) const {
    return Ok([&](flatbuffers::Verifier& v) {
      return AsTable(t)->template VerifyField<Scalar>(v, field, sizeof(Scalar));
    });
  }

  // A field holding a string or a vector of scalars.
  template <typename P, typename R>
  Where Plain(const P* parent, flatbuffers::voffset_t field, const char* name,
              R (P::*get)() const) const {
    if (!Offset(parent, field)) return absl::StrCat(name, " (its offset)");
    const R value = (parent->*get)();
    bool ok = false;
    if constexpr (std::is_same_v<R, const flatbuffers::String*>) {
      ok = Ok([&](flatbuffers::Verifier& v) { return v.VerifyString(value); });
    } else {
      ok = Ok([&](flatbuffers::Verifier& v) { return v.VerifyVector(value); });
    }
    return ok ? Where() : Where(name);
  }

  // A field holding one table; `inside` says where in it, when given.
  template <typename P, typename T>
  Where OneTable(const P* parent, flatbuffers::voffset_t field, const char* name,
                 const T* (P::*get)() const, Inside<T> inside = nullptr) const {
    if (!Offset(parent, field)) return absl::StrCat(name, " (its offset)");
    const T* table = (parent->*get)();
    if (table == nullptr || Whole(table)) return std::nullopt;
    return Describe(name, table, inside);
  }

  // A field holding a vector of tables: the first element that fails alone, and where inside it
  // when `inside` can say.
  template <typename P, typename T>
  Where Tables(const P* parent, flatbuffers::voffset_t field, const char* name,
               const flatbuffers::Vector<flatbuffers::Offset<T>>* (P::*get)() const,
               Inside<T> inside = nullptr) const {
    if (!Offset(parent, field)) return absl::StrCat(name, " (its offset)");
    const flatbuffers::Vector<flatbuffers::Offset<T>>* vec = (parent->*get)();
    if (!Ok([&](flatbuffers::Verifier& v) { return v.VerifyVector(vec); })) return Where(name);
    if (vec == nullptr) return std::nullopt;
    for (flatbuffers::uoffset_t i = 0; i < vec->size(); ++i) {
      const T* element = vec->Get(i);
      if (!Whole(element)) return Describe(absl::StrCat(name, "[", i, "]"), element, inside);
    }
    return std::nullopt;
  }

  // " (Tensor)": the member type of a union whose type byte can be read, else "".
  template <typename T, typename E>
  std::string UnionLabel(const T* table, flatbuffers::voffset_t type_field,
                         E (T::*get_type)() const, const char* (*name_of)(E)) const {
    if (!ScalarField<uint8_t>(table, type_field)) return "";
    const char* name = name_of((table->*get_type)());
    return name == nullptr || *name == '\0' ? "" : absl::StrCat(" (", name, ")");
  }

 private:
  template <typename T>
  std::string Describe(std::string at, const T* table, Inside<T> inside) const {
    if (inside == nullptr || !TableStart(table)) return at;
    std::string label;
    const Where deeper = inside(*this, table, &label);
    absl::StrAppend(&at, label);
    if (deeper.has_value()) absl::StrAppend(&at, ".", *deeper);
    return at;
  }

  absl::Span<const uint8_t> bytes_;
  size_t max_depth_;
  size_t max_tables_;
};

}  // namespace ferry::internal

#endif  // FERRY_LOADER_INTERNAL_VERIFIER_PATH_H_
