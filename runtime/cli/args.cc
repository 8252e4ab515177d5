// The command line: the commands and options `ferry` knows, their help, and ParseArgs.
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ferry/runtime/cli/commands.h"
#include "ferry/runtime/cli/internal.h"

#ifndef FERRY_VERSION
#error "FERRY_VERSION (the project's version) is defined by runtime/CMakeLists.txt"
#endif

namespace ferry::cli {
namespace {

// ---- the command line -------------------------------------------------------------------------

enum CommandBit : unsigned { kPlan = 1, kRun = 2, kBench = 4, kVerify = 8, kAllCommands = 15 };

struct CommandSpec {
  const char* name;
  CommandBit bit;
  const char* summary;      // one line in the usage
  const char* description;  // what `ferry COMMAND --help` explains
  const char* example;
};

constexpr CommandSpec kCommands[] = {
    {"plan", kPlan, "print placement, the copy manifest, arenas and diagnostics (--dot: Graphviz)",
     "Loads the method and prints where every node runs, the copy manifest (each copy's\n"
     "direction, value, devices and bytes, whether it runs once at load or on every call, and\n"
     "why), the arenas per device with their lower bounds, memory per device, and the\n"
     "diagnostics. Nothing is executed. A program with several methods and no --method: every\n"
     "method, loaded together, then once what they share (constant replicas, shared states)\n"
     "and each method's own memory; with --dot, the methods side by side and the values they\n"
     "share drawn once between them. A delegate whose backend is not registered (an ExecuTorch\n"
     "backend id such as XnnpackBackend) is planned from what the program declares, and named.\n",
     "ferry plan build/bench/decoder_block.ferry --skip-h2d\n"
     "  ferry plan --dot | dot -Tpng -o plan.png\n"},
    {"run", kRun, "load, execute with generated (or --input) inputs, print outputs and timings",
     "Loads the method, fills its inputs with generated values (integer inputs with zeros) or\n"
     "with the values given by --input, executes it --calls times and prints the time of the\n"
     "first and the last call and every output's dtype, shape, device, sum, minimum, maximum and\n"
     "first values. --json prints the outputs as JSON instead, with all their values, for\n"
     "scripts. --input values repeat to fill a tensor input (1,2 into 4 elements is 1,2,1,2);\n"
     "a number of values that does not divide its elements is refused. A bundled program's\n"
     "method (.bpte) without --input runs on its first test case's inputs.\n"
     "Inputs and outputs that are not tensors (int, double, bool, string, None, lists) are\n"
     "fixed when the program is made: such an input holds the value the program was traced\n"
     "with, and --input n=5 checks that 5 is that value (doubles within 1e-4 + 1e-5 |v|,\n"
     "lists item by item); such an output prints with its kind, e.g. 'output 0 \"n\" int: 512'\n"
     "(JSON: {\"index\": 0, \"name\": \"n\", \"kind\": \"int\", \"value\": 512}).\n"
     "With --tokens N: greedy generation. The program's \"prefill\" method (when present) runs\n"
     "on a prompt, then the decode method (--method, default \"decode\") once per token, each\n"
     "call fed the argmax of the last logits. Both are loaded as one program: constants on a\n"
     "device are copied there once, and shared states (the KV caches) are one buffer. They take\n"
     "inputs \"tokens\" (int64 [T]), \"pos\" (int64 [T]) and optionally \"mask\" (float32 [T, S],\n"
     "causal, -1e9 where masked) and return the logits (float32 [T, V]) as output 0; decode\n"
     "takes T = 1. Prints the prefill time, tokens per second, the tokens, copies per token (the\n"
     "devices' counters against the manifest; exit status 1 when they disagree), copies of\n"
     "constants and state per call, and device memory. Without PROGRAM the decode-loop example\n"
     "(build/bench/decoder_lm.ferry) is used.\n"
     "--trace FILE writes the load and every call (prefill and each token's decode call with\n"
     "--tokens) as Chrome trace JSON, for Perfetto (ui.perfetto.dev) or chrome://tracing.\n",
     "ferry run --input pos=3 --calls 4\n"
     "  ferry run linear.pte --data linear.ptd --input 0=1,2,3 --json\n"
     "  ferry run llama_qnn.pte --method get_vocab_size   (a method returning an int)\n"
     "  ferry run --tokens 32            (the decode loop of the language-model example)\n"
     "  ferry run --calls 3 --trace trace.json\n"},
    {"bench", kBench,
     "load and execute repeatedly; report load time, latency, copies, arenas (--json)",
     "Loads the method, executes it --warmup times, then --calls times measured, and reports the\n"
     "load time by phase, the latency (min, median, p99), copies and bytes per call (the\n"
     "manifest's against the devices' counters; exit status 1 when they disagree), the constant\n"
     "bytes materialized at load and the arenas. A program with several methods and no\n"
     "--method: every method, loaded together and measured in turn, then once the constant\n"
     "replicas and shared states they share (JSON: one object per method under \"methods\").\n"
     "--profile adds each method's steps (nodes, copies, synchronizations) by their total time\n"
     "over the measured calls: count, mean, and share of the calls' time (JSON: \"profile\").\n"
     "--trace FILE writes the loads and the measured calls as Chrome trace JSON: a lane per\n"
     "device, an event per node and copy, the load's phases and copies in a lane of their own.\n",
     "ferry bench --calls 10000 --no-guard --json\n"
     "  ferry bench --profile --calls 200\n"
     "  ferry bench build/bench/decoder_lm.ferry --json   (prefill and decode, one program)\n"},
    {"verify", kVerify, "run a bundled program's test cases (.bpte) and compare the outputs",
     "Loads the program inside a bundled program (.bpte, ExecuTorch's program with test cases)\n"
     "and runs every test case of every method (or of --method's), each on the inputs it\n"
     "carries, comparing every output with the expected one: float elements within\n"
     "atol + rtol * |expected| (NaN equals NaN; defaults --rtol 1e-5 --atol 1e-8, ExecuTorch's),\n"
     "integers and bools exactly, in logical order whatever the memory order. Prints one line\n"
     "per case: the method, the case, PASS, FAIL or ERROR (a case that cannot run, and why),\n"
     "the largest absolute and relative error, and the first differing element; then a summary.\n"
     "--json prints the same as one object. Exit status 0 when every case passes, 1 when any\n"
     "fails or cannot run.\n",
     "ferry verify model.bpte\n"
     "  ferry verify model.bpte --method forward --rtol 1e-3 --atol 1e-5 --json\n"},
};

struct OptionSpec {
  const char* name;
  const char* arg;  // the value's name, or nullptr for a switch
  unsigned commands;
  const char* help;
};

constexpr OptionSpec kOptions[] = {
    {"--method", "NAME", kAllCommands, "method to load (default: forward)"},
    {"--data", "FILE", kAllCommands,
     "an ExecuTorch program's data file (.ptd), with the tensors it keeps outside itself"},
    {"--skip-h2d", nullptr, kAllCommands,
     "skip_h2d_for_method_inputs: inputs read on a device are passed there"},
    {"--skip-d2h", nullptr, kAllCommands,
     "skip_d2h_for_method_outputs: outputs stay on their device"},
    {"--strict", nullptr, kAllCommands,
     "error_on_per_call_copies: boundary copies are load errors"},
    {"--no-guard", nullptr, kAllCommands,
     "do not guard sim device memory (faster, for measurements)"},
    {"--calls", "N", kRun | kBench, "calls to execute, at least 1 (default: run 1, bench 1000)"},
    {"--warmup", "N", kBench, "calls before measuring (default 10)"},
    {"--input", "NAME=V,V", kRun,
     "values of an input, by name or position (0, 1, ...; repeated to fill it), instead of "
     "generated ones"},
    {"--tokens", "N", kRun,
     "generate N tokens: prefill, then the decode method once per token (see ferry run --help)"},
    {"--dot", nullptr, kPlan, "print Graphviz DOT instead of text"},
    {"--audit", nullptr, kPlan,
     "list where the exporter's copies, device annotations and arena devices (ExecuTorch "
     "programs) differ from Ferry's plan"},
    {"--trace", "FILE", kRun | kBench,
     "write a timeline of the load and every call as Chrome trace JSON (Perfetto, "
     "chrome://tracing)"},
    {"--profile", nullptr, kBench,
     "time every node and copy of the measured calls; print them by total time"},
    {"--rtol", "R", kVerify, "relative tolerance for float outputs (default 1e-5)"},
    {"--atol", "A", kVerify, "absolute tolerance for float outputs (default 1e-8)"},
    {"--json", nullptr, kRun | kBench | kVerify,
     "print JSON instead of text (run: every output with all its values)"},
};

constexpr char kProgramLine[] =
    "PROGRAM is a .ferry file, its .json form, an ExecuTorch program (.pte, with --data FILE\n"
    "for its .ptd) or a bundled one (.bpte: the program inside, with the test cases verify\n"
    "runs); without it the example decoder block is used (verify needs one).\n";
constexpr char kExitStatusLine[] = "exit status: 0 ok, 1 load or run error, 2 usage error\n";

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

const OptionSpec* FindOption(absl::string_view name) {
  for (const OptionSpec& o : kOptions) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

// "plan", "run and bench", "plan, run and bench" (`last` joins the last two).
std::string CommandList(unsigned commands, absl::string_view last = " and ") {
  std::vector<std::string> names;
  for (const CommandSpec& c : kCommands) {
    if (commands & c.bit) names.push_back(c.name);
  }
  if (names.size() < 2) return absl::StrJoin(names, "");
  const std::string final_name = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), last, final_name);
}

std::string OptionLine(const OptionSpec& o, absl::string_view prefix) {
  const std::string flag = o.arg == nullptr ? o.name : absl::StrCat(o.name, " ", o.arg);
  return absl::StrFormat("  %-16s  %s%s\n", flag, prefix, o.help);
}

std::string Usage() {
  std::string s =
      "usage: ferry <plan|run|bench|verify> [PROGRAM] [options]\n"
      "       ferry <plan|run|bench|verify> --help\n"
      "       ferry --help | --version\n"
      "\n"
      "commands:\n";
  for (const CommandSpec& c : kCommands) {
    absl::StrAppendFormat(&s, "  %-6s  %s\n", c.name, c.summary);
  }
  absl::StrAppend(&s, "\n", kProgramLine, "\noptions:\n");
  for (const OptionSpec& o : kOptions) {
    const std::string prefix =
        o.commands == kAllCommands ? "" : absl::StrCat(CommandList(o.commands, ", "), ": ");
    absl::StrAppend(&s, OptionLine(o, prefix));
  }
  absl::StrAppend(&s, "\n", kExitStatusLine);
  return s;
}

std::string CommandHelp(const CommandSpec& c) {
  std::string s = absl::StrCat("usage: ferry ", c.name, " [PROGRAM] [options]\n\n", c.description,
                               "\n", kProgramLine, "\noptions:\n");
  for (const OptionSpec& o : kOptions) {  // the command's own options first
    if (o.commands != kAllCommands && (o.commands & c.bit)) absl::StrAppend(&s, OptionLine(o, ""));
  }
  for (const OptionSpec& o : kOptions) {
    if (o.commands == kAllCommands) absl::StrAppend(&s, OptionLine(o, ""));
  }
  absl::StrAppend(&s, "\nexample:\n  ", c.example, "\n", kExitStatusLine);
  return s;
}

int UnknownCommand(absl::string_view name, std::FILE* err) {
  absl::FPrintF(err, "ferry: unknown command \"%s\"; the commands are %s\n\n%s", name,
                CommandList(kAllCommands), Usage());
  return kExitUsage;
}

}  // namespace

