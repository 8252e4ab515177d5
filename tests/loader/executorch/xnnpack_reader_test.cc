// The XNNPACK payload reader: graphs written with tests/testing/xnnpack_payload.h (and the real
// payloads of ../shared/pte) read back field by field; every refusal names its part; every
// truncation and single-byte flip is read or refused cleanly.
#include "ferry/loader/executorch/xnnpack_reader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/xnnpack_payload.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::ferry::testing::XnnPayloadWriter;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace xfb = ::ferry::testing::xfb;

std::vector<float> Floats(absl::Span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

// A conv between transposes with inline constants, and a fully connected node.
XnnPayloadWriter Sample() {
  XnnPayloadWriter w;
  const uint32_t in = w.Input({1, 2, 3, 3}, 0);
  const uint32_t nhwc = w.Internal({1, 3, 3, 2});
  const uint32_t f = w.Constant({4, 1, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const uint32_t b = w.Constant({4}, {0.5f, 1.5f, 2.5f, 3.5f});
  const uint32_t conv = w.Internal({1, 3, 3, 4});
  const uint32_t out = w.Output({1, 3, 3, 4}, 1);
  w.Transpose({0, 2, 3, 1}, in, nhwc);
  XnnPayloadWriter::Conv p;
  p.padding = {1, 2, 3, 4};
  p.kernel = {1, 1};
  p.stride = {2, 3};
  p.dilation = {4, 5};
  p.groups = 1;
  p.group_in = 2;
  p.group_out = 4;
  w.Convolution(xfb::Node::Conv2d, p, nhwc, f, b, conv, std::array<float, 2>{-1.0f, 6.0f});
  w.FullyConnected(conv, w.Constant({4, 4}, std::vector<float>(16, 0.25f)), kXnnNoValue, out,
                   kXnnTransposeWeights);
  return w;
}

TEST(XnnpackReader, ReadsValuesNodesConstantsAndExternals) {
  const std::vector<uint8_t> payload = Sample().Build();
  ASSERT_OK_AND_ASSIGN(XnnGraph g, ReadXnnpackPayload(payload, nullptr));
  EXPECT_EQ(g.version, "0");
  EXPECT_EQ(g.num_externs, 2u);
  ASSERT_EQ(g.values.size(), 7u);
  EXPECT_THAT(g.input_ids, ElementsAre(0u));
  EXPECT_THAT(g.output_ids, ElementsAre(5u));
  const XnnValue& input = *g.value(0);
  EXPECT_EQ(input.dtype, XnnDataType::kFloat32);
  EXPECT_THAT(input.dims, ElementsAre(1, 2, 3, 3));
  EXPECT_EQ(input.flags, kXnnExternalInput);
  EXPECT_EQ(input.external_id, 0u);
  EXPECT_FALSE(input.is_constant);
  EXPECT_EQ(g.value(1)->external_id, kXnnNoValue);
  const XnnValue& filter = *g.value(2);
  EXPECT_TRUE(filter.is_constant);
  EXPECT_THAT(Floats(filter.data), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(Floats(g.value(3)->data), ElementsAre(0.5f, 1.5f, 2.5f, 3.5f));
  EXPECT_EQ(g.value(5)->flags, kXnnExternalOutput);
  EXPECT_EQ(g.value(5)->external_id, 1u);
  EXPECT_EQ(g.value(99), nullptr);

  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].type, XnnNodeType::kStaticTranspose);
  EXPECT_THAT(g.nodes[0].list, ElementsAre(0, 2, 3, 1));
  const XnnNode& conv = g.nodes[1];
  EXPECT_EQ(conv.type, XnnNodeType::kConv2d);
  EXPECT_EQ(XnnGraph::NodeLabel(conv), "node 1 (Conv2d)");
  EXPECT_THAT(conv.padding, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(conv.stride, ElementsAre(2, 3));
  EXPECT_THAT(conv.dilation, ElementsAre(4, 5));
  EXPECT_EQ(conv.group_input_channels, 2u);
  EXPECT_EQ(conv.group_output_channels, 4u);
  EXPECT_THAT(conv.inputs, ElementsAre(1, 2, 3));
  EXPECT_THAT(conv.outputs, ElementsAre(4));
  ASSERT_TRUE(conv.output_range.has_value());
  EXPECT_THAT(*conv.output_range, ElementsAre(-1.0f, 6.0f));
  const XnnNode& fc = g.nodes[2];
  EXPECT_EQ(fc.type, XnnNodeType::kFullyConnected);
  EXPECT_EQ(fc.flags, kXnnTransposeWeights);
  EXPECT_THAT(fc.inputs, ElementsAre(4, 6, kXnnNoValue));
  EXPECT_FALSE(fc.output_range.has_value());
}

TEST(XnnpackReader, AGraphWithoutHeaderAndTheOlderIdentifierAreRead) {
  XnnPayloadWriter w;
  const uint32_t in = w.Input({3}, 0), out = w.Output({3}, 1);
  w.Unary(xfb::Node::Tanh, in, out);
  for (const char* id : {"XN01", "XN00"}) {
    w.identifier = id;
    std::vector<uint64_t> aligned;
    const std::vector<uint8_t> graph = w.Graph();
    aligned.resize((graph.size() + 7) / 8);
    std::memcpy(aligned.data(), graph.data(), graph.size());
    ASSERT_OK_AND_ASSIGN(
        XnnGraph g,
        ReadXnnpackPayload(
            absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(aligned.data()), graph.size()),
            nullptr));
    ASSERT_EQ(g.nodes.size(), 1u) << id;
    EXPECT_EQ(g.nodes[0].type, XnnNodeType::kTanh);
  }
}

TEST(XnnpackReader, AnUnalignedGraphIsCopied) {
  const std::vector<uint8_t> payload = Sample().Build();
  std::vector<uint8_t> shifted = {0};
  shifted.insert(shifted.end(), payload.begin(), payload.end());
  ASSERT_OK_AND_ASSIGN(XnnGraph g,
                       ReadXnnpackPayload(absl::MakeConstSpan(shifted).subspan(1), nullptr));
  EXPECT_EQ(g.nodes.size(), 3u);
  EXPECT_THAT(Floats(g.value(3)->data), ElementsAre(0.5f, 1.5f, 2.5f, 3.5f));
}

TEST(XnnpackReader, NamedConstantsAreFoundOrRefusedByKey) {
  XnnPayloadWriter w;
  const uint32_t in = w.Input({2}, 0), out = w.Output({2}, 1);
  w.Binary(xfb::Node::Add, in, w.NamedConstant({2}, "weights.0", 8), out);
  const std::vector<uint8_t> payload = w.Build();
  const std::vector<float> weights = {4.0f, -8.0f, 99.0f};  // longer than needed: the first two
  NamedData named;
  named.AddView("weights.0",
                absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(weights.data()), 12));
  ASSERT_OK_AND_ASSIGN(XnnGraph g, ReadXnnpackPayload(payload, &named));
  EXPECT_THAT(Floats(g.value(2)->data), ElementsAre(4.0f, -8.0f));

  EXPECT_THAT(ReadXnnpackPayload(payload, nullptr),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("value 2 (id 2)"), HasSubstr("\"weights.0\""),
                             HasSubstr("no named data"))));
  NamedData other;
  other.AddView("weights.1",
                absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(weights.data()), 12));
  EXPECT_THAT(ReadXnnpackPayload(payload, &other),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"weights.0\"")));
  NamedData short_entry;
  short_entry.AddView("weights.0",
                      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(weights.data()), 4));
  EXPECT_THAT(ReadXnnpackPayload(payload, &short_entry),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("needs 8 bytes"), HasSubstr("has 4"))));
}

