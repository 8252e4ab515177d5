// The embedding example of README.md, compiled and run as written there.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ferry/loader/program_builder.h"
#include "ferry/memory/status_macros.h"
#include "tests/testing/status_matchers.h"

// ---- begin README example ----
#include "ferry/loader/program.h"
#include "ferry/runtime/runtime.h"

absl::StatusOr<float> RunOnce(const std::string& path, float* a, float* b) {
  ferry::Runtime rt;  // host and sim devices (and CUDA devices when present)
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Program> program, ferry::Program::Load(path));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Method> method,
                         rt.LoadMethod(*program, "forward"));
  // The copy manifest, known before the first call.
  for (const ferry::CopyStep& c : method->plan().placement.copies) {
    std::printf("%s %s %s -> %s, %zu bytes, %s\n", ferry::CopyDirectionName(c.direction),
                method->def().values[c.value].name.c_str(), c.src_device.ToString().c_str(),
                c.dst_device.ToString().c_str(), c.bytes, ferry::CopyTimingName(c.timing));
  }
  FERRY_RETURN_IF_ERROR(method->SetInput(0, ferry::TensorView::Host(ferry::DType::kFloat32, {2, 2}, a)));
  FERRY_RETURN_IF_ERROR(method->SetInput(1, ferry::TensorView::Host(ferry::DType::kFloat32, {2, 2}, b)));
  FERRY_RETURN_IF_ERROR(method->Execute());
  ferry::TensorView out = method->Output(0);  // on method->plan().outputs[0].device: the host here
  return out.data_as<float>()[0];
}
// ---- end README example ----

namespace ferry {
namespace {

TEST(ReadmeExample, RunsOnAProgramWithADelegate) {
  ProgramBuilder pb;
  MethodBuilder& m = pb.AddMethod("forward");
  ValueId a = m.Input("a", DType::kFloat32, {2, 2});
  ValueId b = m.Input("b", DType::kFloat32, {2, 2});
  m.Output(m.GraphDelegate("cuda:0", {a, b}, [](MethodBuilder& g, absl::Span<const ValueId> in) {
    return std::vector<ValueId>{g.Op("add", {in[0], in[1]})};
  })[0]);
  std::string path = ::testing::TempDir() + "/readme_example.ferry";
  ASSERT_OK(pb.WriteFile(path));
  std::vector<float> x = {1, 2, 3, 4}, y = {10, 20, 30, 40};
  ASSERT_OK_AND_ASSIGN(float first, RunOnce(path, x.data(), y.data()));
  EXPECT_EQ(first, 11.0f);
  EXPECT_FALSE(RunOnce(path + ".missing", x.data(), y.data()).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ferry
