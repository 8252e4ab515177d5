// `ferry run --tokens N`: greedy generation with a program's "prefill" and decode methods, loaded
// as one program (Runtime::LoadProgram) so that they share constant replicas and KV caches.
//
// The methods follow one convention (the decode-loop example, bench/example/decoder_block.h):
//   inputs  "tokens" int64 [T], "pos" int64 [T] (the tokens' positions), optionally
//           "mask" float32 [T, S] (0 where row i may attend to cache row j <= pos[i], kMaskedOut
//           elsewhere); S, the cache's rows, bounds prompt + generated tokens
//   output  0: the logits, float32 [T, V]; the next token is the argmax of the last row
// The decode method takes one token per call (T = 1). The prompt, processed by "prefill" when
// the program has it, is the deterministic sequence (37 i + 11) mod V.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ferry/base/status_macros.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/cli/commands.h"
#include "ferry/runtime/cli/internal.h"

namespace ferry::cli {
namespace {

constexpr float kMaskedOut = -1e9f;

// A method of the loop with its inputs found and caller-side buffers for them.
struct LoopMethod {
  std::unique_ptr<Method> method;
  int64_t tokens_per_call = 0;  // T
  int tokens = -1, pos = -1, mask = -1;  // input positions; mask -1 when absent
  int64_t cache_rows = -1;               // S, when there is a mask
  int64_t vocab = 0;                     // V
  std::vector<std::vector<uint8_t>> host;  // per input
  std::vector<DeviceBuffer> device;        // per input; empty where the input is on the host
};

absl::Status Convention(absl::string_view method, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--tokens: method \"", method, "\" ", what,
      "; a decode loop needs inputs \"tokens\" (int64 [T]) and \"pos\" (int64 [T]), optionally "
      "\"mask\" (float32 [T, S]), and the logits (float32 [T, V]) as output 0"));
}

absl::StatusOr<LoopMethod> PrepareLoopMethod(const Runtime& rt, std::unique_ptr<Method> method) {
  LoopMethod m;
  const MethodPlan& plan = method->plan();
  const std::string& name = method->def().name;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const IoInfo& io = plan.inputs[i];
    int* slot = io.name == "tokens" ? &m.tokens
                : io.name == "pos"  ? &m.pos
                : io.name == "mask" ? &m.mask
                                    : nullptr;
    if (slot == nullptr) return Convention(name, absl::StrCat("has input \"", io.name, "\""));
    *slot = static_cast<int>(i);
  }
  if (m.tokens < 0 || m.pos < 0) return Convention(name, "lacks \"tokens\" or \"pos\"");
  const IoInfo& tokens = plan.inputs[m.tokens];
  const IoInfo& pos = plan.inputs[m.pos];
  if (tokens.dtype != DType::kInt64 || tokens.sizes.size() != 1 || tokens.sizes[0] < 1 ||
      pos.dtype != DType::kInt64 || pos.sizes != tokens.sizes) {
    return Convention(name, absl::StrCat("has \"tokens\" ", DTypeName(tokens.dtype), "[",
                                         absl::StrJoin(tokens.sizes, ", "), "] and \"pos\" ",
                                         DTypeName(pos.dtype), "[", absl::StrJoin(pos.sizes, ", "),
                                         "]"));
  }
  m.tokens_per_call = tokens.sizes[0];
  if (m.mask >= 0) {
    const IoInfo& mask = plan.inputs[m.mask];
    if (mask.dtype != DType::kFloat32 || mask.sizes.size() != 2 ||
        mask.sizes[0] != m.tokens_per_call || mask.sizes[1] < 1) {
      return Convention(name, absl::StrCat("has \"mask\" ", DTypeName(mask.dtype), "[",
                                           absl::StrJoin(mask.sizes, ", "), "]"));
    }
    m.cache_rows = mask.sizes[1];
  }
  if (plan.outputs.empty() || plan.outputs[0].dtype != DType::kFloat32 ||
      plan.outputs[0].sizes.size() != 2 || plan.outputs[0].sizes[0] != m.tokens_per_call ||
      plan.outputs[0].sizes[1] < 1) {
    return Convention(name, "has no output 0 of shape [T, V]");
  }
  m.vocab = plan.outputs[0].sizes[1];
  m.host.resize(plan.inputs.size());
  m.device.resize(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const IoInfo& io = plan.inputs[i];
    m.host[i].assign(io.bytes, 0);
    if (!io.device.is_host()) {  // --skip-h2d: the loop copies the input there on every call
      FERRY_ASSIGN_OR_RETURN(m.device[i],
                             DeviceBuffer::Allocate(*rt.devices().Find(io.device), io.bytes, 64));
    }
  }
  m.method = std::move(method);
  return m;
}

