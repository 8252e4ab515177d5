// The in-memory model's own logic (loader/model/method_def.h): names of value kinds, compile specs
// by key, and a node's copy owning its own delegate call.
#include "ferry/loader/model/method_def.h"

#include <string>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(MethodDef, ValueKindNames) {
  EXPECT_STREQ(ValueKindName(ValueKind::kInput), "input");
  EXPECT_STREQ(ValueKindName(ValueKind::kConstant), "constant");
  EXPECT_STREQ(ValueKindName(ValueKind::kState), "state");
  EXPECT_STREQ(ValueKindName(ValueKind::kIntermediate), "intermediate");
  EXPECT_STREQ(ValueKindName(ValueKind::kScalar), "scalar");
  EXPECT_STREQ(ValueKindName(static_cast<ValueKind>(99)), "unknown");
}

TEST(MethodDef, CompileSpecsAreFoundByKeyFirstOneWins) {
  NodeDef node;
  EXPECT_FALSE(node.CompileSpec("device").has_value());  // a host op: no delegate at all
  DelegateDef& d = node.mutable_delegate();
  d.backend = "graph";
  d.compile_specs = {{"device", "cuda:0"}, {"mode", ""}, {"device", "cuda:1"}};
  EXPECT_EQ(node.CompileSpec("device"), "cuda:0");
  ASSERT_TRUE(node.CompileSpec("mode").has_value());
  EXPECT_EQ(*node.CompileSpec("mode"), "");
  EXPECT_FALSE(node.CompileSpec("Device").has_value());
}

TEST(MethodDef, ACopiedNodeOwnsItsOwnDelegateCall) {
  NodeDef a;
  a.kind = NodeKind::kDelegate;
  a.name = "call";
  a.args = {0, 1};
  a.results = {2};
  a.mutable_delegate().backend = "graph";
  NodeDef b = a;
  b.mutable_delegate().backend = "other";
  EXPECT_EQ(a.delegate().backend, "graph");
  EXPECT_EQ(b.delegate().backend, "other");
  EXPECT_EQ(b.name, "call");
  EXPECT_EQ(b.args, a.args);
  NodeDef c;
  c = a;
  a.mutable_delegate().backend = "changed";
  EXPECT_EQ(c.delegate().backend, "graph");
  c = c;  // self-assignment keeps the call
  EXPECT_EQ(c.delegate().backend, "graph");
  NodeDef host;
  EXPECT_EQ(host.delegate().backend, "");  // a node without a call reads as an empty one
}

}  // namespace
}  // namespace ferry