const char* Version() { return FERRY_VERSION; }

namespace {

// Parsing's steps, each returning an exit code for main to return, or -1 to go on.

// `ferry`, `ferry --help`, `ferry help [COMMAND]`, `ferry --version`: answered at once.
int AnswerHelpOrVersion(int argc, const char* const* argv, std::FILE* out, std::FILE* err) {
  if (argc < 2) {
    std::fputs(Usage().c_str(), err);
    return kExitUsage;
  }
  const absl::string_view first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    if (first == "help" && argc > 2) {  // `ferry help run`
      const CommandSpec* command = FindCommand(argv[2]);
      if (command == nullptr) return UnknownCommand(argv[2], err);
      std::fputs(CommandHelp(*command).c_str(), out);
      return kExitOk;
    }
    std::fputs(Usage().c_str(), out);
    return kExitOk;
  }
  if (first == "--version") {
    absl::FPrintF(out, "ferry %s\n", Version());
    return kExitOk;
  }
  return -1;
}

// One option `arg` (known, and valid for the command) with its `value` (null for a flag).
int ApplyOption(const std::string& arg, const char* value, Options* options, std::FILE* err) {
  if (arg == "--method") {
    options->method = value;
    options->method_given = true;
  } else if (arg == "--data") {
    options->data = value;
  } else if (arg == "--skip-h2d") {
    options->load.skip_h2d_for_method_inputs = true;
  } else if (arg == "--skip-d2h") {
    options->load.skip_d2h_for_method_outputs = true;
  } else if (arg == "--strict") {
    options->load.error_on_per_call_copies = true;
  } else if (arg == "--no-guard") {
    options->runtime.sim.guard = false;
  } else if (arg == "--calls") {
    // SimpleAtoi refuses what does not fit an int, so overflow is an error, not a wrap.
    if (!absl::SimpleAtoi(value, &options->calls) || options->calls < 1) {
      std::fprintf(err, "ferry: --calls needs a positive integer, at most %d (got \"%s\")\n",
                   std::numeric_limits<int>::max(), value);
      return kExitUsage;
    }
  } else if (arg == "--warmup") {
    if (!absl::SimpleAtoi(value, &options->warmup) || options->warmup < 0) {
      std::fprintf(err, "ferry: --warmup needs a non-negative integer (got \"%s\")\n", value);
      return kExitUsage;
    }
  } else if (arg == "--tokens") {
    if (!absl::SimpleAtoi(value, &options->tokens) || options->tokens < 1) {
      std::fprintf(err, "ferry: --tokens needs a positive integer, at most %d (got \"%s\")\n",
                   std::numeric_limits<int>::max(), value);
      return kExitUsage;
    }
  } else if (arg == "--rtol" || arg == "--atol") {
    double v = 0;
    if (!absl::SimpleAtod(value, &v) || !(v >= 0) || !std::isfinite(v)) {
      std::fprintf(err, "ferry: %s needs a finite non-negative number (got \"%s\")\n", arg.c_str(),
                   value);
      return kExitUsage;
    }
    (arg == "--rtol" ? options->tolerance.rtol : options->tolerance.atol) = v;
  } else if (arg == "--trace") {
    options->trace_path = value;
    options->load.record_trace = true;
  } else if (arg == "--profile") {
    options->profile = true;
    options->load.record_trace = true;
  } else if (arg == "--dot") {
    options->dot = true;
  } else if (arg == "--audit") {
    options->audit = true;
  } else if (arg == "--json") {
    options->json = true;
  } else if (arg == "--input") {
    const std::string spec = value;
    std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits('=', 1));
    if (parts.size() != 2 || parts[0].empty()) {
      std::fprintf(err, "ferry: --input expects NAME=V,V,... (got \"%s\")\n", spec.c_str());
      return kExitUsage;
    }
    std::vector<double> values;
    for (absl::string_view v : absl::StrSplit(parts[1], ',')) {
      double d = 0;
      // true and false stand for 1 and 0 (bool inputs, tensors or not).
      if (v == "true" || v == "false") {
        d = v == "true" ? 1.0 : 0.0;
      } else if (!absl::SimpleAtod(v, &d)) {
        std::fprintf(err, "ferry: --input %s: \"%s\" is not a number (or true, false)\n",
                     parts[0].c_str(), std::string(v).c_str());
        return kExitUsage;
      }
      values.push_back(d);
    }
    options->inputs[parts[0]] = std::move(values);
  }
  return -1;
}

