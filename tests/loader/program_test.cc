#include "ferry/loader/program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ferry/base/huge_pages.h"
#include "ferry/loader/ferry/program_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/loader/test_ops.h"
#include "tests/testing/bundle_builder.h"
#include "tests/testing/hand_made_pte.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::LoaderTestOps;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Field-by-field comparison of two methods, data and payload bytes included, with a message that
// says where they differ.
::testing::AssertionResult SameMethod(const MethodDef& x, const MethodDef& y) {
  auto bytes = [](absl::Span<const uint8_t> s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  if (x.name != y.name) return ::testing::AssertionFailure() << "names differ";
  if (x.values.size() != y.values.size()) return ::testing::AssertionFailure() << "value count";
  for (size_t v = 0; v < x.values.size(); ++v) {
    const ValueDef& a = x.values[v];
    const ValueDef& b = y.values[v];
    if (a.name != b.name || a.kind != b.kind || !(a.meta == b.meta) || !(a.scalar == b.scalar) ||
        bytes(a.data) != bytes(b.data)) {
      return ::testing::AssertionFailure() << "value " << v << " differs";
    }
  }
  if (x.nodes.size() != y.nodes.size()) return ::testing::AssertionFailure() << "node count";
  for (size_t n = 0; n < x.nodes.size(); ++n) {
    const NodeDef& a = x.nodes[n];
    const NodeDef& b = y.nodes[n];
    if (a.name != b.name || a.kind != b.kind || a.args != b.args || a.results != b.results ||
        a.op != b.op || a.delegate().backend != b.delegate().backend ||
        a.delegate().compile_specs != b.delegate().compile_specs ||
        bytes(a.delegate().payload) != bytes(b.delegate().payload) ||
        a.delegate().arg_dim_orders != b.delegate().arg_dim_orders ||
        a.delegate().written_args != b.delegate().written_args) {
      return ::testing::AssertionFailure() << "node " << n << " differs";
    }
  }
  if (x.inputs != y.inputs) return ::testing::AssertionFailure() << "inputs differ";
  if (x.outputs != y.outputs) return ::testing::AssertionFailure() << "outputs differ";
  return ::testing::AssertionSuccess();
}

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

void WriteFile(const std::string& path, absl::Span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void WriteText(const std::string& path, const std::string& text) {
  WriteFile(path, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

class ProgramTest : public ::testing::Test {
 protected:
  // A program with every kind of value, host ops, a graph delegate and a second method.
  std::vector<uint8_t> SampleProgram() {
    ProgramBuilder pb(&ops_);
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId a = m.Input("a", DType::kFloat32, {2, 2});
    ValueId w = m.ConstantF32("w", {2, 2}, {1, -2, 3.5f, 4});
    ValueId kv = m.StateF32("kv", {4}, {0, 1, 2, 3});
    ValueId ids = m.ConstantI64("ids", {2}, {int64_t{1} << 40, -3});
    ValueId shape = m.IntList({4});
    DelegateOptions options;
    options.arg_dim_orders = {{1, 0}, {}};
    options.compile_specs = {{"note", "a \"quoted\" value"}};
    ValueId t = m.GraphDelegate(
        "cuda:0", {a, w},
        [](MethodBuilder& g, absl::Span<const ValueId> in) {
          return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
        },
        options)[0];
    ValueId flat = m.Op("view", {t, shape});
    m.Op("add_", {kv, flat}, "update");
    m.Output(m.Op("mul_scalar", {flat, m.Double(0.25)}));
    m.Output(ids);
    MethodBuilder& second = pb.AddMethod("second");
    second.Output(second.Op("relu", {second.Input("x", DType::kInt64, {3})}));
    absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
    EXPECT_OK(bytes.status());
    return bytes.ok() ? *bytes : std::vector<uint8_t>{};
  }

  std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

  OpRegistry ops_ = LoaderTestOps();
};

TEST_F(ProgramTest, FromBytesCopiesIntoAlignedMemory) {
  std::vector<uint8_t> bytes = SampleProgram();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  EXPECT_NE(program->bytes().data(), bytes.data());
  EXPECT_TRUE(Aligned64(program->bytes().data()));
  EXPECT_EQ(std::vector<uint8_t>(program->bytes().begin(), program->bytes().end()), bytes);
  EXPECT_THAT(program->method_names(), ElementsAre("forward", "second"));
  // The caller's bytes may go away: the program owns its copy.
  std::fill(bytes.begin(), bytes.end(), 0);
  ASSERT_OK_AND_ASSIGN(const MethodDef* def, program->method("forward"));
  EXPECT_EQ(def->values[1].name, "w");
  float w0 = 0;
  std::memcpy(&w0, def->values[1].data.data(), sizeof(float));
  EXPECT_EQ(w0, 1.0f);
}

// A program of several MiB is copied onto huge pages (base/huge_pages.h) where the kernel
// gives them; its content and alignment are what a heap copy gives.
TEST_F(ProgramTest, FromBytesCopiesALargeProgramIntact) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {1 << 20});
  std::vector<float> w(1 << 20);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 1000) - 0.5f;
  ValueId c = m.ConstantF32("w", {1 << 20}, w);
  m.Output(m.Op("add", {x, c}));
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, pb.Build());
  ASSERT_GE(bytes.size(), 2 * kHugeTableBytes);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  EXPECT_TRUE(Aligned64(program->bytes().data()));
  if (internal::MapsLargeTable(bytes.size())) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(program->bytes().data()) % kHugePageBytes, 0u);
  }
  EXPECT_EQ(std::vector<uint8_t>(program->bytes().begin(), program->bytes().end()), bytes);
  std::fill(bytes.begin(), bytes.end(), 0);
  ASSERT_OK_AND_ASSIGN(const MethodDef* def, program->method("forward"));
  ASSERT_EQ(def->values[c].data.size(), w.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(def->values[c].data.data(), w.data(), w.size() * sizeof(float)), 0);
}

