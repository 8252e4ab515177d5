// The commands behind the `ferry` binary, as a library so tests can run them and read their
// output.
#ifndef FERRY_RUNTIME_CLI_COMMANDS_H_
#define FERRY_RUNTIME_CLI_COMMANDS_H_

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "ferry/runtime/runtime.h"

namespace ferry::cli {

struct Options {
  std::string command;  // "plan", "run" or "bench"
  std::string program;
  std::string method = "forward";
  LoadOptions load;
  RuntimeOptions runtime;
  int calls = -1;  // -1: the command's default
  int warmup = 10;
  bool dot = false;
  bool json = false;
  std::map<std::string, std::vector<double>> inputs;  // given input values by name
};

// Runs one command, writing results to `out` and errors to `err`. Returns the process exit code:
// 0 on success, 1 when loading or running fails.
int RunCommand(const Options& options, std::FILE* out, std::FILE* err);

}  // namespace ferry::cli

#endif  // FERRY_RUNTIME_CLI_COMMANDS_H_
