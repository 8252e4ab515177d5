// The Ferry program writer (loader/ferry/internal/writer.h): a written method reads back as it
// was, every constant's and state's data in a segment of its own 64-byte aligned, equal data
// stored once, payloads aligned likewise, the file padded to a multiple of 64; and a program over
// the format's 2 GiB limit refused before anything is written.
#include "ferry/loader/ferry/internal/writer.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ferry/loader/program.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::internal {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<uint8_t> FloatBytes(std::vector<float> v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// forward(x) = delegate(x + w, k), with w and w2 equal constants, k a state and a 5-byte payload.
struct Fixture {
  std::vector<uint8_t> w = FloatBytes({1, 2, 3, 4});
  std::vector<uint8_t> k = FloatBytes({9, 8, 7, 6});
  std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  MethodDef m;
  Fixture() {
    m.name = "forward";
    auto value = [&](ValueKind kind, std::string name) {
      ValueDef v;
      v.kind = kind;
      v.name = std::move(name);
      v.meta = TensorMeta{DType::kFloat32, {4}, {}};
      m.values.push_back(v);
      return static_cast<ValueId>(m.values.size() - 1);
    };
    ValueId x = value(ValueKind::kInput, "x");
    ValueId wv = value(ValueKind::kConstant, "w");
    m.values[wv].data = w;
    ValueId w2 = value(ValueKind::kConstant, "w2");
    m.values[w2].data = w;  // the same bytes again
    ValueId kv = value(ValueKind::kState, "k");
    m.values[kv].data = k;
    ValueId s = value(ValueKind::kIntermediate, "s");
    ValueId out = value(ValueKind::kIntermediate, "out");
    NodeDef add;
    add.op = "add";
    add.name = "add";
    add.args = {x, wv};
    add.results = {s};
    m.nodes.push_back(add);
    NodeDef call;
    call.kind = NodeKind::kDelegate;
    call.name = "call";
    call.args = {s, w2, kv};
    call.results = {out};
    DelegateDef& d = call.mutable_delegate();
    d.backend = "SomeBackend";
    d.compile_specs = {{"target_device", "sim:0"}};
    d.payload = payload;
    m.nodes.push_back(call);
    m.inputs = {x};
    m.outputs = {out};
  }
};

TEST(Writer, AWrittenMethodReadsBackAsItWas) {
  Fixture f;
  const MethodDef* methods[] = {&f.m};
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, SerializeProgram(methods));
  EXPECT_EQ(bytes.size() % 64, 0u);
  // Read from a 64-byte aligned copy, as a file mapping or Program::Load's buffer is.
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> aligned(
      static_cast<uint8_t*>(std::aligned_alloc(64, bytes.size())),
      [](uint8_t* p) { std::free(p); });
  std::memcpy(aligned.get(), bytes.data(), bytes.size());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program,
                       Program::FromBytes(absl::MakeConstSpan(aligned.get(), bytes.size())));
  ASSERT_OK_AND_ASSIGN(const MethodDef* read, program->method("forward"));
  ASSERT_EQ(read->values.size(), f.m.values.size());
  for (size_t v = 0; v < f.m.values.size(); ++v) {
    EXPECT_EQ(read->values[v].name, f.m.values[v].name);
    EXPECT_EQ(read->values[v].kind, f.m.values[v].kind);
    EXPECT_TRUE(read->values[v].meta == f.m.values[v].meta) << v;
  }
  const ValueDef& w = read->values[1];
  const ValueDef& w2 = read->values[2];
  const ValueDef& k = read->values[3];
  EXPECT_EQ(std::vector<uint8_t>(w.data.begin(), w.data.end()), f.w);
  EXPECT_EQ(std::vector<uint8_t>(k.data.begin(), k.data.end()), f.k);
  EXPECT_EQ(w.data.data(), w2.data.data());  // equal data: one segment
  EXPECT_NE(w.data.data(), k.data.data());
  EXPECT_TRUE(Aligned64(w.data.data()));
  EXPECT_TRUE(Aligned64(k.data.data()));
  ASSERT_EQ(read->nodes.size(), 2u);
  EXPECT_EQ(read->nodes[0].op, "add");
  EXPECT_THAT(read->nodes[0].args, ElementsAre(0, 1));
  const NodeDef& call = read->nodes[1];
  EXPECT_EQ(call.kind, NodeKind::kDelegate);
  EXPECT_EQ(call.delegate().backend, "SomeBackend");
  EXPECT_EQ(call.CompileSpec("target_device"), "sim:0");
  EXPECT_THAT(call.args, ElementsAre(4, 2, 3));
  const absl::Span<const uint8_t> payload = call.delegate().payload;
  EXPECT_EQ(std::vector<uint8_t>(payload.begin(), payload.end()), f.payload);
  EXPECT_TRUE(Aligned64(payload.data()));
  EXPECT_THAT(read->inputs, ElementsAre(0));
  EXPECT_THAT(read->outputs, ElementsAre(5));
}

TEST(Writer, AProgramOverTheFormatsLimitIsRefused) {
  Fixture f;
  // Sizes only: the writer bounds the program before it reads any data.
  f.m.values[1].data = absl::MakeConstSpan(f.w.data(), size_t{1} << 31);
  const MethodDef* methods[] = {&f.m};
  EXPECT_THAT(SerializeProgram(methods),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the format holds less than 2 GiB")));
}

}  // namespace
}  // namespace ferry::internal
