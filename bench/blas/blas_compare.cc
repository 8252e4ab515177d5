// ferry_blas_compare: host BLAS libraries side by side on the float32 products Ferry hands a BLAS
// (kernels/internal/host_blas.h), in one interleaved run, written as a markdown table. It is how
// the host BLAS was chosen; it runs by hand, not in the test suite.
//
//   build/bench/blas/ferry_blas_compare --lib=NAME=PATH [--lib=NAME=PATH ...] [--out=FILE]
//   bench/blas/run.sh [FILE]     # OpenBLAS (the one Ferry links) beside BLIS, fetched if absent
//
// Each library is opened with dlopen (its own symbols first, so that two libraries that export
// cblas_sgemm never call into each other) and set to one thread. Every product is first checked
// against a double-precision reference (1e-4 relative to the largest result) on every library;
// a mismatch or a library that does not load exits 1. Timing: the libraries take turns in one
// loop, each turn a batch of calls of about 5 ms (bench/common/interleaved.h); the table gives
// medians over the repetitions and each library's time over the first one's.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/common/interleaved.h"

namespace ferry::blas_compare {
namespace {

// CBLAS's enums, as the standard numbers them.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;
using SgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float* a, int lda, const float* b, int ldb, float beta, float* c,
                         int ldc);
using SgemvFn = void (*)(int order, int trans, int m, int n, float alpha, const float* a, int lda,
                         const float* x, int incx, float beta, float* y, int incy);

// One library: its cblas_sgemm, and what it says of itself.
struct Library {
  std::string name;
  std::string path;
  void* handle = nullptr;
  SgemmFn sgemm = nullptr;
  SgemvFn sgemv = nullptr;
  std::string kernels;  // the kernels it picked for this CPU, when it says
  std::string threads;  // how it was set to one thread
};

absl::StatusOr<Library> Open(const std::string& name, const std::string& path) {
  Library lib;
  lib.name = name;
  lib.path = path;
  lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (lib.handle == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", name, " (", path, "): ", dlerror()));
  }
  lib.sgemm = reinterpret_cast<SgemmFn>(dlsym(lib.handle, "cblas_sgemm"));
  lib.sgemv = reinterpret_cast<SgemvFn>(dlsym(lib.handle, "cblas_sgemv"));
  if (lib.sgemm == nullptr || lib.sgemv == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(name, " (", path, ") lacks cblas_sgemm or cblas_sgemv"));
  }
  // OpenBLAS and BLIS each have their own call for threads and for the kernels they picked.
  if (auto set = reinterpret_cast<void (*)(int)>(dlsym(lib.handle, "openblas_set_num_threads"))) {
    set(1);
    lib.threads = "openblas_set_num_threads(1)";
  } else if (auto bli_set = reinterpret_cast<void (*)(int64_t)>(
                 dlsym(lib.handle, "bli_thread_set_num_threads"))) {
    bli_set(1);
    lib.threads = "bli_thread_set_num_threads(1)";
  } else {
    return absl::FailedPreconditionError(
        absl::StrCat(name, " (", path, ") has no call to set its threads; only OpenBLAS and BLIS "
                     "are known here"));
  }
  if (auto core = reinterpret_cast<const char* (*)()>(dlsym(lib.handle, "openblas_get_corename"))) {
    lib.kernels = core();
  } else if (auto id = reinterpret_cast<int (*)()>(dlsym(lib.handle, "bli_arch_query_id"))) {
    if (auto arch = reinterpret_cast<const char* (*)(int)>(dlsym(lib.handle, "bli_arch_string"))) {
      lib.kernels = arch(id());
    }
  }
  return lib;
}

// c[m, n] = a[m, k] x b[n, k]^T + bias[n] (c holds the bias before the call: beta 1), as Ferry's
// linear calls the BLAS for x times a transposed weight: through sgemm, or for one row (m = 1)
// through sgemv when `gemv` is set.
struct Product {
  std::string label;
  int m, n, k;
  bool gemv = false;
  std::vector<float> a, b, bias;
  std::vector<double> want;  // the reference, in double

