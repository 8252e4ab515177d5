// Programs and callers that try to break the runtime: delegate payloads that disagree with their
// declared results, declared sizes beyond the machine's memory, caller buffers that overlap or
// have too many dimensions, outputs read after a failure, a program file changed after loading.
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
#include "ferry/base/huge_pages.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/memory/devices/host/host_device.h"
#include "ferry/memory/devices/sim/sim_device.h"
#include "ferry/runtime/internal/load_util.h"
#include "ferry/runtime/plan_printer.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A graph payload whose "main" returns relu of a float32 [2, 3] input.
std::vector<uint8_t> ReluPayload(std::vector<int64_t> sizes) {
  ProgramBuilder pb;
  MethodBuilder& g = pb.AddMethod("main");
  g.Output(g.Op("relu", {g.Input("x", DType::kFloat32, std::move(sizes))}));
  return std::move(pb.Build()).value();
}

// A method calling that payload on `device` while declaring `declared` as its result.
std::vector<uint8_t> MismatchedDelegateProgram(const std::string& device,
                                               std::vector<int64_t> declared) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  DelegateOptions options;
  options.name = "mismatch";
  std::vector<ValueId> r = m.Delegate(kGraphBackendName, device, ReluPayload({2, 3}), {x},
                                      {TensorMeta{DType::kFloat32, {declared.begin(), declared.end()}, {}}},
                                      options);
  m.Output(r[0]);
  return std::move(pb.Build()).value();
}

TEST(DelegateContract, ResultLargerThanThePayloadProducesIsRefusedAtLoad) {
  for (const std::string device : {"cpu", "cuda:0"}) {
    SCOPED_TRACE(device);
    ASSERT_OK_AND_ASSIGN(auto program,
                         Program::FromBytes(MismatchedDelegateProgram(device, {2, 768})));
    Runtime rt;
    EXPECT_THAT(rt.LoadMethod(*program, "forward"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("node 0 (mismatch)"), HasSubstr("delegate \"graph\""),
                               HasSubstr("result 0"), HasSubstr("float32[2, 768]"),
                               HasSubstr("float32[2, 3]"))));
  }
}

TEST(DelegateContract, ResultSmallerThanThePayloadProducesIsRefusedAtLoad) {
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(MismatchedDelegateProgram("cuda:0", {3})));
  Runtime rt;
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("float32[3]"), HasSubstr("float32[2, 3]"))));
}

// A backend an application registers gets the same check through DelegateInstance::signature().
class FixedSignatureBackend : public Backend {
 public:
  explicit FixedSignatureBackend(DelegateSignature signature) : signature_(std::move(signature)) {}
  absl::string_view name() const override { return "fixed"; }
  bool SupportsDevice(DeviceType) const override { return true; }
  absl::StatusOr<std::unique_ptr<DelegateInstance>> Init(const DelegateInit&) const override {
    return std::unique_ptr<DelegateInstance>(new Instance(signature_));
  }

 private:
  class Instance : public DelegateInstance {
   public:
    explicit Instance(DelegateSignature s) : s_(std::move(s)) {}
    DelegateSignature signature() const override { return s_; }
    absl::Status Execute(absl::Span<TensorRef* const>, absl::Span<TensorRef* const>,
                         void*) override {
      return absl::OkStatus();
    }

   private:
    DelegateSignature s_;
  };
  DelegateSignature signature_;
};

TEST(DelegateContract, ApplicationBackendsAreCheckedToo) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {4});
  DelegateOptions options;
  options.name = "app";
  m.Output(m.Delegate("fixed", "cuda:0", {}, {x}, {TensorMeta{DType::kFloat32, {4}, {}}},
                      options)[0]);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, pb.Build());
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(bytes));
  struct Case {
    DelegateSignature signature;
    std::string expected;
  };
  const Case cases[] = {
      {{{{DType::kFloat32, {4}}}, {{DType::kFloat32, {4}}}}, ""},
      {{{{DType::kInt64, {4}}}, {{DType::kFloat32, {4}}}},
       "argument 0 (\"x\") is declared float32[4], but the backend's payload reads int64[4]"},
      {{{{DType::kFloat32, {4}}}, {{DType::kFloat32, {5}}}},
       "result 0 (\"app\") is declared float32[4], but the backend's payload produces "
       "float32[5]"},
      {{{{DType::kFloat32, {4}}}, {}}, "declares 1 results, but its payload produces 0"},
      {{{}, {{DType::kFloat32, {4}}}}, "but its payload reads only 0 tensors"},
  };
  for (const Case& c : cases) {
    Runtime rt;
    ASSERT_OK(rt.RegisterBackend(std::make_unique<FixedSignatureBackend>(c.signature)));
    absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(*program, "forward");
    if (c.expected.empty()) {
      EXPECT_OK(method.status());
    } else {
      EXPECT_THAT(method, StatusIs(absl::StatusCode::kInvalidArgument,
                                   AllOf(HasSubstr("node 0 (app)"), HasSubstr(c.expected))));
    }
  }
}

