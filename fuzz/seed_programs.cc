#include "ferry/fuzz/seed_programs.h"

#include <optional>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "ferry/base/status_macros.h"
#include "ferry/loader/ferry/program_builder.h"

namespace ferry::fuzz {
namespace {

using Build = absl::FunctionRef<void(ProgramBuilder&)>;

// Host ops only: binary ops with a constant and broadcasting, unary activations, a reduction-like
// kernel and a copy.
void HostChain(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 3});
  ValueId w = m.ConstantF32("w", {2, 3}, {1, -2, 3, -4, 5, -6});
  ValueId bias = m.ConstantF32("bias", {3}, {0.5f, 0.25f, 0.125f});
  ValueId t = m.Op("add", {a, w});
  t = m.Op("mul", {t, bias}, "scale");
  t = m.Op("relu", {t});
  t = m.Op("softmax", {t, m.Int(-1)});
  m.Output(m.Op("clone", {m.Op("tanh", {t})}));
}

// A graph delegate on cuda:0 (sim:0 without a GPU) between host ops: copies in and out.
void GraphDelegate(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId w = m.ConstantF32("w", {2, 2}, {1, 2, 3, 4});
  ValueId h = m.Op("neg", {a});
  ValueId d = m.GraphDelegate("cuda:0", {h, w}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("matmul", {g.Op("add", {in[0], in[1]}), in[1]})};
  })[0];
  m.Output(m.Op("sigmoid", {d}));
}

// A graph delegate without a target device, so on the host, with two results: its memory is
// heap memory that ASan watches (sim device memory is page-rounded mappings, where a small overrun
// goes unseen).
void HostDelegate(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {2, 3});
  ValueId w = m.ConstantF32("w", {4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1});
  ValueId norm = m.ConstantF32("norm", {3}, {1, 2, 3});
  std::vector<ValueId> r = m.GraphDelegate(
      std::nullopt, {x, w, norm}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        return std::vector<ValueId>{g.Op("gelu", {g.Op("linear", {in[0], in[1]})}),
                                    g.Op("rms_norm", {in[0], in[2], g.Double(1e-5)})};
      });
  m.Output(m.Op("add", {r[0], r[0]}));
  m.Output(r[1]);
}

// Constants only, of both dtypes, one in a transposed dim order; no inputs.
void Constants(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Constant("x", TensorMeta{DType::kFloat32, {2, 2}, {1, 0}},
                         std::vector<uint8_t>(16, uint8_t{0x3f}));
  ValueId y = m.ConstantF32("y", {2, 2}, {1, 0, 0, 1});
  ValueId idx = m.ConstantI64("idx", {2}, {1, 0});
  m.Output(m.Op("linear", {x, y}));
  m.Output(idx);
}

// A state updated in place by index_put_ at a position given per call, then read.
void StateIndexPut(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId pos = m.Input("pos", DType::kInt64, {1});
  ValueId row = m.Input("row", DType::kFloat32, {1, 2});
  ValueId cache = m.StateF32("cache", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  m.Op("index_put_", {cache, pos, row}, "update");
  m.Output(m.Op("clone", {cache}));
}

// Views of every kind (aliases without kernels) feeding copying ops.
void Views(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 3, 4});
  ValueId v = m.Op("view", {a, m.IntList({6, 4})});
  ValueId t = m.Op("transpose", {v, m.Int(0), m.Int(1)});
  ValueId s = m.Op("slice", {t, m.Int(1), m.Int(1), m.Int(5), m.Int(2)});
  ValueId p = m.Op("permute", {a, m.IntList({2, 0, 1})});
  ValueId u = m.Op("unsqueeze", {m.Op("squeeze", {m.Op("unsqueeze", {s, m.Int(0)}), m.Int(0)}),
                                 m.Int(2)});
  ValueId e = m.Op("expand", {u, m.IntList({4, 2, 3})});
  m.Output(m.Op("cat", {m.Int(0), e, e}));
  m.Output(m.Op("reshape", {p, m.IntList({4, 6})}));
}

// The decoder pattern in small: a delegate on cuda:1 that owns a state and writes it in place,
// with views of the state inside the sub-graph, and a second method in the same program.
void DelegateState(ProgramBuilder& pb) {
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId x = m.Input("x", DType::kFloat32, {1, 4});
  ValueId pos = m.Input("pos", DType::kInt64, {1});
  ValueId k = m.StateF32("k", {3, 4}, std::vector<float>(12, 0.5f));
  ValueId d =
      m.GraphDelegate("cuda:1", {x, k, pos}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
        g.Op("index_put_", {in[1], in[2], in[0]}, "k_update");
        ValueId kt = g.Op("permute", {g.Op("view", {in[1], g.IntList({3, 2, 2})}),
                                      g.IntList({1, 2, 0})});
        ValueId q = g.Op("view", {in[0], g.IntList({2, 1, 2})});
        return std::vector<ValueId>{g.Op("matmul", {q, kt})};
      })[0];
  m.Output(m.Op("exp", {d}));

  MethodBuilder& reset = pb.AddMethod("reset");
  ValueId s = reset.StateF32("s", {2}, {1, 2});
  reset.Output(reset.Op("fill_", {s, reset.Double(0)}));
}

absl::Status Add(std::vector<SeedProgram>& seeds, std::string name, Build build) {
  ProgramBuilder pb;
  build(pb);
  FERRY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, pb.Build());
  seeds.push_back(SeedProgram{std::move(name), std::move(bytes)});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<SeedProgram>> BuildSeedPrograms() {
  std::vector<SeedProgram> seeds;
  FERRY_RETURN_IF_ERROR(Add(seeds, "host_chain", HostChain));
  FERRY_RETURN_IF_ERROR(Add(seeds, "graph_delegate", GraphDelegate));
  FERRY_RETURN_IF_ERROR(Add(seeds, "host_delegate", HostDelegate));
  FERRY_RETURN_IF_ERROR(Add(seeds, "constants", Constants));
  FERRY_RETURN_IF_ERROR(Add(seeds, "state_index_put", StateIndexPut));
  FERRY_RETURN_IF_ERROR(Add(seeds, "views", Views));
  FERRY_RETURN_IF_ERROR(Add(seeds, "delegate_state", DelegateState));
  return seeds;
}

}  // namespace ferry::fuzz
