// The embedding example of README.md, compiled and run as written there.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/program_builder.h"
#include "memory/status_macros.h"
#include "tests/testing/status_matchers.h"

// ---- begin README example ----
#include "loader/program.h"
#include "runtime/runtime.h"

absl::Status RunOnce(const std::string& path, float* a, float* b) {
  ferry::Runtime rt;  // host and sim devices (and CUDA devices when present)
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Program> program, ferry::Program::Load(path));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ferry::Method> method,
                         rt.LoadMethod(*program, "forward"));
  for (const ferry::CopyStep& c : method->plan().placement.copies) {
    // c.direction, c.value, c.src_device, c.dst_device, c.bytes, c.timing (once / per call)
  }
  FERRY_RETURN_IF_ERROR(method->SetInput(0, ferry::TensorView::Host(ferry::DType::kFloat32, {2, 2}, a)));
  FERRY_RETURN_IF_ERROR(method->SetInput(1, ferry::TensorView::Host(ferry::DType::kFloat32, {2, 2}, b)));
  FERRY_RETURN_IF_ERROR(method->Execute());
  ferry::TensorView out = method->Output(0);  // out.device(), out.data_as<float>()
  return absl::OkStatus();
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
  EXPECT_OK(RunOnce(path, x.data(), y.data()));
  EXPECT_FALSE(RunOnce(path + ".missing", x.data(), y.data()).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ferry
