// The decode loops of docs/device_io.md, built and run: inputs and outputs stay on the device
// (sim:0 here), the output of one call is the input of the next, and no copy runs per call, in
// the manifest and in the device's own copy counters; with two methods of one program (prefill,
// then decode), weights and state are on the device once for both. The examples' code is also
// checked to be the doc's, word for word.
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <memory>
#include <utility>
#include <vector>

#include "ferry/base/status_macros.h"
#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/runtime.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

constexpr int64_t kWidth = 4;

// The program of the doc: y = tanh(h W) with h += x kept in a device-owned state buffer.
std::vector<uint8_t> DecoderStepProgram() {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {1, kWidth});
  ValueId h = m.StateF32("h", {1, kWidth}, std::vector<float>(kWidth, 0.0f));
  std::vector<float> w(kWidth * kWidth);
  for (int i = 0; i < kWidth * kWidth; ++i) w[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  ValueId wv = m.ConstantF32("w", {kWidth, kWidth}, w);
  m.Output(m.GraphDelegate("cuda:0", {x, h, wv}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    ValueId updated = g.Op("add_", {in[1], in[0]});
    return std::vector<ValueId>{g.Op("tanh", {g.Op("linear", {updated, in[2]})})};
  })[0]);
  return std::move(pb.Build()).value();
}

// ---- begin docs/device_io.md example ----
absl::Status DecodeLoop(ferry::Runtime& rt, const ferry::Program& program, const float* first,
                        int steps, std::vector<float>* last) {
  ferry::LoadOptions options;
  options.skip_h2d_for_method_inputs = true;   // the caller passes x on the device
  options.skip_d2h_for_method_outputs = true;  // y stays on the device
  options.error_on_per_call_copies = true;     // any copy left at the boundary is a load error
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Method> method,
                         rt.LoadMethod(program, "forward", options));
  const ferry::IoInfo& in = method->plan().inputs[0];
  const ferry::IoInfo& out = method->plan().outputs[0];
  ferry::DeviceRuntime* device = rt.devices().Find(in.device);
  // Two device buffers: each call reads one and writes the other.
  FERRY_ASSIGN_OR_RETURN(ferry::DeviceBuffer a, ferry::DeviceBuffer::Allocate(*device, in.bytes, 64));
  FERRY_ASSIGN_OR_RETURN(ferry::DeviceBuffer b, ferry::DeviceBuffer::Allocate(*device, out.bytes, 64));
  FERRY_RETURN_IF_ERROR(device->CopyHostToDevice(a.data(), first, in.bytes));
  for (int step = 0; step < steps; ++step) {
    FERRY_RETURN_IF_ERROR(method->SetInput(0, ferry::TensorView(in.dtype, in.sizes, a.data(), in.device)));
    FERRY_RETURN_IF_ERROR(
        method->SetOutputBuffer(0, ferry::TensorView(out.dtype, out.sizes, b.data(), out.device)));
    FERRY_RETURN_IF_ERROR(method->Execute());
    std::swap(a, b);  // this call's output is the next call's input
  }
  last->resize(out.bytes / sizeof(float));
  FERRY_RETURN_IF_ERROR(device->CopyDeviceToHost(last->data(), a.data(), out.bytes));
  return device->Synchronize();
}
// ---- end docs/device_io.md example ----