// Binds `tokens` at positions start, start + 1, ... (and their causal mask) and executes.
absl::Status Step(const Runtime& rt, LoopMethod& m, absl::Span<const int64_t> tokens,
                  int64_t start) {
  std::memcpy(m.host[m.tokens].data(), tokens.data(), tokens.size() * sizeof(int64_t));
  int64_t* pos = reinterpret_cast<int64_t*>(m.host[m.pos].data());
  for (int64_t i = 0; i < m.tokens_per_call; ++i) pos[i] = start + i;
  if (m.mask >= 0) {
    float* mask = reinterpret_cast<float*>(m.host[m.mask].data());
    for (int64_t i = 0; i < m.tokens_per_call; ++i) {
      for (int64_t j = 0; j < m.cache_rows; ++j) {
        mask[i * m.cache_rows + j] = j <= start + i ? 0.0f : kMaskedOut;
      }
    }
  }
  const MethodPlan& plan = m.method->plan();
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const IoInfo& io = plan.inputs[i];
    void* data = m.host[i].data();
    if (!io.device.is_host()) {
      DeviceRuntime* device = rt.devices().Find(io.device);
      FERRY_RETURN_IF_ERROR(device->CopyHostToDevice(m.device[i].data(), data, io.bytes));
      data = m.device[i].data();
    }
    FERRY_RETURN_IF_ERROR(m.method->SetInput(i, TensorView(io.dtype, io.sizes, data, io.device)));
  }
  return m.method->Execute();
}

// The argmax of the last row of the logits.
absl::StatusOr<int64_t> NextToken(const Runtime& rt, const LoopMethod& m) {
  FERRY_ASSIGN_OR_RETURN(std::vector<double> logits, ReadValues(rt, m.method->Output(0)));
  const auto last = logits.end() - m.vocab;
  return std::max_element(last, logits.end()) - last;
}

// Per-call copies of the manifest that move a constant or a state: 0 when they stay put.
int ConstantAndStateCopies(const Method& method) {
  int n = 0;
  for (const CopyStep& c : method.plan().placement.copies) {
    const ValueKind kind = method.def().values[c.value].kind;
    n += c.timing == CopyTiming::kPerCall &&
         (kind == ValueKind::kConstant || kind == ValueKind::kState);
  }
  return n;
}

std::string CopySummary(const Method& method) {
  int h2d = 0, d2h = 0, d2d = 0;
  for (const CopyStep& c : method.plan().placement.copies) {
    if (c.timing != CopyTiming::kPerCall) continue;
    h2d += c.direction == CopyDirection::kHostToDevice;
    d2h += c.direction == CopyDirection::kDeviceToHost;
    d2d += c.direction == CopyDirection::kDeviceToDevice;
  }
  return absl::StrFormat("%d host-to-device, %d device-to-host, %d device-to-device", h2d, d2h,
                         d2d);
}

