// The part of ONNX Runtime's C API that the peer harness calls, declared by Ferry.
//
// ONNX Runtime's shared library exports one C function, OrtGetApiBase; everything else is a
// table of function pointers (OrtApi) returned by OrtApiBase::GetApi(version). The table only
// grows at its end between releases, so an entry's index is a fact of the ABI. The table is kept
// here as an array of untyped slots; OrtApiTable gives the entries the harness uses their types,
// at their indices (counted in `struct OrtApi` of onnxruntime_c_api.h, where every
// ORT_API2_STATUS, ORT_CLASS_RELEASE and plain function pointer member is one slot).
//
// Misread indices would call the wrong functions, so ort_peer.cc checks them when it opens the
// library: a status made with CreateStatus must come back through GetErrorCode and
// GetErrorMessage, GetAvailableProviders must list the CPU provider, a tensor made over the
// caller's memory must hand that memory back; and peers_main.cc checks that a session starts no
// threads and compares ONNX Runtime's result with Ferry's before every figure it reports.
//
// Thread safety and ownership are ONNX Runtime's: objects returned through `out` parameters are
// released with the matching Release* entry.
#ifndef FERRY_BENCH_PEERS_ORT_API_H_
#define FERRY_BENCH_PEERS_ORT_API_H_

#include <cstddef>
#include <cstdint>

namespace ferry::peers {

// Opaque handles: only ever pointed to.
struct OrtStatus;
struct OrtEnv;
struct OrtSession;
struct OrtSessionOptions;
struct OrtValue;
struct OrtMemoryInfo;
struct OrtRunOptions;
struct OrtIoBinding;

// The values of the C API's enums that the harness passes.
inline constexpr int kOrtLoggingLevelWarning = 2;
inline constexpr int kOrtErrorInvalidArgument = 2;  // OrtErrorCode ORT_INVALID_ARGUMENT
inline constexpr int kOrtSequential = 0;            // ExecutionMode ORT_SEQUENTIAL
inline constexpr int kOrtEnableAll = 99;            // GraphOptimizationLevel ORT_ENABLE_ALL
inline constexpr int kOrtDeviceAllocator = 0;       // OrtAllocatorType
inline constexpr int kOrtMemTypeDefault = 0;        // OrtMemType
inline constexpr int kOnnxFloat = 1;                // ONNXTensorElementDataType FLOAT

// A version of the table that ONNX Runtime 1.17 and later serve; GetApi returns null for a
// version newer than the library.
inline constexpr uint32_t kOrtApiVersion = 17;

struct OrtApiBase {
  const void* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)();
};
using OrtGetApiBaseFn = const OrtApiBase* (*)();

// The table as ONNX Runtime lays it out: slots of function pointers.
struct OrtApiTable {
  const void* const* slots;

  template <typename Fn>
  Fn At(size_t index) const {
    return reinterpret_cast<Fn>(const_cast<void*>(slots[index]));
  }

  // Status (0..2, release 93).
  OrtStatus* CreateStatus(int code, const char* msg) const {
    return At<OrtStatus* (*)(int, const char*)>(0)(code, msg);
  }
  int GetErrorCode(const OrtStatus* s) const { return At<int (*)(const OrtStatus*)>(1)(s); }
  const char* GetErrorMessage(const OrtStatus* s) const {
    return At<const char* (*)(const OrtStatus*)>(2)(s);
  }

  // Environment and sessions (3, 8, 9).
  OrtStatus* CreateEnv(int level, const char* logid, OrtEnv** out) const {
    return At<OrtStatus* (*)(int, const char*, OrtEnv**)>(3)(level, logid, out);
  }
  OrtStatus* CreateSessionFromArray(const OrtEnv* env, const void* data, size_t size,
                                    const OrtSessionOptions* options, OrtSession** out) const {
    return At<OrtStatus* (*)(const OrtEnv*, const void*, size_t, const OrtSessionOptions*,
                             OrtSession**)>(8)(env, data, size, options, out);
  }
  OrtStatus* Run(OrtSession* session, const OrtRunOptions* run_options,
                 const char* const* input_names, const OrtValue* const* inputs, size_t num_inputs,
                 const char* const* output_names, size_t num_outputs, OrtValue** outputs) const {
    return At<OrtStatus* (*)(OrtSession*, const OrtRunOptions*, const char* const*,
                             const OrtValue* const*, size_t, const char* const*, size_t,
                             OrtValue**)>(9)(session, run_options, input_names, inputs, num_inputs,
                                             output_names, num_outputs, outputs);
  }

