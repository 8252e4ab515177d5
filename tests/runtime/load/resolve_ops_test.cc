// Load phases 0 and 1 (runtime/load/resolve_ops.cc): host ops' declared results held to what the
// op infers, node by node (like nodes share an inference only when nothing differs, a scalar
// included); and the load's own tables counted against host memory and the caller's limit before
// any is built, with an estimate that covers the measured peak.
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/example/load_programs.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/devices/host/host_device.h"
#include "ferry/runtime/internal/load_util.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// An op of two arguments and one result whose kernel does nothing: what a program's writer
// declares its results with (`infer`).
OpSchema TwoArgumentOp(std::string name, InferFn infer) {
  OpSchema op;
  op.name = std::move(name);
  op.min_args = op.max_args = 2;
  op.infer = infer;
  op.kernel = [](absl::Span<const OpArg>, absl::Span<TensorRef* const>) {
    return absl::OkStatus();
  };
  return op;
}

// A host op's declared results must be what the runtime's op produces. These programs are
// written with a registry whose "add" declares another result (any writer could); the runtime's
// "add" of two float32 [2, 3] tensors produces float32 [2, 3].
std::vector<uint8_t> AddDeclaring(InferFn declares) {
  OpRegistry writer;
  EXPECT_OK(writer.Register(TwoArgumentOp("add", declares)));
  ProgramBuilder pb(&writer);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  ValueId y = m.Input("y", DType::kFloat32, {2, 3});
  m.Output(m.Op("add", {x, y}, "sum"));
  return std::move(pb.Build()).value();
}

template <DType kDType, int64_t... kSizes>
absl::Status Declares(absl::Span<const OpArg>, absl::Span<InferredResult> results) {
  results[0].layout = TensorRef::Contiguous(kDType, {kSizes...});
  return absl::OkStatus();
}

TEST(HostOpContract, DeclaredResultsThatDisagreeWithTheOpAreRefusedAtLoad) {
  struct Case {
    InferFn declares;
    std::string expected;  // empty: loads
  };
  const Case cases[] = {
      {&Declares<DType::kFloat32, 2, 3>, ""},
      {&Declares<DType::kFloat32, 3, 2>,
       "is declared float32[3, 2], but op \"add\" produces float32[2, 3]"},
      {&Declares<DType::kFloat32, 2, 3, 1>,
       "is declared float32[2, 3, 1], but op \"add\" produces float32[2, 3]"},
      {&Declares<DType::kFloat32, 2>,
       "is declared float32[2], but op \"add\" produces float32[2, 3]"},
      {&Declares<DType::kFloat32>, "is declared float32[], but op \"add\" produces float32[2, 3]"},
      {&Declares<DType::kInt64, 2, 3>,
       "is declared int64[2, 3], but op \"add\" produces float32[2, 3]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(AddDeclaring(c.declares)));
    Runtime rt;
    absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(*program, "forward");
    if (c.expected.empty()) {
      EXPECT_OK(method.status());
    } else {
      EXPECT_THAT(method, StatusIs(absl::StatusCode::kInvalidArgument,
                                   AllOf(HasSubstr("node 0 (sum)"), HasSubstr("result 0"),
                                         HasSubstr(c.expected))));
    }
  }
}

// Loading infers a run of like nodes once (same op, argument layouts, scalars and declared
// results); each node is still held to its own declared results. This writer's "add" declares
// float32[2, 3] for its first node and float32[3, 2] for its second, on the same arguments.
int declared_adds = 0;
absl::Status DeclaresAnotherShapeSecond(absl::Span<const OpArg>,
                                        absl::Span<InferredResult> results) {
  results[0].layout =
      TensorRef::Contiguous(DType::kFloat32, declared_adds++ == 0 ? std::vector<int64_t>{2, 3}
                                                                  : std::vector<int64_t>{3, 2});
  return absl::OkStatus();
}

TEST(HostOpContract, LikeNodesAreEachHeldToTheirOwnDeclaredResults) {
  OpRegistry writer;
  ASSERT_OK(writer.Register(TwoArgumentOp("add", &DeclaresAnotherShapeSecond)));
  declared_adds = 0;
  ProgramBuilder pb(&writer);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  ValueId y = m.Input("y", DType::kFloat32, {2, 3});
  m.Output(m.Op("add", {x, y}, "first"));
  m.Output(m.Op("add", {x, y}, "second"));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("node 1 (second)"),
                             HasSubstr("is declared float32[3, 2], but op \"add\" produces "
                                       "float32[2, 3]"))));
}

// "tile": x repeated k times (k a scalar argument), counting its inferences.
int tile_inferences = 0;
absl::Status TileInfer(absl::Span<const OpArg> args, absl::Span<InferredResult> results) {
  ++tile_inferences;
  const TensorRef& x = *args[0].tensor;
  results[0].layout = TensorRef::Contiguous(x.dtype, {x.sizes[0] * args[1].scalar->i});
  return absl::OkStatus();
}

