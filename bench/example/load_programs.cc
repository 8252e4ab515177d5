#include "bench/example/load_programs.h"

#include <utility>

#include "ferry/loader/ferry/program_builder.h"

namespace ferry::example {

std::vector<uint8_t> AddChainProgram(int n, bool in_place) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {16});
  ValueId w = m.ConstantF32("w", {16}, std::vector<float>(16, 0.5f));
  for (int i = 0; i < n; ++i) v = m.Op(in_place ? "add_" : "add", {v, w});
  m.Output(v);
  return std::move(pb.Build()).value();
}

std::vector<uint8_t> DelegateChainProgram(int n) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId v = m.Input("x", DType::kFloat32, {16});
  ValueId w = m.ConstantF32("w", {16}, std::vector<float>(16, 0.5f));
  for (int i = 0; i < n; ++i) {
    if (i % 10 == 9) {
      v = m.GraphDelegate("cuda:0", {v, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("mul", {in[0], in[1]})};
      })[0];
    } else {
      v = m.Op(i % 2 == 0 ? "relu" : "neg", {v});
    }
  }
  m.Output(v);
  return std::move(pb.Build()).value();
}

std::vector<uint8_t> LongArgumentListsProgram(int n, int args, bool delegates) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {1});
  ValueId last = -1;
  for (int i = 0; i < n; ++i) {
    if (delegates) {
      last = m.GraphDelegate("cuda:0", std::vector<ValueId>(args, x),
                             [](MethodBuilder& g, absl::Span<const ValueId> in) {
                               return std::vector<ValueId>{g.Op("relu", {in[0]})};
                             })[0];
      continue;
    }
    std::vector<ValueId> cat_args{m.Int(0)};
    cat_args.insert(cat_args.end(), args, x);
    last = m.Op("cat", cat_args);
  }
  m.Output(last);
  return std::move(pb.Build()).value();
}

}  // namespace ferry::example
