// hal::Backend for CUDA: lazy initialisation (the libraries are opened by the first node, never
// at program start), capability checks, and serialised execution on the backend's own stream.
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "backends/common/device_startup.hpp"
#include "backends/cuda/blas.hpp"
#include "backends/cuda/cost.hpp"
#include "backends/cuda/device.hpp"
#if SOL_CUDA_CUDNN
#include "backends/cuda/dnn.hpp"
#endif
#include "backends/cuda/resident.hpp"
#include "capture/blas/blas.hpp"
#include "capture/lazy/coherence.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "hal/profile.hpp"
#include "hal/transfers.hpp"

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
class CudaMemory final : public hal::DeviceMemory {
 public:
  CudaMemory(Device& device, std::mutex& mutex) : device_(device), mutex_(mutex) {}

  void* alloc(size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = nullptr;
    if (device_.make_current() != cudaSuccess || device_.rt().cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
      return nullptr;
    return p;
  }
  void free(void* ptr) noexcept override {
    if (!ptr || g_exiting.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    device_.rt().cudaFree(ptr);
  }
  bool copy_to_device(void* dst, const void* src, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!copy(dst, src, bytes, cudaMemcpyHostToDevice)) return false;
    hal::transfers::to_device(bytes);
    return true;
  }
  bool copy_to_host(void* dst, const void* src, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!copy(dst, src, bytes, cudaMemcpyDeviceToHost)) return false;
    hal::transfers::to_host(bytes);
    return true;
  }
  bool sync() noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    return device_.rt().cudaStreamSynchronize(device_.stream()) == cudaSuccess;
  }

 private:
  bool copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) noexcept {
    const CudartApi& rt = device_.rt();
    return device_.make_current() == cudaSuccess &&
           rt.cudaMemcpyAsync(dst, src, bytes, kind, device_.stream()) == cudaSuccess &&
           rt.cudaStreamSynchronize(device_.stream()) == cudaSuccess;
  }

  Device& device_;
  std::mutex& mutex_;
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

// The device's measured costs on disk, in the profile directory: keyed by the device (its slot
// included) and the driver and cuBLAS that the figures were measured with.
std::unique_ptr<CostCache> cost_cache_for(const config::Config& cfg, const Device& device) {
  return std::make_unique<CostCache>(hal::profile::profile_dir(cfg), device.identity(), kCostCacheHeader);
}

constexpr size_t kKeepBytes = size_t{64} << 20;  // device buffers reused between calls, each

// Measures the device's costs now (its stream idle, nobody else using it).
bool measure_now(Device& device, Costs& out, std::string& why) {
  const bool ok = device.make_current() == cudaSuccess && measure_costs(device, out, why);
  device.release_larger_than(kKeepBytes);
  if (!ok && why.empty()) why = "cudaSetDevice failed";
  return ok;
}

// The device's start-up (the CUDA context, cuBLAS, and under auto unless a threshold is configured
// the costs: 0.3 s and 0.45 s to measure on an H200), on a thread of its own
// (backends/common/device_startup.hpp). Under auto it begins once the first routed BLAS call has
// returned, and the router routes every call around the backend until it is done: no call waits
// for the GPU to come up, and a process that never calls BLAS creates no CUDA context.
struct Started : StartedDevice<Device> {
  explicit Started(const config::Config& c) : cfg(c) {}
  void open(bool background, const std::atomic<bool>& stop) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto dev = std::make_unique<Device>();
      ok = dev->open(why);
      if (!ok) return;
      hook_exit();
      if (background && cfg.cuda_min_flops <= 0 && cfg.uses_auto() && !stop.load(std::memory_order_relaxed))
        costs_found = find_costs_ahead("cuda", dev->description(), *cost_cache_for(cfg, *dev), costs, costs_why,
                                       [&](Costs& out, std::string& w) { return measure_now(*dev, out, w); });
      device = std::move(dev);
      if (background)
        SOL_LOG(debug, "cuda: device started ahead of the first call in %.1f ms",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    } catch (const std::bad_alloc&) {
      ok = false;
      why = "out of memory while initialising";
    } catch (...) {
      ok = false;
      why = "unexpected error while initialising";
    }
  }

  const config::Config cfg;
};