// The header's fields, each out of range.
TEST(XnnpackReader, BadHeadersAreRefused) {
  const std::vector<uint8_t> good = Sample().Build();
  auto with = [&](size_t at, uint64_t v, size_t n) {
    std::vector<uint8_t> p = good;
    for (size_t i = 0; i < n; ++i) p[at + i] = static_cast<uint8_t>(v >> (8 * i));
    return p;
  };
  EXPECT_THAT(
      ReadXnnpackPayload(with(4, 0x30304858 + 1, 4), nullptr),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("neither an \"XH00\" header")));
  EXPECT_THAT(ReadXnnpackPayload(with(8, 12, 2), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the header says it is 12")));
  EXPECT_THAT(ReadXnnpackPayload(with(14, good.size(), 4), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not fit")));
  EXPECT_THAT(ReadXnnpackPayload(with(22, good.size(), 8), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("constant data")));
  EXPECT_THAT(ReadXnnpackPayload(with(18, 40, 4), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlaps the graph")));
  EXPECT_THAT(
      ReadXnnpackPayload(with(36, 0x41414141, 4), nullptr),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("file identifier is \"AAAA\"")));
}

absl::Status ReadStatus(const XnnPayloadWriter& w) {
  return ReadXnnpackPayload(w.Build(), nullptr).status();
}

TEST(XnnpackReader, BadValuesAreRefusedNamingThem) {
  auto unary = [](auto edit) {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2, 2}, 0), out = w.Output({2, 2}, 1);
    w.Unary(xfb::Node::Abs, in, out);
    edit(w);
    return ReadStatus(w);
  };
  EXPECT_THAT(
      unary([](XnnPayloadWriter& w) { w.value(0).dtype = static_cast<xfb::DataType>(15); }),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("value 0 (id 0) has datatype 15")));
  EXPECT_THAT(unary([](XnnPayloadWriter& w) { w.value(1).dims = {1, 1, 1, 1, 1, 1, 1}; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has rank 7")));
  EXPECT_THAT(unary([](XnnPayloadWriter& w) { w.value(1).id = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("have the same id 0")));
  EXPECT_THAT(unary([](XnnPayloadWriter& w) { w.value(1).flags = 6; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has flags 0x6")));
  EXPECT_THAT(unary([](XnnPayloadWriter& w) { w.value(1).external_id = 2; }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is external 2, but the graph has 2 external values")));
  EXPECT_THAT(unary([](XnnPayloadWriter& w) { w.value(1).external_id = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("like an earlier value")));
  EXPECT_THAT(
      unary([](XnnPayloadWriter& w) { w.value(0).constant = 1; }),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("both a constant and an input")));
  EXPECT_THAT(unary([](XnnPayloadWriter& w) { w.num_externs = 1u << 30; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 2^24")));
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({4}, 0), out = w.Output({4}, 1);
    w.Binary(xfb::Node::Add, in, w.Constant({4}, {1, 2, 3}), out);  // 12 bytes for 16
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        AllOf(HasSubstr("needs 16 bytes"), HasSubstr("has 12"))));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({4}, 0), out = w.Output({4}, 1);
    w.Binary(xfb::Node::Add, in, w.Constant({4}, {1, 2, 3, 4}), out);
    w.value(2).constant = 7;
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("is constant 7, but the graph has 2 constants")));
  }
}

// Per-channel scales, inline or from a constant (XNNPACK's scale buffer), one per channel.
TEST(XnnpackReader, PerChannelScalesAreReadAndCounted) {
  auto graph = [](std::vector<float> inline_scales, int32_t dim, bool from_constant) {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2, 3}, 0), out = w.Output({2, 4}, 1);
    const uint32_t scales = w.Constant({4}, {0.5f, 0.25f, 2.0f, 4.0f});
    const uint32_t filter =
        w.ConstantBytes(xfb::DataType::QCInt8, {4, 3}, std::vector<uint8_t>(12, 1));
    w.value(filter).per_channel = std::make_pair(std::move(inline_scales), dim);
    if (from_constant) w.value(filter).scales_constant = w.value(scales).constant;
    w.FullyConnected(in, filter, kXnnNoValue, out);
    return w.Build();
  };
  ASSERT_OK_AND_ASSIGN(XnnGraph inline_read,
                       ReadXnnpackPayload(graph({1, 2, 3, 4}, 0, false), nullptr));
  const XnnValue& a = *inline_read.value(3);
  EXPECT_EQ(a.quant, XnnQuant::kPerChannel);
  EXPECT_EQ(a.channel_dim, 0);
  EXPECT_THAT(a.channel_scales, ElementsAre(1, 2, 3, 4));
  ASSERT_OK_AND_ASSIGN(XnnGraph buffered, ReadXnnpackPayload(graph({}, 0, true), nullptr));
  EXPECT_THAT(buffered.value(3)->channel_scales, ElementsAre(0.5f, 0.25f, 2.0f, 4.0f));
  EXPECT_THAT(ReadXnnpackPayload(graph({1, 2}, 0, false), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("value 3 (id 3) has 2 scales for 4 channels")));
  EXPECT_THAT(ReadXnnpackPayload(graph({1, 2, 3, 4}, 2, false), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("quantized per channel along dim 2, but has rank 2")));
}

TEST(XnnpackReader, BadNodesAndExternalsAreRefusedNamingThem) {
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2}, 0), out = w.Output({2}, 1);
    w.Unary(xfb::Node::Abs, 9, out);
    (void)in;
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("node 0 (Abs) reads value id 9, which the "
                                                  "graph does not define")));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2}, 0), mid = w.Internal({2}), out = w.Output({2}, 1);
    w.Unary(xfb::Node::Abs, mid, out);  // read before anything writes it
    w.Unary(xfb::Node::Abs, in, mid);
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("node 0 (Abs) reads value id 1, which is not "
                                                  "an input or a constant and no earlier node")));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2}, 0), out = w.Output({2}, 1);
    w.Unary(xfb::Node::Abs, in, out);
    w.Unary(xfb::Node::Negate, in, out);
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("node 1 (Negate) writes value id 1, which an "
                                                  "earlier node writes")));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2}, 0), out = w.Output({2}, 1);
    w.Unary(xfb::Node::Abs, out, in);
    EXPECT_THAT(ReadStatus(w),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reads value id 1")));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2}, 0), out = w.Output({2}, 1);
    w.Binary(xfb::Node::Add, in, in, w.Constant({2}, {1, 2}));
    (void)out;
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("writes value id 2, which is a constant")));
  }
  {
    XnnPayloadWriter w;
    w.Input({2}, 0);
    w.Output({2}, 1);
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("output 0 is value id 1, which no node writes")));
  }
  {
    XnnPayloadWriter w;
    const uint32_t in = w.Input({2}, 0), out = w.Output({2}, 1);
    w.Unary(xfb::Node::Abs, in, out);
    w.input_ids = std::vector<uint32_t>{1};
    EXPECT_THAT(ReadStatus(w), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("input 0 is value id 1, which is not flagged")));
  }
}

