// ferry_peers: Ferry beside ONNX Runtime (its CPU library, driven through the C API) on the same
// workloads, in one run, written as a markdown table. Both sides run on one thread.
//
//   build-peers/bench/peers/ferry_peers [--out=FILE] [--ort-lib=PATH] [--max-nodes=N]
//   bench/peers/run.sh [FILE]       # fetches ONNX Runtime, builds in Release, runs this
//
// The library is --ort-lib, else $FERRY_ORT_LIB, else the CMake cache variable FERRY_ORT_LIB.
// Without one that loads, the harness says the peer is absent and exits 0. With one, every
// workload's result on ONNX Runtime is compared with Ferry's (the same inputs, 1e-5 relative)
// before it is timed; a mismatch or an ONNX Runtime error exits 1.
//
// Timing: for each workload the sides take turns in one loop (repetition r starts with side
// r mod 2), each repetition one batch of calls per side sized to a few milliseconds; the table
// gives medians over the repetitions. First loads in a process run in fresh processes: the
// harness executes itself (--cold=ferry|ort --nodes=N), and the child times one load after its
// setup (the runtime made, the library opened, the model bytes built).
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/common/interleaved.h"
#include "bench/peers/onnx_writer.h"
#include "bench/peers/ort_peer.h"
#include "ferry/base/status_macros.h"
#include "ferry/kernels/internal/host_blas.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"

#ifndef FERRY_ORT_LIB_DEFAULT
#define FERRY_ORT_LIB_DEFAULT ""
#endif
#ifndef FERRY_PEERS_BUILD_TYPE
#define FERRY_PEERS_BUILD_TYPE "unknown"
#endif

namespace ferry::peers {
namespace {

using Clock = std::chrono::steady_clock;
using bench::Batch;
using bench::FormatTime;
using bench::Interleaved;
using bench::Median;
using Dims = std::vector<int64_t>;

constexpr int64_t kOpset = 17;
constexpr double kRelativeTolerance = 1e-5;

// One workload as both sides see it: a Ferry program with method "forward" and an ONNX model with
// inputs x0, x1, ... and output y, of the same shapes.
struct Workload {
  std::vector<Dims> inputs;
  Dims output;
  std::vector<uint8_t> ferry_program;
  std::vector<uint8_t> onnx_model;
};

std::string InputName(size_t i) { return absl::StrCat("x", i); }

// Declares a workload's inputs and constants on both sides at once; the caller adds the ops to
// method() and the nodes to onnx().
class WorkloadBuilder {
 public:
  WorkloadBuilder() : method_(program_.AddMethod("forward")), onnx_(kOpset) {}

  MethodBuilder& method() { return method_; }
  OnnxModelWriter& onnx() { return onnx_; }

  // Input i, named InputName(i) on both sides.
  ValueId Input(const Dims& dims) {
    const std::string name = InputName(inputs_.size());
    inputs_.push_back(dims);
    onnx_.Input(name, dims);
    return method_.Input(name, DType::kFloat32, dims);
  }
  ValueId Constant(const std::string& name, const Dims& dims, const std::vector<float>& values) {
    onnx_.Initializer(name, dims, values);
    return method_.ConstantF32(name, dims, values);
  }

  // `ferry_output` is Ferry's result; ONNX's is the value named "y".
  Workload Finish(ValueId ferry_output, const Dims& dims) {
    method_.Output(ferry_output);
    onnx_.Output("y", dims);
    return Workload{std::move(inputs_), dims, std::move(program_.Build()).value(), onnx_.Finish()};
  }