TEST_F(ProgramTest, MissingMethodListsTheMethods) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(SampleProgram()));
  EXPECT_THAT(program->method("backward").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "the program has no method \"backward\"; its methods are: \"forward\", "
                       "\"second\""));
}

TEST_F(ProgramTest, LoadMapsABinaryFile) {
  std::vector<uint8_t> bytes = SampleProgram();
  const std::string path = TempPath("program_test_sample.ferry");
  WriteFile(path, bytes);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> loaded, Program::Load(path));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> copied, Program::FromBytes(bytes));
  EXPECT_EQ(std::vector<uint8_t>(loaded->bytes().begin(), loaded->bytes().end()), bytes);
  EXPECT_TRUE(Aligned64(loaded->bytes().data()));
  for (const char* name : {"forward", "second"}) {
    ASSERT_OK_AND_ASSIGN(const MethodDef* a, loaded->method(name));
    ASSERT_OK_AND_ASSIGN(const MethodDef* b, copied->method(name));
    EXPECT_TRUE(SameMethod(*a, *b)) << name;
  }
  // Constants are used in place: their data lies in the mapping.
  ASSERT_OK_AND_ASSIGN(const MethodDef* forward, loaded->method("forward"));
  const ValueDef& w = forward->values[1];
  EXPECT_GE(w.data.data(), loaded->bytes().data());
  EXPECT_LE(w.data.data() + w.data.size(), loaded->bytes().data() + loaded->bytes().size());
  EXPECT_TRUE(Aligned64(w.data.data()));
}

TEST_F(ProgramTest, LoadReportsUnreadableFiles) {
  EXPECT_THAT(Program::Load(TempPath("does_not_exist.ferry")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does_not_exist.ferry")));
  const std::string empty = TempPath("program_test_empty.ferry");
  WriteText(empty, "");
  EXPECT_THAT(Program::Load(empty),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is empty")));
  EXPECT_THAT(Program::Load(::testing::TempDir()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("directory")));
  const std::string junk = TempPath("program_test_junk.ferry");
  WriteText(junk, "this is not a program at all, just some text that is long enough");
  EXPECT_THAT(Program::Load(junk), StatusIs(absl::StatusCode::kInvalidArgument,
                                            AllOf(HasSubstr("program_test_junk.ferry"),
                                                  HasSubstr("not a program Ferry reads"))));
}

TEST_F(ProgramTest, LoadRefusesAFileWithoutReadPermission) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  const std::string path = TempPath("program_test_private.ferry");
  WriteFile(path, SampleProgram());
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  EXPECT_THAT(Program::Load(path), StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr(path)));
  ::chmod(path.c_str(), 0600);
}

TEST_F(ProgramTest, JsonRoundTripGivesTheSameMethods) {
  std::vector<uint8_t> bytes = SampleProgram();
  ASSERT_OK_AND_ASSIGN(std::string json, Program::ToJson(bytes));
  // Strict JSON: quoted field names, enums by name.
  EXPECT_THAT(json, HasSubstr("\"methods\""));
  EXPECT_THAT(json, HasSubstr("\"kind\": \"Constant\""));
  EXPECT_THAT(json, HasSubstr("\"target_device\""));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> from_json, Program::FromJson(json));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> from_bytes, Program::FromBytes(bytes));
  EXPECT_EQ(from_json->method_names(), from_bytes->method_names());
  for (const std::string& name : from_bytes->method_names()) {
    ASSERT_OK_AND_ASSIGN(const MethodDef* a, from_json->method(name));
    ASSERT_OK_AND_ASSIGN(const MethodDef* b, from_bytes->method(name));
    EXPECT_TRUE(SameMethod(*a, *b)) << name;
  }
  // The JSON form is re-packed: its data is aligned like a binary program's.
  ASSERT_OK_AND_ASSIGN(const MethodDef* forward, from_json->method("forward"));
  EXPECT_TRUE(Aligned64(forward->values[1].data.data()));
  // And converting again gives the same text.
  ASSERT_OK_AND_ASSIGN(std::string again, Program::ToJson(from_json->bytes()));
  EXPECT_EQ(again, json);
}

