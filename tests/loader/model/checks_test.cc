// The model's invariants (loader/model/checks.h): the shared checks on hand-picked values, and
// VerifyMethodDef on methods built by both readers and then broken one invariant at a time.
// Expected verdicts come from the invariants as documented, not from the checker.
#include "ferry/loader/model/checks.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ferry/loader/executorch/importer.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/et_program_parts.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(IsDimOrder, EmptyAndPermutationsOnly) {
  EXPECT_TRUE(IsDimOrder(absl::Span<const int32_t>{}, 3));
  EXPECT_TRUE(IsDimOrder(absl::Span<const int32_t>{}, 0));
  const std::vector<int32_t> row_major = {0, 1, 2}, channels_last = {0, 2, 3, 1};
  EXPECT_TRUE(IsDimOrder(absl::MakeConstSpan(row_major), 3));
  EXPECT_TRUE(IsDimOrder(absl::MakeConstSpan(channels_last), 4));
  const std::vector<int32_t> repeated = {0, 0, 1}, too_high = {0, 1, 3}, negative = {-1, 0, 1};
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(repeated), 3));
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(too_high), 3));
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(negative), 3));
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(row_major), 2));  // wrong length
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(row_major), 4));
  // The ExecuTorch formats store dims as bytes.
  const std::vector<uint8_t> bytes = {1, 0}, bad_bytes = {2, 0};
  EXPECT_TRUE(IsDimOrder(absl::MakeConstSpan(bytes), 2));
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(bad_bytes), 2));
  // Orders past rank 8 (ExecuTorch allows 16) are checked alike; none is valid beyond 64.
  std::vector<int32_t> rank_16(16);
  for (size_t i = 0; i < rank_16.size(); ++i) rank_16[i] = static_cast<int32_t>(15 - i);
  EXPECT_TRUE(IsDimOrder(absl::MakeConstSpan(rank_16), 16));
  rank_16[3] = 15;
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(rank_16), 16));
  std::vector<int32_t> long_order(65);
  for (size_t i = 0; i < long_order.size(); ++i) long_order[i] = static_cast<int32_t>(i);
  EXPECT_FALSE(IsDimOrder(absl::MakeConstSpan(long_order), long_order.size()));
}

TEST(CheckedByteSize, CountsElementsTimesSize) {
  const std::vector<int64_t> two_by_three = {2, 3}, scalar = {};
  EXPECT_EQ(CheckedByteSize(DType::kFloat32, two_by_three), 24u);
  EXPECT_EQ(CheckedByteSize(DType::kInt64, two_by_three), 48u);
  EXPECT_EQ(CheckedByteSize(DType::kBool, two_by_three), 6u);
  EXPECT_EQ(CheckedByteSize(DType::kFloat32, scalar), 4u);
  // ExecuTorch stores sizes as int32, with element sizes of dtypes Ferry may not know.
  const std::vector<int32_t> et_sizes = {3, 5};
  EXPECT_EQ(CheckedByteSize<int32_t>(2, et_sizes), 30u);
}

TEST(CheckedByteSize, RefusesNegativeSizesAndOverflow) {
  const std::vector<int64_t> negative = {2, -1};
  EXPECT_EQ(CheckedByteSize(DType::kFloat32, negative), std::nullopt);
  // 2^31 * 2^31 elements of 4 bytes: 2^64 bytes.
  const std::vector<int64_t> huge = {int64_t{1} << 31, int64_t{1} << 31};
  EXPECT_EQ(CheckedByteSize(DType::kFloat32, huge), std::nullopt);
  // 2^61 int64s are 2^64 bytes, one past the limit; 2^59 of them (2^62 bytes) fit in int64.
  const std::vector<int64_t> just_over = {int64_t{1} << 61}, fits = {int64_t{1} << 59};
  EXPECT_EQ(CheckedByteSize(DType::kInt64, just_over), std::nullopt);
  EXPECT_EQ(CheckedByteSize(DType::kInt64, fits), size_t{1} << 62);
}

