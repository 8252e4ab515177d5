// What the tests of the `ferry` commands share (tests/runtime/cli/): a path for a temporary file,
// and CliTest, whose suite writes the example program to a file once per process and gives each
// test the command line options to run a command on it.
#ifndef FERRY_TESTS_RUNTIME_CLI_EXAMPLE_CLI_H_
#define FERRY_TESTS_RUNTIME_CLI_EXAMPLE_CLI_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"
#include "ferry/runtime/cli/commands.h"
#include "gtest/gtest.h"

namespace ferry::cli {

inline std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs the tests of this suite in parallel processes, and rewriting a
    // program another process has mapped would pull its pages away (SIGBUS).
    path_ = new std::string(TempPath("cli_example.ferry"));
    absl::StatusOr<std::vector<uint8_t>> bytes = example::BuildDecoderProgram();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    std::ofstream f(*path_, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }
  static void TearDownTestSuite() {
    std::remove(path_->c_str());
    delete path_;
  }
  Options Base(const std::string& command) {
    Options o;
    o.command = command;
    o.program = *path_;
    o.calls = command == "bench" ? 20 : 2;
    o.warmup = 2;
    return o;
  }
  inline static std::string* path_ = nullptr;
};

}  // namespace ferry::cli

#endif  // FERRY_TESTS_RUNTIME_CLI_EXAMPLE_CLI_H_