 private:
  ProgramBuilder program_;
  MethodBuilder& method_;
  OnnxModelWriter onnx_;
  std::vector<Dims> inputs_;
};

// `op` over float32 inputs of `dims`: Ferry's op name and ONNX's op type.
Workload Elementwise(const std::string& ferry_op, const std::string& onnx_op, int inputs,
                     const Dims& dims) {
  WorkloadBuilder b;
  std::vector<ValueId> args;
  std::vector<std::string> names;
  for (int i = 0; i < inputs; ++i) {
    args.push_back(b.Input(dims));
    names.push_back(InputName(i));
  }
  b.onnx().Node(onnx_op, names, {"y"});
  return b.Finish(b.method().Op(ferry_op, args), dims);
}

// softmax along the last axis of a [rows, cols] input.
Workload Softmax(int64_t rows, int64_t cols) {
  WorkloadBuilder b;
  const Dims dims = {rows, cols};
  ValueId x = b.Input(dims);
  b.onnx().Node("Softmax", {InputName(0)}, {"y"}, {{"axis", -1}});
  return b.Finish(b.method().Op("softmax", {x, b.method().Int(-1)}), dims);
}

// x [size, size] times W^T [size, size] plus bias [size]: Ferry's linear, ONNX's Gemm with
// transB = 1. Weights and bias are constants (initializers), positive so that no result is near 0.
Workload Linear(int64_t size) {
  WorkloadBuilder b;
  const Dims dims = {size, size};
  std::vector<float> weight(size * size), bias(size);
  for (int64_t i = 0; i < size * size; ++i) weight[i] = static_cast<float>(i % 17) / 64.0f;
  for (int64_t i = 0; i < size; ++i) bias[i] = 0.5f + static_cast<float>(i % 5) * 0.25f;
  ValueId x = b.Input(dims);
  ValueId w = b.Constant("w", dims, weight);
  ValueId c = b.Constant("b", {size}, bias);
  b.onnx().Node("Gemm", {InputName(0), "w", "b"}, {"y"}, {{"transB", 1}});
  return b.Finish(b.method().Op("linear", {x, w, c}), dims);
}

// A chain of `n` adds of one constant [16] to a [16] input: the load-time workload (the graph
// of load_bench.cc's BM_LoadAddChain).
Workload AddChain(int n) {
  WorkloadBuilder b;
  const Dims dims = {16};
  ValueId v = b.Input(dims);
  ValueId c = b.Constant("w", dims, std::vector<float>(16, 0.5f));
  std::string prev = InputName(0);
  for (int i = 0; i < n; ++i) {
    v = b.method().Op("add", {v, c});
    std::string next = i + 1 == n ? "y" : absl::StrCat("v", i);
    b.onnx().Node("Add", {prev, "w"}, {next});
    prev = std::move(next);
  }
  return b.Finish(v, dims);
}

int64_t Elements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Both sides of a workload, loaded, with inputs and ONNX Runtime's output buffer bound once.
struct Loaded {
  const OrtPeer* ort = nullptr;
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
  std::unique_ptr<PeerSession> session;
  std::vector<std::vector<float>> inputs;
  std::vector<float> ort_output;
  std::vector<PeerValue> ort_inputs;
  PeerValue ort_output_value;
  std::vector<std::string> input_names;
  std::vector<const char*> input_name_ptrs;
  std::vector<const OrtValue*> input_value_ptrs;
};

// The threads of this process.
int CountThreads() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task"); dir != nullptr) {
    while (const dirent* e = readdir(dir)) n += e->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

absl::StatusOr<std::unique_ptr<Loaded>> Load(const Runtime& rt, const OrtPeer& ort,
                                             const Workload& w) {
  auto l = std::make_unique<Loaded>();
  l->ort = &ort;
  FERRY_ASSIGN_OR_RETURN(l->program, Program::FromBytes(w.ferry_program));
  FERRY_ASSIGN_OR_RETURN(l->method, rt.LoadMethod(*l->program, "forward"));
  // A session with one intra-op and one inter-op thread starts no threads: more would mean the
  // options (SetIntraOpNumThreads, SetInterOpNumThreads) were not applied.
  const int threads = CountThreads();
  FERRY_ASSIGN_OR_RETURN(l->session, ort.CreateSession(w.onnx_model));
  if (CountThreads() != threads) {
    return absl::FailedPreconditionError(
        absl::StrFormat("an ONNX Runtime session started %d threads: it does not run on one thread",
                        CountThreads() - threads));
  }
  for (size_t i = 0; i < w.inputs.size(); ++i) {
    std::vector<float>& in = l->inputs.emplace_back(Elements(w.inputs[i]));
    // Mixed signs (relu has work to do), different per input, exact in float.
    for (size_t k = 0; k < in.size(); ++k) {
      in[k] = static_cast<float>(static_cast<int64_t>((k * 7 + i * 3) % 23) - 11) / 8.0f;
    }
    FERRY_RETURN_IF_ERROR(
        l->method->SetInput(i, TensorView::Host(DType::kFloat32, w.inputs[i], in.data())));
    FERRY_ASSIGN_OR_RETURN(PeerValue v, ort.WrapFloats(in.data(), w.inputs[i]));
    l->input_value_ptrs.push_back(v.get());
    l->ort_inputs.push_back(std::move(v));
    l->input_names.push_back(InputName(i));
  }
  for (const std::string& name : l->input_names) l->input_name_ptrs.push_back(name.c_str());
  l->ort_output.assign(Elements(w.output), 0.0f);
  FERRY_ASSIGN_OR_RETURN(l->ort_output_value, ort.WrapFloats(l->ort_output.data(), w.output));
  return l;
}

constexpr const char* kOutputNames[] = {"y"};

// ONNX Runtime's Run over the bound inputs into the bound output buffer.
OrtStatus* RunOrt(const Loaded& l) {
  OrtValue* outputs[] = {l.ort_output_value.get()};
  return l.ort->api().Run(l.session->get(), nullptr, l.input_name_ptrs.data(),
                          l.input_value_ptrs.data(), l.input_value_ptrs.size(), kOutputNames, 1,
                          outputs);
}

// Ferry's last output against ONNX Runtime's output buffer, which is poisoned first and then
// filled by `run_ort`.
absl::Status CompareOutputs(const std::string& what, Loaded& l,
                            const std::function<absl::Status()>& run_ort) {
  FERRY_RETURN_IF_ERROR(l.method->Execute());
  std::fill(l.ort_output.begin(), l.ort_output.end(), std::numeric_limits<float>::quiet_NaN());
  FERRY_RETURN_IF_ERROR(run_ort());
  const auto* ferry = static_cast<const float*>(l.method->Output(0).data());
  for (size_t i = 0; i < l.ort_output.size(); ++i) {
    const float a = ferry[i], b = l.ort_output[i];
    const float scale = std::max(std::fabs(a), std::fabs(b));
    if (!(std::fabs(a - b) <= kRelativeTolerance * scale)) {
      return absl::InternalError(absl::StrFormat(
          "%s: element %d is %.9g on Ferry and %.9g on ONNX Runtime (more than %g relative); "
          "the ONNX model or the ONNX Runtime function table is wrong",
          what, i, a, b, kRelativeTolerance));
    }
  }
  return absl::OkStatus();
}

absl::Status CompareRun(const std::string& what, Loaded& l) {
  return CompareOutputs(what, l, [&] { return l.ort->Check(RunOrt(l), "Run"); });
}

struct Row {
  std::string workload;
  double ferry_ns;
  double ort_ns;
  std::string ferry_text;  // as shown; FormatTime of the figure when empty
  std::string ort_text;
  std::string ort_path;  // what the ONNX Runtime figure times
};

// --- bind inputs + execute -----------------------------------------------------------------------

// One relu (1 input) or add (2 inputs) over 16 floats, inputs bound on every call: Ferry's
// SetInput + Execute against ONNX Runtime's CreateTensorWithDataAsOrtValue + Run, and the same
// with BindInput + RunWithBinding; the faster ONNX Runtime path is reported. ONNX Runtime's
// output is bound once to a caller buffer (Ferry's stays in its arena), its fastest way.
absl::StatusOr<Row> BindExecute(const Runtime& rt, const OrtPeer& ort, const std::string& label,
                                const Workload& w, int reps) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Loaded> loaded, Load(rt, ort, w));
  Loaded& l = *loaded;
  const OrtApiTable& api = ort.api();
  const size_t num_inputs = w.inputs.size();
  const Dims dims = w.inputs[0];