std::string ArenaSummary(const Method& method) {
  std::vector<std::string> parts;
  for (const ArenaInfo& a : method.plan().arenas) {
    parts.push_back(absl::StrCat(a.device_label, " ", a.arena_bytes, " B"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

int RunTokens(const Options& options, const Runtime& rt, const Program& program, std::FILE* out,
              std::FILE* err) {
  std::unique_ptr<LoadedProgram> loaded = rt.LoadProgram(program);
  const std::vector<std::string> names = program.method_names();
  const bool has_prefill =
      options.method != "prefill" && std::find(names.begin(), names.end(), "prefill") != names.end();
  std::optional<LoopMethod> prefill;
  if (has_prefill) {
    absl::StatusOr<std::unique_ptr<Method>> method = loaded->LoadMethod("prefill", options.load);
    if (!method.ok()) return Fail(err, method.status());
    absl::StatusOr<LoopMethod> m = PrepareLoopMethod(rt, *std::move(method));
    if (!m.ok()) return Fail(err, m.status());
    prefill = *std::move(m);
  }
  absl::StatusOr<std::unique_ptr<Method>> decode_method =
      loaded->LoadMethod(options.method, options.load);
  if (!decode_method.ok()) return Fail(err, decode_method.status());
  absl::StatusOr<LoopMethod> loop = PrepareLoopMethod(rt, *std::move(decode_method));
  if (!loop.ok()) return Fail(err, loop.status());
  LoopMethod& decode = *loop;
  if (decode.tokens_per_call != 1) {
    return Fail(err, Convention(options.method,
                                absl::StrCat("takes ", decode.tokens_per_call,
                                             " tokens per call, and the decode method takes 1 "
                                             "(--method names it)")));
  }
  if (prefill.has_value() && prefill->vocab != decode.vocab) {
    return Fail(err, absl::InvalidArgumentError(absl::StrFormat(
                         "--tokens: \"prefill\" has %d logits per token and \"%s\" %d",
                         prefill->vocab, options.method, decode.vocab)));
  }
  const int64_t prompt_length = prefill.has_value() ? prefill->tokens_per_call : 0;
  std::vector<int64_t> prompt(prompt_length);
  for (int64_t i = 0; i < prompt_length; ++i) prompt[i] = (37 * i + 11) % decode.vocab;
  if (decode.cache_rows >= 0 && prompt_length + options.tokens > decode.cache_rows) {
    return Fail(err, absl::InvalidArgumentError(absl::StrFormat(
                         "--tokens %d: the cache holds %d positions (input \"mask\" of method "
                         "\"%s\" is [1, %d]) and the prompt takes %d: at most %d tokens",
                         options.tokens, decode.cache_rows, options.method, decode.cache_rows,
                         prompt_length, decode.cache_rows - prompt_length)));
  }

  TraceRecorder trace;
  if (prefill.has_value()) trace.AddLoad(*prefill->method);
  trace.AddLoad(*decode.method);
  // Prefill, then one decode call per token, each fed the argmax of the last logits.
  int64_t next = 11 % decode.vocab;
  double prefill_us = 0;
  if (prefill.has_value()) {
    auto start = Clock::now();
    if (absl::Status s = Step(rt, *prefill, prompt, 0); !s.ok()) return Fail(err, s);
    trace.AddCall(*prefill->method);
    absl::StatusOr<int64_t> token = NextToken(rt, *prefill);
    if (!token.ok()) return Fail(err, token.status());
    prefill_us = MicrosSince(start);
    next = *token;
  }
  std::vector<Device> devices = decode.method->plan().placement.devices();
  const DeviceCounters before = TotalCounters(rt, devices);
  std::vector<int64_t> generated;
  std::vector<double> step_us;
  auto progress = Clock::now();
  const auto loop_start = Clock::now();
  for (int t = 0; t < options.tokens; ++t) {
    generated.push_back(next);
    auto start = Clock::now();
    if (absl::Status s = Step(rt, decode, {&next, 1}, prompt_length + t); !s.ok()) {
      return Fail(err, s);
    }
    trace.AddCall(*decode.method);
    absl::StatusOr<int64_t> token = NextToken(rt, decode);
    if (!token.ok()) return Fail(err, token.status());
    step_us.push_back(MicrosSince(start));
    next = *token;
    if (MicrosSince(progress) > 1e6) {
      std::fprintf(err, "\rferry run: %d/%d tokens", t + 1, options.tokens);
      progress = Clock::now();
    }
  }
  const double loop_us = MicrosSince(loop_start);
  if (!options.trace_path.empty()) {
    if (absl::Status s = WriteTrace(options, trace, err); !s.ok()) return Fail(err, s);
  }
  const DeviceCounters after = TotalCounters(rt, devices);
  const double n = options.tokens;
  const double copies = ((after.h2d_copies - before.h2d_copies) +
                         (after.d2h_copies - before.d2h_copies) +
                         (after.d2d_copies - before.d2d_copies)) / n;
  const double bytes = ((after.h2d_bytes - before.h2d_bytes) + (after.d2h_bytes - before.d2h_bytes) +
                        (after.d2d_bytes - before.d2d_bytes)) / n;
  // The loop's own copies: inputs it passes on a device (--skip-h2d) and logits it reads from one
  // (--skip-d2h).
  int caller_copies = 0;
  size_t caller_bytes = 0;
  for (const IoInfo& io : decode.method->plan().inputs) {
    if (!io.device.is_host()) ++caller_copies, caller_bytes += io.bytes;
  }
  if (!decode.method->plan().outputs[0].device.is_host()) {
    ++caller_copies;
    caller_bytes += decode.method->plan().outputs[0].bytes;
  }
  const Method& method = *decode.method;
  const int manifest = method.plan().placement.per_call_copies();
  const size_t manifest_bytes = method.plan().placement.per_call_bytes();
  const bool agree = copies == manifest + caller_copies && bytes == manifest_bytes + caller_bytes;
  std::fprintf(err, options.tokens > 0 ? "\r" : "");

  if (prefill.has_value()) {
    absl::FPrintF(out, "prefill: %d tokens in %.1f us\n", prompt_length, prefill_us);
  }
  std::sort(step_us.begin(), step_us.end());
  const double median = step_us.empty() ? 0 : step_us[step_us.size() / 2];
  absl::FPrintF(out, "%s: %d tokens in %.1f us: %.2f us per token (median %.2f), %.0f tokens/s\n",
                options.method, options.tokens, loop_us, n > 0 ? loop_us / n : 0.0, median,
                loop_us > 0 ? n * 1e6 / loop_us : 0.0);
  absl::FPrintF(out, "tokens: %s\n", absl::StrJoin(generated, " "));
  absl::FPrintF(out,
                "copies per token: %.2f counted by devices, %.1f bytes (the manifest: %d per call: "
                "%s; %d B%s)%s\n",
                copies, bytes, manifest, CopySummary(method), manifest_bytes,
                caller_copies > 0 ? absl::StrFormat("; the loop's own: %d, %d B", caller_copies,
                                                    caller_bytes)
                                  : "",
                agree ? "" : "  (MISMATCH)");
  const int moved = ConstantAndStateCopies(method) +
                    (prefill.has_value() ? ConstantAndStateCopies(*prefill->method) : 0);
  absl::FPrintF(out, "copies of constants and state per call: %d\n", moved);
  absl::FPrintF(out, "device memory: constant replicas %s (made once), shared states %s\n",
                DeviceBytes(loaded->replica_bytes()), DeviceBytes(loaded->shared_state_bytes()));
  if (prefill.has_value()) {
    absl::FPrintF(out, "arenas: prefill %s; %s %s\n", ArenaSummary(*prefill->method),
                  options.method, ArenaSummary(method));
  } else {
    absl::FPrintF(out, "arenas: %s %s\n", options.method, ArenaSummary(method));
  }
  return agree ? kExitOk : kExitError;
}

}  // namespace ferry::cli