TEST(HostOpContract, NodesThatDifferOnlyInAScalarAreInferredEach) {
  const OpSchema tile = TwoArgumentOp("tile", &TileInfer);
  OpRegistry writer;
  ASSERT_OK(writer.Register(tile));
  ProgramBuilder pb(&writer);
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2});
  m.Output(m.Op("tile", {x, m.Int(2)}, "a"));
  m.Output(m.Op("tile", {x, m.Int(2)}, "b"));
  m.Output(m.Op("tile", {x, m.Int(3)}, "c"));
  m.Output(m.Op("tile", {x, m.Int(3)}, "d"));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK(rt.ops().Register(tile));
  tile_inferences = 0;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  const std::vector<int64_t> expected[] = {{4}, {4}, {6}, {6}};
  ASSERT_EQ(method->plan().outputs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(method->plan().outputs[i].sizes, expected[i]) << i;
  // a infers, b matches a, c differs in its scalar, d matches c.
  EXPECT_EQ(tile_inferences, 2);
}

// Two slices of one shape at different starts: like nodes but for a scalar, and views whose
// offsets differ; each reads its own part of the input.
TEST(HostOpContract, ViewsThatDifferOnlyInAScalarReadTheirOwnElements) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {4});
  ValueId zero = m.Int(0), one = m.Int(1);
  ValueId front = m.Op("slice", {x, zero, zero, m.Int(2), one});
  ValueId back = m.Op("slice", {x, zero, m.Int(2), m.Int(4), one});  // right after the first
  m.Output(m.Op("relu", {front}, "front"));
  m.Output(m.Op("relu", {back}, "back"));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
  std::vector<float> in = {1, 2, 3, 4};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {4}, in.data())));
  ASSERT_OK(method->Execute());
  const float* out0 = static_cast<const float*>(method->Output(0).data());
  const float* out1 = static_cast<const float*>(method->Output(1).data());
  ASSERT_NE(out0, nullptr);
  ASSERT_NE(out1, nullptr);
  EXPECT_EQ(std::vector<float>(out0, out0 + 2), (std::vector<float>{1, 2}));
  EXPECT_EQ(std::vector<float>(out1, out1 + 2), (std::vector<float>{3, 4}));
}


// Programs of the load benchmarks (bench/example/load_programs.h), read.
std::unique_ptr<Program> AddChain(int n) {
  return std::move(Program::FromBytes(example::AddChainProgram(n))).value();
}
std::unique_ptr<Program> LongArgumentLists(int n, int args, bool delegates = false) {
  return std::move(Program::FromBytes(example::LongArgumentListsProgram(n, args, delegates)))
      .value();
}

TEST(LoadTables, LongArgumentListsCountInTheEstimate) {
  // 100 nodes of 2,001 arguments: the lists, not the nodes, are most of what loading builds.
  std::unique_ptr<Program> program = LongArgumentLists(100, 2000);
  ASSERT_OK_AND_ASSIGN(const MethodDef* m, program->method("forward"));
  EXPECT_GE(internal::LoadTableBytes(*m), 100u * 2002u * internal::kLoadTableBytesPerArgument);
  Runtime rt;
  LoadOptions options;
  options.table_memory_limit_bytes = size_t{2} << 20;  // ~5 MB of lists: over the limit
  EXPECT_THAT(rt.LoadMethod(*program, "forward", options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("more than the 2.0 MiB that "
                                 "LoadOptions::table_memory_limit_bytes allows")));
  options.table_memory_limit_bytes = size_t{16} << 20;
  EXPECT_OK(rt.LoadMethod(*program, "forward", options).status());
}

TEST(LoadTables, AMethodWhoseTablesGoOverTheLimitIsRefusedBeforeAnyAllocation) {
  std::unique_ptr<Program> program = AddChain(1000);
  Runtime rt;
  auto* host = static_cast<HostDevice*>(rt.devices().Find(Device::Host()));
  const uint64_t allocations = host->counters().allocations;
  LoadOptions options;
  // 64 bytes per node: far below what a node's layouts, placement and step take.
  options.table_memory_limit_bytes = 64 * 1000;
  EXPECT_THAT(rt.LoadMethod(*program, "forward", options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("method \"forward\" has 1002 values and 1000 nodes"),
                             HasSubstr("more than the 62.5 KiB that "
                                       "LoadOptions::table_memory_limit_bytes allows"),
                             HasSubstr("Nothing was allocated"))));
  EXPECT_EQ(host->counters().allocations, allocations);
  // 8 KiB per node: far above.
  options.table_memory_limit_bytes = size_t{8} << 20;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward", options));
  EXPECT_GT(host->counters().allocations, allocations);
}