class CudaBackend final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "cuda"; }
  bool device_backend() const noexcept override { return true; }
  Hint accelerator_hint(const config::Config&) const noexcept override { return gpu_inventory(); }
  // Device copies kept between nodes (resident.hpp) unless SOL_LAZY=0; proven on a GPU by
  // scripts/gpu/cuda_backend.sh's lazy section and lapack_bench.sh's sol-cuda-lazy row. Not
  // where CUDA could find no device: nothing can run here, and the lazy executor (which serves
  // large allocations) would start for nothing.
  bool runs_lazily() const noexcept override { return may_have_gpu(); }

  // Starts the device on a thread of its own (see Started): once a library SOL intercepts is
  // loaded when the configuration names cuda, at start_now() under auto.
  void prepare(const config::Config& cfg, StartWhen when) noexcept override { startup_.prepare(cfg, when); }
  void start_now() noexcept override { startup_.start_now(); }
  bool starting() const noexcept override { return startup_.starting(); }

  bool init(const config::Config& cfg, std::string& why) noexcept override {
    try {
      std::unique_ptr<Device> device;
      if (startup_.started()) {
        if (!startup_.take(device, why, "CUDA")) return false;
      } else {
        device = std::make_unique<Device>();
        if (!device->open(why)) return false;
        hook_exit();
      }
      device_ = std::move(device);
      pid_ = ::getpid();
      startup_.hand_costs(costs_, cost_cache_for(cfg, *device_), device_->description());
      memory_ = std::make_unique<CudaMemory>(*device_, mutex_);
#if SOL_CUDA_CUDNN
      dnn_ = std::make_unique<Dnn>(*device_);
#endif
      min_flops_ = static_cast<double>(cfg.cuda_min_flops);
      if (capture::lazy::enabled()) {
        auto resident = std::make_unique<Resident>(*device_, mutex_, cfg, exiting);
        if (std::string no; !resident->device().open(no)) {
          log::write(log::Level::warn, "cuda: nodes run eagerly: %s", no.c_str());
        } else {
          resident_ = std::move(resident);
          device_->set_resident(resident_.get());
          capture::lazy::attach(resident_.get());
          // Registered after the device's exit handler, so it runs first: pending results are
          // written back while the device still works.
          std::atexit([] { capture::lazy::at_exit(); });
        }
      }
      return true;
    } catch (const std::bad_alloc&) {
      why = "out of memory while initialising";
    } catch (...) {
      why = "unexpected error while initialising";
    }
    return false;
  }

  ~CudaBackend() override {
    // After exit() began the runtime may be gone: the device's objects go with the process.
    if (g_exiting.load(std::memory_order_acquire) || ::getpid() != pid_) {
      resident_.release();
#if SOL_CUDA_CUDNN
      dnn_.release();
#endif
      memory_.release();
      device_.release();
    }
  }

  std::string device() const override {
    if (!device_) return "not initialised";
    std::string d = device_->description();
#if SOL_CUDA_CUDNN
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (std::string dnn = dnn_->describe(); !dnn.empty()) d += ", " + dnn;
    }