  // Session options (10, 13, 23, 24, 25).
  OrtStatus* CreateSessionOptions(OrtSessionOptions** out) const {
    return At<OrtStatus* (*)(OrtSessionOptions**)>(10)(out);
  }
  OrtStatus* SetSessionExecutionMode(OrtSessionOptions* o, int mode) const {
    return At<OrtStatus* (*)(OrtSessionOptions*, int)>(13)(o, mode);
  }
  OrtStatus* SetSessionGraphOptimizationLevel(OrtSessionOptions* o, int level) const {
    return At<OrtStatus* (*)(OrtSessionOptions*, int)>(23)(o, level);
  }
  OrtStatus* SetIntraOpNumThreads(OrtSessionOptions* o, int n) const {
    return At<OrtStatus* (*)(OrtSessionOptions*, int)>(24)(o, n);
  }
  OrtStatus* SetInterOpNumThreads(OrtSessionOptions* o, int n) const {
    return At<OrtStatus* (*)(OrtSessionOptions*, int)>(25)(o, n);
  }

  // Tensors and memory info (49, 51, 69).
  OrtStatus* CreateTensorWithDataAsOrtValue(const OrtMemoryInfo* info, void* data, size_t bytes,
                                            const int64_t* shape, size_t rank, int type,
                                            OrtValue** out) const {
    return At<OrtStatus* (*)(const OrtMemoryInfo*, void*, size_t, const int64_t*, size_t, int,
                             OrtValue**)>(49)(info, data, bytes, shape, rank, type, out);
  }
  OrtStatus* GetTensorMutableData(OrtValue* value, void** out) const {
    return At<OrtStatus* (*)(OrtValue*, void**)>(51)(value, out);
  }
  OrtStatus* CreateCpuMemoryInfo(int allocator_type, int mem_type, OrtMemoryInfo** out) const {
    return At<OrtStatus* (*)(int, int, OrtMemoryInfo**)>(69)(allocator_type, mem_type, out);
  }

  // Releases (92..96, 100).
  void ReleaseEnv(OrtEnv* p) const { At<void (*)(OrtEnv*)>(92)(p); }
  void ReleaseStatus(OrtStatus* p) const { At<void (*)(OrtStatus*)>(93)(p); }
  void ReleaseMemoryInfo(OrtMemoryInfo* p) const { At<void (*)(OrtMemoryInfo*)>(94)(p); }
  void ReleaseSession(OrtSession* p) const { At<void (*)(OrtSession*)>(95)(p); }
  void ReleaseValue(OrtValue* p) const { At<void (*)(OrtValue*)>(96)(p); }
  void ReleaseSessionOptions(OrtSessionOptions* p) const {
    At<void (*)(OrtSessionOptions*)>(100)(p);
  }

  // Providers (125, 126): the harness checks that the CPU provider is listed.
  OrtStatus* GetAvailableProviders(char*** out, int* count) const {
    return At<OrtStatus* (*)(char***, int*)>(125)(out, count);
  }
  OrtStatus* ReleaseAvailableProviders(char** providers, int count) const {
    return At<OrtStatus* (*)(char**, int)>(126)(providers, count);
  }

  // I/O binding (133..137).
  OrtStatus* RunWithBinding(OrtSession* session, const OrtRunOptions* run_options,
                            const OrtIoBinding* binding) const {
    return At<OrtStatus* (*)(OrtSession*, const OrtRunOptions*, const OrtIoBinding*)>(133)(
        session, run_options, binding);
  }
  OrtStatus* CreateIoBinding(OrtSession* session, OrtIoBinding** out) const {
    return At<OrtStatus* (*)(OrtSession*, OrtIoBinding**)>(134)(session, out);
  }
  void ReleaseIoBinding(OrtIoBinding* p) const { At<void (*)(OrtIoBinding*)>(135)(p); }
  OrtStatus* BindInput(OrtIoBinding* binding, const char* name, const OrtValue* value) const {
    return At<OrtStatus* (*)(OrtIoBinding*, const char*, const OrtValue*)>(136)(binding, name,
                                                                                value);
  }
  OrtStatus* BindOutput(OrtIoBinding* binding, const char* name, const OrtValue* value) const {
    return At<OrtStatus* (*)(OrtIoBinding*, const char*, const OrtValue*)>(137)(binding, name,
                                                                                value);
  }
};

}  // namespace ferry::peers

#endif  // FERRY_BENCH_PEERS_ORT_API_H_
