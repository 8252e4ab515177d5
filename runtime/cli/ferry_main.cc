// The `ferry` command line: plan, run and bench a program.
//
//   ferry plan [PROGRAM] [--dot]           placement, copy manifest, arenas, diagnostics
//   ferry run  [PROGRAM] [--calls N] [--input NAME=v,v,...]   execute and summarize outputs
//   ferry bench [PROGRAM] [--calls N] [--json]  load time, latency, copies, arenas
//
// Options shared by all commands: --method NAME (default "forward"), --skip-h2d, --skip-d2h,
// --strict (error_on_per_call_copies), --no-guard (sim devices unguarded). With no PROGRAM the
// example decoder block shipped in bench/ is used. Exit status: 0 on success, 1 on a load or run
// error (the status message is printed), 2 on a usage error.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "ferry/runtime/cli/commands.h"

#ifndef FERRY_EXAMPLE_PROGRAM
#define FERRY_EXAMPLE_PROGRAM ""
#endif

namespace {

constexpr char kUsage[] =
    "usage: ferry <plan|run|bench> [PROGRAM] [options]\n"
    "\n"
    "commands:\n"
    "  plan    print placement, the copy manifest, arenas and diagnostics (--dot: Graphviz)\n"
    "  run     load, execute with generated (or --input) inputs, print outputs and timings\n"
    "  bench   load and execute repeatedly; report load time, latency, copies, arenas (--json)\n"
    "\n"
    "PROGRAM is a .ferry file or its .json form; without it the example decoder block is used.\n"
    "\n"
    "options:\n"
    "  --method NAME     method to load (default: forward)\n"
    "  --skip-h2d        skip_h2d_for_method_inputs: inputs read on a device are passed there\n"
    "  --skip-d2h        skip_d2h_for_method_outputs: outputs stay on their device\n"
    "  --strict          error_on_per_call_copies: boundary copies are load errors\n"
    "  --no-guard        do not guard sim device memory (faster, for measurements)\n"
    "  --calls N         calls to execute (run: 1, bench: 1000)\n"
    "  --warmup N        bench: calls before measuring (default 10)\n"
    "  --input NAME=V,V  run: values of an input (repeated to fill it), instead of generated ones\n"
    "  --dot             plan: print Graphviz DOT instead of text\n"
    "  --json            bench: print JSON instead of a table\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  ferry::cli::Options options;
  options.command = argv[1];
  if (options.command == "--help" || options.command == "-h" || options.command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (options.command != "plan" && options.command != "run" && options.command != "bench") {
    std::fprintf(stderr, "ferry: unknown command \"%s\"\n\n%s", argv[1], kUsage);
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ferry: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    auto count = [&](const char* flag) {
      int n = 0;
      if (!absl::SimpleAtoi(value(flag), &n) || n < 0) {
        std::fprintf(stderr, "ferry: %s needs a non-negative integer\n", flag);
        std::exit(2);
      }
      return n;
    };
    if (arg == "--method") {
      options.method = value("--method");
    } else if (arg == "--skip-h2d") {
      options.load.skip_h2d_for_method_inputs = true;
    } else if (arg == "--skip-d2h") {
      options.load.skip_d2h_for_method_outputs = true;
    } else if (arg == "--strict") {
      options.load.error_on_per_call_copies = true;
    } else if (arg == "--no-guard") {
      options.runtime.sim_guard = false;
    } else if (arg == "--calls") {
      options.calls = count("--calls");
    } else if (arg == "--warmup") {
      options.warmup = count("--warmup");
    } else if (arg == "--dot") {
      options.dot = true;
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg == "--input") {
      std::string spec = value("--input");
      std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits('=', 1));
      if (parts.size() != 2 || parts[0].empty()) {
        std::fprintf(stderr, "ferry: --input expects NAME=V,V,... (got \"%s\")\n", spec.c_str());
        return 2;
      }
      std::vector<double> values;
      for (absl::string_view v : absl::StrSplit(parts[1], ',')) {
        double d = 0;
        if (!absl::SimpleAtod(v, &d)) {
          std::fprintf(stderr, "ferry: --input %s: \"%s\" is not a number\n", parts[0].c_str(),
                       std::string(v).c_str());
          return 2;
        }
        values.push_back(d);
      }
      options.inputs[parts[0]] = std::move(values);
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "ferry: unknown option \"%s\"\n\n%s", arg.c_str(), kUsage);
      return 2;
    } else if (options.program.empty()) {
      options.program = arg;
    } else {
      std::fprintf(stderr, "ferry: unexpected argument \"%s\"\n", arg.c_str());
      return 2;
    }
  }
  if (options.program.empty()) {
    options.program = FERRY_EXAMPLE_PROGRAM;
    if (options.program.empty()) {
      std::fputs("ferry: no PROGRAM given and no example program was built in\n", stderr);
      return 2;
    }
  }
  if (options.calls < 0) options.calls = options.command == "bench" ? 1000 : 1;
  return ferry::cli::RunCommand(options, stdout, stderr);
}