// Names of the node types follow the format's node union, one per member.
TEST(XnnpackReader, EveryNodeTypeHasADistinctName) {
  std::set<std::string> names;
  for (int t = 1; t <= kXnnNodeTypeCount; ++t) {
    names.insert(std::string(XnnNodeTypeName(static_cast<XnnNodeType>(t))));
    // The schema's member of the same number.
    EXPECT_STRNE(xfb::EnumNameNode(static_cast<xfb::Node>(t)), "") << t;
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kXnnNodeTypeCount));
  EXPECT_EQ(static_cast<int>(xfb::Node::MAX), kXnnNodeTypeCount);
  EXPECT_EQ(XnnNodeTypeName(static_cast<XnnNodeType>(0)), "unknown");
  EXPECT_EQ(XnnDataTypeName(XnnDataType::kQCInt4), "qcint4");
}

TEST(XnnpackReader, EveryTruncationAndByteFlipIsReadOrRefusedCleanly) {
  const std::vector<uint8_t> payload = Sample().Build();
  for (size_t n = 0; n < payload.size(); ++n) {
    const std::vector<uint8_t> cut(payload.begin(), payload.begin() + n);
    absl::StatusOr<XnnGraph> read = ReadXnnpackPayload(cut, nullptr);
    EXPECT_FALSE(read.ok()) << n;
  }
  size_t refused = 0;
  for (size_t at = 0; at < payload.size(); ++at) {
    std::vector<uint8_t> flipped = payload;
    flipped[at] ^= 0xff;
    absl::StatusOr<XnnGraph> read = ReadXnnpackPayload(flipped, nullptr);
    if (read.ok()) continue;  // a flip inside data, or of a value no check covers
    ++refused;
    EXPECT_THAT(read.status().message(), HasSubstr("XNNPACK payload: ")) << at;
  }
  EXPECT_GT(refused, 0u);
}

