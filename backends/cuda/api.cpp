#include "backends/cuda/api.hpp"

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/native.hpp"

namespace sol::backends::cuda {
namespace {

constexpr const char* kToolkitDir = "/usr/local/cuda/lib64/";

// The loaded object whose file name begins with `soname` ("libcublas.so.13"), or "".
std::string loaded_path(const char* soname) {
  const size_t len = std::strlen(soname);
  for (const std::string& path : loaded_objects()) {
    const size_t slash = path.rfind('/');
    const char* base = path.c_str() + (slash == std::string::npos ? 0 : slash + 1);
    if (std::strncmp(base, soname, len) == 0) return path;
  }
  return {};
}

// Opens `soname` as described in api.hpp; `path` gets what was opened. RTLD_LOCAL: the program
// must not see these libraries' symbols through us.
void* open_library(const char* soname, std::string& path, std::string& why) {
  if (void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    path = soname;
    return h;
  }
  std::string loaded = loaded_path(soname);
  if (!loaded.empty())
    if (void* h = dlopen(loaded.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = loaded;
      return h;
    }
  if (void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) {
    path = soname;
    return h;
  }
  const char* err = dlerror();
  why = err ? err : (std::string(soname) + ": cannot be opened");
  const std::string toolkit = std::string(kToolkitDir) + soname;
  if (void* h = dlopen(toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    path = toolkit;
    why.clear();
    return h;
  }
  return nullptr;
}

template <class F>
bool resolve(void* handle, const char* lib, const char* name, F& fn, std::string& why) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (fn) return true;
  why = std::string(lib) + " has no " + name + " (an older version than CUDA 13?)";
  return false;
}

}  // namespace

void* open_cuda_library(const char* soname, std::string& path, std::string& why, const std::string* beside,
                        int nbeside) {
  if (void* h = open_library(soname, path, why)) return h;
  // A wheel's libraries lie in site-packages/nvidia/<package>/lib: look in the siblings of the
  // folders the libraries already opened came from (cuDNN's wheel beside cuBLAS's).
  for (int i = 0; i < nbeside; ++i) {
    const std::string& other = beside[i];
    size_t cut = other.rfind('/');
    for (int up = 0; up < 2 && cut != std::string::npos && cut > 0; ++up) cut = other.rfind('/', cut - 1);
    if (cut == std::string::npos) continue;
    const std::string base = other.substr(0, cut + 1);  // .../site-packages/nvidia/
    const std::string pkg = std::strncmp(soname, "libcudnn", 8) == 0 ? "cudnn" : "";
    if (pkg.empty()) continue;
    const std::string candidate = base + pkg + "/lib/" + soname;
    if (void* h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = candidate;
      why.clear();
      return h;
    }
  }
  return nullptr;
}

bool load_libraries(Libraries& out, std::string& why) {
  void* rt = open_library("libcudart.so.13", out.cudart_path, why);
  if (!rt) return false;
#define SOL_CUDART(name) \
  if (!resolve(rt, "libcudart.so.13", SOL_CUDA_STR(name), out.rt.name, why)) return false;
#include "backends/cuda/cudart_functions.def"
#undef SOL_CUDART
  void* blas = open_library("libcublas.so.13", out.cublas_path, why);
  if (!blas) return false;
#define SOL_CUBLAS(name) \
  if (!resolve(blas, "libcublas.so.13", SOL_CUDA_STR(name), out.blas.name, why)) return false;
#include "backends/cuda/cublas_functions.def"
#undef SOL_CUBLAS
  return true;
}

std::string error_text(const CudartApi& rt, cudaError_t err) {
  const char* name = rt.cudaGetErrorName ? rt.cudaGetErrorName(err) : nullptr;
  const char* text = rt.cudaGetErrorString ? rt.cudaGetErrorString(err) : nullptr;
  std::string s = name ? name : ("cudaError " + std::to_string(static_cast<int>(err)));
  if (text) s += std::string(": ") + text;
  return s;
}

const char* status_text(const CublasApi& blas, cublasStatus_t st) noexcept {
  const char* s = blas.cublasGetStatusString ? blas.cublasGetStatusString(st) : nullptr;
  return s ? s : "unknown cuBLAS status";
}

}  // namespace sol::backends::cuda
