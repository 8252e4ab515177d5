// Writes the example programs (bench/example/decoder_block.h) to the paths given: the decoder
// block and the decode-loop language model.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/example/decoder_block.h"

namespace {

int Write(const char* path, const absl::StatusOr<std::vector<uint8_t>>& bytes) {
  if (!bytes.ok()) {
    std::fprintf(stderr, "ferry_make_example: %s: %s\n", path,
                 std::string(bytes.status().message()).c_str());
    return 1;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  if (!out.good()) {
    std::fprintf(stderr, "ferry_make_example: cannot write %s\n", path);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ferry_make_example DECODER_BLOCK.ferry LANGUAGE_MODEL.ferry\n");
    return 2;
  }
  if (int rc = Write(argv[1], ferry::example::BuildDecoderProgram()); rc != 0) return rc;
  return Write(argv[2], ferry::example::BuildLanguageModelProgram());
}
