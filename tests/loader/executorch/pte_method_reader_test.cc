// The .pte reader's methods (loader/executorch/pte_method_reader.cc): hand-made programs
// (tests/testing/hand_made_pte.h) with one thing broken each, refused with a message that names
// the method, the value or instruction, and the problem; and lists and strings the file shares
// among many tables, refused before they are copied once per table.
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/loader/executorch/pte_reader.h"
#include "flatbuffers/flatbuffers.h"
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
using ::ferry::testing::Read;
using ::ferry::testing::ReadWith;
using ::ferry::testing::RefusedWith;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A method "forward" of `lists` IntList values sharing one list of `entries` items, `strings`
// String values sharing one string of `string_bytes` bytes, and `calls` kernel calls sharing one
// argument list of `args` entries: each shared list or string is in the file once.
std::vector<uint8_t> SharingPte(int lists, int entries, int strings, int string_bytes, int calls,
                                int args) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::EValue>> values = {
      fb::CreateEValue(fbb, fb::KernelTypes::Int, fb::CreateInt(fbb, 1).Union())};
  const auto list = fb::CreateIntList(fbb, fbb.CreateVector(std::vector<int64_t>(entries, 0)));
  for (int i = 0; i < lists; ++i) {
    values.push_back(fb::CreateEValue(fbb, fb::KernelTypes::IntList, list.Union()));
  }
  const auto text = fb::CreateString(fbb, fbb.CreateString(std::string(string_bytes, 'x')));
  for (int i = 0; i < strings; ++i) {
    values.push_back(fb::CreateEValue(fbb, fb::KernelTypes::String, text.Union()));
  }
  const auto call = fb::CreateInstruction(
      fbb, fb::InstructionArguments::KernelCall,
      fb::CreateKernelCall(fbb, 0, fbb.CreateVector(std::vector<int32_t>(args, 0))).Union());
  const std::vector<flatbuffers::Offset<fb::Instruction>> instructions(calls, call);
  const std::vector<flatbuffers::Offset<fb::Chain>> chains = {
      fb::CreateChainDirect(fbb, nullptr, nullptr, &instructions)};
  const std::vector<flatbuffers::Offset<fb::Operator>> operators = {
      fb::CreateOperatorDirect(fbb, "aten::add", "out")};
  const std::vector<int64_t> arenas = {0};
  const std::vector<flatbuffers::Offset<fb::ExecutionPlan>> plans = {fb::CreateExecutionPlanDirect(
      fbb, "forward", 0, &values, nullptr, nullptr, &chains, &operators, nullptr, &arenas)};
  fb::FinishProgramBuffer(fbb, fb::CreateProgramDirect(fbb, 0, &plans));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

TEST(ExecuTorchHandMadeTest, ArgumentOutOfRange) {
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.args = {0, 1, 3, 2, 40};
              }),
              RefusedWith("method \"forward\", instruction 0 (kernel call aten::add.out): "
                          "argument 4 is value 40, but the method has 6 values"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.delegate_args = {-1}; }),
              RefusedWith("instruction 1 (delegate call TestBackend): argument 0 is value -1"));
}

// Every instruction's node is named after its operator or backend, so a name of megabytes would
// be copied once per instruction: names longer than any real one are refused at the table.
TEST(ExecuTorchHandMadeTest, OverlongOperatorAndBackendNamesAreRefused) {
  absl::StatusOr<EtProgram> longest =
      ReadWith([](PteSpec& s) { s.op_name = std::string(1021, 'a'); });
  ASSERT_OK(longest.status());  // 1,021 + "out": exactly the limit
  EXPECT_EQ(longest->methods.at(0).operators.at(0).name.size(), 1021u);
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.op_name = std::string(1022, 'a'); }),
              RefusedWith("operator 0: its name and overload are 1025 bytes; at most 1024 are "
                          "read"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.backend_id = std::string(5000, 'b'); }),
              RefusedWith("delegate 0: its backend id is 5000 bytes; at most 1024 are read"));
}

TEST(ExecuTorchHandMadeTest, OperatorAndDelegateOutOfRange) {
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.op_index = 5; }),
              RefusedWith("instruction 0 (kernel call): its operator is 5, but the method has 1 "
                          "operators"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.delegate_index = 1; }),
              RefusedWith("instruction 1 (delegate call): its delegate is 1, but the method has "
                          "1 delegates"));
}

TEST(ExecuTorchHandMadeTest, DelegatePayloadOutOfRange) {
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.payload_index = 3; }),
              RefusedWith("delegate 0 (TestBackend): its payload is inline data 3, but the "
                          "program has 1"));
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.payload_location = fb::DataLocation::SEGMENT;
                s.payload_index = 2;
              }),
              RefusedWith("its payload is segment 2, but the program has 1 segments"));
}

