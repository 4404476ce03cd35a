// Device time of cuDNN executions: a CUDA event recorded on the handle's stream before and after
// the native call; the elapsed times are read once the device has passed the end event, checked
// without waiting at later calls, and waited for only at exit. Never a device-wide sync.
//
// Device timestamps: each device's first timed call records an anchor event and waits for that
// one event once (a stall of the stream's queued work, at the first call only); its completion
// time on the host clock is the origin from which the elapsed time of every later event is
// placed on the trace's timeline.
//
// The CUDA runtime is the program's own (PyTorch loads libcudart with RTLD_LOCAL): found among
// the loaded objects at the first timed call, never linked. Without one, nothing is timed.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "interpose/cudnn/detail.hpp"

namespace sol::interpose::cudnn::detail {
namespace {

// The runtime entry points, by their ABI (int for cudaError_t, so that header versions do not matter).
struct Runtime {
  int (*eventCreateWithFlags)(cudaEvent_t*, unsigned) = nullptr;
  int (*eventRecord)(cudaEvent_t, cudaStream_t) = nullptr;
  int (*eventQuery)(cudaEvent_t) = nullptr;
  int (*eventSynchronize)(cudaEvent_t) = nullptr;
  int (*eventElapsedTime)(float*, cudaEvent_t, cudaEvent_t) = nullptr;
  int (*eventDestroy)(cudaEvent_t) = nullptr;
  int (*getDevice)(int*) = nullptr;
  int (*streamIsCapturing)(cudaStream_t, cudaStreamCaptureStatus*) = nullptr;
};

constexpr int kMaxDevices = 64;
constexpr size_t kMaxPending = 1 << 14;  // beyond this, new calls go untimed until the device catches up

struct Pending {
  cudaEvent_t start, end;
  int device;
  const char* track;
  capture::trace::CallRef call;
};

class Timer {
 public:
  static Timer& instance() noexcept {
    static Timer* t = new Timer;  // never destroyed: used from exit handlers
    return *t;
  }

  bool ready() noexcept {
    std::call_once(bind_once_, [this] { bind(); });
    return ok_;
  }

