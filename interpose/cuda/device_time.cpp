// Device time of traced CUDA library calls (device_time.hpp): CUDA events recorded on the call's
// stream before and after it, read once they have completed.
//
// Where the device ran a call on the process's timeline: each device's first timed call records an
// anchor event on its stream and waits for that one event, once (a stall of the work queued on
// that stream, at the first timed call only); the host clock when the wait returns is the
// anchor's time, and every later event is placed at the anchor's time plus the device's elapsed
// time since the anchor (cudaEventElapsedTime). That is exact relative to the anchor, and late by
// however long the wait took to return (microseconds).
#include "interpose/cuda/device_time.hpp"

#include <pthread.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/trace/trace.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "interpose/cuda/cudart.hpp"

namespace sol::interpose::cuda {
namespace {

using abi::cudaError_t;
using abi::cudaEvent_t;
using abi::cudaStream_t;

// The CUDA runtime functions used, as cuda_runtime_api.h declares them (cudart_check.hpp checks
// these types against it).
struct Cudart {
  cudaError_t (*event_create)(cudaEvent_t*, unsigned) = nullptr;
  cudaError_t (*event_record)(cudaEvent_t, cudaStream_t) = nullptr;
  cudaError_t (*event_query)(cudaEvent_t) = nullptr;
  cudaError_t (*event_elapsed)(float*, cudaEvent_t, cudaEvent_t) = nullptr;
  cudaError_t (*event_synchronize)(cudaEvent_t) = nullptr;
  cudaError_t (*event_destroy)(cudaEvent_t) = nullptr;
  cudaError_t (*stream_is_capturing)(cudaStream_t, abi::cudaStreamCaptureStatus*) = nullptr;
  cudaError_t (*get_device)(int*) = nullptr;
};

template <class F>
bool bind(F& f, const char* name) noexcept {
  f = reinterpret_cast<F>(find_native(name));
  return f != nullptr;
}

// Beyond this many calls in flight (a stream the host runs far ahead of), new calls are traced
// without device time until the queue drains.
constexpr size_t kMaxPending = 8192;
constexpr int kMaxDevices = 64;

uint64_t ms_to_ns(float ms) noexcept {
  return static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
}

struct Pending {
  cudaEvent_t start, end;
  int device;
  uint32_t track;
  capture::trace::SpanRef span;
};

struct Anchor {
  cudaEvent_t event = nullptr;
  uint64_t host_ns = 0;  // monotonic clock when the event was known complete
};

class Timing {
 public:
  static Timing& instance() noexcept {
    static Timing* t = new Timing;  // never destroyed: drained by exit handlers
    return *t;
  }

  bool ready() noexcept {
    std::call_once(bound_, [this] { bind_runtime(); });
    return ok_;
  }