TEST(ExecuTorchHandMadeTest, InputsAndOutputsOutOfRange) {
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.inputs = {0, 9};
              }),
              RefusedWith("method \"forward\", input 1: it is value 9, but the method has 6 "
                          "values"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.outputs = {6}; }),
              RefusedWith("output 0: it is value 6"));
}

TEST(ExecuTorchHandMadeTest, ConstantOutsideItsSegment) {
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.constant_offsets = {0, 4};
              }),
              RefusedWith("value 4 (tensor): its 8 bytes at offset 4 of the constant segment "
                          "(segment 0) run past the segment's 8 bytes"));
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.constant_offsets = {0, 0, 0};
                s.constant_index = 7;
              }),
              RefusedWith("its data is entry 7 of the constant segment, which has 3 entries"));
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.constant_offsets = {0, std::numeric_limits<uint64_t>::max()};
              }),
              RefusedWith("run past the segment's 8 bytes"));
}

TEST(ExecuTorchHandMadeTest, BadTensorShapesAndTypes) {
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.sizes = {-1}; }),
              RefusedWith("value 4 (tensor): size 0 is -1; sizes must be non-negative"));
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.sizes = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max(),
                           std::numeric_limits<int32_t>::max()};
                s.dim_order = {0, 1, 2};
              }),
              RefusedWith("is too large: its byte size overflows"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.dim_order = {1}; }),
              RefusedWith("dim_order (1) is not a permutation of the 1 dimensions"));
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.sizes = {2, 1};
                s.dim_order = {0, 0};
              }),
              RefusedWith("dim_order (0, 0) is not a permutation of the 2 dimensions"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.scalar_type = 99; }),
              RefusedWith("scalar type 99 is not an ExecuTorch scalar type"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.sizes = std::vector<int32_t>(17, 1); }),
              RefusedWith("rank 17 exceeds ExecuTorch's limit of 16 dimensions"));
}

TEST(ExecuTorchHandMadeTest, PlannedTensorOutsideItsArena) {
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.memory_offset = 44; }),
              RefusedWith("value 2 (tensor): its 8 bytes at offset 44 of arena 1 run past the "
                          "arena's 48 bytes"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.memory_id = 0; }),
              RefusedWith("it is planned in arena 0, but the method has arenas 1..1"));
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.arena_sizes = {0, -48};
              }),
              RefusedWith("arena 1: its size is -48 bytes"));
}

TEST(ExecuTorchHandMadeTest, ArenaDevicesAreReadAndShownPerArena) {
  // Arena 2 on cuda:1; arenas 1 and 3 have no entry, so they are on the CPU (the host).
  ASSERT_OK_AND_ASSIGN(EtProgram program, ReadWith([](PteSpec& s) {
                         s.arena_sizes = {0, 48, 64, 100};
                         s.arena_devices = {{2, 1, 1}};
                       }));
  const EtMethod& m = program.methods.at(0);
  ASSERT_EQ(m.non_const_buffer_devices.size(), 1u);
  EXPECT_EQ(m.non_const_buffer_devices[0].buffer_idx, 2u);
  EXPECT_EQ(m.non_const_buffer_devices[0].device_type, 1);
  EXPECT_EQ(m.non_const_buffer_devices[0].device_index, 1);
  const std::vector<ExporterArena> arenas = EtExporterArenas(m);
  ASSERT_EQ(arenas.size(), 3u);
  EXPECT_EQ(arenas[0].device, Device::Host());
  EXPECT_EQ(arenas[1].device.ToString(), "cuda:1");
  EXPECT_EQ(arenas[2].device, Device::Host());
  // An explicit CPU entry is the host too; without the list every arena is.
  ASSERT_OK_AND_ASSIGN(program, ReadWith([](PteSpec& s) { s.arena_devices = {{1, 0, 0}}; }));
  EXPECT_EQ(EtExporterArenas(program.methods.at(0)).at(0).device, Device::Host());
  ASSERT_OK_AND_ASSIGN(program, Read(PteSpec{}));
  EXPECT_THAT(program.methods.at(0).non_const_buffer_devices, IsEmpty());
}