// The programs a fuzzer found, kept beside the project: both declare a graph delegate result
// of another shape than its sub-graph returns.
TEST(DelegateContract, FuzzerReprosAreRefusedAtLoad) {
  const std::string dir = FERRY_SHARED_DIR "/repro";
  struct Repro {
    const char* file;
    const char* declared;
  };
  for (const Repro& r : {Repro{"fuzz_delegate_result_shape.ferry", "float32[2, 768]"},
                         Repro{"fuzz_delegate_result_shape_segv.ferry", "float32[14850, 768]"}}) {
    const std::string path = dir + "/" + r.file;
    if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not present";
    SCOPED_TRACE(path);
    ASSERT_OK_AND_ASSIGN(auto program, Program::Load(path));
    Runtime rt;
    EXPECT_THAT(rt.LoadMethod(*program, "forward"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("delegate \"graph\""), HasSubstr(r.declared),
                               HasSubstr("produces float32[2, 3]"))));
  }
}

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// relu of an input of `elements` floats, on the host or (with a device) inside a delegate there:
// its result is planned in that device's arena.
std::unique_ptr<Program> ReluProgram(int64_t rows, int64_t cols,
                                     std::optional<std::string> device) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {rows, cols});
  if (device.has_value()) {
    DelegateOptions options;
    options.name = "big_delegate";
    m.Output(m.GraphDelegate(device, {x}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op("relu", {in[0]}, "big")};
    }, options)[0]);
  } else {
    m.Output(m.Op("relu", {x}, "big"));
  }
  std::vector<uint8_t> bytes = std::move(pb.Build()).value();
  return std::move(Program::FromBytes(bytes)).value();
}

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

TEST(MemoryBudget, TensorLargerThanTheHostIsRefusedBeforeAnyAllocation) {
  // 2^45 float32 = 128 TiB: no machine this runs on has it.
  std::unique_ptr<Program> program = ReluProgram(int64_t{1} << 25, int64_t{1} << 20, std::nullopt);
  Runtime rt;
  auto* host = static_cast<HostDevice*>(rt.devices().Find(Device::Host()));
  const uint64_t allocations = host->counters().allocations;
  const size_t resident = ResidentBytes();
  absl::StatusOr<std::unique_ptr<Method>> method = rt.LoadMethod(*program, "forward");
  EXPECT_THAT(method, StatusIs(absl::StatusCode::kResourceExhausted,
                               AllOf(HasSubstr("method \"forward\" does not fit"),
                                     HasSubstr("host"), HasSubstr("\"big\""),
                                     HasSubstr("128.00 TiB"), HasSubstr("Nothing was allocated"))));
  EXPECT_EQ(host->counters().allocations, allocations);
  EXPECT_LT(ResidentBytes() - std::min(ResidentBytes(), resident), size_t{10} << 20);
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

TEST(MemoryBudget, SimDeviceCapacityIsAConfigurableSize) {
  RuntimeOptions options;
  options.sim.bytes = size_t{1} << 20;
  Runtime rt(options);
  auto* sim0 = static_cast<SimDevice*>(rt.devices().Find(Device::Sim(0)));
  // 512 x 1024 float32 = 2 MiB: twice the device.
  std::unique_ptr<Program> program = ReluProgram(512, 1024, "cuda:0");
  EXPECT_THAT(rt.LoadMethod(*program, "forward"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("cuda:0 (as sim:0)"), HasSubstr("the device has available"),
                             HasSubstr("1.0 MiB"), HasSubstr("\"x\""))));
  EXPECT_EQ(sim0->counters().allocations, 0u);
  // Half the size fits (input copy and result: 2 x 256 KiB).
  std::unique_ptr<Program> small = ReluProgram(128, 512, "cuda:0");
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*small, "forward"));
  EXPECT_GT(sim0->counters().allocations, 0u);
}

