// The hal::Backend of a device backend (opencl, cuda): everything they do alike, once. A device
// backend is DeviceBackend<Spec> plus what only it knows (accelerator_hint(), runs_lazily()); Spec
// gives its device and the few calls that differ, as static member functions or function pointers
// (the start-up thread calls them too, never the backend object):
//
//   using Device    its device: a DeviceBase (device_base.hpp) with release_larger_than(bytes)
//   using Resident  its lazy executor's copies (backends/common/resident.hpp)
//   using Dnn       its DNN nodes: Dnn(Device&), supports(node), run(node) (under the lock)
//   kName, kApi     "opencl", "OpenCL": the backend's name (its messages' prefix) and the device's
//                   API (in reasons)
//   open(cfg, out, why)           opens the device the configuration names; false with `why`
//   warm_up(device, stop)         on the start-up thread, once the device is open: readies what a
//                                 first call needs; words for the debug line ("" or " (...)")
//   is_accelerator(device)        a GPU or accelerator: auto's threshold and costs apply
//   min_flops(cfg)                backends.<name>.min_flops: an explicit threshold when > 0
//   cost_cache(cfg, device)       where its measured costs are kept (device_costs.hpp)
//   measure(device, costs, why)   measures them, its queue idle
//   exiting()                     exit() has begun: the device runs nothing more
//   ready(device)                 under the lock, before a node: Reason::ok or why not
//   blas_supports(device, node), blas_run(device, node)
//   memory(device, mutex)         its hal::DeviceMemory
//   resident(device, mutex, cfg)  its lazy executor's copies, or nullptr (nodes then run eagerly)
//
// What the skeleton does: the start-up on a thread of its own (device_startup.hpp's
// DeviceStarted calls open(), warm_up() and, under auto, the costs' functions), init() from it or
// inline, the costs (device_costs.hpp: from the start-up, the disk cache, or measured at their
// first need), the lazy executor's attachment, and run(): declined in a forked child (a device
// context does not survive fork) and once exit() began, one node at a time under the device's
// lock, exceptions turned into reasons, an eager node counted as a flush of its own, and large
// buffers given back after each node.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>

#include "backends/common/device_costs.hpp"
#include "backends/common/device_operand.hpp"
#include "backends/common/device_startup.hpp"
#include "backends/common/resident.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "hal/backend.hpp"
#include "hal/coherence.hpp"
#include "hal/transfers.hpp"
#include "ir/node.hpp"

namespace sol::backends {

// Device buffers reused between calls are kept up to this size, each; larger ones are given back
// after the node (one large call should not pin its memory for the process's life).
inline constexpr size_t kKeepDeviceBytes = size_t{64} << 20;

// Whether a node is of the "dnn" family (those go to the backend's Dnn, the rest are BLAS).
inline bool is_dnn_node(const capture::Node& node) noexcept {
  return std::string_view(capture::op_family(node.op)) == "dnn";
}

// hal::DeviceMemory of a device backend: copies and waits under the backend's lock, counted as
// transfers. The device's own calls are the hooks; allocation is the device's business.
class LockedDeviceMemory : public hal::DeviceMemory {
 public:
  explicit LockedDeviceMemory(std::mutex& mutex) noexcept : mutex_(mutex) {}

  bool copy_to_device(void* dst, const void* src, size_t bytes) noexcept final {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!upload(dst, src, bytes)) return false;
    hal::transfers::to_device(bytes);
    return true;
  }
  bool copy_to_host(void* dst, const void* src, size_t bytes) noexcept final {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!download(dst, src, bytes)) return false;
    hal::transfers::to_host(bytes);
    return true;
  }
  bool sync() noexcept final {
    std::lock_guard<std::mutex> lock(mutex_);
    return wait();
  }

 protected:
  // Under the lock; each waits for its copy.
  virtual bool upload(void* dst, const void* src, size_t bytes) noexcept = 0;
  virtual bool download(void* dst, const void* src, size_t bytes) noexcept = 0;
  virtual bool wait() noexcept = 0;

  std::mutex& mutex_;
};

template <class Spec>
class DeviceBackend : public hal::Backend {
 public:
  using Device = typename Spec::Device;
  using Resident = typename Spec::Resident;
  using Dnn = typename Spec::Dnn;

  const char* name() const noexcept override { return Spec::kName; }
  bool device_backend() const noexcept override { return true; }

  // Starts the device on a thread of its own (DeviceStarted): once a library SOL intercepts is
  // loaded when the configuration names the backend, at start_now() under auto.
  void prepare(const config::Config& cfg, StartWhen when) noexcept override { startup_.prepare(cfg, when); }
  void start_now() noexcept override { startup_.start_now(); }
  bool starting() const noexcept override { return startup_.starting(); }

  bool init(const config::Config& cfg, std::string& why) noexcept override {
    try {
      std::unique_ptr<Device> device;
      if (startup_.started() ? !startup_.take(device, why, Spec::kApi) : !Spec::open(cfg, device, why))
        return false;
      accelerator_device_ = Spec::is_accelerator(*device);
      device_ = std::move(device);
      pid_ = ::getpid();
      startup_.hand_costs(costs_, Spec::cost_cache(cfg, *device_), device_->description());
      memory_ = Spec::memory(*device_, mutex_);
      dnn_ = std::make_unique<Dnn>(*device_);
      min_flops_ = Spec::min_flops(cfg);
      if (hal::coherence::active()) attach_resident(cfg);
      return true;
    } catch (const std::bad_alloc&) {
      why = "out of memory while initialising";
    } catch (...) {
      why = "unexpected error while initialising";
    }
    return false;
  }

