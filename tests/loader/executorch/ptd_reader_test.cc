// The ExecuTorch data file (.ptd) reader: the real linear.ptd in ../shared/pte (the older layout)
// with the facts it holds, files in the current layout written by tests/testing/ptd_builder.h,
// every truncation and many single-byte mutations (never a crash; meaningful under ASan), and
// hand-broken files, each refused with a message that names the problem.
//
// The facts about linear.ptd were read off `xxd` of the file and a `flatc --json --raw-binary`
// dump with loader/executorch/schema/executorch_data.fbs, not off the reader under test: the header
// at byte 8 says the FlatBuffer part is 0x30 + 0xe0 bytes and the segments start at 0x110 (64
// bytes); "linear.weight" is float32 [3, 3] at segment offset 0, "linear.bias" float32 [3] at 48.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/loader/executorch/ptd_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/ptd_builder.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::BuildPtd;
using ::ferry::testing::FloatBytes;
using ::ferry::testing::PtdTensor;
using ::ferry::testing::PutLE;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kPteDir[] = FERRY_SHARED_PTE_DIR;
constexpr char kLinearPtd[] = "executorch__extension_module_test_resources_linear.ptd";

#define SKIP_WITHOUT_REAL_PROGRAMS()                                                      \
  if (!std::filesystem::is_directory(kPteDir)) {                                          \
    GTEST_SKIP() << "no real ExecuTorch programs: " << kPteDir                            \
                 << " is absent (it is shared between checkouts, beside the repository)"; \
  }