TEST(CheckedByteSize, EmptyTensorsAreZeroBytesButStillBounded) {
  const std::vector<int64_t> empty = {0, 5};
  EXPECT_EQ(CheckedByteSize(DType::kFloat32, empty), 0u);
  // No elements, but strides of 2^62 * 4 bytes would not fit.
  const std::vector<int64_t> empty_but_huge = {0, int64_t{1} << 62, 4};
  EXPECT_EQ(CheckedByteSize(DType::kFloat32, empty_but_huge), std::nullopt);
}

TEST(DefinitionTracker, DefinedBeforeUseAndProducedOnce) {
  DefinitionTracker defs(3);
  defs.DefineAtStart(0);
  EXPECT_TRUE(defs.IsDefined(0));
  EXPECT_FALSE(defs.IsDefined(1));
  EXPECT_EQ(defs.Produce(0, 0), DefinitionTracker::ProduceResult::kNotIntermediate);
  EXPECT_EQ(defs.Produce(1, 0), DefinitionTracker::ProduceResult::kOk);
  EXPECT_TRUE(defs.IsDefined(1));
  EXPECT_EQ(defs.producer(1), 0);
  EXPECT_EQ(defs.Produce(1, 4), DefinitionTracker::ProduceResult::kAlreadyProduced);
  EXPECT_EQ(defs.producer(1), 0);  // the failed call recorded nothing
  EXPECT_EQ(defs.producer(2), DefinitionTracker::kNotProduced);
  EXPECT_EQ(defs.producer(0), DefinitionTracker::kFromStart);
}

// forward(x) = relu(x + w) from Ferry's own builder and reader.
MethodDef FerryMethod(std::unique_ptr<Program>& keep) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  const ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  const ValueId w = m.ConstantF32("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  m.Output(m.Op("relu", {m.Op("add", {x, w})}));
  absl::StatusOr<std::vector<uint8_t>> bytes = pb.Build();
  EXPECT_OK(bytes.status());
  absl::StatusOr<std::unique_ptr<Program>> program = Program::FromBytes(*bytes);
  EXPECT_OK(program.status());
  keep = *std::move(program);
  absl::StatusOr<const MethodDef*> method = keep->method("forward");
  EXPECT_OK(method.status());
  return **method;
}

// forward(a, b) = (a + b) * a through the ExecuTorch importer: values 0 and 1 inputs, 2 and 3 the
// sum and the product, 4 the add's alpha.
std::vector<MethodDef> ImportedMethods() {
  EtProgram p;
  EtMethod& m = p.methods.emplace_back();
  m.name = "forward";
  m.values = {testing::FloatTensor({2, 2}), testing::FloatTensor({2, 2}),
              testing::FloatTensor({2, 2}), testing::FloatTensor({2, 2}), testing::Int(1)};
  m.inputs = {0, 1};
  m.outputs = {3};
  m.operators = {{"aten::add", "out"}, {"aten::mul", "out"}};
  m.instructions = {testing::KernelCall(0, {0, 1, 4, 2, 2}), testing::KernelCall(1, {2, 0, 3, 3})};
  absl::StatusOr<EtImport> imported = ImportExecuTorchProgram(p);
  EXPECT_OK(imported.status());
  return imported.ok() ? std::move(imported->methods) : std::vector<MethodDef>{};
}

TEST(VerifyMethodDef, AcceptsWhatBothReadersBuild) {
  std::unique_ptr<Program> keep;
  EXPECT_OK(VerifyMethodDef(FerryMethod(keep)));
  const std::vector<MethodDef> imported = ImportedMethods();
  ASSERT_EQ(imported.size(), 1u);
  EXPECT_OK(VerifyMethodDef(imported[0]));
  EXPECT_OK(VerifyReaderOutput(imported, "ExecuTorch importer"));
}

