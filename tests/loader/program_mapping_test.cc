// A program file mapped read-only (loader/program_mapping.h): the bytes are the file's, and the
// page hints never change what the memory reads, a dropped page being read back from the file.
#include "ferry/loader/program_mapping.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

class ProgramMappingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/ferry_mapping_" + std::to_string(getpid()) + ".bin";
    // Three pages and a bit, each byte a function of its offset.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_.resize(3 * page + 123);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<uint8_t>(i * 7 + i / 251);
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
    fd_ = open(path_.c_str(), O_RDONLY);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    std::remove(path_.c_str());
  }
  std::string path_;
  std::vector<uint8_t> bytes_;
  int fd_ = -1;
};

TEST_F(ProgramMappingTest, MapsTheFilesBytes) {
  std::unique_ptr<ProgramMapping> m = ProgramMapping::Map(fd_, bytes_.size());
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->size(), bytes_.size());
  EXPECT_EQ(std::vector<uint8_t>(m->data(), m->data() + m->size()), bytes_);
}

TEST_F(ProgramMappingTest, HintsNeverChangeWhatIsRead) {
  std::unique_ptr<ProgramMapping> m = ProgramMapping::Map(fd_, bytes_.size());
  ASSERT_NE(m, nullptr);
  // Ranges that start and end inside pages, the whole mapping, and an empty range.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const std::pair<size_t, size_t> ranges[] = {
      {0, bytes_.size()}, {10, page}, {page - 1, 2 * page + 2}, {page, page}, {5, 0}};
  for (const auto& [offset, size] : ranges) {
    m->WillRead(m->data() + offset, size);
    m->DoneReading(m->data() + offset, size);
    EXPECT_EQ(std::vector<uint8_t>(m->data(), m->data() + m->size()), bytes_)
        << "after hints on [" << offset << ", " << offset + size << ")";
  }
}

TEST_F(ProgramMappingTest, AFileThatCannotBeMappedGivesNull) {
  EXPECT_EQ(ProgramMapping::Map(-1, 16), nullptr);
}

}  // namespace
}  // namespace ferry