  // A fresh (or recycled) event on the current device, or nullptr.
  cudaEvent_t event(int device) {
    auto& pool = pools_[device];
    if (!pool.empty()) {
      cudaEvent_t e = pool.back();
      pool.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    return rt_.eventCreateWithFlags(&e, cudaEventDefault) == 0 ? e : nullptr;
  }

  bool begin(cudaStream_t stream, void*& start, int& device) noexcept {
    if (!ready()) return false;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    // Work captured into a CUDA graph does not run now: it is not timed.
    if (rt_.streamIsCapturing && (rt_.streamIsCapturing(stream, &cs) != 0 || cs != cudaStreamCaptureStatusNone))
      return false;
    int dev = 0;
    if (rt_.getDevice(&dev) != 0 || dev < 0 || dev >= kMaxDevices) return false;
    std::lock_guard lock(mu_);
    poll_locked();
    if (pending_.size() >= kMaxPending) return false;
    try {
      if (!anchored(dev, stream)) return false;
      cudaEvent_t e = event(dev);
      if (!e || rt_.eventRecord(e, stream) != 0) return false;
      start = e;
      device = dev;
      return true;
    } catch (...) {
      return false;
    }
  }

  void end(cudaStream_t stream, void* start, int device, const capture::trace::CallRef& call) noexcept {
    std::lock_guard lock(mu_);
    auto s = static_cast<cudaEvent_t>(start);
    try {
      cudaEvent_t e = event(device);
      if (!call.seq || !e || rt_.eventRecord(e, stream) != 0) {
        pools_[device].push_back(s);
        if (e) pools_[device].push_back(e);
        return;
      }
      pending_.push_back(Pending{s, e, device, track(device, stream), call});
    } catch (...) {
    }
    if (!atexit_) {
      // Registered after the CUDA runtime's own exit handler, so it runs first (LIFO).
      atexit_ = true;
      std::atexit([] { Timer::instance().drain(); });
    }
  }

  // At exit: waits for what is still pending.
  void drain() noexcept {
    std::lock_guard lock(mu_);
    while (!pending_.empty()) {
      Pending& p = pending_.front();
      if (rt_.eventSynchronize(p.end) != 0) break;  // the runtime is going away
      report(p);
      pending_.pop_front();
    }
    pending_.clear();
  }

 private:
  void bind() {
    auto sym = [](const char* name) { return find_native(name); };
    rt_.eventCreateWithFlags = reinterpret_cast<decltype(rt_.eventCreateWithFlags)>(sym("cudaEventCreateWithFlags"));
    rt_.eventRecord = reinterpret_cast<decltype(rt_.eventRecord)>(sym("cudaEventRecord"));
    rt_.eventQuery = reinterpret_cast<decltype(rt_.eventQuery)>(sym("cudaEventQuery"));
    rt_.eventSynchronize = reinterpret_cast<decltype(rt_.eventSynchronize)>(sym("cudaEventSynchronize"));
    rt_.eventElapsedTime = reinterpret_cast<decltype(rt_.eventElapsedTime)>(sym("cudaEventElapsedTime"));
    rt_.eventDestroy = reinterpret_cast<decltype(rt_.eventDestroy)>(sym("cudaEventDestroy"));
    rt_.getDevice = reinterpret_cast<decltype(rt_.getDevice)>(sym("cudaGetDevice"));
    rt_.streamIsCapturing = reinterpret_cast<decltype(rt_.streamIsCapturing)>(sym("cudaStreamIsCapturing"));
    ok_ = rt_.eventCreateWithFlags && rt_.eventRecord && rt_.eventQuery && rt_.eventSynchronize &&
          rt_.eventElapsedTime && rt_.getDevice;
    if (ok_)
      SOL_LOG(debug, "cudnn: device time from CUDA events (%s)", object_name(reinterpret_cast<void*>(rt_.eventRecord)));
    else
      SOL_LOG(info, "cudnn: no CUDA runtime found in the process; cuDNN calls are traced without device time");
  }

  // The device's anchor: recorded and waited for once.
  bool anchored(int dev, cudaStream_t stream) {
    if (anchor_[dev]) return true;
    cudaEvent_t e = event(dev);
    if (!e || rt_.eventRecord(e, stream) != 0 || rt_.eventSynchronize(e) != 0) return false;
    anchor_[dev] = e;
    anchor_ns_[dev] = monotonic_ns();
    return true;
  }

  const char* track(int dev, cudaStream_t stream) {
    char name[64];
    std::snprintf(name, sizeof name, "cuda:%d stream %p", dev, static_cast<void*>(stream));
    for (const std::string& t : tracks_)
      if (t == name) return t.c_str();
    return tracks_.emplace_back(name).c_str();  // a deque: stable
  }

  void report(const Pending& p) noexcept {
    float from_anchor = 0, ms = 0;
    if (rt_.eventElapsedTime(&from_anchor, anchor_[p.device], p.start) == 0 &&
        rt_.eventElapsedTime(&ms, p.start, p.end) == 0 && ms >= 0)
      capture::trace::device_span(p.call, p.track, anchor_ns_[p.device] + static_cast<uint64_t>(from_anchor * 1e6),
                         static_cast<uint64_t>(static_cast<double>(ms) * 1e6));
    auto& pool = pools_[p.device];
    try {
      pool.push_back(p.start);
      pool.push_back(p.end);
    } catch (...) {
    }
  }

  // Reports every call the device has finished, in order; stops at the first one still running.
  void poll_locked() noexcept {
    while (!pending_.empty()) {
      const Pending& p = pending_.front();
      if (rt_.eventQuery(p.end) != 0) return;  // cudaErrorNotReady (or an error: looked at later)
      report(p);
      pending_.pop_front();
    }
  }

  std::once_flag bind_once_;
  bool ok_ = false;
  Runtime rt_;
  std::mutex mu_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> pools_[kMaxDevices];
  cudaEvent_t anchor_[kMaxDevices] = {};
  uint64_t anchor_ns_[kMaxDevices] = {};
  std::deque<std::string> tracks_;
  bool atexit_ = false;
};

}  // namespace

bool DeviceTimer::begin(cudaStream_t stream) noexcept {
  stream_ = stream;
  return Timer::instance().begin(stream, start_, device_);
}

void DeviceTimer::end(const capture::trace::CallRef& call) noexcept {
  if (start_) Timer::instance().end(stream_, start_, device_, call);
  start_ = nullptr;
}

}  // namespace sol::interpose::cudnn::detail