  Product(std::string label_in, int m_in, int n_in, int k_in)
      : label(std::move(label_in)), m(m_in), n(n_in), k(k_in), a(size_t(m) * k), b(size_t(n) * k),
        bias(n), want(size_t(m) * n) {
    // Deterministic values in [-1, 1), not a simple progression.
    uint32_t state = 2463534242u + static_cast<uint32_t>(m * 31 + n * 7 + k);
    auto next = [&state] {
      state ^= state << 13;
      state ^= state >> 17;
      state ^= state << 5;
      return static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
    };
    for (float& v : a) v = next();
    for (float& v : b) v = next();
    for (float& v : bias) v = next();
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double s = bias[j];
        for (int p = 0; p < k; ++p) s += double(a[size_t(i) * k + p]) * b[size_t(j) * k + p];
        want[size_t(i) * n + j] = s;
      }
    }
  }

  double flops() const { return 2.0 * m * n * k; }

  void Run(const Library& lib, std::vector<float>& c) const {
    for (int i = 0; i < m; ++i) std::copy(bias.begin(), bias.end(), c.begin() + size_t(i) * n);
    if (gemv) {  // per row i: c[i] = b[n, k] a[i] + c[i]
      for (int i = 0; i < m; ++i) {
        lib.sgemv(kRowMajor, kNoTrans, n, k, 1.0f, b.data(), k, a.data() + size_t(i) * k, 1, 1.0f,
                  c.data() + size_t(i) * n, 1);
      }
      return;
    }
    lib.sgemm(kRowMajor, kNoTrans, kTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 1.0f,
              c.data(), n);
  }

  // The largest difference from the reference over the largest reference value.
  double RelativeError(const std::vector<float>& c) const {
    double err = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      err = std::max(err, std::abs(double(c[i]) - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    return scale > 0 ? err / scale : err;
  }
};

struct Args {
  std::vector<std::pair<std::string, std::string>> libs;  // name, path
  std::string out;
  int repetitions = 15;
};

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--lib=")) {
      const std::string spec = a.substr(6);
      const size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
        return absl::InvalidArgumentError(absl::StrCat(a, ": expected --lib=NAME=PATH"));
      }
      args.libs.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    } else if (absl::StartsWith(a, "--out=")) {
      args.out = a.substr(6);
    } else if (absl::StartsWith(a, "--repetitions=")) {
      args.repetitions = std::atoi(a.c_str() + 14);
      if (args.repetitions < 1) return absl::InvalidArgumentError(absl::StrCat(a, ": at least 1"));
    } else if (a == "--help" || a == "-h") {
      return absl::CancelledError(
          "usage: ferry_blas_compare --lib=NAME=PATH [--lib=NAME=PATH ...] [--out=FILE] "
          "[--repetitions=N]\n"
          "Times cblas_sgemm of each library, one thread each, on the products Ferry's linear "
          "hands a BLAS, in one interleaved run; writes a markdown table (to FILE or standard "
          "output). See bench/README.md.");
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument ", a, " (see --help)"));
    }
  }
  if (args.libs.empty()) return absl::InvalidArgumentError("no --lib=NAME=PATH given (see --help)");
  return args;
}

