// Helpers of method loading (runtime/internal/load_util.h): layouts as placement records them,
// specs and device labels as messages show them, the load-table estimate, and load-time copies in
// pieces of 16 MiB, each counted by the device.
#include "ferry/runtime/internal/load_util.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/memory/device_buffer.h"
#include "ferry/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(LoadUtil, LayoutsAsPlacementRecordsThem) {
  // Row-major: nothing stored.
  ValueLayout row_major = LayoutOf(TensorRef::Contiguous(DType::kFloat32, {2, 3, 4}));
  EXPECT_TRUE(row_major.dense);
  EXPECT_THAT(row_major.dim_order, IsEmpty());
  EXPECT_THAT(row_major.strides, IsEmpty());
  // Channels last over [N, C, H, W] = [2, 3, 4, 5]: dense in dim order (0, 2, 3, 1).
  TensorRef nhwc = TensorRef::Contiguous(DType::kFloat32, {2, 3, 4, 5});
  const int64_t strides[] = {60, 1, 15, 3};
  for (int d = 0; d < 4; ++d) nhwc.strides[d] = strides[d];
  ValueLayout channels_last = LayoutOf(nhwc);
  EXPECT_TRUE(channels_last.dense);
  EXPECT_THAT(channels_last.dim_order, ElementsAre(0, 2, 3, 1));
  EXPECT_THAT(channels_last.strides, IsEmpty());
  // Every other row of a [4, 3] buffer: not dense, its strides kept.
  TensorRef gaps = TensorRef::Contiguous(DType::kFloat32, {2, 3});
  gaps.strides[0] = 6;
  ValueLayout strided = LayoutOf(gaps);
  EXPECT_FALSE(strided.dense);
  EXPECT_THAT(strided.dim_order, IsEmpty());
  EXPECT_THAT(strided.strides, ElementsAre(6, 1));
}

TEST(LoadUtil, SpecsAndDeviceLabels) {
  EXPECT_EQ(SpecString(DType::kFloat32, std::vector<int64_t>{2, 3}), "float32[2, 3]");
  EXPECT_EQ(SpecString(DType::kInt64, std::vector<int64_t>{}), "int64[]");
  absl::flat_hash_map<Device, Device> map = {{Device::Cuda(0), Device::Sim(0)},
                                             {Device::Cuda(1), Device::Sim(0)},
                                             {Device::Sim(1), Device::Sim(1)}};
  // The lowest declared device that the map sends to this one names it.
  EXPECT_EQ(DeviceLabel(Device::Sim(0), map), "cuda:0 (as sim:0)");
  EXPECT_EQ(DeviceLabel(Device::Sim(1), map), "sim:1");  // mapped to itself
  EXPECT_EQ(DeviceLabel(Device::Host(), map), "host");
  EXPECT_EQ(DeviceLabel(Device::Sim(0), {}), "sim:0");
}

TEST(LoadUtil, TableEstimateCountsEachPartAndSaturates) {
  EXPECT_EQ(LoadTableBytes(0, 0, 0, 0), 0u);
  EXPECT_EQ(LoadTableBytes(10, 4, 12, 100),
            10 * kLoadTableBytesPerValue + 4 * kLoadTableBytesPerNode +
                12 * kLoadTableBytesPerArgument + 100 * kLoadTableBytesPerPayloadByte);
  EXPECT_EQ(LoadTableBytes(SIZE_MAX / 2, 0, 0, 0), SIZE_MAX);
  EXPECT_EQ(LoadTableBytes(0, 0, SIZE_MAX / 4, SIZE_MAX / 4), SIZE_MAX);
  // A method: its values, nodes, list entries and payload bytes.
  MethodDef m;
  m.values.resize(3);
  NodeDef host;
  host.args = {0, 1};
  host.results = {2};
  m.nodes.push_back(host);
  static const uint8_t kPayload[7] = {};
  NodeDef call;
  call.kind = NodeKind::kDelegate;
  call.args = {2};
  call.results = {0};
  call.mutable_delegate().payload = absl::MakeConstSpan(kPayload);
  m.nodes.push_back(call);
  EXPECT_EQ(LoadTableBytes(m), LoadTableBytes(3, 2, 5, 7));
}

TEST(LoadUtil, ALargeLoadCopyRunsInPiecesEachCounted) {
  Runtime rt;
  DeviceRuntime* host = rt.devices().Find(Device::Host());
  DeviceRuntime* sim = rt.devices().Find(Device::Sim(0));
  ASSERT_NE(sim, nullptr);
  constexpr size_t kBytes = (size_t{16} << 20) * 2 + 4096;  // two pieces and a bit
  std::vector<uint8_t> source(kBytes);
  for (size_t i = 0; i < kBytes; ++i) source[i] = static_cast<uint8_t>(i * 31 + i / 65536);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::Allocate(*sim, kBytes, 64));
  const int64_t floats = static_cast<int64_t>(kBytes / 4);
  const TensorRef src = TensorRef::Contiguous(DType::kFloat32, {floats}, source.data());
  const TensorRef dst = TensorRef::Contiguous(DType::kFloat32, {floats}, buffer.data());
  CopyExec c;
  c.direction = CopyDirection::kHostToDevice;
  c.src_runtime = host;
  c.dst_runtime = sim;
  c.src = &src;
  c.dst = &dst;
  c.bytes = kBytes;
  sim->ResetCounters();
  ASSERT_OK(RunLoadCopy(c, /*mapping=*/nullptr));
  EXPECT_EQ(sim->counters().h2d_copies, 3u);
  EXPECT_EQ(sim->counters().h2d_bytes, kBytes);
  std::vector<uint8_t> back(kBytes);
  ASSERT_OK(sim->CopyDeviceToHost(back.data(), buffer.data(), kBytes));
  ASSERT_OK(sim->Synchronize());
  EXPECT_TRUE(back == source);
}

}  // namespace
}  // namespace ferry::internal
