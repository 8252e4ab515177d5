// Writes the seed corpora of the fuzzers (fuzz/seed_programs.h) and their dictionaries:
//   DIR/program/NAME.ferry   binary programs, for ferry_fuzz_program
//   DIR/json/NAME.json       the same programs in JSON form, for ferry_fuzz_json
//   DIR/program.dict         libFuzzer dictionaries: the op names of the built-in registry and
//   DIR/json.dict            the strings the loader looks for, plus the JSON form's keys
//   DIR/bpte/NAME.bpte       with PTE_DIR: each PTE_DIR/NAME.pte bundled with one test case
//                            (a float tensor, an int, a bool and a double), for ferry_fuzz_bpte
//   DIR/xnnpack/NAME_N.xnn   with PTE_DIR: the payload of each XnnpackBackend delegate N of
//                            PTE_DIR/NAME.pte, for ferry_fuzz_xnnpack
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ferry/fuzz/seed_programs.h"
#include "ferry/kernels/op_registry.h"
#include "ferry/loader/executorch/pte_reader.h"
#include "ferry/loader/executorch/xnnpack_reader.h"
#include "ferry/loader/program.h"
#include "flatbuffers/flatbuffers.h"
#include "loader/executorch/schema/bundled_program_generated.h"

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

// `pte` bundled with one test case for "forward": its values of every kind, not its real
// inputs (the fuzzer explores from there).
std::vector<uint8_t> Bundle(const std::vector<uint8_t>& pte) {
  namespace fb = ::ferry::et::bundled::fbs;
  flatbuffers::FlatBufferBuilder fbb;
  const std::vector<int32_t> sizes = {2};
  const std::vector<uint8_t> data(8, 0);
  const std::vector<uint8_t> order = {0};
  std::vector<flatbuffers::Offset<fb::Value>> inputs = {
      fb::CreateValue(fbb, fb::ValueUnion::Tensor,
                      fb::CreateTensorDirect(fbb, 6, &sizes, &data, &order).Union()),
      fb::CreateValue(fbb, fb::ValueUnion::Int, fb::CreateInt(fbb, 1).Union()),
      fb::CreateValue(fbb, fb::ValueUnion::Bool, fb::CreateBool(fbb, true).Union()),
      fb::CreateValue(fbb, fb::ValueUnion::Double, fb::CreateDouble(fbb, 0.5).Union())};
  std::vector<flatbuffers::Offset<fb::Value>> expected = {fb::CreateValue(
      fbb, fb::ValueUnion::Tensor, fb::CreateTensorDirect(fbb, 6, &sizes, &data, &order).Union())};
  std::vector<flatbuffers::Offset<fb::BundledMethodTestCase>> cases = {
      fb::CreateBundledMethodTestCaseDirect(fbb, &inputs, &expected)};
  std::vector<flatbuffers::Offset<fb::BundledMethodTestSuite>> suites = {
      fb::CreateBundledMethodTestSuiteDirect(fbb, "forward", &cases)};
  fb::FinishBundledProgramBuffer(fbb, fb::CreateBundledProgramDirect(fbb, 0, &suites, &pte));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// Creates DIR/SUB and calls `seed` with each PTE_DIR/NAME.pte's path and bytes (none when PTE_DIR
// is absent, and none over 64 MiB); false when the folder cannot be made or `seed` fails.
template <typename F>
bool ForEachPte(const std::filesystem::path& dir, const char* sub,
                const std::filesystem::path& pte_dir, F seed) {
  std::error_code error;
  std::filesystem::create_directories(dir / sub, error);
  if (error) return false;
  if (!std::filesystem::is_directory(pte_dir)) return true;
  for (const auto& entry : std::filesystem::directory_iterator(pte_dir)) {
    if (entry.path().extension() != ".pte") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> pte((std::istreambuf_iterator<char>(in)), {});
    if (pte.empty() || pte.size() > (size_t{64} << 20)) continue;
    if (!seed(entry.path(), pte)) return false;
  }
  return true;
}

// Writes DIR/bpte/NAME.bpte for every PTE_DIR/NAME.pte.
bool WriteBundleSeeds(const std::filesystem::path& dir, const std::filesystem::path& pte_dir) {
  return ForEachPte(dir, "bpte", pte_dir,
                    [&](const std::filesystem::path& path, const std::vector<uint8_t>& pte) {
                      const std::vector<uint8_t> bpte = Bundle(pte);
                      const std::string name = path.stem().string() + ".bpte";
                      return WriteFile(dir / "bpte" / name, bpte.data(), bpte.size());
                    });
}

// Writes DIR/xnnpack/NAME_N.xnn for every XNNPACK delegate of every PTE_DIR/NAME.pte.
bool WriteXnnpackSeeds(const std::filesystem::path& dir, const std::filesystem::path& pte_dir) {
  return ForEachPte(
      dir, "xnnpack", pte_dir,
      [&](const std::filesystem::path& path, const std::vector<uint8_t>& pte) {
        std::vector<uint64_t> aligned((pte.size() + 7) / 8);
        std::memcpy(aligned.data(), pte.data(), pte.size());
        absl::StatusOr<ferry::EtProgram> program = ferry::ReadExecuTorchProgram(
            absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(aligned.data()), pte.size()));
        if (!program.ok()) return true;
        int n = 0;
        for (const ferry::EtMethod& method : program->methods) {
          for (const ferry::EtDelegate& d : method.delegates) {
            if (d.backend_id != ferry::kXnnpackBackendName) continue;
            const std::string name = absl::StrCat(path.stem().string(), "_", n++, ".xnn");
            if (!WriteFile(dir / "xnnpack" / name, d.payload.data(), d.payload.size()))
              return false;
          }
        }
        return true;
      });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: ferry_fuzz_make_seeds DIR [PTE_DIR]\n");
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
  if (argc == 3 && (!WriteBundleSeeds(dir, argv[2]) || !WriteXnnpackSeeds(dir, argv[2]))) return 1;
  return 0;
}