// What the options imply together, once all are read.
int FinishOptions(const CommandSpec& command, bool program_given, Options* options,
                  std::FILE* err) {
  if (options->tokens > 0) {
    if (options->calls >= 0 || !options->inputs.empty() || options->json) {
      std::fprintf(err,
                   "ferry: --tokens makes the calls and their inputs; it does not go with %s\n",
                   options->calls >= 0 ? "--calls"
                   : options->json     ? "--json"
                                       : "--input");
      return kExitUsage;
    }
    if (!options->method_given) options->method = "decode";
    if (!program_given && !options->tokens_program.empty()) {
      options->program = options->tokens_program;
    }
  }
  if (command.bit == kVerify && !program_given) {
    std::fputs("ferry: verify needs PROGRAM, a bundled program (.bpte)\n", err);
    return kExitUsage;
  }
  if (options->program.empty()) {
    std::fputs("ferry: no PROGRAM given and no example program was built in\n", err);
    return kExitUsage;
  }
  if (options->calls < 0) options->calls = command.bit == kBench ? 1000 : 1;
  return -1;
}

}  // namespace

int ParseArgs(int argc, const char* const* argv, Options* options, std::FILE* out, std::FILE* err) {
  if (int code = AnswerHelpOrVersion(argc, argv, out, err); code >= 0) return code;
  const CommandSpec* command = FindCommand(argv[1]);
  if (command == nullptr) return UnknownCommand(argv[1], err);
  options->command = command->name;
  bool program_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(CommandHelp(*command).c_str(), out);
      return kExitOk;
    }
    if (arg.empty() || arg[0] != '-') {
      if (program_given) {
        std::fprintf(err, "ferry: unexpected argument \"%s\"\n", arg.c_str());
        return kExitUsage;
      }
      options->program = arg;
      program_given = true;
      continue;
    }
    const OptionSpec* option = FindOption(arg);
    if (option == nullptr) {
      absl::FPrintF(err, "ferry: unknown option \"%s\"\n\n%s", arg, CommandHelp(*command));
      return kExitUsage;
    }
    if ((option->commands & command->bit) == 0) {
      absl::FPrintF(err, "ferry: %s does not apply to %s, only to %s (see ferry %s --help)\n", arg,
                    command->name, CommandList(option->commands), command->name);
      return kExitUsage;
    }
    const char* value = nullptr;
    if (option->arg != nullptr) {
      if (i + 1 >= argc) {
        std::fprintf(err, "ferry: %s needs a value\n", option->name);
        return kExitUsage;
      }
      value = argv[++i];
    }
    if (int code = ApplyOption(arg, value, options, err); code >= 0) return code;
  }
  return FinishOptions(*command, program_given, options, err);
}

}  // namespace ferry::cli