// The real XNNPACK-delegated programs: their payloads read, with the named data of their program.
TEST(XnnpackReader, RealPayloadsAreRead) {
  const std::filesystem::path dir(FERRY_SHARED_PTE_DIR);
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is absent";
  struct Case {
    const char* file;
    std::vector<XnnNodeType> nodes;
  };
  const std::vector<Case> cases = {
      {"corey-cole__tests_models_add.pte", {XnnNodeType::kAdd}},
      {"corey-cole__native_spike_add.pte", {XnnNodeType::kAdd}},
      {"corey-cole__native_spike_clamp5.pte", {XnnNodeType::kClamp}},
      {"corey-cole__native_spike_conv.pte",
       {XnnNodeType::kStaticTranspose, XnnNodeType::kConv2d, XnnNodeType::kStaticTranspose}},
  };
  for (const Case& c : cases) {
    std::ifstream in(dir / c.file, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
    std::memcpy(aligned.data(), bytes.data(), bytes.size());
    ASSERT_OK_AND_ASSIGN(EtProgram et,
                         ReadExecuTorchProgram(absl::MakeConstSpan(
                             reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size())));
    NamedData named;
    for (const EtNamedData& d : et.named_data) named.AddView(d.key, d.bytes);
    ASSERT_EQ(et.methods[0].delegates.size(), 1u) << c.file;
    ASSERT_OK_AND_ASSIGN(XnnGraph g,
                         ReadXnnpackPayload(et.methods[0].delegates[0].payload, &named));
    std::vector<XnnNodeType> types;
    for (const XnnNode& n : g.nodes) types.push_back(n.type);
    EXPECT_EQ(types, c.nodes) << c.file;
  }
}

}  // namespace
}  // namespace ferry
