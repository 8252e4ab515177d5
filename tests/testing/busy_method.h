// A method touching every kind of step, for tests of the executor and of loading.
#ifndef FERRY_TESTS_TESTING_BUSY_METHOD_H_
#define FERRY_TESTS_TESTING_BUSY_METHOD_H_

#include "ferry/loader/ferry/program_builder.h"
#include "tests/conformance/conformance_util.h"

namespace ferry::testing {

// A method touching every kind of step: host ops, views, in-place writes, delegates on two
// devices, constants, state, copies in all directions.
inline void BuildBusyMethod(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId b = m.Input("b", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  ValueId k = m.StateF32("k", {2, 2}, {0, 0, 0, 0});
  ValueId t = Call(m, "cuda:0", "t", {a, w});
  ValueId tt = m.Op("transpose", {t, m.Int(0), m.Int(1)});
  ValueId r = m.Op("relu", {tt});
  m.Op("add_", {k, r});
  ValueId u = Call(m, "cuda:1", "u", {t, k});
  ValueId v = Call(m, std::nullopt, "v", {u, b});
  m.Output(v);
  m.Output(u);
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_BUSY_METHOD_H_
