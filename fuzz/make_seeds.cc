// Writes the seed corpora of the fuzzers (fuzz/seed_programs.h) and their dictionaries:
//   DIR/program/NAME.ferry   binary programs, for ferry_fuzz_program
//   DIR/json/NAME.json       the same programs in JSON form, for ferry_fuzz_json
//   DIR/program.dict         libFuzzer dictionaries: the op names of the built-in registry and
//   DIR/json.dict            the strings the loader looks for, plus the JSON form's keys
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/fuzz/seed_programs.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/program.h"

namespace {

bool WriteFile(const std::filesystem::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out.good()) {
    std::fprintf(stderr, "ferry_fuzz_make_seeds: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// A libFuzzer dictionary entry: the bytes of `word` in quotes.
std::string Entry(const std::string& word) {
  std::string out = "\"";
  for (char c : word) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"\n";
}

// Strings that steer loading: backend and device names, compile spec keys, method names, and
// every op name the runtime knows (the registry, so new ops are included without an edit here).
std::string CommonDictionary() {
  std::string dict;
  for (const std::string& op : ferry::OpRegistry::WithBuiltIns().Names()) dict += Entry(op);
  for (const char* word : {"graph", "target_device", "main", "forward", "host", "host:0", "sim:0",
                           "sim:1", "cuda:0", "cuda:1", "cuda:2", "cuda:3"}) {
    dict += Entry(word);
  }
  return dict;
}

// The JSON form's keys (quoted, as they appear) and enum names, from
// loader/ferry/schema/program.fbs.
std::string JsonDictionary() {
  std::string dict = CommonDictionary();
  for (const char* key :
       {"version", "methods", "segments", "name", "values", "nodes", "inputs", "outputs", "kind",
        "dtype", "sizes", "dim_order", "scalar", "data_segment", "int_value", "double_value",
        "bool_value", "int_list", "key", "value", "op", "op_type", "backend", "compile_specs",
        "payload", "arg_dim_orders", "written_args", "dims", "args", "results", "data"}) {
    dict += Entry(absl::StrCat("\"", key, "\":"));
  }
  for (const char* name : {"Input", "Constant", "State", "Intermediate", "Scalar", "Float32",
                           "Int64", "Int", "Double", "Bool", "IntList", "HostOp", "DelegateCall"}) {
    dict += Entry(absl::StrCat("\"", name, "\""));
  }
  return dict;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ferry_fuzz_make_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir(argv[1]);
  std::error_code error;
  std::filesystem::create_directories(dir / "program", error);
  if (!error) std::filesystem::create_directories(dir / "json", error);
  if (error) {
    std::fprintf(stderr, "ferry_fuzz_make_seeds: cannot create %s: %s\n", dir.c_str(),
                 error.message().c_str());
    return 1;
  }
  absl::StatusOr<std::vector<ferry::fuzz::SeedProgram>> seeds = ferry::fuzz::BuildSeedPrograms();
  if (!seeds.ok()) {
    std::fprintf(stderr, "ferry_fuzz_make_seeds: %s\n", seeds.status().ToString().c_str());
    return 1;
  }
  for (const ferry::fuzz::SeedProgram& seed : *seeds) {
    absl::StatusOr<std::string> json = ferry::Program::ToJson(seed.bytes);
    if (!json.ok()) {
      std::fprintf(stderr, "ferry_fuzz_make_seeds: %s: %s\n", seed.name.c_str(),
                   json.status().ToString().c_str());
      return 1;
    }
    if (!WriteFile(dir / "program" / (seed.name + ".ferry"), seed.bytes.data(),
                   seed.bytes.size()) ||
        !WriteFile(dir / "json" / (seed.name + ".json"), json->data(), json->size())) {
      return 1;
    }
  }
  const std::string program_dict = absl::StrCat(Entry(ferry::kProgramFileIdentifier),
                                                CommonDictionary());
  const std::string json_dict = JsonDictionary();
  if (!WriteFile(dir / "program.dict", program_dict.data(), program_dict.size()) ||
      !WriteFile(dir / "json.dict", json_dict.data(), json_dict.size())) {
    return 1;
  }
  return 0;
}