TEST(LoadTables, HostMemoryIsAskedABoundedNumberOfTimesWhateverTheDelegates) {
  // Reading a program and loading a method check their structures against the host's available
  // memory, which costs a few file reads. A method of many graph delegates parses one small
  // sub-program per distinct payload: those must not ask again, or the load of 200 delegates
  // pays for 200 queries.
  constexpr int kDelegates = 200;
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {16});
  for (int i = 0; i < kDelegates; ++i) {
    // Each payload adds its own constant: no two are the same, so none is shared.
    v = m.GraphDelegate("cuda:0", {v}, [i](MethodBuilder& g, absl::Span<const ValueId> in) {
      ValueId c = g.ConstantF32("c", {16}, std::vector<float>(16, static_cast<float>(i)));
      return std::vector<ValueId>{g.Op("add", {in[0], c})};
    })[0];
  }
  m.Output(v);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, pb.Build());
  Runtime rt;
  const size_t before = internal::HostAvailableBytesQueries();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  // The method's budget check asks once for the host and once per sim device it uses.
  EXPECT_LE(internal::HostAvailableBytesQueries() - before, 4u);
  // A structure over the floor is still checked against the host.
  const size_t asked = internal::HostAvailableBytesQueries();
  internal::HostAvailableBytesFor(internal::kHostMemoryQueryFloorBytes);
  EXPECT_EQ(internal::HostAvailableBytesQueries(), asked + 1);
  internal::HostAvailableBytesFor(internal::kHostMemoryQueryFloorBytes - 1);
  EXPECT_EQ(internal::HostAvailableBytesQueries(), asked + 1);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FERRY_TEST_HEAP_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FERRY_TEST_HEAP_CHECKED 1
#endif
#endif

// A field of /proc/self/status ("VmRSS", "VmHWM") in bytes; 0 when it cannot be read.
size_t StatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoul(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// The growth of the peak resident size over one load of `program`'s "forward", in a child process
// whose freed heap memory has been returned to the system first, in `*peak`; 0 when the peak
// cannot be reset. A fatal failure when the child cannot be run or its load fails.
void LoadPeakBytes(const Program& program, size_t* peak) {
  Runtime rt;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    malloc_trim(0);
    ReleaseCachedLargeTables();
    size_t report[2] = {0, 0};  // bytes of peak growth; 1 when the load succeeded
    std::FILE* clear = std::fopen("/proc/self/clear_refs", "we");
    if (clear != nullptr && std::fputs("5", clear) >= 0 && std::fclose(clear) == 0) {
      const size_t before = StatusBytes("VmRSS");
      const bool ok = rt.LoadMethod(program, "forward").ok();
      report[0] = StatusBytes("VmHWM") - before;
      report[1] = ok ? 1 : 0;
    }
    (void)!write(fds[1], report, sizeof(report));
    _exit(0);
  }
  close(fds[1]);
  size_t report[2] = {0, 0};
  const bool read_all = read(fds[0], report, sizeof(report)) == sizeof(report);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(read_all);
  *peak = 0;
  if (report[0] == 0 && report[1] == 0) return;
  ASSERT_EQ(report[1], 1u) << "the load failed";
  *peak = report[0];
}

TEST(LoadTables, EstimateCoversThePeak) {
#ifdef FERRY_TEST_HEAP_CHECKED
  GTEST_SKIP() << "a sanitizer's allocator changes what memory the load takes";
#else
  // The estimate the load checks its tables against (LoadTableBytes), held to the growth of the
  // peak resident size over one load: of 100,000 nodes of two arguments each, of 1,000 host
  // nodes of 1,001 arguments each, and of 300 graph delegates of 1,000 arguments each (whose
  // payloads, sub-programs of 1,000 inputs, the backend reads and plans).
  struct Case {
    const char* name;
    std::unique_ptr<Program> program;
  };
  Case cases[] = {{"add chain", AddChain(100000)},
                  {"long lists", LongArgumentLists(1000, 1000)},
                  {"delegates with long lists", LongArgumentLists(300, 1000, true)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    size_t peak_bytes = 0;
    ASSERT_NO_FATAL_FAILURE(LoadPeakBytes(*c.program, &peak_bytes));
    if (peak_bytes == 0) GTEST_SKIP() << "cannot reset the peak resident size";
    ASSERT_OK_AND_ASSIGN(const MethodDef* m, c.program->method("forward"));
    const double estimate = static_cast<double>(internal::LoadTableBytes(*m));
    const double peak = static_cast<double>(peak_bytes);
    // The peak at most a quarter over the estimate...
    EXPECT_LE(peak, 1.25 * estimate) << "raise the kLoadTableBytesPer... figures";
    // ...and at least half of it, so that methods that fit are not refused.
    EXPECT_GE(peak, 0.5 * estimate) << "lower the kLoadTableBytesPer... figures";
  }
#endif
}

}  // namespace
}  // namespace ferry::testing