TEST(MemoryBudget, CallerLimitsPerDeviceAreHonoured) {
  std::unique_ptr<Program> program = ReluProgram(64, 64, "cuda:0");  // 16 KiB per tensor
  Runtime rt;
  LoadOptions options;
  options.memory_limits[Device::Sim(0)] = 16 << 10;
  EXPECT_THAT(rt.LoadMethod(*program, "forward", options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("LoadOptions::memory_limits allows 16.0 KiB"),
                             HasSubstr("needs 32.0 KiB"))));
  options.memory_limits[Device::Sim(0)] = 32 << 10;
  EXPECT_OK(rt.LoadMethod(*program, "forward", options).status());
  options.memory_limits[Device::Host()] = 1024;  // the host arena holds the d2h copy of the result
  EXPECT_THAT(rt.LoadMethod(*program, "forward", options),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("does not fit in host")));
}

TEST(MemoryBudget, NearTheLimitWarnsAndThePlanShowsTheTotals) {
  std::unique_ptr<Program> program = ReluProgram(64, 64, "cuda:0");  // 32 KiB on sim:0
  Runtime rt;
  LoadOptions options;
  options.memory_limits[Device::Sim(0)] = 36 << 10;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward", options));
  std::vector<std::string> warnings;
  for (const Diagnostic& d : method->plan().placement.diagnostics) warnings.push_back(d.message);
  EXPECT_THAT(warnings, ::testing::Contains(AllOf(HasSubstr("32.0 KiB on cuda:0 (as sim:0)"),
                                                  HasSubstr("89%"),
                                                  HasSubstr("its memory limit allows"))));
  const std::string text = FormatPlanText(*method);
  EXPECT_THAT(text, HasSubstr("memory (arena and constants, per device)"));
  EXPECT_THAT(text, HasSubstr("limit 36.0 KiB"));
  // Far from the limit: no warning.
  options.memory_limits[Device::Sim(0)] = 1 << 20;
  ASSERT_OK_AND_ASSIGN(method, rt.LoadMethod(*program, "forward", options));
  for (const Diagnostic& d : method->plan().placement.diagnostics) {
    EXPECT_THAT(d.message, ::testing::Not(HasSubstr("memory limit")));
  }
}

// Two inputs and an output [2, 2]: out = a + b on the host.
struct AddMethod {
  AddMethod() {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId a = m.Input("a", DType::kFloat32, {2, 2});
    ValueId b = m.Input("b", DType::kFloat32, {2, 2});
    m.Output(m.Op("add", {a, b}, "sum"));
    m.Output(m.Op("mul", {a, b}, "product"));
    program = std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
    method = std::move(rt.LoadMethod(*program, "forward")).value();
  }
  Runtime rt;
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
};

TensorView View(std::vector<float>& v) { return TensorView::Host(DType::kFloat32, {2, 2}, v.data()); }

TEST(CallerBuffers, OutputBufferOverlappingAnInputIsRefusedAndNothingIsWritten) {
  AddMethod f;
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, other(4, 0.0f);
  ASSERT_OK(f.method->SetInput(0, View(a)));
  ASSERT_OK(f.method->SetInput(1, View(b)));
  ASSERT_OK(f.method->SetOutputBuffer(0, View(a)));  // binding in any order is allowed ...
  ASSERT_OK(f.method->SetOutputBuffer(1, View(other)));
  EXPECT_THAT(f.method->Execute(),  // ... but Execute refuses it before any step
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 0 (\"sum\")"), HasSubstr("input 0 (\"a\")"),
                             HasSubstr("Nothing was run"))));
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(other, std::vector<float>(4, 0.0f));
  // Two outputs into one buffer, partly overlapping.
  std::vector<float> shared(6, 0.0f);
  ASSERT_OK(f.method->SetOutputBuffer(0, TensorView::Host(DType::kFloat32, {2, 2}, shared.data())));
  ASSERT_OK(
      f.method->SetOutputBuffer(1, TensorView::Host(DType::kFloat32, {2, 2}, shared.data() + 2)));
  EXPECT_THAT(f.method->Execute(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 0 (\"sum\")"), HasSubstr("output 1 (\"product\")"))));
  // Rebinding to separate memory makes it run, with the right values.
  std::vector<float> sum(4), product(4);
  ASSERT_OK(f.method->SetOutputBuffer(0, View(sum)));
  ASSERT_OK(f.method->SetOutputBuffer(1, View(product)));
  ASSERT_OK(f.method->Execute());
  EXPECT_EQ(sum, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(product, (std::vector<float>{10, 40, 90, 160}));
}