  // An event of the current device, from the pool or new. nullptr when CUDA says no.
  cudaEvent_t take(int device) noexcept {
    {
      std::lock_guard lock(mu_);
      auto& pool = pools_[device];
      if (!pool.empty()) {
        cudaEvent_t e = pool.back();
        pool.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    return rt_.event_create(&e, abi::kCudaEventDefault) == abi::cudaSuccess ? e : nullptr;
  }

  void give_back(int device, cudaEvent_t e) noexcept {
    try {
      std::lock_guard lock(mu_);
      pools_[device].push_back(e);
    } catch (...) {
      rt_.event_destroy(e);
    }
  }

  bool room() noexcept {
    std::lock_guard lock(mu_);
    return pending_.size() < kMaxPending;
  }

  // The device's anchor, recorded on `stream` and waited for the first time: false when it cannot
  // be (then nothing of this device is timed).
  bool anchored(int device, cudaStream_t stream) noexcept {
    std::lock_guard lock(mu_);
    if (anchors_[device].event) return true;
    cudaEvent_t e = nullptr;
    if (rt_.event_create(&e, abi::kCudaEventDefault) != abi::cudaSuccess) return false;
    if (rt_.event_record(e, stream) != abi::cudaSuccess || rt_.event_synchronize(e) != abi::cudaSuccess) {
      rt_.event_destroy(e);
      return false;
    }
    anchors_[device] = {e, monotonic_ns()};
    return true;
  }

  // A small number per stream, its trace track, and the track's name.
  uint32_t track(void* stream, int device) noexcept {
    std::lock_guard lock(mu_);
    try {
      auto [it, added] = tracks_.try_emplace(stream, static_cast<uint32_t>(track_names_.size()));
      if (added) {
        char name[96];
        std::snprintf(name, sizeof name, "cuda device %d stream 0x%" PRIxPTR, device,
                      reinterpret_cast<uintptr_t>(stream));
        track_names_.emplace_back(name);
      }
      return it->second;
    } catch (...) {
      return 0;
    }
  }

  void queue(const Pending& p) noexcept {
    try {
      std::lock_guard lock(mu_);
      pending_.push_back(p);
    } catch (...) {
      give_back(p.device, p.start);
      give_back(p.device, p.end);
    }
  }

  // Reports the completed calls at the front of the queue, in order; with `wait`, all of them.
  void read(bool wait) noexcept {
    std::unique_lock lock(mu_, std::defer_lock);
    if (!wait) {
      if (!lock.try_lock()) return;  // another thread is at it
    } else {
      lock.lock();
    }
    while (!pending_.empty()) {
      const Pending p = pending_.front();
      cudaError_t st = rt_.event_query(p.end);
      if (st == abi::cudaErrorNotReady) {
        if (!wait) break;
        st = rt_.event_synchronize(p.end);
      }
      pending_.pop_front();
      float ms = 0, since = 0;
      if (st == abi::cudaSuccess && rt_.event_elapsed(&ms, p.start, p.end) == abi::cudaSuccess && ms >= 0) {
        const Anchor& a = anchors_[p.device];
        const uint64_t start_ns =
            rt_.event_elapsed(&since, a.event, p.start) == abi::cudaSuccess && since >= 0
                ? a.host_ns + ms_to_ns(since)
                : 0;
        const char* name = p.track < track_names_.size() ? track_names_[p.track].c_str() : "cuda";
        capture::trace::add_device_time(p.span, ms_to_ns(ms), start_ns, p.track, name);
      }
      // An event in error (the context is gone, a sticky error) is not reused.
      if (st == abi::cudaSuccess) {
        try {
          pools_[p.device].push_back(p.start);
          pools_[p.device].push_back(p.end);
        } catch (...) {
        }
      }
    }
  }

  void after_fork_child() noexcept {
    // CUDA does not survive fork(): the child forgets the parent's events without touching them.
    new (&mu_) std::mutex;
    pending_.clear();
    for (auto& pool : pools_) pool.clear();
    for (auto& a : anchors_) a = Anchor{};
  }

  Cudart rt_;

 private:
  void bind_runtime() noexcept {
    ok_ = bind(rt_.event_create, "cudaEventCreateWithFlags") && bind(rt_.event_record, "cudaEventRecord") &&
          bind(rt_.event_query, "cudaEventQuery") && bind(rt_.event_elapsed, "cudaEventElapsedTime") &&
          bind(rt_.event_synchronize, "cudaEventSynchronize") &&
          bind(rt_.event_destroy, "cudaEventDestroy") &&
          bind(rt_.stream_is_capturing, "cudaStreamIsCapturing") && bind(rt_.get_device, "cudaGetDevice");
    if (!ok_) {
      log::write(log::Level::info,
                 "trace: no CUDA runtime among the loaded libraries; CUDA library calls are "
                 "traced without device time");
      return;
    }
    SOL_LOG(debug, "trace: device time of CUDA library calls through %s",
            object_name(reinterpret_cast<void*>(rt_.event_record)));
    // Registered now, after the CUDA runtime registered its own teardown: atexit runs this first,
    // while events can still be read. The trace's own end drains too (a process ending in _exit).
    std::atexit([] { Timing::instance().read(true); });
    capture::trace::on_finish([]() noexcept { Timing::instance().read(true); });
    pthread_atfork(nullptr, nullptr, [] { Timing::instance().after_fork_child(); });
  }

  std::once_flag bound_;
  bool ok_ = false;
  std::mutex mu_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> pools_[kMaxDevices];
  Anchor anchors_[kMaxDevices];
  std::unordered_map<void*, uint32_t> tracks_;
  std::deque<std::string> track_names_;  // a deque: names stay where they are as it grows
};

}  // namespace

DeviceTimer::DeviceTimer(void* stream) noexcept : stream_(stream) {
  Timing& t = Timing::instance();
  if (!t.ready()) return;
  auto s = static_cast<cudaStream_t>(stream);
  // Inside CUDA graph capture an event record would become part of the graph: not timed.
  abi::cudaStreamCaptureStatus capturing{};
  if (t.rt_.stream_is_capturing(s, &capturing) != abi::cudaSuccess ||
      capturing != abi::cudaStreamCaptureStatusNone)
    return;
  // Earlier calls' events, read now that no capture is in the way (a query during a capture in
  // global mode would invalidate it).
  t.read(false);
  if (!t.room()) return;
  int device = -1;
  if (t.rt_.get_device(&device) != abi::cudaSuccess || device < 0 || device >= kMaxDevices) return;
  if (!t.anchored(device, s)) return;
  cudaEvent_t e = t.take(device);
  if (!e) return;
  if (t.rt_.event_record(e, s) != abi::cudaSuccess) {
    t.give_back(device, e);
    return;
  }
  start_ = e;
  device_ = device;
}

void DeviceTimer::finish() noexcept {
  if (!start_) return;
  Timing& t = Timing::instance();
  auto start = static_cast<cudaEvent_t>(start_);
  start_ = nullptr;
  const capture::trace::SpanRef span = capture::trace::last_span();
  cudaEvent_t end = span.valid ? t.take(device_) : nullptr;
  if (!end || t.rt_.event_record(end, static_cast<cudaStream_t>(stream_)) != abi::cudaSuccess) {
    if (end) t.give_back(device_, end);
    t.give_back(device_, start);
    return;
  }
  t.queue(Pending{start, end, device_, t.track(stream_, device_), span});
}

}  // namespace sol::interpose::cuda
