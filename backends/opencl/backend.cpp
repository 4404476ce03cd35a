// hal::Backend for OpenCL: backends/common/device_backend.hpp's skeleton with the OpenCL device,
// its memory, and the cached answer to whether an accelerator is here.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/common/device_backend.hpp"
#include "backends/opencl/blas.hpp"
#include "backends/opencl/device.hpp"
#include "backends/opencl/dnn.hpp"
#include "backends/opencl/opencl.hpp"
#include "backends/opencl/program_cache.hpp"
#include "backends/opencl/resident.hpp"
#include "common/fs_safety.hpp"
#include "common/native.hpp"
#include "config/config.hpp"

namespace sol::backends::opencl {
namespace {

using hal::Reason;

// hal::DeviceMemory over OpenCL buffers: the pointers it hands out are cl_mem handles, valid only
// as arguments of this interface.
class ClMemory final : public LockedDeviceMemory {
 public:
  ClMemory(Device& device, std::mutex& mutex) : LockedDeviceMemory(mutex), device_(device) {}

  void* alloc(size_t bytes) noexcept override {
    cl_int err = CL_SUCCESS;
    return device_.cl().clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
  }
  void free(void* ptr) noexcept override {
    if (ptr) device_.cl().clReleaseMemObject(static_cast<cl_mem>(ptr));
  }

 private:
  bool upload(void* dst, const void* src, size_t bytes) noexcept override {
    return device_.cl().clEnqueueWriteBuffer(device_.queue(), static_cast<cl_mem>(dst), CL_TRUE, 0, bytes,
                                             src, 0, nullptr, nullptr) == CL_SUCCESS;
  }
  bool download(void* dst, const void* src, size_t bytes) noexcept override {
    return device_.cl().clEnqueueReadBuffer(device_.queue(), static_cast<cl_mem>(const_cast<void*>(src)),
                                            CL_TRUE, 0, bytes, dst, 0, nullptr, nullptr) == CL_SUCCESS;
  }
  bool wait() noexcept override { return device_.cl().clFinish(device_.queue()) == CL_SUCCESS; }

  Device& device_;
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

// SOL_TEST_SLOW=opencl:startup: the start-up takes a second longer (a device that is slow to come
// up), so that a test sees calls route around it. Not a configuration key.
void slow_if_asked(const std::atomic<bool>& stop) {
  const char* v = std::getenv("SOL_TEST_SLOW");
  const std::string knobs = "," + std::string(v ? v : "") + ",";
  if (knobs.find(",opencl:startup,") == std::string::npos) return;
  for (int i = 0; i < 100 && !stop.load(std::memory_order_relaxed); ++i) {
    const timespec ten_ms{0, 10 * 1000 * 1000};
    ::nanosleep(&ten_ms, nullptr);
  }
}

// What the opencl backend plugs into DeviceBackend (backends/common/device_backend.hpp). Its
// start-up on a thread of its own loads the libraries, picks the platform and creates the context
// and queue, loads CLBlast's GEMM programs from the disk cache and, for an accelerator whose
// threshold auto measures, its costs: from the disk cache, else measured. A backend the
// configuration names: its first call waits for what is left of it, not for all of it (about 60 ms
// of loading the ICD and LLVM on pocl, which a Python program spends importing its modules
// instead). Under auto it begins once the first routed BLAS call has returned, and no call waits:
// the router routes around the backend until the start-up is done, costs included.
struct OpenclSpec {
  using Device = opencl::Device;
  using Resident = opencl::Resident;
  using Dnn = opencl::Dnn;
  static constexpr const char* kName = "opencl";
  static constexpr const char* kApi = "OpenCL";

  // Opens the device the configuration names and records in the inventory whether it is an
  // accelerator (see OpenclBackend::accelerator_hint()).
  static bool open(const config::Config& cfg, std::unique_ptr<Device>& out, std::string& why) {
    auto device = std::make_unique<Device>();
    const bool ok = device->open(cfg, why);
    Inventory(cfg).write(ok && device->is_accelerator());
    if (ok) out = std::move(device);
    return ok;
  }
  static std::string warm_up(Device& device, const std::atomic<bool>& stop) {
    const int before = ProgramCache::totals().loaded;
    blas_warm_up(device, stop);
    const int loaded = ProgramCache::totals().loaded - before;
    slow_if_asked(stop);
    return " (" + std::to_string(loaded) + " programs from the cache)";
  }
  // A CPU device (pocl) computes in host memory anyway: only a GPU or accelerator, or a test's.
  static bool is_accelerator(const Device& device) {
    return device.is_accelerator() || test_forces_accelerator();
  }
  static double min_flops(const config::Config& cfg) { return static_cast<double>(cfg.opencl_min_flops); }
  // Keyed by everything the measured costs depend on: the device and its driver, the installed
  // ICDs and the selection, and the CLBlast library whose GEMM is timed.
  static std::unique_ptr<CostCache> cost_cache(const config::Config& cfg, const Device& device) {
    const std::string key =
        device.identity() + '\n' + Inventory(cfg).key() + '\n' +
        sol::library_identity(reinterpret_cast<const void*>(device.clblast().SgemmWithTempBuffer));
    return std::make_unique<CostCache>(trusted_cache_dir(cfg.opencl_cache_dir), key,
                                       "sol opencl device costs v1");
  }
  static bool measure(Device& device, DeviceCosts& out, std::string& why) {
    return device.measure_costs(out, why);
  }
  static constexpr auto exiting = &process_exiting;
  static hal::Reason ready(Device&) noexcept { return hal::Reason::ok; }
  static constexpr auto blas_supports = &opencl::blas_supports;
  static constexpr auto blas_run = &opencl::blas_run;
  static std::unique_ptr<hal::DeviceMemory> memory(Device& device, std::mutex& mutex) {
    return std::make_unique<ClMemory>(device, mutex);
  }
  static std::unique_ptr<Resident> resident(Device& device, std::mutex& mutex, const config::Config& cfg) {
    return std::make_unique<Resident>(device, mutex, cfg);
  }
};

class OpenclBackend final : public DeviceBackend<OpenclSpec> {
 public:
  bool runs_lazily() const noexcept override { return true; }

  // auto asks every process that calls BLAS whether an accelerator may be here. Finding out costs
  // about 40 ms and leaves driver threads behind (pocl), so the answer is kept in the cache
  // directory, keyed by the installed ICDs and the device selection: only the first process on a
  // machine (or after a driver change) pays for it.
  Hint accelerator_hint(const config::Config& cfg) const noexcept override {
    if (test_forces_accelerator()) return Hint::yes;
    try {
      std::string text;
      const Inventory inv(cfg);
      if (!inv.read(text)) return Hint::unknown;
      if (text == inv.line(true)) return Hint::yes;
      if (text == inv.line(false)) return Hint::no;
    } catch (...) {
    }
    return Hint::unknown;
  }
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<OpenclBackend>();
}

}  // namespace sol::backends::opencl