  OrtIoBinding* binding = nullptr;
  FERRY_RETURN_IF_ERROR(
      ort.Check(api.CreateIoBinding(l.session->get(), &binding), "CreateIoBinding"));
  auto release_binding = [&api](OrtIoBinding* b) { api.ReleaseIoBinding(b); };
  std::unique_ptr<OrtIoBinding, decltype(release_binding)> binding_owner(binding, release_binding);
  FERRY_RETURN_IF_ERROR(
      ort.Check(api.BindOutput(binding, kOutputNames[0], l.ort_output_value.get()), "BindOutput"));

  // One call: input values made over the caller's memory and released after the run, as for a
  // caller whose input buffers change from call to call.
  auto ort_call = [&](bool with_binding) -> OrtStatus* {
    OrtValue* values[2] = {nullptr, nullptr};
    OrtStatus* s = nullptr;
    for (size_t i = 0; i < num_inputs && s == nullptr; ++i) {
      s = api.CreateTensorWithDataAsOrtValue(ort.cpu(), l.inputs[i].data(),
                                             l.inputs[i].size() * sizeof(float), dims.data(),
                                             dims.size(), kOnnxFloat, &values[i]);
      if (s == nullptr && with_binding) s = api.BindInput(binding, l.input_name_ptrs[i], values[i]);
    }
    if (s == nullptr) {
      if (with_binding) {
        s = api.RunWithBinding(l.session->get(), nullptr, binding);
      } else {
        OrtValue* outputs[] = {l.ort_output_value.get()};
        s = api.Run(l.session->get(), nullptr, l.input_name_ptrs.data(), values, num_inputs,
                    kOutputNames, 1, outputs);
      }
    }
    for (OrtValue* v : values) {
      if (v != nullptr) api.ReleaseValue(v);
    }
    return s;
  };
  FERRY_RETURN_IF_ERROR(
      CompareOutputs(label + " (Run)", l, [&] { return ort.Check(ort_call(false), "Run"); }));
  FERRY_RETURN_IF_ERROR(CompareOutputs(
      label + " (RunWithBinding)", l, [&] { return ort.Check(ort_call(true), "RunWithBinding"); }));

