// hal::Backend for CUDA: backends/common/device_backend.hpp's skeleton with the CUDA device (the
// libraries are opened by the start-up or the first node, never at program start), its memory,
// and whether a GPU may be here.
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "backends/common/device_backend.hpp"
#include "backends/cuda/blas.hpp"
#include "backends/cuda/device.hpp"
#if SOL_CUDA_CUDNN
#include "backends/cuda/dnn.hpp"
#endif
#include "backends/cuda/resident.hpp"
#include "common/log.hpp"
#include "config/config.hpp"

namespace sol::backends::cuda {
namespace {

using hal::Reason;

// Set by an atexit handler registered once the device is open: exit() has begun, the CUDA
// runtime's own teardown may already have run, so the device neither runs work nor releases its
// objects (they go with the process).
std::atomic<bool> g_exiting{false};
void at_exit() {
  g_exiting.store(true, std::memory_order_release);
}
// at_exit registered once, when the device is open: after the CUDA runtime's own handler, so that
// it runs first.
void hook_exit() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(at_exit); });
}
bool exiting() noexcept {
  return g_exiting.load(std::memory_order_acquire);
}

// hal::DeviceMemory over cudaMalloc'd memory: the pointers are device pointers. Copies run on the
// backend's stream and wait for it only.
class CudaMemory final : public LockedDeviceMemory {
 public:
  CudaMemory(Device& device, std::mutex& mutex) : LockedDeviceMemory(mutex), device_(device) {}

  void* alloc(size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = nullptr;
    if (device_.make_current() != cudaSuccess || device_.rt().cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
      return nullptr;
    return p;
  }
  void free(void* ptr) noexcept override {
    if (!ptr || exiting()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    device_.rt().cudaFree(ptr);
  }

 private:
  bool upload(void* dst, const void* src, size_t bytes) noexcept override {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice);
  }
  bool download(void* dst, const void* src, size_t bytes) noexcept override {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost);
  }
  bool wait() noexcept override {
    return device_.rt().cudaStreamSynchronize(device_.stream()) == cudaSuccess;
  }

  bool copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) noexcept {
    const CudartApi& rt = device_.rt();
    return device_.make_current() == cudaSuccess &&
           rt.cudaMemcpyAsync(dst, src, bytes, kind, device_.stream()) == cudaSuccess &&
           rt.cudaStreamSynchronize(device_.stream()) == cudaSuccess;
  }

  Device& device_;
};

// CUDA_VISIBLE_DEVICES hides every GPU (empty, or -1).
bool gpus_hidden() noexcept {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v && (!*v || std::strcmp(v, "-1") == 0);
}

// Whether an NVIDIA GPU may be here, without loading CUDA (auto asks every process that calls
// BLAS): the kernel driver lists its GPUs under /proc/driver/nvidia/gpus. None there, or
// CUDA_VISIBLE_DEVICES hiding them all: no. Some: yes; the device's costs decide the rest.
hal::Backend::Hint gpu_inventory() noexcept {
  if (gpus_hidden()) return hal::Backend::Hint::no;
  DIR* d = ::opendir("/proc/driver/nvidia/gpus");
  if (!d) return hal::Backend::Hint::no;
  bool any = false;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') any = true;
  ::closedir(d);
  return any ? hal::Backend::Hint::yes : hal::Backend::Hint::no;
}

// Whether CUDA could find a device here at all: a GPU the kernel driver lists, or the device
// node the driver's library opens (/dev/nvidiactl; /dev/dxg under WSL, which has no /proc entry),
// unless CUDA_VISIBLE_DEVICES hides every GPU. Nothing is loaded to find out.
bool may_have_gpu() noexcept {
  return gpu_inventory() == hal::Backend::Hint::yes ||
         (!gpus_hidden() && (::access("/dev/nvidiactl", F_OK) == 0 || ::access("/dev/dxg", F_OK) == 0));
}

#if SOL_CUDA_CUDNN
using DnnNodes = Dnn;
#else
// Built without cuDNN's headers (cudnn.h): DNN nodes are not run here.
class DnnNodes {
 public:
  explicit DnnNodes(Device&) noexcept {}
  hal::Reason supports(const capture::Node&) const noexcept { return hal::Reason::op_unsupported; }
  hal::Reason run(capture::Node&) noexcept { return hal::Reason::op_unsupported; }
};
#endif

