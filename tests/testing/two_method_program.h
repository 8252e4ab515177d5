// A program of two methods, "prefill" and "decode", that share what a program can share: each
// adds its input x [4] and the constant w = {1, 2, 3, 4} (one segment of the program, so one
// replica per device) into the shared state acc [4] inside a graph delegate on cuda:0, and
// returns acc. With `own_constants`, each then adds a host constant of its own,
// "<method>_bias" ({1, 0, 0, 0} for prefill, {2, 0, 0, 0} for decode), on the host.
#ifndef FERRY_TESTS_TESTING_TWO_METHOD_PROGRAM_H_
#define FERRY_TESTS_TESTING_TWO_METHOD_PROGRAM_H_

#include <string>
#include <vector>

#include "ferry/loader/ferry/program_builder.h"

namespace ferry::testing {

inline void AddTwoMethods(ProgramBuilder& pb, bool own_constants = false) {
  for (const std::string name : {"prefill", "decode"}) {
    MethodBuilder& m = pb.AddMethod(name);
    ValueId x = m.Input("x", DType::kFloat32, {4});
    ValueId w = m.ConstantF32("w", {4}, {1, 2, 3, 4});
    ValueId acc = m.SharedStateF32("acc", {4}, {0, 0, 0, 0});
    ValueId y = m.GraphDelegate("cuda:0", {acc, x, w},
                                [](MethodBuilder& g, absl::Span<const ValueId> in) {
                                  ValueId s = g.Op("add", {in[1], in[2]});
                                  return std::vector<ValueId>{g.Op("add_", {in[0], s})};
                                })[0];
    if (own_constants) {
      ValueId bias = m.ConstantF32(name + "_bias", {4}, {name == "prefill" ? 1.0f : 2.0f, 0, 0, 0});
      y = m.Op("add", {y, bias});
    }
    m.Output(y);
  }
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_TWO_METHOD_PROGRAM_H_
