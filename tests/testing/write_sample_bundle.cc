// Writes the bundled program of tests/testing/bundled_sample.h, with a right test case for each
// of its three methods, to the path given: the build makes build/tests/sample.bpte with it, the
// README's `ferry verify` example.
#include <cstdio>
#include <vector>

#include "tests/testing/bundle_builder.h"
#include "tests/testing/bundled_sample.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ferry_write_sample_bundle FILE.bpte\n");
    return 2;
  }
  using namespace ::ferry::testing;  // NOLINT
  const std::vector<uint8_t> bytes = BuildBundle(
      SampleBundlePte(),
      {{"forward", {RightForward()}}, {"count", {RightCount()}}, {"size", {RightSize()}}});
  std::FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0) {
    std::fprintf(stderr, "ferry_write_sample_bundle: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