absl::Status Run(const Args& args) {
  std::vector<Library> libs;
  for (const auto& [name, path] : args.libs) {
    absl::StatusOr<Library> lib = Open(name, path);
    if (!lib.ok()) return lib.status();
    libs.push_back(*std::move(lib));
  }
  std::vector<Product> products;
  products.emplace_back("linear [64, 64] x [64, 64]^T + bias", 64, 64, 64);
  products.emplace_back("linear [256, 256] x [256, 256]^T + bias", 256, 256, 256);
  products.emplace_back("linear [512, 512] x [512, 512]^T + bias", 512, 512, 512);
  // Few rows (tokens), through sgemm and through sgemv per row: where HostSgemm turns from one to
  // the other (kHostBlasMaxGemvRows).
  for (int rows : {1, 8, 16}) {
    for (int n : {1024, 4096}) {
      const std::string shape = absl::StrFormat("linear [%d, 1024] x [%d, 1024]^T + bias", rows, n);
      products.emplace_back(shape + ", sgemm", rows, n, 1024);
      products.emplace_back(shape + ", sgemv per row", rows, n, 1024);
      products.back().gemv = true;
    }
  }

  for (const Product& p : products) {
    std::vector<float> c(size_t(p.m) * p.n);
    for (const Library& lib : libs) {
      p.Run(lib, c);
      const double err = p.RelativeError(c);
      if (!(err <= 1e-4)) {
        return absl::InternalError(absl::StrFormat("%s on %s: relative error %g against the "
                                                   "double reference, more than 1e-4",
                                                   p.label, lib.name, err));
      }
    }
  }

  std::string table = "| product |";
  for (const Library& l : libs) absl::StrAppend(&table, " ", l.name, " |");
  for (size_t l = 1; l < libs.size(); ++l) {
    absl::StrAppend(&table, " ", libs[l].name, " / ", libs[0].name, " |");
  }
  absl::StrAppend(&table, "\n|");
  for (size_t col = 0; col < 2 * libs.size(); ++col) absl::StrAppend(&table, " --- |");
  absl::StrAppend(&table, "\n");
  for (const Product& p : products) {
    std::fprintf(stderr, "%s\n", p.label.c_str());
    std::vector<float> c(size_t(p.m) * p.n);
    std::vector<bench::Batch> sides;
    for (const Library& lib : libs) {
      sides.push_back([&p, &lib, &c](int64_t calls) {
        for (int64_t i = 0; i < calls; ++i) p.Run(lib, c);
        return true;
      });
    }
    absl::StatusOr<std::vector<double>> timed =
        bench::Interleaved(sides, args.repetitions, /*target_ms=*/5);
    if (!timed.ok()) return timed.status();
    const std::vector<double>& ns = *timed;
    absl::StrAppend(&table, "| ", p.label, " |");
    for (double t : ns) {
      absl::StrAppend(&table,
                      absl::StrFormat(" %s (%.1f GFLOP/s) |", bench::FormatTime(t), p.flops() / t));
    }
    for (size_t l = 1; l < libs.size(); ++l) {
      absl::StrAppend(&table, absl::StrFormat(" %.2f |", ns[l] / ns[0]));
    }
    absl::StrAppend(&table, "\n");
  }
  std::string head = "One thread each; medians of interleaved repetitions; a ratio above 1: the "
                     "first library is faster.\n\n";
  for (const Library& l : libs) {
    absl::StrAppend(&head, "- ", l.name, ": `", l.path, "`, kernels ",
                    l.kernels.empty() ? "not reported" : l.kernels, ", ", l.threads, "\n");
  }
  const std::string text = absl::StrCat(head, "\n", table);
  if (args.out.empty()) {
    std::fputs(text.c_str(), stdout);
    return absl::OkStatus();
  }
  FILE* f = std::fopen(args.out.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrCat("cannot write ", args.out));
  const bool ok = std::fputs(text.c_str(), f) >= 0;
  if (std::fclose(f) != 0 || !ok) return absl::InternalError(absl::StrCat("cannot write ", args.out));
  std::fprintf(stderr, "wrote %s\n", args.out.c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace ferry::blas_compare

int main(int argc, char** argv) {
  absl::StatusOr<ferry::blas_compare::Args> args = ferry::blas_compare::ParseArgs(argc, argv);
  if (!args.ok()) {
    const bool help = absl::IsCancelled(args.status());
    std::fprintf(help ? stdout : stderr, "%s\n", std::string(args.status().message()).c_str());
    return help ? 0 : 2;
  }
  if (absl::Status s = ferry::blas_compare::Run(*args); !s.ok()) {
    std::fprintf(stderr, "ferry_blas_compare: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
