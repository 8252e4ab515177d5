// The file identifiers (bytes 4..7 of a file) of every format the loader reads, in one place: the
// entry point (loader/program.h) picks a reader by them, and each reader names the right format
// when it is handed another's file.
#ifndef FERRY_LOADER_FILE_IDENTIFIERS_H_
#define FERRY_LOADER_FILE_IDENTIFIERS_H_

namespace ferry {

// Ferry's binary format (loader/ferry/).
inline constexpr char kProgramFileIdentifier[] = "FRRY";
// ExecuTorch's program format (.pte, loader/executorch/pte_reader.h).
inline constexpr char kExecuTorchFileIdentifier[] = "ET12";
// ExecuTorch's data files (.ptd, loader/executorch/ptd_reader.h).
inline constexpr char kExecuTorchDataFileIdentifier[] = "FT01";
// ExecuTorch's bundled programs (.bpte: a .pte with test cases, loader/executorch/bpte_reader.h).
inline constexpr char kExecuTorchBundleFileIdentifier[] = "BP08";

}  // namespace ferry

#endif  // FERRY_LOADER_FILE_IDENTIFIERS_H_
