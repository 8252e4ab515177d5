// Load phases 8 and 9 (runtime/load/materialize.cc), the load-time copies. Constants larger than
// the loader's copy piece (16 MiB) are streamed to their device: the program's pages are dropped
// from the process once copied when the program is a file mapping (host memory stays bounded),
// and left alone when the program is memory the caller owns. A small program is read, not mapped
// (loader/program.h): it loads and runs after its file is truncated.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {
namespace {

constexpr int64_t kRows = 1024 * 24;  // [24576, 256] float32: 24 MiB, one and a half pieces
constexpr int64_t kCols = 256;

// out = x + w[row], the row picked by the sub-graph; w[r][c] = r + c / 1024.
std::vector<uint8_t> LargeConstantProgram(int64_t row) {
  std::vector<float> w(kRows * kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) w[r * kCols + c] = static_cast<float>(r) + c / 1024.0f;
  }
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {1, kCols});
  ValueId wv = m.ConstantF32("w", {kRows, kCols}, std::move(w));
  ValueId y = m.GraphDelegate("cuda:0", {x, wv}, [row](MethodBuilder& g, absl::Span<const ValueId> in) {
    ValueId r = g.Op("slice", {in[1], g.Int(0), g.Int(row), g.Int(row + 1), g.Int(1)});
    return std::vector<ValueId>{g.Op("add", {in[0], r})};
  })[0];
  m.Output(y);
  return std::move(pb.Build()).value();
}

std::vector<float> RunOnce(Method& method) {
  std::vector<float> x(kCols, 0.5f);
  EXPECT_OK(method.SetInput(0, TensorView::Host(DType::kFloat32, {1, kCols}, x.data())));
  EXPECT_OK(method.Execute());
  const float* out = method.Output(0).data_as<float>();
  return std::vector<float>(out, out + kCols);
}

void ExpectRow(const std::vector<float>& out, int64_t row) {
  ASSERT_EQ(out.size(), static_cast<size_t>(kCols));
  for (int64_t c = 0; c < kCols; ++c) {
    ASSERT_EQ(out[c], 0.5f + static_cast<float>(row) + c / 1024.0f) << "column " << c;
  }
}

size_t PeakRssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

TEST(ConstantLoadingTest, ProgramInMemoryIsNeverDroppedAndLoadsTwice) {
  // A row well inside the first piece, whose pages the copy would drop if it took the caller's
  // memory for a file mapping.
  const int64_t row = kRows / 3;
  ASSERT_OK_AND_ASSIGN(auto program, Program::FromBytes(LargeConstantProgram(row)));
  ASSERT_EQ((*program->method("forward"))->mapping, nullptr);
  Runtime rt;
  for (int load = 0; load < 2; ++load) {
    ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
    ASSERT_EQ(method->plan().placement.load_copies.size(), 1u);
    ExpectRow(RunOnce(*method), row);
  }
}

TEST(ConstantLoadingTest, MappedProgramStreamsWithBoundedHostMemory) {
  const int64_t row = kRows / 2 + 3;
  const std::string path = ::testing::TempDir() + "/ferry_large_constant_" +
                           std::to_string(getpid()) + ".ferry";
  {
    std::vector<uint8_t> bytes = LargeConstantProgram(row);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  RuntimeOptions options;
  options.sim.guard = false;
  Runtime rt(options);
  for (int load = 0; load < 2; ++load) {  // the second load reads the pages the first dropped
    ASSERT_OK_AND_ASSIGN(auto program, Program::Load(path));
    ASSERT_NE((*program->method("forward"))->mapping, nullptr);
    std::ofstream("/proc/self/clear_refs") << "5";  // resets the peak resident size
    const size_t before = PeakRssKiB();
    ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
    const double growth_mib = static_cast<double>(PeakRssKiB() - before) / 1024.0;
    // The replica (24 MiB: sim memory is host memory) plus at most one piece of the program
    // (16 MiB); keeping the program's pages would add all 24 MiB of it (measured: 46 MiB, and
    // 32 MiB with the pages dropped).
    if (before > 0) {
      EXPECT_LT(growth_mib, 24 + 16) << "load " << load;
    }
    ExpectRow(RunOnce(*method), row);
  }
  std::remove(path.c_str());
}

// A constant that a device delegate and a host op both read: its replica is made at load from the
// mapped file, and the host op keeps reading the program's own pages, call after call.
TEST(ConstantLoadingTest, ConstantReadOnTheHostTooStaysReadable) {
  const std::string path = ::testing::TempDir() + "/ferry_shared_constant_" +
                           std::to_string(getpid()) + ".ferry";
  std::vector<float> w(kRows * kCols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 1000) * 0.25f;
  {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId x = m.Input("x", DType::kFloat32, {kRows, kCols});
    ValueId wv = m.ConstantF32("w", {kRows, kCols}, w);
    ValueId on_device = m.GraphDelegate("cuda:0", {x, wv}, [](MethodBuilder& g,
                                                                absl::Span<const ValueId> in) {
      return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
    })[0];
    m.Output(on_device);
    m.Output(m.Op("neg", {wv}));  // reads w on the host, in place
    ASSERT_OK(pb.WriteFile(path));
  }
  ASSERT_OK_AND_ASSIGN(auto program, Program::Load(path));
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> x(kRows * kCols, 1.0f);
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {kRows, kCols}, x.data())));
  for (int call = 0; call < 2; ++call) {
    ASSERT_OK(method->Execute());
    const float* sum = method->Output(0).data_as<float>();
    const float* neg = method->Output(1).data_as<float>();
    for (size_t i = 0; i < w.size(); i += 4099) {
      ASSERT_EQ(sum[i], 1.0f + w[i]) << "element " << i;
      ASSERT_EQ(neg[i], -w[i]) << "element " << i;
    }
  }
  std::remove(path.c_str());
}

TEST(ProgramFile, SmallProgramSurvivesItsFileBeingTruncated) {
  const std::string path =
      ::testing::TempDir() + "/ferry_truncated_" + std::to_string(getpid()) + ".ferry";
  {
    ProgramBuilder pb;
    MethodBuilder& m = pb.AddMethod("forward");
    ValueId a = m.Input("a", DType::kFloat32, {2, 2});
    ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
    m.Output(m.Op("add", {a, w}));
    ASSERT_OK(pb.WriteFile(path));
  }
  ASSERT_OK_AND_ASSIGN(auto program, Program::Load(path));
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  Runtime rt;
  ASSERT_OK_AND_ASSIGN(auto method, rt.LoadMethod(*program, "forward"));
  std::vector<float> a = {10, 20, 30, 40};
  ASSERT_OK(method->SetInput(0, TensorView::Host(DType::kFloat32, {2, 2}, a.data())));
  ASSERT_OK(method->Execute());
  const float* out = method->Output(0).data_as<float>();
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{11, 22, 33, 44}));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ferry::testing