TEST(DecodeLoop, RunsOnTheDeviceWithNoPerCallCopies) {
  std::vector<uint8_t> bytes = DecoderStepProgram();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  Runtime rt;
  // The plan: inputs, outputs and state on sim:0; only the constant and the state's initial data
  // are copied, once.
  LoadOptions options;
  options.skip_h2d_for_method_inputs = true;
  options.skip_d2h_for_method_outputs = true;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward", options));
  EXPECT_EQ(method->plan().inputs[0].device, Device::Sim(0));
  EXPECT_EQ(method->plan().outputs[0].device, Device::Sim(0));
  EXPECT_EQ(method->plan().placement.per_call_copies(), 0);
  method.reset();

  DeviceRuntime* sim0 = rt.devices().Find(Device::Sim(0));
  std::vector<float> first = {0.5f, -0.25f, 1.0f, 0.0f};
  std::vector<float> last;
  sim0->ResetCounters();
  const uint64_t before = sim0->counters().h2d_copies + sim0->counters().d2h_copies +
                          sim0->counters().d2d_copies;
  ASSERT_OK(DecodeLoop(rt, *program, first.data(), 6, &last));
  const DeviceCounters c = sim0->counters();
  // Load: w and h once; the loop: the first token in and the last result out. Nothing per call.
  EXPECT_EQ(c.h2d_copies + c.d2h_copies + c.d2d_copies - before, 2u + 2u);

  // Reference: the same recurrence on the host.
  std::vector<float> w(kWidth * kWidth);
  for (int i = 0; i < kWidth * kWidth; ++i) w[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  std::vector<float> x = first, h(kWidth, 0.0f);
  for (int step = 0; step < 6; ++step) {
    for (int i = 0; i < kWidth; ++i) h[i] += x[i];
    std::vector<float> y(kWidth);
    for (int o = 0; o < kWidth; ++o) {
      double acc = 0;
      for (int i = 0; i < kWidth; ++i) acc += static_cast<double>(h[i]) * w[o * kWidth + i];
      y[o] = std::tanh(static_cast<float>(acc));
    }
    x = y;
  }
  ASSERT_EQ(last.size(), x.size());
  for (int i = 0; i < kWidth; ++i) EXPECT_NEAR(last[i], x[i], 1e-5) << i;
}

// Prefill resets the shared state h to the prompt, decode adds its input to it; both return
// tanh(h W). W and h are shared by the two methods.
std::vector<uint8_t> PrefillDecodeProgram() {
  ProgramBuilder pb;
  std::vector<float> w(kWidth * kWidth);
  for (int i = 0; i < kWidth * kWidth; ++i) w[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  for (const char* name : {"prefill", "decode"}) {
    const bool prefill = std::string(name) == "prefill";
    MethodBuilder& m = pb.AddMethod(name);
    ValueId x = m.Input(prefill ? "prompt" : "x", DType::kFloat32, {1, kWidth});
    ValueId h = m.SharedStateF32("h", {1, kWidth}, std::vector<float>(kWidth, 0.0f));
    ValueId wv = m.ConstantF32("w", {kWidth, kWidth}, w);
    m.Output(m.GraphDelegate("cuda:0", {x, h, wv},
                             [prefill](MethodBuilder& g, absl::Span<const ValueId> in) {
                               ValueId updated = g.Op(prefill ? "copy_" : "add_", {in[1], in[0]});
                               return std::vector<ValueId>{
                                   g.Op("tanh", {g.Op("linear", {updated, in[2]})})};
                             })[0]);
  }
  return std::move(pb.Build()).value();
}

// ---- begin docs/device_io.md example: prefill then decode ----
absl::Status PrefillThenDecode(ferry::Runtime& rt, const ferry::Program& program,
                               const float* prompt, int steps, std::vector<float>* last) {
  ferry::LoadOptions options;
  options.skip_h2d_for_method_inputs = true;   // inputs are passed on the device
  options.skip_d2h_for_method_outputs = true;  // outputs stay there
  options.error_on_per_call_copies = true;
  std::unique_ptr<ferry::LoadedProgram> loaded = rt.LoadProgram(program);
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Method> prefill,
                         loaded->LoadMethod("prefill", options));
  // The weights and the shared state are on the device already: decode copies nothing at load.
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Method> decode,
                         loaded->LoadMethod("decode", options));
  const ferry::IoInfo& in = prefill->plan().inputs[0];
  const ferry::IoInfo& out = decode->plan().outputs[0];
  ferry::DeviceRuntime* device = rt.devices().Find(in.device);
  FERRY_ASSIGN_OR_RETURN(ferry::DeviceBuffer p, ferry::DeviceBuffer::Allocate(*device, in.bytes, 64));
  FERRY_RETURN_IF_ERROR(device->CopyHostToDevice(p.data(), prompt, in.bytes));
  FERRY_RETURN_IF_ERROR(prefill->SetInput(0, ferry::TensorView(in.dtype, in.sizes, p.data(), in.device)));
  FERRY_RETURN_IF_ERROR(prefill->Execute());
  // Decode writes into two buffers of its own in turn; each call reads the one written before,
  // and the first reads prefill's output where it is.
  FERRY_ASSIGN_OR_RETURN(ferry::DeviceBuffer a, ferry::DeviceBuffer::Allocate(*device, out.bytes, 64));
  FERRY_ASSIGN_OR_RETURN(ferry::DeviceBuffer b, ferry::DeviceBuffer::Allocate(*device, out.bytes, 64));
  ferry::TensorView x = prefill->Output(0);
  for (int step = 0; step < steps; ++step) {
    FERRY_RETURN_IF_ERROR(decode->SetInput(0, x));
    FERRY_RETURN_IF_ERROR(
        decode->SetOutputBuffer(0, ferry::TensorView(out.dtype, out.sizes, a.data(), out.device)));
    FERRY_RETURN_IF_ERROR(decode->Execute());
    x = ferry::TensorView(out.dtype, out.sizes, a.data(), out.device);
    std::swap(a, b);
  }
  last->resize(out.bytes / sizeof(float));
  FERRY_RETURN_IF_ERROR(device->CopyDeviceToHost(last->data(), x.data(), out.bytes));
  return device->Synchronize();
}
// ---- end docs/device_io.md example: prefill then decode ----

