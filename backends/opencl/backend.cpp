// hal::Backend for OpenCL: lazy initialisation, capability checks, and serialised execution on
// the one queue of the chosen device.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "backends/common/device_startup.hpp"
#include "backends/opencl/blas.hpp"
#include "backends/opencl/cost.hpp"
#include "backends/opencl/device.hpp"
#include "backends/opencl/dnn.hpp"
#include "backends/opencl/opencl.hpp"
#include "backends/opencl/program_cache.hpp"
#include "backends/opencl/resident.hpp"
#include "common/fs_safety.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "common/startup.hpp"
#include "config/config.hpp"
#include "hal/transfers.hpp"

namespace sol::backends::opencl {
namespace {

using hal::Reason;

// hal::DeviceMemory over OpenCL buffers: the pointers it hands out are cl_mem handles, valid only
// as arguments of this interface.
class ClMemory final : public hal::DeviceMemory {
 public:
  ClMemory(Device& device, std::mutex& mutex) : device_(device), mutex_(mutex) {}

  void* alloc(size_t bytes) noexcept override {
    cl_int err = CL_SUCCESS;
    return device_.cl().clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
  }
  void free(void* ptr) noexcept override {
    if (ptr) device_.cl().clReleaseMemObject(static_cast<cl_mem>(ptr));
  }
  bool copy_to_device(void* dst, const void* src, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_.cl().clEnqueueWriteBuffer(device_.queue(), static_cast<cl_mem>(dst), CL_TRUE, 0, bytes, src, 0,
                                          nullptr, nullptr) != CL_SUCCESS)
      return false;
    hal::transfers::to_device(bytes);
    return true;
  }
  bool copy_to_host(void* dst, const void* src, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_.cl().clEnqueueReadBuffer(device_.queue(), static_cast<cl_mem>(const_cast<void*>(src)), CL_TRUE, 0,
                                         bytes, dst, 0, nullptr, nullptr) != CL_SUCCESS)
      return false;
    hal::transfers::to_host(bytes);
    return true;
  }
  bool sync() noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    return device_.cl().clFinish(device_.queue()) == CL_SUCCESS;
  }

 private:
  Device& device_;
  std::mutex& mutex_;
};

// The cached answer to "is an OpenCL accelerator here?" (see accelerator_hint()).
class Inventory {
 public:
  // Not kept in a cache directory others could write: a planted answer would steer auto.
  explicit Inventory(const config::Config& cfg) : dir_(trusted_cache_dir(cfg.opencl_cache_dir)) {
    // Everything the answer depends on: where the ICD loader looks, what it finds there, and
    // which platform and device the configuration picks.
    std::string key = "platform=" + cfg.opencl_platform + "\ndevice=" + cfg.opencl_device + "\n";
    for (const char* var : {"OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH", "OCL_ICD_FILENAMES"})
      if (const char* v = std::getenv(var)) key += std::string(var) + "=" + v + "\n";
    const char* vendors = std::getenv("OCL_ICD_VENDORS");
    const std::string dir = vendors && *vendors && vendors[0] == '/' ? vendors : "/etc/OpenCL/vendors";
    if (DIR* d = ::opendir(dir.c_str())) {
      std::vector<std::string> entries;
      while (dirent* e = ::readdir(d)) {
        struct stat st;
        const std::string full = dir + "/" + e->d_name;
        if (e->d_name[0] != '.' && ::stat(full.c_str(), &st) == 0)
          entries.push_back(full + ":" + std::to_string(st.st_mtime) + ":" + std::to_string(st.st_size));
      }
      ::closedir(d);
      std::sort(entries.begin(), entries.end());
      for (const auto& e : entries) key += e + "\n";
    }
    key_ = std::to_string(std::hash<std::string>{}(key));
  }

  // What identifies the installed ICDs and the device selection (a hash).
  const std::string& key() const noexcept { return key_; }

  std::string line(bool accelerator) const {
    return key_ + (accelerator ? " accelerator\n" : " no-accelerator\n");
  }