  Method& method = *l.method;
  std::vector<TensorView> views;
  for (size_t i = 0; i < num_inputs; ++i) {
    views.push_back(TensorView::Host(DType::kFloat32, dims, l.inputs[i].data()));
  }
  Batch ferry = [&](int64_t iterations) {
    bool ok = true;
    for (int64_t k = 0; k < iterations; ++k) {
      for (size_t i = 0; i < num_inputs; ++i) ok &= method.SetInput(i, views[i]).ok();
      ok &= method.Execute().ok();
    }
    return ok;
  };
  auto ort_batch = [&](bool with_binding) -> Batch {
    return [&, with_binding](int64_t iterations) {
      for (int64_t k = 0; k < iterations; ++k) {
        if (OrtStatus* s = ort_call(with_binding); s != nullptr) {
          api.ReleaseStatus(s);
          return false;
        }
      }
      return true;
    };
  };
  FERRY_ASSIGN_OR_RETURN(std::vector<double> ns,
                         Interleaved({ferry, ort_batch(false), ort_batch(true)}, reps, 5));
  const bool binding_faster = ns[2] < ns[1];
  Row row;
  row.workload = label;
  row.ferry_ns = ns[0];
  row.ort_ns = std::min(ns[1], ns[2]);
  row.ort_path = binding_faster ? absl::StrCat(
                                      "CreateTensorWithDataAsOrtValue + BindInput + RunWithBinding "
                                      "(plain Run: ",
                                      FormatTime(ns[1]), ")")
                                : absl::StrCat(
                                      "CreateTensorWithDataAsOrtValue + Run (IoBinding + "
                                      "RunWithBinding: ",
                                      FormatTime(ns[2]), ")");
  return row;
}

// --- kernels and linear
// ----------------------------------------------------------------------------

// Inputs bound once; Ferry's Execute against ONNX Runtime's Run (output into a bound buffer).
absl::StatusOr<Row> Steady(const Runtime& rt, const OrtPeer& ort, const std::string& label,
                           const Workload& w, int reps, double target_ms) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Loaded> loaded, Load(rt, ort, w));
  Loaded& l = *loaded;
  FERRY_RETURN_IF_ERROR(CompareRun(label, l));
  Batch ferry = [&](int64_t iterations) {
    bool ok = true;
    for (int64_t k = 0; k < iterations; ++k) ok &= l.method->Execute().ok();
    return ok;
  };
  Batch onnx = [&](int64_t iterations) {
    for (int64_t k = 0; k < iterations; ++k) {
      if (OrtStatus* s = RunOrt(l); s != nullptr) {
        ort.api().ReleaseStatus(s);
        return false;
      }
    }
    return true;
  };
  FERRY_ASSIGN_OR_RETURN(std::vector<double> ns, Interleaved({ferry, onnx}, reps, target_ms));
  return Row{label, ns[0], ns[1], "", "", "Run, inputs and output bound once"};
}

