#include "ferry/loader/ferry/internal/table_verifier.h"

#include <cstddef>
#include <cstdint>

#include "ferry/loader/file_identifiers.h"
#include "flatbuffers/flatbuffers.h"

namespace ferry::internal {
namespace {

using flatbuffers::soffset_t;
using flatbuffers::uoffset_t;
using flatbuffers::voffset_t;

// Field ids (vtable offsets) of loader/ferry/schema/program.fbs: 4 + 2 * the field's index.
constexpr voffset_t Field(int index) { return static_cast<voffset_t>(4 + 2 * index); }

// A table whose start and vtable have been checked.
struct TableAt {
  size_t pos = 0;       // the table's position in the buffer
  size_t vtable = 0;    // its vtable's position
  voffset_t vsize = 0;  // the vtable's size in bytes
};

class TableVerifier {
 public:
  TableVerifier(const uint8_t* buf, size_t size, size_t max_tables)
      : buf_(buf), size_(size), max_tables_(max_tables) {}

  bool Buffer() {
    // From here on size_ > 8, which the fixed-length checks (InFixed) rely on.
    if (size_ < FLATBUFFERS_MIN_BUFFER_SIZE) return false;
    if (size_ < 2 * sizeof(uoffset_t) ||
        !flatbuffers::BufferHasIdentifier(buf_, kProgramFileIdentifier)) {
      return false;
    }
    size_t root = 0;
    return Offset(0, &root) && Program(root);
  }

 private:
  // [elem, elem + len) lies inside the buffer (the generated verifier's Verify(elem, len)).
  bool In(size_t elem, size_t len) const { return len < size_ && elem <= size_ - len; }
  // The same for a length known at compile time, below the least size Buffer lets through.
  template <size_t kLen>
  bool InFixed(size_t elem) const {
    static_assert(kLen < FLATBUFFERS_MIN_BUFFER_SIZE);
    return elem <= size_ - kLen;
  }
  template <typename T>
  bool InAligned(size_t elem) const {
    return (elem & (sizeof(T) - 1)) == 0 && InFixed<sizeof(T)>(elem);
  }
  template <typename T>
  T Read(size_t at) const {
    return flatbuffers::ReadScalar<T>(buf_ + at);
  }

  // The uoffset at `at`: aligned, inside, non-zero, forward, landing inside. `*target` is where.
  bool Offset(size_t at, size_t* target) const {
    if (!InAligned<uoffset_t>(at)) return false;
    const uoffset_t o = Read<uoffset_t>(at);
    if (o == 0 || static_cast<soffset_t>(o) < 0 || !InFixed<1>(at + o)) return false;
    *target = at + o;
    return true;
  }

  // A table at `pos`: its soffset aligned and inside, its vtable aligned, inside and of even size;
  // counted against max_tables.
  bool Start(size_t pos, TableAt* t) {
    if (++tables_ > max_tables_) return false;
    if (!InAligned<soffset_t>(pos)) return false;
    const size_t vtable = pos - static_cast<size_t>(Read<soffset_t>(pos));
    if (!InAligned<voffset_t>(vtable)) return false;
    const voffset_t vsize = Read<voffset_t>(vtable);
    if ((vsize & 1) != 0 || !In(vtable, vsize)) return false;
    t->pos = pos;
    t->vtable = vtable;
    t->vsize = vsize;
    return true;
  }

  // The field's offset in its table, 0 when absent (a field past the vtable's end is absent).
  voffset_t FieldOffset(const TableAt& t, voffset_t field) const {
    return field < t.vsize ? Read<voffset_t>(t.vtable + field) : 0;
  }

  // A scalar field of kSize bytes aligned to kAlign, when present.
  template <size_t kSize, size_t kAlign>
  bool Scalar(const TableAt& t, voffset_t field) const {
    const voffset_t fo = FieldOffset(t, field);
    if (fo == 0) return true;
    const size_t at = t.pos + fo;
    return (at & (kAlign - 1)) == 0 && InFixed<kSize>(at);
  }
  // The field's value as a uint8_t (0 when absent); Scalar must have passed.
  uint8_t U8(const TableAt& t, voffset_t field) const {
    const voffset_t fo = FieldOffset(t, field);
    return fo == 0 ? 0 : Read<uint8_t>(t.pos + fo);
  }

  // An offset field: `*target` is where it points, 0 when the field is absent.
  bool Ref(const TableAt& t, voffset_t field, size_t* target) const {
    *target = 0;
    const voffset_t fo = FieldOffset(t, field);
    return fo == 0 || Offset(t.pos + fo, target);
  }