  bool read(std::string& text) const {
    if (dir_.empty()) return false;
    const int fd = ::open(path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[256];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n <= 0) return false;
    text.assign(buf, static_cast<size_t>(n));
    return true;
  }

  // Atomically (temporary file, rename): processes may race to write the same answer.
  void write(bool accelerator) const {
    if (dir_.empty() || !fs_safety::make_private_dir(dir_).empty()) return;
    std::string error;
    fs_safety::replace_file(path(), line(accelerator), error);
  }

 private:
  std::string path() const { return dir_ + "/devices.v1"; }

  std::string dir_, key_;
};

// SOL_TEST_OPENCL_ACCELERATOR=1 makes the backend treat its device as an accelerator, so that
// tests on pocl's CPU device reach the accelerator path (measured costs, threshold, estimates).
// Not a configuration key. The inventory keeps the device's real answer: a process with the
// switch answers accelerator_hint() without reading it and init() writes what the device is.
bool test_forces_accelerator() noexcept {
  const char* v = std::getenv("SOL_TEST_OPENCL_ACCELERATOR");
  return v && std::strcmp(v, "1") == 0;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The cost cache of a device: keyed by everything the measured costs depend on (the device and its
// driver, the installed ICDs and the selection, and the CLBlast library whose GEMM is timed).
std::unique_ptr<CostCache> cost_cache_for(const config::Config& cfg, Device& device) {
  const Inventory inventory(cfg);
  const std::string key =
      device.identity() + '\n' + inventory.key() + '\n' +
      sol::library_identity(reinterpret_cast<const void*>(device.clblast().SgemmWithTempBuffer));
  return std::make_unique<CostCache>(trusted_cache_dir(cfg.opencl_cache_dir), key, kCostCacheHeader);
}

// Opens the device the configuration names and records in the inventory whether it is an
// accelerator (see accelerator_hint()).
bool open_device(const config::Config& cfg, std::unique_ptr<Device>& out, std::string& why) {
  auto device = std::make_unique<Device>();
  const bool ok = device->open(cfg, why);
  Inventory(cfg).write(ok && device->is_accelerator());
  if (ok) out = std::move(device);
  return ok;
}

// The device's start-up (libraries, platform, context, queue, CLBlast's GEMM programs from the
// disk cache, and for an accelerator whose threshold auto measures, its costs: from the disk
// cache, else measured), on a thread of its own (backends/common/device_startup.hpp). A backend
// the configuration names: its first call waits for what is left of it, not for all of it (about
// 60 ms of loading the ICD and LLVM on pocl, which a Python program spends importing its modules
// instead). Under auto it begins once the first routed BLAS call has returned, and no call waits:
// the router routes around the backend until the start-up is done, costs included. A child
// forked after it gets the parent's OpenCL state, which does not survive fork: init() in the child
// declines, as run() already does once the parent initialised.
struct Started : StartedDevice<Device> {
  explicit Started(const config::Config& c) : cfg(c) {}
  // The start-up's work (Startup::Work): only the thread warms up; a first call that starts the
  // device itself needs its own program, not every precision's.
  void open(bool background, const std::atomic<bool>& stop) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Device> dev;
    std::string reason;
    int loaded = 0;
    bool opened = false;
    try {
      opened = open_device(cfg, dev, reason);
      if (opened && background && !stop.load(std::memory_order_relaxed)) {
        const int before = ProgramCache::totals().loaded;
        blas_warm_up(*dev, stop);
        loaded = ProgramCache::totals().loaded - before;
        slow_if_asked(stop);
        // The first call would measure them, on the device it needs at once.
        if ((dev->is_accelerator() || test_forces_accelerator()) && cfg.opencl_min_flops <= 0 && cfg.uses_auto() &&
            !stop.load(std::memory_order_relaxed))
          costs_found = find_costs_ahead("opencl", dev->description(), *cost_cache_for(cfg, *dev), costs, costs_why,
                                         [&](Costs& out, std::string& why) { return measure_costs(*dev, out, why); });
      }
    } catch (const std::bad_alloc&) {
      opened = false;
      reason = "out of memory while initialising";
    } catch (...) {
      opened = false;
      reason = "unexpected error while initialising";
    }
    if (background && opened)
      SOL_LOG(debug, "opencl: device started ahead of the first call in %.1f ms (%d programs from the cache)",
              ms_since(t0), loaded);
    ok = opened;
    device = std::move(dev);
    why = std::move(reason);
  }
  // SOL_TEST_SLOW=opencl:startup: the start-up takes a second longer (a device that is slow to
  // come up), so that a test sees calls route around it. Not a configuration key.
  static void slow_if_asked(const std::atomic<bool>& stop) {
    const char* v = std::getenv("SOL_TEST_SLOW");
    const std::string knobs = "," + std::string(v ? v : "") + ",";
    if (knobs.find(",opencl:startup,") == std::string::npos) return;
    for (int i = 0; i < 100 && !stop.load(std::memory_order_relaxed); ++i) {
      const timespec ten_ms{0, 10 * 1000 * 1000};
      ::nanosleep(&ten_ms, nullptr);
    }
  }

  const config::Config cfg;
};

class OpenclBackend final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "opencl"; }
  bool device_backend() const noexcept override { return true; }
  bool runs_lazily() const noexcept override { return true; }

  // auto asks every process that calls BLAS whether an accelerator may be here. Finding out costs
  // about 40 ms and leaves driver threads behind (pocl), so the answer is kept in the cache
  // directory, keyed by the installed ICDs and the device selection: only the first process on a
  // machine (or after a driver change) pays for it.
  Hint accelerator_hint(const config::Config& cfg) const noexcept override {
    if (test_forces_accelerator()) return Hint::yes;
    try {
      std::string text, error;
      const Inventory inv(cfg);
      if (!inv.read(text)) return Hint::unknown;
      if (text == inv.line(true)) return Hint::yes;
      if (text == inv.line(false)) return Hint::no;
    } catch (...) {
    }
    return Hint::unknown;
  }

  // Starts the device on a thread of its own (see Started): once per process, from the main thread;
  // the thread begins once a library SOL intercepts is loaded when the configuration names opencl,
  // at start_now() under auto.
  void prepare(const config::Config& cfg, StartWhen when) noexcept override { startup_.prepare(cfg, when); }
  void start_now() noexcept override { startup_.start_now(); }
  bool starting() const noexcept override { return startup_.starting(); }

  bool init(const config::Config& cfg, std::string& why) noexcept override {
    try {
      std::unique_ptr<Device> device;
      Started* started = startup_.started();
      if (started ? !startup_.take(device, why, "OpenCL") : !open_device(cfg, device, why)) return false;
      accelerator_device_ = device->is_accelerator() || test_forces_accelerator();
      device_ = std::move(device);
      startup_.hand_costs(costs_, cost_cache_for(cfg, *device_), device_->description());
      dnn_ = std::make_unique<Dnn>(*device_);
      memory_ = std::make_unique<ClMemory>(*device_, mutex_);
      min_flops_ = static_cast<double>(cfg.opencl_min_flops);
      pid_ = ::getpid();
      if (capture::lazy::enabled()) {
        resident_ = std::make_unique<Resident>(*device_, mutex_, cfg);
        device_->set_resident(resident_.get());
        capture::lazy::attach(resident_.get());
        // Registered after the device's own exit handler, so it runs first: pending results are
        // written back while the device still works.
        std::atexit([] { capture::lazy::at_exit(); });
      }
      return true;
    } catch (const std::bad_alloc&) {
      why = "out of memory while initialising";
      return false;
    } catch (...) {
      why = "unexpected error while initialising";
      return false;
    }
  }

  // The device, and for an accelerator its costs once known (measured, or from the disk cache:
  // asking does not measure), or why measuring failed.
  std::string device() const override {
    if (!device_) return "not initialised";
    std::string d = device_->description();
    if (!accelerator_device_) return d;
    if (const Costs* c = costs(false)) return d + describe(*c);
    if (costs_.failed()) d += ", not used under auto: measuring it failed: " + costs_.why();
    return d;
  }

  // A CPU device (pocl) computes in host memory anyway; only a GPU or accelerator is worth the
  // size threshold under auto, and only while its costs could be measured.
  bool accelerator() const noexcept override { return device_ && accelerator_device_ && !costs_.failed(); }

  // An explicit backends.opencl.min_flops, else the measured break-even size (break_even_flops):
  // the first call measures the device unless the disk cache has its costs. 0 when the device is
  // no accelerator or measuring failed.
  double min_flops() const noexcept override {
    if (min_flops_ > 0) return min_flops_;
    return accelerator() && costs(true) ? costs_.break_even() : 0;
  }

  // predict_seconds() over the measured costs, for the BLAS nodes this backend runs. With an
  // explicit threshold the device is never measured: costs from the disk cache only.
  double estimate_seconds(const capture::Node& node, double flops) const noexcept override {
    if (!accelerator() || blas_supports(*device_, node) != Reason::ok) return -1;
    const Costs* c = costs(min_flops_ <= 0);
    return c ? predict_seconds(*c, node, flops) : -1;
  }

  Reason supports(const capture::Node& node) const noexcept override {
    if (!device_) return Reason::unavailable;
    return is_dnn_node(node) ? dnn_->supports(node) : blas_supports(*device_, node);
  }

  Reason run(capture::Node& node) noexcept override {
    if (!device_) return Reason::unavailable;
    const bool dnn = is_dnn_node(node);
    if (Reason r = dnn ? dnn_->supports(node) : blas_supports(*device_, node); r != Reason::ok) return r;
    // An OpenCL context does not survive fork(): the child has none of the driver's threads.
    if (::getpid() != pid_) {
      log::once(log::Level::info, "opencl: fork",
                "opencl: not used in a forked child (OpenCL state does not survive fork)");
      return Reason::forked;
    }
    if (process_exiting()) return Reason::exiting;
    Resident::Lock lock(mutex_);
    const bool lazy = resident_ && resident_->active();
    hal::transfers::note_eager(nullptr);  // set again if this node cannot wait
    Reason r;
    try {
      r = dnn ? dnn_->run(node) : blas_run(*device_, node);
    } catch (const std::bad_alloc&) {
      r = Reason::out_of_memory;
    } catch (...) {
      r = Reason::internal_error;
    }
    // Eagerly, a node is a flush of its own; lazily, the Job (BLAS or DNN) says whether it waited.
    if (r == Reason::ok && !lazy) hal::transfers::flushed(hal::transfers::Cause::eager);
    device_->release_larger_than(kKeepBytes);
    return r;
  }

  hal::DeviceMemory* memory() noexcept override { return memory_.get(); }

 private:
  static constexpr size_t kKeepBytes = size_t{64} << 20;  // buffers reused between calls, each

  // The device's costs: known, else from the disk cache, else measured now when `may_measure`
  // (never in a forked child, which has no usable context, nor in an exiting process). Measuring
  // holds the queue's lock: run() waits meanwhile.
  const Costs* costs(bool may_measure) const noexcept {
    if (!device_) return nullptr;
    return costs_.get(may_measure && ::getpid() == pid_ && !process_exiting(), mutex_, device_->description(),
                      [&](Costs& out, std::string& why) { return measure_costs(*device_, out, why); });
  }

  DeviceStartup<Started> startup_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Dnn> dnn_;
  std::unique_ptr<ClMemory> memory_;
  std::unique_ptr<Resident> resident_;  // lazily: the device copies kept between nodes
  mutable std::mutex mutex_;         // one queue and one set of staging buffers: calls run one at a time
  bool accelerator_device_ = false;  // a GPU or accelerator, or a test says so
  double min_flops_ = 0;             // backends.opencl.min_flops: an explicit threshold when > 0
  pid_t pid_ = 0;

  mutable KnownCosts costs_{"opencl"};  // written under mutex_
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<OpenclBackend>();
}

}  // namespace sol::backends::opencl