TEST_F(ProgramTest, LoadParsesJsonFiles) {
  std::vector<uint8_t> bytes = SampleProgram();
  ASSERT_OK_AND_ASSIGN(std::string json, Program::ToJson(bytes));
  const std::string path = TempPath("program_test_sample.json");
  WriteText(path, json);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> loaded, Program::Load(path));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> expected, Program::FromBytes(bytes));
  ASSERT_OK_AND_ASSIGN(const MethodDef* a, loaded->method("forward"));
  ASSERT_OK_AND_ASSIGN(const MethodDef* b, expected->method("forward"));
  EXPECT_TRUE(SameMethod(*a, *b));
}

// Stock `flatc -b` on the JSON form writes a binary that does not align constant data. Ferry
// refuses it, and the message says why and what to load instead (README, "Program files").
TEST_F(ProgramTest, FlatcBinaryIsRefusedWithTheReasonAndTheJsonAlternative) {
  const std::string flatc = FERRY_FLATC;
  if (flatc.empty() || access(flatc.c_str(), X_OK) != 0) GTEST_SKIP() << "flatc not found";
  ASSERT_OK_AND_ASSIGN(std::string json, Program::ToJson(SampleProgram()));
  const std::string dir = TempPath("flatc_" + std::to_string(getpid()));
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string json_path = dir + "/sample.json";
  WriteText(json_path, json);
  const std::string command = flatc + " -b -o " + dir + " " + FERRY_SCHEMA_PATH + " " + json_path;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string binary_path = dir + "/sample.ferry";  // the schema's file_extension
  absl::StatusOr<std::unique_ptr<Program>> binary = Program::Load(binary_path);
  EXPECT_THAT(binary, StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(HasSubstr("not a multiple of 64"),
                                     HasSubstr("A binary made by stock `flatc -b` is refused"),
                                     HasSubstr("Load the JSON form instead"))));
  EXPECT_OK(Program::Load(json_path).status());  // what the message says to do
  std::remove(binary_path.c_str());
  std::remove(json_path.c_str());
  rmdir(dir.c_str());
}

// A program written by hand in the JSON form, read field by field: pins the schema's names.
TEST_F(ProgramTest, HandWrittenJsonLoads) {
  const std::string json = R"({
    "methods": [{
      "name": "forward",
      "values": [
        {"name": "x", "kind": "Input", "dtype": "Float32", "sizes": [2]},
        {"name": "w", "kind": "Constant", "dtype": "Int64", "sizes": [1], "data_segment": 0},
        {"name": "n", "kind": "Scalar", "scalar": {"kind": "IntList", "int_list": [2, 1]}},
        {"name": "y", "kind": "Intermediate", "dtype": "Float32", "sizes": [2, 1]},
        {"kind": "Intermediate", "dtype": "Float32", "sizes": [2, 1]}
      ],
      "nodes": [
        {"op_type": "HostOp", "op": {"op": "view"}, "args": [0, 2], "results": [3]},
        {"name": "dev", "op_type": "DelegateCall",
         "op": {"backend": "graph", "payload": [1, 2, 3],
                "compile_specs": [{"key": "target_device", "value": "sim:1"}],
                "arg_dim_orders": [{"dims": [1, 0]}], "written_args": [0]},
         "args": [3], "results": [4]}
      ],
      "inputs": [0],
      "outputs": [4, 1]
    }],
    "segments": [{"data": [42, 0, 0, 0, 0, 0, 0, 0]}]
  })";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromJson(json));
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  ASSERT_EQ(m->values.size(), 5u);
  EXPECT_EQ(m->values[1].kind, ValueKind::kConstant);
  EXPECT_EQ(m->values[1].meta, (TensorMeta{DType::kInt64, {1}, {}}));
  int64_t w = 0;
  ASSERT_EQ(m->values[1].data.size(), 8u);
  std::memcpy(&w, m->values[1].data.data(), 8);
  EXPECT_EQ(w, 42);
  EXPECT_EQ(m->values[2].scalar, Scalar::IntList({2, 1}));
  EXPECT_EQ(m->values[4].name, "value 4");
  ASSERT_EQ(m->nodes.size(), 2u);
  EXPECT_EQ(m->nodes[0].name, "view");
  EXPECT_EQ(m->nodes[0].op, "view");
  EXPECT_THAT(m->nodes[0].args, ElementsAre(0, 2));
  EXPECT_EQ(m->nodes[1].name, "dev");
  EXPECT_EQ(m->nodes[1].kind, NodeKind::kDelegate);
  EXPECT_EQ(m->nodes[1].CompileSpec("target_device"), "sim:1");
  EXPECT_THAT(m->nodes[1].delegate().payload, ElementsAre(1, 2, 3));
  ASSERT_EQ(m->nodes[1].delegate().arg_dim_orders.size(), 1u);
  EXPECT_THAT(m->nodes[1].delegate().arg_dim_orders[0], ElementsAre(1, 0));
  EXPECT_THAT(m->nodes[1].delegate().written_args, ElementsAre(0));
  EXPECT_THAT(m->outputs, ElementsAre(4, 1));
}