#endif
    if (const Costs* c = costs(false)) return d + describe(*c);
    if (costs_.failed()) d += ", not used under auto: measuring it failed: " + costs_.why();
    return d;
  }

  // A GPU, while its costs could be measured (or were never needed: an explicit threshold).
  bool accelerator() const noexcept override { return device_ && !costs_.failed(); }

  // An explicit backends.cuda.min_flops, else the measured break-even size.
  double min_flops() const noexcept override {
    if (min_flops_ > 0) return min_flops_;
    return accelerator() && costs(true) ? costs_.break_even() : 0;
  }

  double estimate_seconds(const capture::Node& node, double flops) const noexcept override {
    if (!accelerator() || blas_supports(*device_, node) != Reason::ok) return -1;
    const Costs* c = costs(min_flops_ <= 0);
    return c ? predict_seconds(*c, node, flops) : -1;
  }

  Reason supports(const capture::Node& node) const noexcept override {
    if (!device_) return Reason::unavailable;
    if (std::strcmp(capture::op_family(node.op), "dnn") == 0) {
#if SOL_CUDA_CUDNN
      return dnn_->supports(node);
#else
      return Reason::op_unsupported;  // built without cuDNN's headers (cudnn.h)
#endif
    }
    return blas_supports(*device_, node);
  }

  Reason run(capture::Node& node) noexcept override {
    if (Reason r = supports(node); r != Reason::ok) return r;
    // A CUDA context does not survive fork(): the child has none of the driver's state.
    if (::getpid() != pid_) {
      log::once(log::Level::info, "cuda: fork", "cuda: not used in a forked child (CUDA state does not survive fork)");
      return Reason::forked;
    }
    if (g_exiting.load(std::memory_order_acquire)) return Reason::exiting;
    ResidentLock lock(mutex_);
    if (cudaError_t err = device_->make_current(); err != cudaSuccess) {
      SOL_LOG(debug, "cuda: cudaSetDevice failed: %s", error_text(device_->rt(), err).c_str());
      return Reason::device_error;
    }
    const bool lazy = resident_ && resident_->active();
    if (lazy) hal::transfers::note_eager(nullptr);  // set again if this node cannot wait
    Reason r;
    try {
#if SOL_CUDA_CUDNN
      if (std::strcmp(capture::op_family(node.op), "dnn") == 0) {
        // cuDNN nodes run eagerly on the host's memory: every result comes back and every copy
        // goes first, so that they read current data and their writes meet open pages.
        if (lazy) resident_->settle();
        r = dnn_->run(node);
        if (r == Reason::ok && lazy) hal::transfers::flushed(hal::transfers::Cause::eager);
      } else
#endif
        r = blas_run(*device_, node);
    } catch (const std::bad_alloc&) {
      r = Reason::out_of_memory;
    } catch (...) {
      r = Reason::internal_error;
    }
    // Eagerly, each node is a flush of its own, which the executor leaves to the device backend
    // to count; lazily, the Job says whether it waited.
    if (r == Reason::ok && !lazy) hal::transfers::flushed(hal::transfers::Cause::eager);
    device_->release_larger_than(kKeepBytes);
    return r;
  }

  hal::DeviceMemory* memory() noexcept override { return memory_.get(); }

 private:
  // The device's costs: known, else from the disk cache, else measured now when `may_measure`
  // (never in a forked child, which has no CUDA state, nor once exit() began). Measuring holds the
  // stream's lock: run() waits meanwhile.
  const Costs* costs(bool may_measure) const noexcept {
    if (!device_) return nullptr;
    return costs_.get(may_measure && ::getpid() == pid_ && !g_exiting.load(std::memory_order_acquire), mutex_,
                      device_->description(),
                      [&](Costs& out, std::string& why) { return measure_now(*device_, out, why); });
  }

  DeviceStartup<Started> startup_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<CudaMemory> memory_;
  std::unique_ptr<Resident> resident_;  // lazily: the device copies kept between nodes (destroyed before device_)
#if SOL_CUDA_CUDNN
  std::unique_ptr<Dnn> dnn_;  // destroyed before device_
#endif
  mutable std::mutex mutex_;  // one stream, one cuBLAS handle, one set of buffers: one call at a time
  double min_flops_ = 0;      // backends.cuda.min_flops: an explicit threshold when > 0
  pid_t pid_ = 0;

  mutable KnownCosts costs_{"cuda"};  // written under mutex_
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<CudaBackend>();
}

}  // namespace sol::backends::cuda
