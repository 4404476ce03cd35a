// hal::Backend for OpenCL: lazy initialisation, capability checks, and serialised execution on
// the one queue of the chosen device.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "backends/opencl/blas.hpp"
#include "backends/opencl/device.hpp"
#include "backends/opencl/dnn.hpp"
#include "backends/opencl/opencl.hpp"
#include "backends/opencl/program_cache.hpp"
#include "common/fs_safety.hpp"
#include "common/log.hpp"
#include "config/config.hpp"

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
    return device_.cl().clEnqueueWriteBuffer(device_.queue(), static_cast<cl_mem>(dst), CL_TRUE, 0, bytes,
                                             src, 0, nullptr, nullptr) == CL_SUCCESS;
  }
  bool copy_to_host(void* dst, const void* src, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    return device_.cl().clEnqueueReadBuffer(device_.queue(), static_cast<cl_mem>(const_cast<void*>(src)),
                                            CL_TRUE, 0, bytes, dst, 0, nullptr, nullptr) == CL_SUCCESS;
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
    const std::string tmp = path() + ".tmp" + std::to_string(::getpid());
    std::string error;
    const int fd = fs_safety::open_new_private(tmp, 0, error);
    if (fd < 0) return;
    const std::string text = line(accelerator);
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path().c_str()) != 0) ::unlink(tmp.c_str());
  }

 private:
  std::string path() const { return dir_ + "/devices.v1"; }

  std::string dir_, key_;
};

class OpenclBackend final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "opencl"; }

  // auto asks every process that calls BLAS whether an accelerator may be here. Finding out costs
  // about 40 ms and leaves driver threads behind (pocl), so the answer is kept in the cache
  // directory, keyed by the installed ICDs and the device selection: only the first process on a
  // machine (or after a driver change) pays for it.
  Hint accelerator_hint(const config::Config& cfg) const noexcept override {
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

  bool init(const config::Config& cfg, std::string& why) noexcept override {
    try {
      auto device = std::make_unique<Device>();
      const bool ok = device->open(cfg, why);
      Inventory(cfg).write(ok && device->is_accelerator());
      if (!ok) return false;
      device_ = std::move(device);
      dnn_ = std::make_unique<Dnn>(*device_);
      memory_ = std::make_unique<ClMemory>(*device_, mutex_);
      min_flops_ = static_cast<double>(cfg.opencl_min_flops);
      pid_ = ::getpid();
      return true;
    } catch (const std::bad_alloc&) {
      why = "out of memory while initialising";
      return false;
    } catch (...) {
      why = "unexpected error while initialising";
      return false;
    }
  }

  std::string device() const override { return device_ ? device_->description() : "not initialised"; }

  // A CPU device (pocl) computes in host memory anyway; only a GPU or accelerator is worth the
  // size threshold under auto.
  bool accelerator() const noexcept override { return device_ && device_->is_accelerator(); }
  double min_flops() const noexcept override { return min_flops_; }

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
      return Reason::device_error;
    }
    if (process_exiting()) return Reason::device_error;
    std::lock_guard<std::mutex> lock(mutex_);
    Reason r;
    try {
      r = dnn ? dnn_->run(node) : blas_run(*device_, node);
    } catch (const std::bad_alloc&) {
      r = Reason::out_of_memory;
    } catch (...) {
      r = Reason::internal_error;
    }
    device_->release_larger_than(kKeepBytes);
    return r;
  }

  hal::DeviceMemory* memory() noexcept override { return memory_.get(); }

 private:
  static constexpr size_t kKeepBytes = size_t{64} << 20;  // buffers reused between calls, each

  std::unique_ptr<Device> device_;
  std::unique_ptr<Dnn> dnn_;
  std::unique_ptr<ClMemory> memory_;
  std::mutex mutex_;  // one queue and one set of staging buffers: calls run one at a time
  double min_flops_ = 0;
  pid_t pid_ = 0;
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<OpenclBackend>();
}

}  // namespace sol::backends::opencl