TEST_F(ProgramTest, JsonErrorsAreReported) {
  EXPECT_THAT(Program::FromJson("{ \"methods\": [ "),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith("the program's JSON does not parse")));
  EXPECT_THAT(Program::FromJson("{ \"no_such_field\": 1 }"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no_such_field")));
  // Valid JSON for the schema, but not a valid program: the same semantic checks apply.
  EXPECT_THAT(Program::FromJson(R"({"methods": [{"name": "forward",
      "values": [{"name": "x", "kind": "Input", "sizes": [2]}],
      "nodes": [{"op_type": "HostOp", "op": {"op": "relu"}, "args": [5], "results": []}],
      "inputs": [0]}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "method \"forward\", node 0 (relu): argument 0 is value 5, but the method "
                       "has 1 values"));
  EXPECT_THAT(Program::FromJson("{}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no methods")));
}

TEST_F(ProgramTest, ToJsonRefusesBadBytes) {
  std::vector<uint8_t> bytes = SampleProgram();
  bytes.resize(bytes.size() / 2);
  EXPECT_THAT(Program::ToJson(bytes), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(Program::ToJson({}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
}

// A bundled program loads as the .pte inside it, read where it lies, with its test cases.
TEST_F(ProgramTest, ABundleLoadsTheProgramInsideWithItsTestCases) {
  using ::ferry::testing::BuildBundle;
  using ::ferry::testing::FloatValue;
  const std::vector<uint8_t> pte = ::ferry::testing::BuildPte();
  const std::vector<uint8_t> bpte = BuildBundle(
      pte, {{"forward",
             {{{FloatValue({2}, {1, 2}), FloatValue({2}, {3, 4})}, {FloatValue({2}, {4, 6})}}}}});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bpte));
  EXPECT_THAT(program->method_names(), ElementsAre("forward"));
  ASSERT_EQ(program->bytes().size(), pte.size());
  EXPECT_EQ(std::memcmp(program->bytes().data(), pte.data(), pte.size()), 0);
  ASSERT_EQ(program->test_suites().size(), 1u);
  EXPECT_EQ(program->test_suites()[0].method_name, "forward");
  ASSERT_EQ(program->test_suites()[0].cases.size(), 1u);
  EXPECT_EQ(program->test_suites()[0].cases[0].inputs.size(), 2u);

  // Through a file, as the command line loads it.
  const std::string path = TempPath("bundle.bpte");
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bpte.data()),
              static_cast<std::streamsize>(bpte.size()));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> loaded, Program::Load(path));
  EXPECT_EQ(loaded->test_suites().size(), 1u);
  std::remove(path.c_str());

  // Other programs carry none.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> plain, Program::FromBytes(pte));
  EXPECT_TRUE(plain->test_suites().empty());
}

TEST_F(ProgramTest, ABundleWhoseProgramIsBrokenIsRefusedSayingSo) {
  using ::ferry::testing::BuildBundle;
  std::vector<uint8_t> pte = ::ferry::testing::BuildPte();
  pte.resize(pte.size() / 2);
  EXPECT_THAT(
      Program::FromBytes(BuildBundle(pte, {})),
      StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("the program inside the bundle: ")));
  // A bundle of a Ferry program, or of another bundle: only .pte files are bundled.
  EXPECT_THAT(Program::FromBytes(BuildBundle(SampleProgram(), {})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not an ExecuTorch program: its file identifier is \"FRRY\"")));
  std::vector<uint8_t> bpte = BuildBundle(::ferry::testing::BuildPte(), {});
  bpte.resize(bpte.size() - 4);
  EXPECT_THAT(Program::FromBytes(bpte),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("bundled program: ")));
}

}  // namespace
}  // namespace ferry