TEST(CallerBuffers, OutputOutOfRangeIsAnEmptyView) {
  AddMethod f;
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  ASSERT_OK(f.method->SetInput(0, View(a)));
  ASSERT_OK(f.method->SetInput(1, View(b)));
  ASSERT_OK(f.method->Execute());
  EXPECT_NE(f.method->Output(1).data(), nullptr);
  for (size_t i : {size_t{2}, size_t{99}, SIZE_MAX}) {
    TensorView out = f.method->Output(i);
    EXPECT_EQ(out.data(), nullptr) << i;
    EXPECT_EQ(out.numel(), 1) << i;  // rank 0
    EXPECT_EQ(out.sizes().size(), 0u) << i;
  }
}

TEST(CallerBuffers, RankAboveTheMaximumIsRefused) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  const std::vector<int64_t> rank8(8, 1);
  m.Output(m.Op("relu", {m.Input("x", DType::kFloat32, rank8)}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  float x = 1.0f;
  EXPECT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, rank8, &x)));
  const std::vector<int64_t> rank9(9, 1);
  EXPECT_THAT(method->SetInput(0, TensorView::Host(DType::kFloat32, rank9, &x)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0 (\"x\")"), HasSubstr("rank 9"),
                             HasSubstr("maximum 8"))));
  EXPECT_THAT(method->SetOutputBuffer(0, TensorView::Host(DType::kFloat32, rank9, &x)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 9")));
}

// After a failed Execute, Output() gives nothing to read until a call succeeds; a caller's output
// buffer holds its old content when the failure came before the step that writes it.
TEST(CallerBuffers, FailedExecuteLeavesNoOutputToReadAndUnwrittenBuffersUnchanged) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId b = m.Input("b", DType::kFloat32, {2, 2});
  m.Output(Call(m, kD0, "on_device", {a, b}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> av = {1, 2, 3, 4}, bv = {1, 1, 1, 1}, out(4, -7.0f);
  ASSERT_OK(method->SetInput(0, View(av)));
  ASSERT_OK(method->SetInput(1, View(bv)));
  ASSERT_OK(method->SetOutputBuffer(0, View(out)));
  ASSERT_OK(method->Execute());
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 5}));
  ASSERT_EQ(method->Output(0).data(), out.data());
  // The first copy (h2d of a) fails: the output's d2h never runs.
  out.assign(4, -7.0f);
  auto* sim0 = static_cast<SimDevice*>(rt.devices().Find(Device::Sim(0)));
  sim0->set_copy_failure_after(0);
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInternal, HasSubstr("injected")));
  EXPECT_EQ(method->Output(0).data(), nullptr);
  EXPECT_EQ(out, std::vector<float>(4, -7.0f));
  ASSERT_OK(method->Execute());
  EXPECT_EQ(method->Output(0).data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 5}));
}

// An output that is the result of in-place writes (add_ of add_ of relu's result) shares the
// memory of the value they write: a caller's buffer bound to it becomes that memory, so every
// write lands there. An in-place result on the method's input is the input's memory and is
// refused as a destination.
TEST(CallerBuffers, OutputOfInPlaceWritesIsWrittenIntoTheCallersBuffer) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {0.5f, 0.5f, 0.5f, 0.5f});
  ValueId v = m.Op("relu", {x});
  for (int i = 0; i < 3; ++i) v = m.Op("add_", {v, w});
  m.Output(v);
  m.Output(m.Op("add_", {x, w}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  EXPECT_THAT(method->SetOutputBuffer(1, TensorView::Host(DType::kFloat32, {2, 2}, nullptr)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("output 1"), HasSubstr("memory of value \"x\""))));
  std::vector<float> xv = {-1, 2, -3, 4}, out(4, -7.0f);
  ASSERT_OK(method->SetInput(0, View(xv)));
  ASSERT_OK(method->SetOutputBuffer(0, View(out)));
  ASSERT_OK(method->Execute());
  // relu(x) + 3 * 0.5, computed here; then x itself was written in place by the second output.
  EXPECT_EQ(out, (std::vector<float>{1.5f, 3.5f, 1.5f, 5.5f}));
  EXPECT_EQ(method->Output(0).data(), out.data());
  EXPECT_EQ(xv, (std::vector<float>{-0.5f, 2.5f, -2.5f, 4.5f}));
}

// forward(x) with `n` outputs, output k = relu(x) for even k, neg(x) for odd k; x float32 [2, 2].
std::unique_ptr<Program> ManyOutputsProgram(int n) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 2});
  for (int k = 0; k < n; ++k) m.Output(m.Op(k % 2 == 0 ? "relu" : "neg", {x}));
  return std::move(Program::FromBytes(std::move(pb.Build()).value())).value();
}

