// The `ferry` command line, as a library so tests can parse arguments, run commands and read
// their output.
//
//   ferry::cli::Options options;
//   options.program = "build/bench/decoder_block.ferry";  // used when argv names no PROGRAM
//   if (int code = ParseArgs(argc, argv, &options, stdout, stderr); code >= 0) return code;
//   return RunCommand(options, stdout, stderr);
//
// Exit codes (the same for the binary): kExitOk, kExitError when loading or running fails (the
// status message is printed), kExitUsage for a command line that does not parse.
//
// Thread safety: the functions share no state; each writes only to the streams it is given.
#ifndef FERRY_RUNTIME_CLI_COMMANDS_H_
#define FERRY_RUNTIME_CLI_COMMANDS_H_

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "ferry/runtime/runtime.h"
#include "ferry/runtime/trace.h"
#include "ferry/runtime/verify.h"

namespace ferry::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

struct Options {
  std::string command;  // "plan", "run", "bench" or "verify"
  std::string program;
  std::string data;  // --data: an ExecuTorch program's data file (.ptd); empty for none
  std::string method = "forward";
  bool method_given = false;  // --method was on the command line
  LoadOptions load;
  RuntimeOptions runtime;
  int calls = -1;  // -1: the command's default
  int warmup = 10;
  bool dot = false;
  bool audit = false;  // plan --audit: where the exporter's placement differs from Ferry's
  bool json = false;
  VerifyTolerance tolerance;  // verify --rtol, --atol
  std::string trace_path;     // --trace FILE (run, bench): a Chrome trace of the load and calls
  bool profile = false;       // bench --profile: time per node and copy
  std::map<std::string, std::vector<double>> inputs;  // given input values by name
  // `run --tokens N`: N tokens of greedy generation with the program's "prefill" method and the
  // decode method (--method; default "decode"); 0: a plain run.
  int tokens = 0;
  // The program `--tokens` uses when the command line names none (the decode-loop example).
  std::string tokens_program;
};

// `ferry <version>`, the project's version.
const char* Version();

// Parses `argv` (argv[0] is the binary's name) into `options`. On entry `options->program` is the
// program used when the command line names none (empty: PROGRAM is required). Returns -1 when
// the command is to run, with every field of `options` set (calls resolved to the command's
// default); otherwise the exit code, after printing: kExitOk for help (`--help`, `-h`, `help`,
// `help COMMAND`, `COMMAND --help`) or `--version`, written to `out`; kExitUsage for an unknown
// command or option, an option that does not apply to the command, or a bad option value, with a
// message naming it written to `err`.
int ParseArgs(int argc, const char* const* argv, Options* options, std::FILE* out, std::FILE* err);

// Runs one command, writing results to `out` and errors to `err`. Returns the process exit code:
// kExitOk on success, kExitError when loading or running fails.
int RunCommand(const Options& options, std::FILE* out, std::FILE* err);

}  // namespace ferry::cli

#endif  // FERRY_RUNTIME_CLI_COMMANDS_H_