// --- load
// ------------------------------------------------------------------------------------------

double MicrosSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// One timed load of `bytes` on `side` ("ferry": Program::FromBytes + LoadMethod; "ort":
// CreateSessionFromArray), in microseconds; the loaded objects are destroyed after the clock stops.
absl::StatusOr<double> TimeOneLoad(const std::string& side, const Runtime& rt, const OrtPeer* ort,
                                   const std::vector<uint8_t>& bytes) {
  if (side == "ferry") {
    const Clock::time_point t0 = Clock::now();
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Method> method, rt.LoadMethod(*program, "forward"));
    return MicrosSince(t0);
  }
  const Clock::time_point t0 = Clock::now();
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<PeerSession> session, ort->CreateSession(bytes));
  return MicrosSince(t0);
}

absl::StatusOr<std::vector<uint8_t>> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

absl::Status WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The child of a first-load measurement: set up, read the model, time one load, print the
// microseconds.
absl::Status ColdChild(const std::string& side, const std::string& model_path,
                       const std::string& ort_lib) {
  RuntimeOptions options;
  options.sim.guard = false;
  Runtime rt(options);
  std::unique_ptr<OrtPeer> ort;
  if (side == "ort") {
    FERRY_ASSIGN_OR_RETURN(ort, OrtPeer::Open(ort_lib));
  } else if (side != "ferry") {
    return absl::InvalidArgumentError(absl::StrCat("--cold=", side, ": ferry or ort"));
  }
  FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFile(model_path));
  FERRY_ASSIGN_OR_RETURN(double us, TimeOneLoad(side, rt, ort.get(), bytes));
  std::printf("%.3f\n", us);
  return absl::OkStatus();
}

// Runs this program as a cold-load child; its figure.
absl::StatusOr<double> ColdLoadInChild(const std::string& side, const std::string& model_path,
                                       const std::string& ort_lib) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  std::string a1 = "--cold=" + side, a2 = "--model=" + model_path, a3 = "--ort-lib=" + ort_lib;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    char name[] = "ferry_peers";
    char* argv[] = {name, a1.data(), a2.data(), a3.data(), nullptr};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("the ", side, " cold-load child failed"));
  }
  return std::strtod(out.c_str(), nullptr);
}

std::string PerNode(double us, int nodes) {
  return absl::StrFormat("%s (%.3g us/node)", FormatTime(us * 1e3), us / nodes);
}

