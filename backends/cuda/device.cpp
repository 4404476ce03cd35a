#include "backends/cuda/device.hpp"

#include <dlfcn.h>

#include <cstdio>

namespace sol::backends::cuda {

namespace {

std::string version(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

Device::~Device() {
  // At process exit the driver may already be shutting down: a failure here is of no consequence
  // and nothing is reported.
  if (!libs_.rt.cudaFree) return;
  release_larger_than(0);
  if (handle_) libs_.blas.cublasDestroy(handle_);
  if (stream_) libs_.rt.cudaStreamDestroy(stream_);
}

bool Device::open(std::string& why) {
  if (!load_libraries(libs_, why)) return false;
  const CudartApi& rt = libs_.rt;
  int count = 0;
  if (cudaError_t err = rt.cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    why = "no CUDA device: cudaGetDeviceCount: " +
          (err != cudaSuccess ? error_text(rt, err) : std::string("0 devices"));
    // The runtime reports a missing kernel-mode driver as an old one; say what is missing. It has
    // tried to load the driver library by now, so not finding it loaded means it is not there.
    if (err == cudaErrorInsufficientDriver && !dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD))
      why += " (no NVIDIA driver: libcuda.so.1 is not installed)";
    return false;
  }
  ordinal_ = 0;
  cudaDeviceProp prop{};
  if (cudaError_t err = rt.cudaGetDeviceProperties(&prop, ordinal_); err != cudaSuccess) {
    why = "cudaGetDeviceProperties: " + error_text(rt, err);
    return false;
  }
  if (cudaError_t err = make_current(); err != cudaSuccess) {
    why = "cudaSetDevice: " + error_text(rt, err);
    return false;
  }
  // Non-blocking: our stream does not synchronise with the legacy default stream the program's
  // own CUDA work may use, so a node waits for its own commands only.
  if (cudaError_t err = rt.cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); err != cudaSuccess) {
    why = "cudaStreamCreateWithFlags: " + error_text(rt, err);
    return false;
  }
  const CublasApi& b = libs_.blas;
  cublasStatus_t st = b.cublasCreate(&handle_);
  if (st == CUBLAS_STATUS_SUCCESS) st = b.cublasSetStream(handle_, stream_);
  if (st == CUBLAS_STATUS_SUCCESS) st = b.cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST);
  if (st == CUBLAS_STATUS_SUCCESS) st = b.cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH);
  if (st != CUBLAS_STATUS_SUCCESS) {
    why = std::string("cuBLAS handle: ") + status_text(b, st);
    return false;
  }
  int runtime = 0, driver = 0, cublas = 0;
  rt.cudaRuntimeGetVersion(&runtime);
  rt.cudaDriverGetVersion(&driver);
  b.cublasGetVersion(handle_, &cublas);
  total_memory_ = prop.totalGlobalMem;
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  // cuBLAS versions are major * 10000 + minor * 100 + patch.
  const std::string cublas_version = std::to_string(cublas / 10000) + "." + std::to_string(cublas / 100 % 100) +
                                     "." + std::to_string(cublas % 100);
  description_ = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                 mem + "), CUDA runtime " + version(runtime) + ", driver " + version(driver) + ", cuBLAS " +
                 cublas_version;
  identity_ = std::string(prop.name) + "\n" + std::to_string(prop.totalGlobalMem) + "\n" +
              std::to_string(prop.multiProcessorCount) + "\n" + std::to_string(prop.pciDomainID) + ":" +
              std::to_string(prop.pciBusID) + ":" + std::to_string(prop.pciDeviceID) + "\n" +
              std::to_string(driver) + "\n" + std::to_string(cublas) + "\n" + libs_.cublas_path;
  return true;
}

void* Device::buffer(int slot, size_t bytes, cudaError_t& err) noexcept {
  err = cudaSuccess;
  Block& b = device_[slot];
  if (b.ptr && b.bytes >= bytes) return b.ptr;
  if (b.ptr) libs_.rt.cudaFree(b.ptr);
  b = Block{};
  void* p = nullptr;
  err = libs_.rt.cudaMalloc(&p, bytes ? bytes : 1);
  if (err != cudaSuccess) return nullptr;
  b.ptr = p;
  b.bytes = bytes;
  return p;
}

void* Device::staging(int slot, size_t bytes, cudaError_t& err) noexcept {
  err = cudaSuccess;
  Block& b = host_[slot];
  if (b.ptr && b.bytes >= bytes) return b.ptr;
  if (b.ptr) libs_.rt.cudaFreeHost(b.ptr);
  b = Block{};
  void* p = nullptr;
  err = libs_.rt.cudaMallocHost(&p, bytes ? bytes : 1);
  if (err != cudaSuccess) return nullptr;
  b.ptr = p;
  b.bytes = bytes;
  return p;
}

void Device::release_larger_than(size_t bytes) noexcept {
  bool any = false;
  for (const Block& b : device_) any |= b.ptr && b.bytes > bytes;
  for (const Block& b : host_) any |= b.ptr && b.bytes > bytes;
  // Lazily, the stream runs deferred nodes: no wait unless something goes.
  if (!any) return;
  // The stream may still use a buffer a failed call left commands on.
  if (stream_) libs_.rt.cudaStreamSynchronize(stream_);
  for (Block& b : device_)
    if (b.ptr && b.bytes > bytes) {
      libs_.rt.cudaFree(b.ptr);
      b = Block{};
    }
  for (Block& b : host_)
    if (b.ptr && b.bytes > bytes) {
      libs_.rt.cudaFreeHost(b.ptr);
      b = Block{};
    }
}

}  // namespace sol::backends::cuda
