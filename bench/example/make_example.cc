// Writes the example program (bench/example/decoder_block.h) to the path given.
#include <cstdio>
#include <fstream>

#include "bench/example/decoder_block.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ferry_make_example OUTPUT.ferry\n");
    return 2;
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = ferry::example::BuildDecoderProgram();
  if (!bytes.ok()) {
    std::fprintf(stderr, "ferry_make_example: %s\n", std::string(bytes.status().message()).c_str());
    return 1;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  if (!out.good()) {
    std::fprintf(stderr, "ferry_make_example: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
