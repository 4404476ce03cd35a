// A device backend's start-up on a thread of its own (common/startup.hpp), as opencl and cuda do
// it: prepare() begins it (at once for a backend the configuration names, at start_now() under
// auto), the router routes around the backend while it is starting(), and init() takes what the
// thread did, failures included, exactly as an inline start-up would report them. A child forked
// during or after it has none of the device's state: init() there declines with the reason.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "backends/common/device_costs.hpp"
#include "common/log.hpp"
#include "common/startup.hpp"
#include "config/config.hpp"
#include "hal/backend.hpp"

namespace sol::backends {

// What a start-up thread leaves for init(): the opened device, or why it could not be opened; and
// the device's costs when it looked for them (under auto, without an explicit threshold).
template <class Device>
struct StartedDevice {
  std::unique_ptr<Device> device;
  std::string why;
  bool ok = false;
  CostsFound costs_found = CostsFound::not_looked_for;
  DeviceCosts costs;
  std::string costs_why;  // costs_found == failed
};

// The start-up thread's work for a device backend's Spec (device_backend.hpp): the device opened,
// warmed up, and under auto without an explicit threshold, for an accelerator, its costs from the
// disk cache or measured. Only the thread warms up: a first call that opens the device itself
// needs its own work only.
template <class Spec>
struct DeviceStarted : StartedDevice<typename Spec::Device> {
  explicit DeviceStarted(const config::Config& c) : cfg(c) {}

  void open(bool background, const std::atomic<bool>& stop) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<typename Spec::Device> dev;
    std::string reason, warmed;
    bool opened = false;
    try {
      opened = Spec::open(cfg, dev, reason);
      if (opened && background && !stop.load(std::memory_order_relaxed)) {
        warmed = Spec::warm_up(*dev, stop);
        if (Spec::is_accelerator(*dev) && Spec::min_flops(cfg) <= 0 && cfg.uses_auto() &&
            !stop.load(std::memory_order_relaxed))
          this->costs_found = find_costs_ahead(
              Spec::kName, dev->description(), *Spec::cost_cache(cfg, *dev), this->costs, this->costs_why,
              [&](DeviceCosts& out, std::string& why) { return Spec::measure(*dev, out, why); });
      }
    } catch (const std::bad_alloc&) {
      opened = false;
      reason = "out of memory while initialising";
    } catch (...) {
      opened = false;
      reason = "unexpected error while initialising";
    }
    if (background && opened)
      SOL_LOG(debug, "%s: device started ahead of the first call in %.1f ms%s", Spec::kName,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
              warmed.c_str());
    this->ok = opened;
    this->device = std::move(dev);
    this->why = std::move(reason);
  }

  const config::Config cfg;
};

// `Started` (DeviceStarted<Spec>) derives from StartedDevice<Device>, is built from the
// configuration and has `void open(bool background, const std::atomic<bool>& stop)`, the
// start-up's work.
template <class Started>
class DeviceStartup {
 public:
  void prepare(const config::Config& cfg, hal::Backend::StartWhen when) noexcept {
    if (startup_) return;
    try {
      auto* started = new Started(cfg);  // never freed: the thread may still refer to it at exit
      startup_ = Startup::begin(
          [started](bool background, const std::atomic<bool>& stop) { started->open(background, stop); },
          std::chrono::milliseconds(0),
          when == hal::Backend::StartWhen::first_use ? Startup::Trigger::request : Startup::Trigger::library);
      if (startup_) started_ = started;
      else delete started;
    } catch (...) {  // out of memory: no start-up ahead of the first call
    }
  }
  void start_now() noexcept {
    if (startup_) startup_->request();
  }
  bool starting() const noexcept { return startup_ && startup_->pending(); }

  // The start-up's outcome; nullptr when none was begun (init() opens the device itself).
  Started* started() const noexcept { return started_; }

  // For init(): the started device, waiting for a start-up under way in this process (unbounded in
  // effect: the first call needs the device; compiling CLBlast's kernels with pocl's cache empty
  // takes 10-11 s). false with `reason`; `api` names the device's API ("CUDA").
  template <class Device>
  bool take(std::unique_ptr<Device>& out, std::string& reason, const char* api) {
    const std::string a = api;
    switch (startup_->take(std::chrono::hours(1))) {
      case Startup::Outcome::abandoned:
        reason = "this process was forked while its parent started the " + a + " device (" + a +
                 " state does not survive fork)";
        return false;
      case Startup::Outcome::done_before_fork:
        reason = "the " + a + " device was started before this process was forked (" + a +
                 " state does not survive fork)";
        return false;
      case Startup::Outcome::timed_out:
        reason = "the " + a + " device's start-up did not finish";
        return false;
      case Startup::Outcome::done:
        break;
    }
    if (!started_->ok || !started_->device) {
      reason = started_->why.empty() ? "the " + a + " device's start-up failed" : started_->why;
      return false;
    }
    out = std::move(started_->device);
    return true;
  }

  // For init(), once the device is the backend's: `costs` begins with `cache` and what the
  // start-up thread found of them (nothing without a start-up).
  void hand_costs(KnownCosts& costs, std::unique_ptr<CostCache> cache, const std::string& device) const noexcept {
    if (started_) costs.begin(std::move(cache), started_->costs_found, started_->costs, started_->costs_why, device);
    else costs.begin(std::move(cache), CostsFound::not_looked_for, DeviceCosts{}, std::string(), device);
  }

 private:
  Startup* startup_ = nullptr;  // prepare()'s, when it began one
  Started* started_ = nullptr;  // its work's outcome
};

}  // namespace sol::backends