// The add chain of `nodes`: checked once loaded, then loaded `reps` times per side, in turns, in
// this process (steady state: after that first load) and in fresh processes (first load).
absl::Status LoadRows(const Runtime& rt, const OrtPeer& ort, int nodes, int reps, int cold_reps,
                      const std::string& ort_lib, const std::string& tmp_dir,
                      std::vector<Row>& rows) {
  const Workload w = AddChain(nodes);
  {
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Loaded> l, Load(rt, ort, w));
    FERRY_RETURN_IF_ERROR(CompareRun(absl::StrCat("add chain of ", nodes), *l));
  }
  std::vector<double> ferry_us, ort_us;
  for (int r = 0; r < reps; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool ferry_turn = (k + r) % 2 == 0;
      FERRY_ASSIGN_OR_RETURN(double us, TimeOneLoad(ferry_turn ? "ferry" : "ort", rt, &ort,
                                                    ferry_turn ? w.ferry_program : w.onnx_model));
      (ferry_turn ? ferry_us : ort_us).push_back(us);
    }
  }
  const std::string count = absl::StrFormat("%d", nodes);
  double f = Median(ferry_us), o = Median(ort_us);
  rows.push_back(Row{absl::StrCat("load, chain of ", count, " adds, steady state"), f * 1e3,
                     o * 1e3, PerNode(f, nodes), PerNode(o, nodes),
                     "CreateSessionFromArray, ORT_ENABLE_ALL (the default)"});

  const std::string ferry_path = absl::StrCat(tmp_dir, "/chain_", nodes, ".ferry");
  const std::string onnx_path = absl::StrCat(tmp_dir, "/chain_", nodes, ".onnx");
  FERRY_RETURN_IF_ERROR(WriteFile(ferry_path, w.ferry_program));
  FERRY_RETURN_IF_ERROR(WriteFile(onnx_path, w.onnx_model));
  ferry_us.clear();
  ort_us.clear();
  for (int r = 0; r < cold_reps; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool ferry_turn = (k + r) % 2 == 0;
      FERRY_ASSIGN_OR_RETURN(double us,
                             ColdLoadInChild(ferry_turn ? "ferry" : "ort",
                                             ferry_turn ? ferry_path : onnx_path, ort_lib));
      (ferry_turn ? ferry_us : ort_us).push_back(us);
    }
  }
  std::remove(ferry_path.c_str());
  std::remove(onnx_path.c_str());
  f = Median(ferry_us);
  o = Median(ort_us);
  rows.push_back(Row{absl::StrCat("load, chain of ", count, " adds, first in a process"), f * 1e3,
                     o * 1e3, PerNode(f, nodes), PerNode(o, nodes),
                     "CreateSessionFromArray in a fresh process"});
  return absl::OkStatus();
}

// --- the table
// -------------------------------------------------------------------------------------

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

std::string FormatRatio(double ratio) {
  return absl::StrFormat(ratio < 0.1 ? "%.3f" : "%.2f", ratio);
}

std::string Table(const std::vector<Row>& rows, const std::string& ort_version,
                  const std::string& command) {
  std::string t = absl::StrFormat(
      "Measured on %s on %s (%u CPUs), ONNX Runtime %s (the CPU library of npm "
      "`onnxruntime-node`), Ferry built %s (host BLAS kernels: %s), with `%s`. Both sides on "
      "one thread; medians of interleaved repetitions; ratio < 1: Ferry is faster.\n\n",
      Today(), CpuModel(), std::thread::hardware_concurrency(), ort_version, FERRY_PEERS_BUILD_TYPE,
      internal::HostBlasKernels(), command);
  absl::StrAppend(&t, "| workload | Ferry | ONNX Runtime | Ferry / ORT | ONNX Runtime path |\n",
                  "| --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    absl::StrAppend(&t, "| ", r.workload, " | ",
                    r.ferry_text.empty() ? FormatTime(r.ferry_ns) : r.ferry_text, " | ",
                    r.ort_text.empty() ? FormatTime(r.ort_ns) : r.ort_text, " | ",
                    FormatRatio(r.ferry_ns / r.ort_ns), " | ", r.ort_path, " |\n");
  }
  return t;
}

struct Args {
  std::string out;
  std::string ort_lib;
  std::string command;
  std::string cold;
  std::string model;
  int max_nodes = 100000;
};

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  if (const char* env = std::getenv("FERRY_ORT_LIB"); env != nullptr && *env != '\0') {
    a.ort_lib = env;
  } else {
    a.ort_lib = FERRY_ORT_LIB_DEFAULT;
  }
  std::vector<std::string> words;
  for (int i = 0; i < argc; ++i) words.push_back(argv[i]);
  a.command = absl::StrJoin(words, " ");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag, std::string& out) {
      if (!absl::StartsWith(arg, flag)) return false;
      out = arg.substr(std::string(flag).size());
      return true;
    };
    std::string nodes;
    if (value("--out=", a.out) || value("--ort-lib=", a.ort_lib) ||
        value("--command=", a.command) || value("--cold=", a.cold) || value("--model=", a.model)) {
      continue;
    }
    if (value("--max-nodes=", nodes)) {
      a.max_nodes = std::atoi(nodes.c_str());
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown argument ", arg));
  }
  return a;
}

