// The CUDA runtime and cuBLAS, opened at run time: function tables declared from the toolkit's
// headers (types and prototypes only), filled by dlsym. Nothing here is linked, so libsol loads
// and runs on a machine without CUDA; the backend then reports which library was missing.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

namespace sol::backends::cuda {

// A name after macro expansion: cublas_v2.h turns cublasSgemm into cublasSgemm_v2, and the table
// must look up the symbol the header's prototype is for.
#define SOL_CUDA_STR2(x) #x
#define SOL_CUDA_STR(x) SOL_CUDA_STR2(x)

struct CudartApi {
#define SOL_CUDART(name) decltype(&::name) name = nullptr;
#include "backends/cuda/cudart_functions.def"
#undef SOL_CUDART
};

struct CublasApi {
#define SOL_CUBLAS(name) decltype(&::name) name = nullptr;
#include "backends/cuda/cublas_functions.def"
#undef SOL_CUBLAS
};

// The two libraries, opened once per process and never closed (the driver's threads and the
// libraries' own destructors must not race a dlclose). Where each is looked for, in order:
//   1. already in the process (PyTorch's wheels load them from site-packages/nvidia/...: the same
//      copy is used, found by soname with RTLD_NOLOAD, else by path among the loaded objects);
//   2. by soname (LD_LIBRARY_PATH, the ld.so cache: a CUDA toolkit or a Debian package);
//   3. the toolkit's default folder, /usr/local/cuda/lib64.
// false with `why` naming the library and dlopen's message when one cannot be opened or lacks a
// function.
struct Libraries {
  CudartApi rt;
  CublasApi blas;
  std::string cudart_path, cublas_path;  // what was opened, for `sol backends`
};
bool load_libraries(Libraries& out, std::string& why);

// Opens one CUDA library as load_libraries() does (already loaded, by soname, the toolkit's
// folder), then in the folders of `beside` (paths of libraries already opened: a pip wheel's
// sibling folders, site-packages/nvidia/<name>/lib). `path` gets what was opened; nullptr with
// dlopen's message in `why`.
void* open_cuda_library(const char* soname, std::string& path, std::string& why,
                        const std::string* beside = nullptr, int nbeside = 0);

// "cudaErrorNoDevice: no CUDA-capable device is detected" / "CUBLAS_STATUS_NOT_INITIALIZED".
std::string error_text(const CudartApi& rt, cudaError_t err);
const char* status_text(const CublasApi& blas, cublasStatus_t st) noexcept;

}  // namespace sol::backends::cuda