  // A vector of kElem-byte elements at `v`: its length aligned and inside, its bytes inside.
  template <size_t kElem>
  bool VectorAt(size_t v, size_t* length) const {
    if (!InAligned<uoffset_t>(v)) return false;
    const uoffset_t n = Read<uoffset_t>(v);
    if (n >= FLATBUFFERS_MAX_BUFFER_SIZE / kElem) return false;
    if (!In(v, sizeof(uoffset_t) + kElem * n)) return false;
    *length = n;
    return true;
  }
  // A vector field of kElem-byte elements (absent passes).
  template <size_t kElem>
  bool Vector(const TableAt& t, voffset_t field) const {
    size_t v = 0, n = 0;
    return Ref(t, field, &v) && (v == 0 || VectorAt<kElem>(v, &n));
  }
  // A string field: a vector of bytes followed by a zero byte.
  bool String(const TableAt& t, voffset_t field) const {
    size_t s = 0, n = 0;
    if (!Ref(t, field, &s)) return false;
    if (s == 0) return true;
    if (!VectorAt<1>(s, &n)) return false;
    const size_t end = s + sizeof(uoffset_t) + n;
    return InFixed<1>(end) && buf_[end] == 0;
  }
  // A vector-of-tables field, each element checked by `table(position)`.
  template <typename Check>
  bool Tables(const TableAt& t, voffset_t field, Check table) {
    size_t v = 0, n = 0;
    if (!Ref(t, field, &v)) return false;
    if (v == 0) return true;
    if (!VectorAt<sizeof(uoffset_t)>(v, &n)) return false;
    for (size_t i = 0; i < n; ++i) {
      const size_t elem = v + sizeof(uoffset_t) + i * sizeof(uoffset_t);
      if (!table(elem + Read<uoffset_t>(elem))) return false;
    }
    return true;
  }
  // A table field (absent passes).
  template <typename Check>
  bool Sub(const TableAt& t, voffset_t field, Check table) {
    size_t at = 0;
    return Ref(t, field, &at) && (at == 0 || table(at));
  }

  // One function per table of the schema, in its field order.
  bool Program(size_t pos) {
    TableAt t;
    return Start(pos, &t) && Scalar<4, 4>(t, Field(0)) &&                  // version: uint
           Tables(t, Field(1), [this](size_t p) { return Method(p); }) &&  // methods
           Tables(t, Field(2), [this](size_t p) { return DataSegment(p); });
  }
  bool Method(size_t pos) {
    TableAt t;
    return Start(pos, &t) && String(t, Field(0)) &&                       // name
           Tables(t, Field(1), [this](size_t p) { return Value(p); }) &&  // values
           Tables(t, Field(2), [this](size_t p) { return Node(p); }) &&   // nodes
           Vector<4>(t, Field(3)) && Vector<4>(t, Field(4));              // inputs, outputs: [int]
  }
  bool Value(size_t pos) {
    TableAt t;
    return Start(pos, &t) && String(t, Field(0)) &&                          // name
           Scalar<1, 1>(t, Field(1)) && Scalar<1, 1>(t, Field(2)) &&         // kind, dtype
           Vector<8>(t, Field(3)) && Vector<4>(t, Field(4)) &&               // sizes, dim_order
           Sub(t, Field(5), [this](size_t p) { return ScalarValue(p); }) &&  // scalar
           Scalar<4, 4>(t, Field(6)) && Scalar<1, 1>(t, Field(7));           // data_segment, shared
  }
  bool ScalarValue(size_t pos) {
    TableAt t;
    return Start(pos, &t) && Scalar<1, 1>(t, Field(0)) &&             // kind
           Scalar<8, 8>(t, Field(1)) && Scalar<8, 8>(t, Field(2)) &&  // int_value, double_value
           Scalar<1, 1>(t, Field(3)) && Vector<8>(t, Field(4)) &&     // bool_value, int_list
           String(t, Field(5)) && Vector<8>(t, Field(6)) &&           // string_value, double_list
           Vector<1>(t, Field(7));                                    // bool_list
  }
  bool CompileSpec(size_t pos) {
    TableAt t;
    return Start(pos, &t) && String(t, Field(0)) && String(t, Field(1));  // key, value
  }
  bool DimOrder(size_t pos) {
    TableAt t;
    return Start(pos, &t) && Vector<4>(t, Field(0));  // dims
  }
  bool HostOp(size_t pos) {
    TableAt t;
    return Start(pos, &t) && String(t, Field(0));  // op
  }
  bool DelegateCall(size_t pos) {
    TableAt t;
    return Start(pos, &t) && String(t, Field(0)) &&                             // backend
           Tables(t, Field(1), [this](size_t p) { return CompileSpec(p); }) &&  // compile_specs
           Vector<1>(t, Field(2)) &&                                            // payload
           Tables(t, Field(3), [this](size_t p) { return DimOrder(p); }) &&     // arg_dim_orders
           Vector<4>(t, Field(4));                                              // written_args
  }
  bool Node(size_t pos) {
    TableAt t;
    if (!Start(pos, &t) || !String(t, Field(0)) || !Scalar<1, 1>(t, Field(1))) return false;
    // op: a union, its table checked as the type field says; an unknown type passes here (the
    // semantic checks refuse it).
    size_t op = 0;
    if (!Ref(t, Field(2), &op)) return false;
    if (op != 0) {
      switch (U8(t, Field(1))) {
        case 1:
          if (!HostOp(op)) return false;
          break;
        case 2:
          if (!DelegateCall(op)) return false;
          break;
        default:
          break;
      }
    }
    return Vector<4>(t, Field(3)) && Vector<4>(t, Field(4));  // args, results
  }
  bool DataSegment(size_t pos) {
    TableAt t;
    return Start(pos, &t) && Vector<1>(t, Field(0));  // data
  }

  const uint8_t* const buf_;
  const size_t size_;
  const size_t max_tables_;
  size_t tables_ = 0;
};

}  // namespace

bool ProgramTablesWellFormed(absl::Span<const uint8_t> bytes, size_t max_tables) {
  return TableVerifier(bytes.data(), bytes.size(), max_tables).Buffer();
}

}  // namespace ferry::internal
