// Load phase 4 (runtime/load/init_backends.cc): a delegate whose payload produces results other
// than the program declares is refused at load, naming the delegate and both shapes; for Ferry's
// graph backend, an application's backend, and the fuzzers' reproducers.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace ferry::testing
