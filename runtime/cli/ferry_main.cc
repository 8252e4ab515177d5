// The `ferry` command line: plan, run and bench a program.
//
//   ferry plan [PROGRAM] [--dot]           placement, copy manifest, arenas, diagnostics
//   ferry run  [PROGRAM] [--calls N] [--input NAME=v,v,...]   execute and summarize outputs
//   ferry run  [PROGRAM] --tokens N [--method NAME]  the decode loop: prefill, N decode calls
//   ferry bench [PROGRAM] [--calls N] [--warmup N] [--json]  load time, latency, copies, arenas
//   ferry COMMAND --help, ferry --help, ferry --version
//
// Options shared by all commands: --method NAME (default "forward"), --skip-h2d, --skip-d2h,
// --strict (error_on_per_call_copies), --no-guard (sim devices unguarded). With no PROGRAM the
// example decoder block shipped in bench/ is used. Exit status: 0 on success, 1 on a load or run
// error (the status message is printed), 2 on a usage error. The parsing and the commands live
// in runtime/cli/commands.h, where the tests reach them.
#include <cstdio>

#include "ferry/runtime/cli/commands.h"

#ifndef FERRY_EXAMPLE_PROGRAM
#define FERRY_EXAMPLE_PROGRAM ""
#endif
#ifndef FERRY_LM_PROGRAM
#define FERRY_LM_PROGRAM ""
#endif

int main(int argc, char** argv) {
  ferry::cli::Options options;
  options.program = FERRY_EXAMPLE_PROGRAM;  // when the command line names no PROGRAM
  options.tokens_program = FERRY_LM_PROGRAM;  // the same for run --tokens
  const int code = ferry::cli::ParseArgs(argc, argv, &options, stdout, stderr);
  if (code >= 0) return code;
  return ferry::cli::RunCommand(options, stdout, stderr);
}