  // The device, what describe_dnn() adds, and for an accelerator its costs once known (measured,
  // or from the disk cache: asking does not measure), or why measuring failed.
  std::string device() const override {
    if (!device_) return "not initialised";
    std::string d = device_->description() + describe_dnn();
    if (!accelerator_device_) return d;
    if (const DeviceCosts* c = costs(false)) return d + describe(*c);
    if (costs_.failed()) d += ", not used under auto: measuring it failed: " + costs_.why();
    return d;
  }

  // Only a GPU or accelerator is worth the size threshold under auto (a CPU device computes in
  // host memory anyway), and only while its costs could be measured.
  bool accelerator() const noexcept override { return device_ && accelerator_device_ && !costs_.failed(); }

  // An explicit threshold, else the measured break-even size (break_even_flops): the first call
  // measures the device unless the disk cache has its costs. 0 when the device is no accelerator
  // or measuring failed.
  double min_flops() const noexcept override {
    if (min_flops_ > 0) return min_flops_;
    return accelerator() && costs(true) ? costs_.break_even() : 0;
  }

  // predict_seconds() over the measured costs, for the BLAS nodes this backend runs. With an
  // explicit threshold the device is never measured: costs from the disk cache only.
  double estimate_seconds(const capture::Node& node, double flops) const noexcept override {
    if (!accelerator() || Spec::blas_supports(*device_, node) != hal::Reason::ok) return -1;
    const DeviceCosts* c = costs(min_flops_ <= 0);
    return c ? predict_seconds(*c, node, flops) : -1;
  }

  hal::Reason supports(const capture::Node& node) const noexcept override {
    if (!device_) return hal::Reason::unavailable;
    return is_dnn_node(node) ? dnn_->supports(node) : Spec::blas_supports(*device_, node);
  }

  hal::Reason run(capture::Node& node) noexcept override {
    if (hal::Reason r = supports(node); r != hal::Reason::ok) return r;
    if (::getpid() != pid_) return forked();
    if (Spec::exiting()) return hal::Reason::exiting;
    ResidentLock lock(mutex_);
    if (hal::Reason r = Spec::ready(*device_); r != hal::Reason::ok) return r;
    const bool lazy = resident_ && resident_->active();
    if (lazy) hal::transfers::note_eager(nullptr);  // set again if this node cannot wait
    hal::Reason r;
    try {
      r = is_dnn_node(node) ? dnn_->run(node) : Spec::blas_run(*device_, node);
    } catch (const std::bad_alloc&) {
      r = hal::Reason::out_of_memory;
    } catch (...) {
      r = hal::Reason::internal_error;
    }
    // Eagerly, each node is a flush of its own, which the executor leaves to the device backend
    // to count; lazily, the node's job says whether it waited.
    if (r == hal::Reason::ok && !lazy) hal::transfers::flushed(hal::transfers::Cause::eager);
    device_->release_larger_than(kKeepDeviceBytes);
    return r;
  }

  hal::DeviceMemory* memory() noexcept override { return memory_.get(); }

 protected:
  // What the DNN library adds to the device's description (", cuDNN 9.1.0 (...)").
  virtual std::string describe_dnn() const { return ""; }

  // Once the device's runtime may be gone (exit() began, or a forked child): its objects go with
  // the process instead of being destroyed.
  void abandon() noexcept {
    resident_.release();
    dnn_.release();
    memory_.release();
    device_.release();
  }

  const Dnn* dnn() const noexcept { return dnn_.get(); }
  pid_t pid() const noexcept { return pid_; }
  std::mutex& mutex() const noexcept { return mutex_; }

 private:
  hal::Reason forked() const noexcept {
    char cause[32];  // "opencl: fork": one line per backend
    std::snprintf(cause, sizeof cause, "%s: fork", Spec::kName);
    log::once(log::Level::info, cause, "%s: not used in a forked child (%s state does not survive fork)",
              Spec::kName, Spec::kApi);
    return hal::Reason::forked;
  }

  void attach_resident(const config::Config& cfg) {
    resident_ = Spec::resident(*device_, mutex_, cfg);
    if (!resident_) return;
    device_->set_resident(resident_.get());
    hal::coherence::layer()->attach(resident_.get());
    // Registered after the device's own exit handler, so it runs first: pending results are
    // written back while the device still works.
    std::atexit([] { hal::coherence::layer()->at_exit(); });
  }

  // The device's costs: known, else from the disk cache, else measured now when `may_measure`
  // (never in a forked child, which has no usable device, nor once exit() began). Measuring holds
  // the device's lock: run() waits meanwhile.
  const DeviceCosts* costs(bool may_measure) const noexcept {
    if (!device_) return nullptr;
    return costs_.get(may_measure && ::getpid() == pid_ && !Spec::exiting(), mutex_, device_->description(),
                      [&](DeviceCosts& out, std::string& why) { return Spec::measure(*device_, out, why); });
  }

  DeviceStartup<DeviceStarted<Spec>> startup_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<hal::DeviceMemory> memory_;
  std::unique_ptr<Resident> resident_;  // lazily: the device copies kept between nodes (before device_ goes)
  std::unique_ptr<Dnn> dnn_;            // destroyed before device_
  mutable std::mutex mutex_;            // one queue, one set of buffers: one node at a time
  bool accelerator_device_ = false;
  double min_flops_ = 0;  // backends.<name>.min_flops: an explicit threshold when > 0
  pid_t pid_ = 0;

  mutable KnownCosts costs_{Spec::kName};  // written under mutex_
};

}  // namespace sol::backends