TEST(ExecuTorchHandMadeTest, MalformedArenaDevicesAreRefused) {
  // The method has arenas 1..2 (entry 0 of non_const_buffer_sizes is reserved).
  auto with = [](std::vector<PteSpec::ArenaDevice> devices) {
    return ReadWith([&](PteSpec& s) {
      s.arena_sizes = {0, 48, 16};
      s.arena_devices = devices;
    });
  };
  EXPECT_THAT(with({{0, 1, 0}}),
              RefusedWith("method \"forward\", non_const_buffer_device entry 0: it names buffer "
                          "0, but the method has buffers 1..2"));
  EXPECT_THAT(with({{1, 1, 0}, {3, 1, 0}}),
              RefusedWith("non_const_buffer_device entry 1: it names buffer 3, but the method has "
                          "buffers 1..2"));
  EXPECT_THAT(with({{-1, 1, 0}}),
              RefusedWith("entry 0: it names buffer -1, but the method has buffers 1..2"));
  EXPECT_THAT(with({{2, 1, 0}, {1, 1, 0}, {2, 0, 0}}),
              RefusedWith("non_const_buffer_device entry 2: buffer 2 already has a device "
                          "(entry 0)"));
  EXPECT_THAT(with({{1, 2, 0}}),
              RefusedWith("non_const_buffer_device entry 0: buffer 1 has device type 2, which is "
                          "not one of 0 CPU, 1 CUDA"));
  EXPECT_THAT(with({{1, -3, 0}}), RefusedWith("buffer 1 has device type -3"));
  EXPECT_THAT(with({{2, 1, -1}}),
              RefusedWith("non_const_buffer_device entry 0: buffer 2 has device index -1; an "
                          "index is non-negative"));
  // A method that plans no arenas has no buffer to name.
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.arena_sizes = {0};
                s.memory_id = 1;
                s.arena_devices = {{1, 1, 0}};
              }),
              RefusedWith("non_const_buffer_device entry 0: it names buffer 1, but the method "
                          "plans no buffers"));
  // The same entry in range reads.
  EXPECT_OK(with({{1, 1, 0}}).status());
}

TEST(ExecuTorchHandMadeTest, ListItemsOfTheWrongKind) {
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.int_list = {0}; }),
              RefusedWith("value 5 (int list): item 0 is value 0, a tensor; the items of an int "
                          "list are int values"));
  EXPECT_THAT(ReadWith([](PteSpec& s) {
                s.int_list = {3, 77};
              }),
              RefusedWith("value 5 (int list): item 1 is value 77, but the method has 6 values"));
}

TEST(ExecuTorchHandMadeTest, MissingUnionMembersAndChains) {
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.empty_value_3 = true; }),
              RefusedWith("value 3: it is tagged int, but the int is missing"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.chains = 0; }),
              RefusedWith("method \"forward\" has no chain of instructions"));
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.chains = 2; }),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("has 2 chains")));
}

TEST(ExecuTorchHandMadeTest, JumpOutsideTheChain) {
  EXPECT_OK(ReadWith([](PteSpec& s) { s.jump_destination = 0; }).status());
  EXPECT_THAT(ReadWith([](PteSpec& s) { s.jump_destination = 3; }),
              RefusedWith("instruction 2 (jump if false): it jumps to instruction 3, but the "
                          "chain has 3 instructions"));
}

TEST(ExecuTorchSharedDataTest, UnsharedListsStringsAndArgumentsAreRead) {
  // The same shape without amplification reads (the ops are checked later, at import).
  ASSERT_OK_AND_ASSIGN(EtProgram program,
                       ReadExecuTorchProgram(SharingPte(100, 2, 100, 8, 100, 2)));
  ASSERT_EQ(program.methods.size(), 1u);
  const EtMethod& m = program.methods[0];
  ASSERT_EQ(m.values.size(), 201u);
  EXPECT_THAT(m.values[100].items, ElementsAre(0, 0));
  EXPECT_EQ(m.values[200].string_value, "xxxxxxxx");
  ASSERT_EQ(m.instructions.size(), 100u);
  EXPECT_THAT(m.instructions[99].args, ElementsAre(0, 0));
}

TEST(ExecuTorchSharedDataTest, ASharedIntListIsRefusedBeforeItIsCopiedPerValue) {
  // 2,000 values x 20,000 shared items: 40 million items from a file of about 200 KB.
  const std::vector<uint8_t> bytes = SharingPte(2000, 20000, 0, 0, 0, 0);
  ASSERT_LT(bytes.size(), 1u << 20);
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("method \"forward\", value "), HasSubstr("(int list)"),
                             HasSubstr("could hold unshared"))));
}

TEST(ExecuTorchSharedDataTest, ASharedArgumentListIsRefusedBeforeItIsCopiedPerInstruction) {
  const std::vector<uint8_t> bytes = SharingPte(0, 0, 0, 0, 2000, 20000);
  ASSERT_LT(bytes.size(), 1u << 20);
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("(kernel call aten::add.out)"),
                             HasSubstr("arguments go over what the file could hold unshared"))));
}

TEST(ExecuTorchSharedDataTest, ASharedStringIsRefusedBeforeItIsCopiedPerValue) {
  // 2,000 values sharing a 100 KB string: 200 MB of strings from a file of about 100 KB.
  const std::vector<uint8_t> bytes = SharingPte(0, 0, 2000, 100000, 0, 0);
  ASSERT_LT(bytes.size(), 1u << 20);
  EXPECT_THAT(ReadExecuTorchProgram(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("value "), HasSubstr("bytes go over what the file"))));
}

}  // namespace
}  // namespace ferry