// The first node whose op is `op`.
size_t NodeOf(const MethodDef& m, const std::string& op) {
  for (size_t n = 0; n < m.nodes.size(); ++n) {
    if (m.nodes[n].op == op) return n;
  }
  ADD_FAILURE() << "no " << op << " node";
  return 0;
}

// One broken invariant: how to break it, and what the refusal must name.
struct Breakage {
  const char* name;
  void (*breaks)(MethodDef&);
  const char* names;
};

const Breakage kBreakages[] = {
    {"node order swapped: an argument read before it is produced",
     [](MethodDef& m) { std::swap(m.nodes[0], m.nodes[1]); },
     "an intermediate that no earlier node produces"},
    {"a result produced twice", [](MethodDef& m) { m.nodes[1].results[0] = m.nodes[0].results[0]; },
     "already produces"},
    {"an input as a result", [](MethodDef& m) { m.nodes[0].results[0] = m.inputs[0]; },
     "results must be intermediates"},
    {"an argument out of range",
     [](MethodDef& m) { m.nodes[0].args[0] = static_cast<ValueId>(m.values.size()); },
     "but the method has"},
    {"a dim order that is no permutation",
     [](MethodDef& m) {
       m.values[m.inputs[0]].meta.dim_order = {0, 0};
     },
     "is not a permutation"},
    {"a negative size", [](MethodDef& m) { m.values[m.inputs[0]].meta.sizes[0] = -2; },
     "byte size overflows"},
    {"an unknown dtype",
     [](MethodDef& m) { m.values[m.inputs[0]].meta.dtype = static_cast<DType>(99); },
     "not a known dtype"},
    {"an input missing from the inputs", [](MethodDef& m) { m.inputs.pop_back(); },
     "not listed in the method's inputs"},
    {"an input listed twice", [](MethodDef& m) { m.inputs.push_back(m.inputs[0]); }, "again"},
    {"an intermediate listed as an input",
     [](MethodDef& m) { m.inputs.push_back(m.nodes[0].results[0]); },
     "method inputs must be input or scalar values"},
    {"an output no node produces",
     [](MethodDef& m) {
       m.nodes.pop_back();
       if (!m.node_instructions.empty()) m.node_instructions.pop_back();
     },
     "an intermediate that no node produces"},
    {"a host op without an op", [](MethodDef& m) { m.nodes[0].op.clear(); }, "has no op name"},
    {"data on an input",
     [](MethodDef& m) {
       static const uint8_t kBytes[4] = {};
       m.values[m.inputs[0]].data = absl::MakeConstSpan(kBytes);
     },
     "holds 4 bytes of data"},
    {"a shared value that is no state", [](MethodDef& m) { m.values[m.inputs[0]].shared = true; },
     "only a state can be"},
    {"exporter records for the wrong number of nodes",
     [](MethodDef& m) { m.node_instructions.assign(m.nodes.size() + 1, 0); },
     "the exporter's records"},
    {"a delegate with no backend", [](MethodDef& m) { m.nodes[0].kind = NodeKind::kDelegate; },
     "the delegate call has no backend name"},
};

class BrokenImport : public ::testing::TestWithParam<Breakage> {};

// The importer's output, broken: caught by the check that loading runs on every imported method
// (ProgramLoadOptions::verify_methods), as Internal naming the importer and the element.
TEST_P(BrokenImport, IsCaughtNamingTheImporter) {
  std::vector<MethodDef> methods = ImportedMethods();
  ASSERT_EQ(methods.size(), 1u);
  ASSERT_EQ(methods[0].nodes.size(), 2u);
  GetParam().breaks(methods[0]);
  EXPECT_THAT(VerifyMethodDef(methods[0]),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("method \"forward\""), HasSubstr(GetParam().names))));
  EXPECT_THAT(VerifyReaderOutput(methods, "ExecuTorch importer"),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("the ExecuTorch importer built an invalid method"),
                             HasSubstr(GetParam().names))));
}

INSTANTIATE_TEST_SUITE_P(Invariants, BrokenImport, ::testing::ValuesIn(kBreakages));

