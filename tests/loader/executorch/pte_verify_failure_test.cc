// Where the FlatBuffers verifier rejects a damaged ExecuTorch program
// (loader/executorch/pte_verify_failure.cc, through ReadExecuTorchProgram): the refusal names the
// schema's path to the first part that fails on its own, the method by name, the union member by
// type. Each case damages one length or offset of a hand-made program (tests/testing/
// hand_made_pte.h) found through the generated accessors, so the expected path is the one the
// test chose to break.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/executorch/schema/executorch_program_generated.h"
#include "tests/testing/hand_made_pte.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

namespace fb = ::ferry::et::fbs;
using ::ferry::testing::BuildPte;
using ::ferry::testing::PteSpec;
using ::ferry::testing::PutLE;
using ::ferry::testing::RefusedWith;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// The byte offset of `p` in `bytes`.
size_t At(const std::vector<uint8_t>& bytes, const void* p) {
  return static_cast<size_t>(static_cast<const uint8_t*>(p) - bytes.data());
}

const fb::ExecutionPlan* Plan(const std::vector<uint8_t>& bytes, size_t i) {
  return fb::GetProgram(bytes.data())
      ->execution_plan()
      ->Get(static_cast<flatbuffers::uoffset_t>(i));
}

// A vector's or string's length word set far past the end of the program.
void BreakLength(std::vector<uint8_t>& bytes, const void* vector_or_string) {
  PutLE(bytes, At(bytes, vector_or_string), 0x0fffffff, 4);
}

TEST(PteVerifyFailure, NamesTheTensorField) {
  std::vector<uint8_t> bytes = BuildPte();
  BreakLength(bytes, Plan(bytes, 0)->values()->Get(4)->val_as_Tensor()->sizes());
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              RefusedWith("the FlatBuffers verifier rejected its " /* size */));
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              RefusedWith("at execution_plan[0] (method \"forward\").values[4] (Tensor).sizes"));
}

TEST(PteVerifyFailure, NamesTheInstructionAndItsArguments) {
  std::vector<uint8_t> bytes = BuildPte();
  const fb::Chain* chain = Plan(bytes, 0)->chains()->Get(0);
  BreakLength(bytes, chain->instructions()->Get(1)->instr_args_as_DelegateCall()->args());
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              RefusedWith("at execution_plan[0] (method \"forward\").chains[0].instructions[1] "
                          "(DelegateCall).args"));
  bytes = BuildPte();
  chain = Plan(bytes, 0)->chains()->Get(0);
  BreakLength(bytes, chain->instructions()->Get(0)->instr_args_as_KernelCall()->args());
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              RefusedWith("chains[0].instructions[0] (KernelCall).args"));
}

TEST(PteVerifyFailure, NamesOperatorsDelegatesAndTheMethodList) {
  std::vector<uint8_t> bytes = BuildPte();
  BreakLength(bytes, Plan(bytes, 0)->operators()->Get(0)->overload());
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              RefusedWith("(method \"forward\").operators[0].overload"));
  bytes = BuildPte();
  BreakLength(bytes, Plan(bytes, 0)->delegates()->Get(0)->id());
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("(method \"forward\").delegates[0].id"));
  bytes = BuildPte();
  BreakLength(bytes, fb::GetProgram(bytes.data())->execution_plan());
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              AllOf(RefusedWith("rejected its"), RefusedWith("bytes at execution_plan (")));
}

TEST(PteVerifyFailure, NamesTheProgramLevelTables) {
  std::vector<uint8_t> bytes = BuildPte();
  const fb::Program* program = fb::GetProgram(bytes.data());
  // The first element's offset, pointing far outside the program.
  PutLE(bytes, At(bytes, program->segments()->Data()), 0x0fffff00, 4);
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("bytes at segments[0] ("));
  bytes = BuildPte();
  BreakLength(bytes, fb::GetProgram(bytes.data())->constant_segment()->offsets());
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("bytes at constant_segment ("));
  bytes = BuildPte();
  BreakLength(bytes, fb::GetProgram(bytes.data())->backend_delegate_data()->Get(0)->data());
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("bytes at backend_delegate_data[0] ("));
}

TEST(PteVerifyFailure, NamesTheMethodOfSeveralAndEscapesItsName) {
  PteSpec spec;
  spec.method_names = {"first", "second\x1b[2J"};
  std::vector<uint8_t> bytes = BuildPte(spec);
  BreakLength(bytes, Plan(bytes, 1)->values()->Get(5)->val_as_IntList()->items());
  const absl::StatusOr<EtProgram> read = ReadExecuTorchProgram(bytes);
  EXPECT_THAT(read, RefusedWith("at execution_plan[1] (method \"second\\x1b[2J\").values[5] "
                                "(IntList) ("));
  EXPECT_THAT(read, Not(RefusedWith("\x1b")));
}

TEST(PteVerifyFailure, NamesTheRootOffset) {
  std::vector<uint8_t> bytes = BuildPte();
  PutLE(bytes, 0, 0x7ffffff0, 4);
  EXPECT_THAT(ReadExecuTorchProgram(bytes), RefusedWith("at the root offset (bytes 0..3)"));
}

// Every single-byte change of a program's FlatBuffer that the verifier rejects is refused with a
// place named, never with the message for limits (which a program this small cannot reach).
TEST(PteVerifyFailure, EveryRejectedByteFlipNamesAPlace) {
  const std::vector<uint8_t> good = BuildPte();
  const uint64_t program_size =
      good[::ferry::testing::kProgramSizeAt] | (good[::ferry::testing::kProgramSizeAt + 1] << 8);
  int rejected = 0;
  for (size_t i = 0; i < program_size; ++i) {
    if (i >= 8 && i < 40) continue;  // the extended header has its own checks
    std::vector<uint8_t> bytes = good;
    bytes[i] ^= 0xF0;
    const absl::StatusOr<EtProgram> read = ReadExecuTorchProgram(bytes);
    if (read.ok() || !absl::StrContains(read.status().message(), "verifier rejected")) continue;
    ++rejected;
    EXPECT_THAT(read.status().message(), AllOf(HasSubstr(" bytes at "), Not(HasSubstr("nest"))))
        << "byte " << i;
  }
  EXPECT_GT(rejected, 10);
}

}  // namespace
}  // namespace ferry