TEST(DecodeLoop, PrefillThenDecodeShareWeightsAndStateAndHandOffOnTheDevice) {
  std::vector<uint8_t> bytes = PrefillDecodeProgram();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Program> program, Program::FromBytes(bytes));
  Runtime rt;
  DeviceRuntime* sim0 = rt.devices().Find(Device::Sim(0));
  std::vector<float> prompt = {0.5f, -0.25f, 1.0f, 0.0f};
  std::vector<float> last;
  sim0->ResetCounters();
  ASSERT_OK(PrefillThenDecode(rt, *program, prompt.data(), 5, &last));
  const DeviceCounters c = sim0->counters();
  // At load: w and h once, by prefill (decode shares them); the loop: the prompt in and the last
  // result out. Nothing per call, and no hand-off copy.
  EXPECT_EQ(c.h2d_copies, 3u);
  EXPECT_EQ(c.d2h_copies, 1u);
  EXPECT_EQ(c.d2d_copies, 0u);

  // Reference: h = prompt, y = tanh(h W); then 5 times h += y, y = tanh(h W).
  std::vector<float> w(kWidth * kWidth);
  for (int i = 0; i < kWidth * kWidth; ++i) w[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  auto step = [&](const std::vector<float>& h) {
    std::vector<float> y(kWidth);
    for (int o = 0; o < kWidth; ++o) {
      double acc = 0;
      for (int i = 0; i < kWidth; ++i) acc += static_cast<double>(h[i]) * w[o * kWidth + i];
      y[o] = std::tanh(static_cast<float>(acc));
    }
    return y;
  };
  std::vector<float> h = prompt;
  std::vector<float> y = step(h);
  for (int s = 0; s < 5; ++s) {
    for (int i = 0; i < kWidth; ++i) h[i] += y[i];
    y = step(h);
  }
  ASSERT_EQ(last.size(), y.size());
  for (int i = 0; i < kWidth; ++i) EXPECT_NEAR(last[i], y[i], 1e-5) << i;
}

// Every "---- begin docs/X example... ----" block of this file appears in docs/X word for word.
TEST(DecodeLoop, TheDocsShowTheCodeTheseTestsRun) {
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const std::string source = read(std::string(FERRY_SOURCE_DIR) + "/tests/e2e/decode_loop_test.cc");
  const std::string doc = read(std::string(FERRY_SOURCE_DIR) + "/docs/device_io.md");
  ASSERT_FALSE(source.empty());
  ASSERT_FALSE(doc.empty());
  int blocks = 0;
  // Markers at the start of a line (this test's own strings are indented).
  const std::string open = "\n// ---- begin docs/device_io.md example";
  for (size_t at = source.find(open); at != std::string::npos; at = source.find(open, at + 1)) {
    const size_t begin = source.find('\n', at + 1) + 1;
    const size_t end = source.find("\n// ---- end docs/device_io.md example", begin);
    ASSERT_NE(end, std::string::npos);
    const std::string code = source.substr(begin, end + 1 - begin);
    EXPECT_NE(doc.find(code), std::string::npos) << "docs/device_io.md lacks:\n" << code;
    ++blocks;
  }
  EXPECT_EQ(blocks, 2);
}

}  // namespace
}  // namespace ferry