// What the cuda backend plugs into DeviceBackend (backends/common/device_backend.hpp). Its
// start-up on a thread of its own creates the CUDA context and cuBLAS and, under auto unless a
// threshold is configured, finds the costs (0.3 s and 0.45 s to measure on an H200). Under auto it
// begins once the first routed BLAS call has returned, and the router routes every call around
// the backend until it is done: no call waits for the GPU to come up, and a process that never
// calls BLAS creates no CUDA context.
struct CudaSpec {
  using Device = cuda::Device;
  using Resident = cuda::Resident;
  using Dnn = DnnNodes;
  static constexpr const char* kName = "cuda";
  static constexpr const char* kApi = "CUDA";

  static bool open(const config::Config&, std::unique_ptr<Device>& out, std::string& why) {
    auto device = std::make_unique<Device>();
    if (!device->open(why)) return false;
    hook_exit();
    out = std::move(device);
    return true;
  }
  static std::string warm_up(Device&, const std::atomic<bool>&) { return ""; }
  // A GPU, while its costs could be measured (or were never needed: an explicit threshold).
  static bool is_accelerator(const Device&) { return true; }
  static double min_flops(const config::Config& cfg) { return static_cast<double>(cfg.cuda_min_flops); }
  // In the profile directory (config::cache_dir(): tune.dir, else $XDG_CACHE_HOME/sol, else
  // ~/.cache/sol): keyed by the device (its slot included) and the driver and cuBLAS that the
  // figures were measured with, so measured by the first process on a machine, or after a driver,
  // cuBLAS or GPU change.
  static std::unique_ptr<CostCache> cost_cache(const config::Config& cfg, const Device& device) {
    return std::make_unique<CostCache>(config::cache_dir(cfg), device.identity(), "sol cuda device costs v1");
  }
  // Its stream idle, nobody else using it.
  static bool measure(Device& device, DeviceCosts& out, std::string& why) {
    const bool ok = device.make_current() == cudaSuccess && device.measure_costs(out, why);
    device.release_larger_than(kKeepDeviceBytes);
    if (!ok && why.empty()) why = "cudaSetDevice failed";
    return ok;
  }
  static constexpr auto exiting = &cuda::exiting;
  // The runtime's current device is per thread, and the program may have chosen another.
  static hal::Reason ready(Device& device) noexcept {
    const cudaError_t err = device.make_current();
    if (err == cudaSuccess) return hal::Reason::ok;
    SOL_LOG(debug, "cuda: cudaSetDevice failed: %s", error_text(device.rt(), err).c_str());
    return hal::Reason::device_error;
  }
  static constexpr auto blas_supports = &cuda::blas_supports;
  static constexpr auto blas_run = &cuda::blas_run;
  static std::unique_ptr<hal::DeviceMemory> memory(Device& device, std::mutex& mutex) {
    return std::make_unique<CudaMemory>(device, mutex);
  }
  // Not when its memory pool cannot be created: nodes then run eagerly.
  static std::unique_ptr<Resident> resident(Device& device, std::mutex& mutex, const config::Config& cfg) {
    auto resident = std::make_unique<Resident>(device, mutex, cfg, cuda::exiting);
    if (std::string no; !resident->device().open(no)) {
      log::write(log::Level::warn, "cuda: nodes run eagerly: %s", no.c_str());
      return nullptr;
    }
    return resident;
  }
};

class CudaBackend final : public DeviceBackend<CudaSpec> {
 public:
  Hint accelerator_hint(const config::Config&) const noexcept override { return gpu_inventory(); }
  // Device copies kept between nodes (resident.hpp) unless SOL_LAZY=0; proven on a GPU by
  // scripts/gpu/cuda_backend.sh's lazy section and lapack_bench.sh's sol-cuda-lazy row. Not
  // where CUDA could find no device: nothing can run here, and the lazy executor (which serves
  // large allocations) would start for nothing.
  bool runs_lazily() const noexcept override { return may_have_gpu(); }

  ~CudaBackend() override {
    // After exit() began the runtime may be gone: the device's objects go with the process.
    if (exiting() || ::getpid() != pid()) abandon();
  }

 private:
#if SOL_CUDA_CUDNN
  std::string describe_dnn() const override {
    std::lock_guard<std::mutex> lock(mutex());
    const std::string dnn = this->dnn()->describe();
    return dnn.empty() ? "" : ", " + dnn;
  }
#endif
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<CudaBackend>();
}

}  // namespace sol::backends::cuda