// The same breakages of a method Ferry's reader built.
class BrokenFerryMethod : public ::testing::TestWithParam<Breakage> {};

TEST_P(BrokenFerryMethod, IsRefusedNamingTheElement) {
  std::unique_ptr<Program> keep;
  MethodDef method = FerryMethod(keep);
  ASSERT_EQ(method.nodes.size(), 2u);
  GetParam().breaks(method);
  EXPECT_THAT(VerifyMethodDef(method),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().names)));
}

INSTANTIATE_TEST_SUITE_P(Invariants, BrokenFerryMethod, ::testing::ValuesIn(kBreakages));

// Values that are not tensors may be inputs (holding their traced value) and outputs.
TEST(VerifyMethodDef, ScalarsMayBeInputsAndOutputs) {
  std::unique_ptr<Program> keep;
  MethodDef method = FerryMethod(keep);
  ValueDef scalar;
  scalar.name = "n";
  scalar.kind = ValueKind::kScalar;
  scalar.scalar = Scalar::String("tokenizer.model");
  method.values.push_back(scalar);
  const ValueId id = static_cast<ValueId>(method.values.size() - 1);
  method.inputs.push_back(id);
  method.outputs.push_back(id);
  EXPECT_OK(VerifyMethodDef(method));
  method.inputs.push_back(id);
  EXPECT_THAT(VerifyMethodDef(method),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("again")));
}

TEST(VerifyMethodDef, ConstantDataMustMatchItsSize) {
  std::unique_ptr<Program> keep;
  MethodDef method = FerryMethod(keep);
  ValueId w = -1;
  for (size_t v = 0; v < method.values.size(); ++v) {
    if (method.values[v].kind == ValueKind::kConstant) w = static_cast<ValueId>(v);
  }
  ASSERT_GE(w, 0);
  method.values[w].data = method.values[w].data.subspan(0, 20);
  EXPECT_THAT(VerifyMethodDef(method),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"w\""), HasSubstr("holds 20 bytes of data, expected 24"))));
}

TEST(VerifyMethodDef, DelegateFieldsAreChecked) {
  std::vector<MethodDef> methods = ImportedMethods();
  ASSERT_EQ(methods.size(), 1u);
  MethodDef& m = methods[0];
  const size_t add = NodeOf(m, "add");
  m.nodes[add].kind = NodeKind::kDelegate;
  m.nodes[add].mutable_delegate().backend = "graph";
  EXPECT_OK(VerifyMethodDef(m));
  m.nodes[add].mutable_delegate().written_args = {0, 0};
  EXPECT_THAT(VerifyMethodDef(m), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("argument 0 is listed as written twice")));
  m.nodes[add].mutable_delegate().written_args = {7};
  EXPECT_THAT(VerifyMethodDef(m), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("written argument 7 is not one of its")));
  m.nodes[add].mutable_delegate().written_args = {};
  m.nodes[add].mutable_delegate().arg_dim_orders = {{1, 0}};
  EXPECT_THAT(VerifyMethodDef(m), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("argument dim orders for")));
  m.nodes[add].mutable_delegate().arg_dim_orders.push_back({0, 2});
  EXPECT_THAT(VerifyMethodDef(m), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("the dim order (0, 2) of argument 1")));
  m.nodes[add].mutable_delegate().arg_dim_orders[1] = {};
  EXPECT_OK(VerifyMethodDef(m));
}

// Loading checks what the importer built when asked to, and a valid program passes.
TEST(VerifyMethods, LoadingWithTheCheckAcceptsValidPrograms) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  m.Output(m.Op("relu", {m.Input("x", DType::kFloat32, {4})}));
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, pb.Build());
  ProgramLoadOptions options;
  options.verify_methods = true;
  const std::string path = ::testing::TempDir() + "/checks_test_relu.ferry";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  EXPECT_OK(Program::Load(path, options).status());
  options.verify_methods = false;
  EXPECT_OK(Program::Load(path, options).status());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ferry