absl::Status Run(const Args& args, const OrtPeer& ort) {
  RuntimeOptions options;
  options.sim.guard = false;
  Runtime rt(options);
  std::vector<Row> rows;
  auto add = [&rows](absl::StatusOr<Row> row) -> absl::Status {
    if (!row.ok()) return row.status();
    std::fprintf(stderr, "  %s: Ferry %s, ONNX Runtime %s\n", row->workload.c_str(),
                 FormatTime(row->ferry_ns).c_str(), FormatTime(row->ort_ns).c_str());
    rows.push_back(*std::move(row));
    return absl::OkStatus();
  };
  std::fprintf(stderr, "bind + execute\n");
  FERRY_RETURN_IF_ERROR(add(BindExecute(rt, ort, "bind + execute, 1 input, relu over 16 floats",
                                        Elementwise("relu", "Relu", 1, {16}), 15)));
  FERRY_RETURN_IF_ERROR(add(BindExecute(rt, ort, "bind + execute, 2 inputs, add over 16 floats",
                                        Elementwise("add", "Add", 2, {16}), 15)));
  std::fprintf(stderr, "kernels and linear\n");
  constexpr int64_t k64K = 64 * 1024;
  FERRY_RETURN_IF_ERROR(
      add(Steady(rt, ort, "add, 64K floats", Elementwise("add", "Add", 2, {k64K}), 11, 10)));
  FERRY_RETURN_IF_ERROR(
      add(Steady(rt, ort, "relu, 64K floats", Elementwise("relu", "Relu", 1, {k64K}), 11, 10)));
  FERRY_RETURN_IF_ERROR(
      add(Steady(rt, ort, "softmax, [64, 1024], last axis", Softmax(64, 1024), 11, 10)));
  FERRY_RETURN_IF_ERROR(
      add(Steady(rt, ort, "linear [64, 64] x [64, 64]^T + bias (Gemm)", Linear(64), 11, 10)));
  FERRY_RETURN_IF_ERROR(
      add(Steady(rt, ort, "linear [512, 512] x [512, 512]^T + bias (Gemm)", Linear(512), 7, 30)));

  char tmp_template[] = "/tmp/ferry_peers_XXXXXX";
  if (mkdtemp(tmp_template) == nullptr) return absl::InternalError("mkdtemp failed");
  struct ChainSize {
    int nodes, reps, cold_reps;
  };
  for (const ChainSize& load :
       {ChainSize{1000, 9, 5}, ChainSize{10000, 5, 3}, ChainSize{100000, 3, 3}}) {
    if (load.nodes > args.max_nodes) continue;
    std::fprintf(stderr, "load, %d nodes\n", load.nodes);
    const size_t before = rows.size();
    absl::Status s =
        LoadRows(rt, ort, load.nodes, load.reps, load.cold_reps, args.ort_lib, tmp_template, rows);
    if (!s.ok()) {
      rmdir(tmp_template);
      return s;
    }
    for (size_t i = before; i < rows.size(); ++i) {
      std::fprintf(stderr, "  %s: Ferry %s, ONNX Runtime %s\n", rows[i].workload.c_str(),
                   rows[i].ferry_text.c_str(), rows[i].ort_text.c_str());
    }
  }
  rmdir(tmp_template);

  const std::string table = Table(rows, ort.version(), args.command);
  if (args.out.empty()) {
    std::fputs(table.c_str(), stdout);
    return absl::OkStatus();
  }
  std::ofstream out(args.out);
  out << table;
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", args.out));
  std::fprintf(stderr, "wrote %s\n", args.out.c_str());
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "ferry_peers: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  if (!args->cold.empty()) {
    absl::Status s = ColdChild(args->cold, args->model, args->ort_lib);
    if (!s.ok()) std::fprintf(stderr, "ferry_peers: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 1;
  }
  absl::StatusOr<std::unique_ptr<OrtPeer>> ort = OrtPeer::Open(args->ort_lib);
  if (absl::IsNotFound(ort.status())) {
    std::printf("ONNX Runtime is absent (%s): no comparison made.\n",
                std::string(ort.status().message()).c_str());
    return 0;
  }
  absl::Status s = ort.status();
  if (s.ok()) {
    std::fprintf(stderr, "ONNX Runtime %s from %s\n", (*ort)->version().c_str(),
                 args->ort_lib.c_str());
    s = Run(*args, **ort);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "ferry_peers: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ferry::peers

int main(int argc, char** argv) { return ferry::peers::Main(argc, argv); }