std::vector<uint8_t> ReadFile(const std::string& name) {
  std::ifstream in(std::filesystem::path(kPteDir) / name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> FloatsAt(const std::vector<uint8_t>& file, size_t offset, size_t count) {
  std::vector<float> out(count);
  std::memcpy(out.data(), file.data() + offset, count * sizeof(float));
  return out;
}

std::vector<float> Floats(absl::Span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST(ExecuTorchDataFileTest, RealLinearPtdIsReadInItsOlderLayout) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  const std::vector<uint8_t> file = ReadFile(kLinearPtd);
  ASSERT_EQ(file.size(), 336u);
  ASSERT_OK_AND_ASSIGN(EtDataFile data, ReadExecuTorchDataFile(file));
  EXPECT_EQ(data.layout, EtDataLayout::kLegacyTensors);
  EXPECT_EQ(data.header.length, 40u);
  EXPECT_EQ(data.header.flatbuffer_offset, 0x30u);
  EXPECT_EQ(data.header.flatbuffer_size, 0xe0u);
  EXPECT_EQ(data.header.segment_base_offset, 0x110u);
  EXPECT_EQ(data.header.segment_data_size, 64u);
  ASSERT_EQ(data.segments.size(), 1u);
  EXPECT_EQ(data.segments[0].size, 64u);
  EXPECT_EQ(data.segments[0].file_offset, 0x110u);
  ASSERT_EQ(data.entries.size(), 2u);

  const EtDataEntry* weight = data.Find("linear.weight");
  ASSERT_NE(weight, nullptr);
  ASSERT_TRUE(weight->tensor.has_value());
  EXPECT_EQ(weight->tensor->scalar_type, 6);
  EXPECT_THAT(weight->tensor->sizes, ElementsAre(3, 3));
  EXPECT_THAT(weight->tensor->dim_order, ElementsAre(0, 1));
  EXPECT_EQ(weight->file_offset, 0x110u);
  EXPECT_EQ(Floats(weight->bytes), FloatsAt(file, 0x110, 9));

  const EtDataEntry* bias = data.Find("linear.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_THAT(bias->tensor->sizes, ElementsAre(3));
  EXPECT_EQ(bias->file_offset, 0x110u + 48);
  EXPECT_EQ(Floats(bias->bytes), FloatsAt(file, 0x140, 3));
  EXPECT_EQ(data.Find("linear"), nullptr);
}

TEST(ExecuTorchDataFileTest, FindUsesTheReadersIndexAndScansAFileAssembledByHand) {
  EtDataFile data;
  for (const char* key : {"a", "b", "c"}) {
    EtDataEntry entry;
    entry.key = key;
    data.entries.push_back(entry);
  }
  // No index: a scan.
  ASSERT_NE(data.Find("b"), nullptr);
  EXPECT_EQ(data.Find("b"), &data.entries[1]);
  EXPECT_EQ(data.Find("d"), nullptr);
  // An index that covers the entries is used; one that disagrees with them is not trusted.
  data.index = {{"a", 0}, {"b", 1}, {"c", 2}};
  EXPECT_EQ(data.Find("c"), &data.entries[2]);
  EXPECT_EQ(data.Find("d"), nullptr);
  data.index = {{"a", 2}, {"b", 1}, {"c", 0}};
  EXPECT_EQ(data.Find("a"), &data.entries[0]);
}

TEST(ExecuTorchDataFileTest, CurrentLayoutNamedDataIsRead) {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::vector<uint8_t> blob = {7, 8, 9};
  std::vector<uint8_t> file = BuildPtd({{"w", 6, {2, 3}, FloatBytes(w)},
                                        {"blob", 0, {}, blob, /*with_layout=*/false}});
  ASSERT_OK_AND_ASSIGN(EtDataFile data, ReadExecuTorchDataFile(file));
  EXPECT_EQ(data.layout, EtDataLayout::kNamedData);
  ASSERT_EQ(data.entries.size(), 2u);
  EXPECT_EQ(data.entries[0].key, "w");
  ASSERT_TRUE(data.entries[0].tensor.has_value());
  EXPECT_THAT(data.entries[0].tensor->sizes, ElementsAre(2, 3));
  EXPECT_EQ(data.entries[0].tensor->byte_size, 24u);
  EXPECT_EQ(Floats(data.entries[0].bytes), w);
  EXPECT_EQ(data.entries[1].key, "blob");
  EXPECT_FALSE(data.entries[1].tensor.has_value());
  EXPECT_THAT(std::vector<uint8_t>(data.entries[1].bytes.begin(), data.entries[1].bytes.end()),
              ElementsAre(7, 8, 9));
  EXPECT_EQ(data.entries[1].segment_index, 1u);
  EXPECT_EQ(data.segments[1].offset, 32u);  // 24 bytes, then padding to 16
}

TEST(ExecuTorchDataFileTest, WrongFilesAreNamed) {
  std::vector<uint8_t> file = BuildPtd({{"w", 6, {1}, FloatBytes({1})}});
  std::vector<uint8_t> pte = file;
  std::memcpy(pte.data() + 4, "ET12", 4);
  EXPECT_THAT(ReadExecuTorchDataFile(pte),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("this is an ExecuTorch program (.pte")));
  std::vector<uint8_t> newer = file;
  std::memcpy(newer.data() + 4, "FT02", 4);
  EXPECT_THAT(ReadExecuTorchDataFile(newer),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("\"FT02\" is not supported")));
  std::vector<uint8_t> other = file;
  std::memcpy(other.data() + 4, "ABCD", 4);
  EXPECT_THAT(ReadExecuTorchDataFile(other),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a .ptd file")));
  std::vector<uint8_t> no_header = file;
  std::memcpy(no_header.data() + 8, "XH01", 4);
  EXPECT_THAT(ReadExecuTorchDataFile(no_header),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("it has no header")));
  EXPECT_THAT(ReadExecuTorchDataFile(absl::MakeConstSpan(file).first(6)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("too short")));
}

TEST(ExecuTorchDataFileTest, HeaderOffsetsOutsideTheFileAreRefused) {
  const std::vector<uint8_t> good = BuildPtd({{"w", 6, {2}, FloatBytes({1, 2})}});
  ASSERT_OK(ReadExecuTorchDataFile(good).status());
  struct Case {
    size_t at;
    uint64_t value;
    size_t width;
    const char* message;
  };
  const Case cases[] = {
      {12, 8, 4, "the header's length is 8 bytes"},
      {12, 1 << 20, 4, "runs past the end of the file"},
      {24, ~uint64_t{0}, 8, "FlatBuffer data is"},              // flatbuffer_size overflows
      {16, ~uint64_t{0} - 4, 8, "FlatBuffer data is"},          // flatbuffer_offset + size wraps
      {16, 16, 8, "lies inside the header"},                    // flatbuffer_offset
      {40, ~uint64_t{0}, 8, "segment data"},                    // segment_data_size wraps
      {32, good.size(), 8, "segment data"},                     // base + size past the end
      {32, 16, 8, "lies inside the FlatBuffer data"},           // segment_base_offset
      {40, 4, 8, "runs past the end of the segment data (4 bytes)"},  // segment 0 is 8 bytes
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    std::vector<uint8_t> bad = good;
    PutLE(bad, c.at, c.value, c.width);
    EXPECT_THAT(ReadExecuTorchDataFile(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

TEST(ExecuTorchDataFileTest, BadEntriesAreRefusedNamingThem) {
  EXPECT_THAT(ReadExecuTorchDataFile(BuildPtd({{"w", 6, {2}, FloatBytes({1, 2})},
                                               {"w", 6, {1}, FloatBytes({3})}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("named data entry 1: key \"w\" is given twice")));
  // A layout that needs more bytes than its segment holds.
  EXPECT_THAT(ReadExecuTorchDataFile(BuildPtd({{"w", 6, {3}, FloatBytes({1, 2})}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("named data entry 0 (\"w\"): a tensor of 12 bytes, but its "
                                 "segment 0 holds 8")));
  EXPECT_THAT(ReadExecuTorchDataFile(BuildPtd({{"w", 99, {1}, {0}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("scalar type 99 names no type")));
  EXPECT_THAT(ReadExecuTorchDataFile(BuildPtd({{"w", 6, {-1}, {}}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("size 0 is -1, negative")));
  EXPECT_THAT(
      ReadExecuTorchDataFile(BuildPtd({{"w", 6, {1 << 30, 1 << 30, 1 << 30}, {}}})),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("its byte size overflows")));
}

TEST(ExecuTorchDataFileTest, LegacyEntriesOutsideTheirSegmentAreRefused) {
  SKIP_WITHOUT_REAL_PROGRAMS();
  std::vector<uint8_t> file = ReadFile(kLinearPtd);
  // linear.bias's offset (uint64 at 0xa0, found in the xxd dump) moved past the 64-byte segment.
  ASSERT_EQ(file[0xa0], 48);
  file[0xa0] = 56;
  EXPECT_THAT(ReadExecuTorchDataFile(file),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 1 (\"linear.bias\"): 12 bytes at offset 56 of segment 0 "
                                 "run past its end (64 bytes)")));
  file[0xa0] = 48;
  // The segment's size (uint64 at 0x68) larger than the segment data.
  ASSERT_EQ(file[0x68], 64);
  file[0x68] = 65;
  EXPECT_THAT(ReadExecuTorchDataFile(file),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment 0 (65 bytes at offset 0) runs past the end of the "
                                 "segment data (64 bytes)")));
}

// Every truncation is refused; every single-byte change is refused or read, and what is read
// lies inside the file (meaningful under ASan, which would catch a read outside it).
TEST(ExecuTorchDataFileTest, TruncatedAndMutatedFilesNeverCrash) {
  std::vector<std::vector<uint8_t>> files = {
      BuildPtd({{"w", 6, {2, 3}, FloatBytes({1, 2, 3, 4, 5, 6})}, {"b", 6, {3}, FloatBytes({7, 8, 9})}})};
  if (std::filesystem::is_directory(kPteDir)) files.push_back(ReadFile(kLinearPtd));
  for (const std::vector<uint8_t>& file : files) {
    for (size_t n = 0; n < file.size(); ++n) {
      std::vector<uint8_t> cut(file.begin(), file.begin() + n);
      absl::StatusOr<EtDataFile> read = ReadExecuTorchDataFile(cut);
      // The segment data ends the file, so every cut loses some of it or more.
      EXPECT_FALSE(read.ok()) << "cut at " << n;
    }
    // Every value of every byte (the files are a few hundred bytes).
    for (size_t at = 0; at < file.size(); ++at) {
      for (int value = 0; value < 256; ++value) {
        std::vector<uint8_t> bad = file;
        bad[at] = static_cast<uint8_t>(value);
        absl::StatusOr<EtDataFile> read = ReadExecuTorchDataFile(bad);
        if (!read.ok()) continue;
        uint64_t sum = 0;
        for (const EtDataEntry& e : read->entries) {
          ASSERT_LE(e.bytes.data() + e.bytes.size(), bad.data() + bad.size());
          ASSERT_GE(e.bytes.data(), bad.data());
          for (uint8_t byte : e.bytes) sum += byte;
        }
        (void)sum;
      }
    }
  }
}

}  // namespace
}  // namespace ferry
