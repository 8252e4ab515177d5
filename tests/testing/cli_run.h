// Runs a `ferry` command in-process (runtime/cli/commands.h) and captures what it prints.
#ifndef FERRY_TESTS_TESTING_CLI_RUN_H_
#define FERRY_TESTS_TESTING_CLI_RUN_H_

#include <cstdio>
#include <string>
#include <utility>

#include "ferry/runtime/cli/commands.h"

namespace ferry::testing {

struct CliResult {
  int code = 0;
  std::string out, err;
};

inline CliResult RunCli(const cli::Options& options) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  CliResult r;
  r.code = cli::RunCommand(options, out, err);
  for (auto [f, text] : {std::pair{out, &r.out}, std::pair{err, &r.err}}) {
    std::rewind(f);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text->append(buf, n);
    std::fclose(f);
  }
  return r;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_CLI_RUN_H_