// With more inputs and outputs than are compared pairwise, overlaps are found by a sweep in
// address order: every kind of overlap is still refused, naming both, and separate buffers run.
TEST(CallerBuffers, OverlapsAmongManyOutputsAreFound) {
  constexpr int kOutputs = 24;
  std::unique_ptr<Program> program = ManyOutputsProgram(kOutputs);
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x = {-1, 2, -3, 4, 0, 0, 0, 0};  // the input is the first four
  std::vector<float> out(4 * kOutputs, 0.0f);
  ASSERT_OK(method->SetInput(0, View(x)));
  auto bind = [&](int k, float* data) {
    return method->SetOutputBuffer(k, TensorView::Host(DType::kFloat32, {2, 2}, data));
  };
  for (int k = 0; k < kOutputs; ++k) ASSERT_OK(bind(k, out.data() + 4 * k));
  ASSERT_OK(method->Execute());
  for (int k = 0; k < kOutputs; ++k) {
    const std::vector<float> expected =
        k % 2 == 0 ? std::vector<float>{0, 2, 0, 4} : std::vector<float>{1, -2, 3, -4};
    EXPECT_EQ(std::vector<float>(out.begin() + 4 * k, out.begin() + 4 * k + 4), expected) << k;
  }
  // Output 17 on the input, then starting inside it.
  ASSERT_OK(bind(17, x.data()));
  EXPECT_THAT(method->Execute(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 17"), HasSubstr("input 0 (\"x\")"))));
  ASSERT_OK(bind(17, x.data() + 2));
  EXPECT_THAT(method->Execute(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("output 17"), HasSubstr("input 0 (\"x\")"),
                             HasSubstr("Nothing was run"))));
  ASSERT_OK(bind(17, out.data() + 4 * 17));
  // Output 12 half over output 3 (and 3 over nothing else).
  ASSERT_OK(bind(12, out.data() + 4 * 3 + 2));
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("output 3"), HasSubstr("output 12"))));
  // Output 0 inside the furthest-reaching output range seen before it in address order: the last
  // output, made to span everything below the others' buffers.
  std::vector<float> wide(4 * kOutputs + 8, 0.0f);
  ASSERT_OK(bind(12, out.data() + 4 * 12));
  ASSERT_OK(method->SetOutputBuffer(kOutputs - 1,
                                    TensorView::Host(DType::kFloat32, {2, 2}, wide.data())));
  ASSERT_OK(bind(0, wide.data() + 2));
  EXPECT_THAT(method->Execute(), StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("output 0"), HasSubstr("output 23"))));
  ASSERT_OK(bind(0, out.data()));
  ASSERT_OK(bind(kOutputs - 1, out.data() + 4 * (kOutputs - 1)));
  ASSERT_OK(method->Execute());
}

TEST(CallerBuffers, FreedDeviceMemoryIsNamedAsFreed) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  m.Output(Call(m, kD0, "on_device", {a}));
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(std::move(pb.Build()).value()));
  Runtime rt;
  LoadOptions options;
  options.skip_h2d_for_method_inputs = true;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward", options));
  DeviceRuntime* sim0 = rt.devices().Find(Device::Sim(0));
  void* freed = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*sim0, 16, 64));
    freed = buffer.data();
  }
  EXPECT_THAT(method->SetInput(0, TensorView(DType::kFloat32, {2, 2}, freed, Device::Sim(0))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 0 (\"a\")"), HasSubstr("was freed"))));
  // Memory that was never the device's is not called freed.
  float host[4] = {};
  EXPECT_THAT(method->SetInput(0, TensorView(DType::kFloat32, {2, 2}, host, Device::Sim(0))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("not memory of that device"),
                             ::testing::Not(HasSubstr("freed")))));
}

// A program smaller than the mapping threshold is read, so the file may change after Load.
TEST(ProgramFile, SmallProgramSurvivesItsFileBeingTruncated) {
  const std::string path =
      ::testing::TempDir() + "/ferry_truncated_" + std::to_string(getpid()) + ".ferry";
  {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId a = m.Input("a", DType::kFloat32, {2, 2});
    ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
    m.Output(m.Op("add", {a, w}));
    ASSERT_OK(pb.WriteFile(path));
  }
  ASSERT_OK_AND_ASSIGN(auto program, Program::Load(path));
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> a = {10, 20, 30, 40};
  ASSERT_OK(method->SetInput(0, View(a)));
  ASSERT_OK(method->Execute());
  const float* out = method->Output(0).data_as<float>();
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{11, 22, 33, 44}));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ferry::testing
