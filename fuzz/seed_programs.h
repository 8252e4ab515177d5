// Small valid programs that start the fuzzers deep inside Ferry: each one loads and executes, so
// mutations of it reach placement, planning, delegates and kernels instead of stopping at the
// verifier. Written to the build tree by make_seeds (binary and JSON forms) and checked by the
// regression test, which keeps them valid as the format and the ops evolve.
//
//   for (const ferry::fuzz::SeedProgram& seed : ferry::fuzz::BuildSeedPrograms()) ...
//
// Every seed's inputs are on the host and small, and zero-filled inputs are valid for it (an
// int64 input used as an index is 0), so the fuzz driver executes every method of every seed.
#ifndef FERRY_FUZZ_SEED_PROGRAMS_H_
#define FERRY_FUZZ_SEED_PROGRAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry::fuzz {

struct SeedProgram {
  std::string name;  // a file stem: [a-z0-9_]+
  std::vector<uint8_t> bytes;
};

// The seeds, always the same bytes; the first builder error otherwise.
absl::StatusOr<std::vector<SeedProgram>> BuildSeedPrograms();

}  // namespace ferry::fuzz

#endif  // FERRY_FUZZ_SEED_PROGRAMS_H_
