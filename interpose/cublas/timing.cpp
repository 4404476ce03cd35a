// Device time of traced cuBLAS calls: CUDA events recorded on the call's stream before and after
// it, read once they have completed.
//
// Nothing here waits on the hot path: events are queried (cudaEventQuery) at later traced calls
// and only the process's end waits for the ones still pending. The CUDA runtime is the program's
// own (libcudart as PyTorch loaded it, found among the loaded objects), resolved at the first
// traced call: libsol has no link dependency on CUDA. Where none is loaded, calls are traced
// without device time (one line at SOL_LOG=info says so).
//
// Where the device ran a call on the process's timeline is estimated from one anchor event per
// device: its host time when recorded, plus the events' elapsed time since it. That is exact
// relative to the anchor, and early by however long the stream was busy when the anchor was
// recorded (the first traced call).
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/trace/trace.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "interpose/cublas/cublas.hpp"

namespace sol::interpose::cublas::timing {
namespace {

using abi::cudaError_t;
using abi::cudaEvent_t;
using abi::cudaStream_t;

// The CUDA runtime functions used, as cuda_runtime_api.h declares them (abi_check.hpp checks the
// types they use).
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

struct Pending {
  cudaEvent_t start, end;
  int device;
  uint32_t track;
  capture::trace::SpanRef span;
};

struct Anchor {
  cudaEvent_t event = nullptr;
  uint64_t host_ns = 0;
};

class Timing {
 public:
  static Timing& instance() noexcept {
    static Timing* t = new Timing;  // never destroyed: drained at exit by an atexit handler
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

  // The start event of the first timed call of a device becomes its anchor (and is never reused).
  bool anchor(int device, cudaEvent_t start) noexcept {
    std::lock_guard lock(mu_);
    if (anchors_[device].event) return false;
    anchors_[device] = {start, monotonic_ns()};
    return true;
  }

  // A small number per stream, its trace track, and the track's name.
  uint32_t track(void* stream, int device) noexcept {
    std::lock_guard lock(mu_);
    try {
      auto [it, added] = tracks_.try_emplace(stream, static_cast<uint32_t>(track_names_.size()));
      if (added) {
        char name[96];
        std::snprintf(name, sizeof name, "cuda device %d stream %p", device, stream);
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

  // Reads the completed calls at the front of the queue; with `wait`, all of them.
  void read(bool wait) noexcept {
    std::unique_lock lock(mu_, std::defer_lock);
    if (!wait) {
      if (!lock.try_lock()) return;  // another thread is at it
    } else {
      lock.lock();
    }
    while (!pending_.empty()) {
      Pending p = pending_.front();
      cudaError_t st = rt_.event_query(p.end);
      if (st == abi::cudaErrorNotReady) {
        if (!wait) break;
        st = rt_.event_synchronize(p.end);
      }
      pending_.pop_front();
      if (st == abi::cudaSuccess) {
        float ms = 0;
        if (rt_.event_elapsed(&ms, p.start, p.end) == abi::cudaSuccess && ms >= 0) {
          uint64_t start_ns = 0;
          const Anchor& a = anchors_[p.device];
          float since = 0;
          if (a.event && rt_.event_elapsed(&since, a.event, p.start) == abi::cudaSuccess && since >= 0)
            start_ns = a.host_ns + static_cast<uint64_t>(static_cast<double>(since) * 1e6);
          const std::string name = p.track < track_names_.size() ? track_names_[p.track] : std::string("cuda");
          capture::trace::add_device_time(p.span, static_cast<uint64_t>(static_cast<double>(ms) * 1e6), start_ns,
                                          p.track, name.c_str());
        }
      }
      // An event in error (the context is gone, a sticky error) is not reused.
      if (st == abi::cudaSuccess) {
        if (p.start != anchors_[p.device].event) pools_[p.device].push_back(p.start);
        pools_[p.device].push_back(p.end);
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
          bind(rt_.event_synchronize, "cudaEventSynchronize") && bind(rt_.event_destroy, "cudaEventDestroy") &&
          bind(rt_.stream_is_capturing, "cudaStreamIsCapturing") && bind(rt_.get_device, "cudaGetDevice");
    if (!ok_) {
      log::write(log::Level::info, "trace: no CUDA runtime among the loaded libraries; cuBLAS calls are traced "
                 "without device time");
      return;
    }
    SOL_LOG(debug, "trace: device time of cuBLAS calls through %s", object_name(reinterpret_cast<void*>(rt_.event_record)));
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
  std::vector<std::string> track_names_;
};

}  // namespace

Timer::Timer(void* stream) noexcept : stream_(stream) {
  Timing& t = Timing::instance();
  if (!t.ready()) return;
  auto s = static_cast<cudaStream_t>(stream);
  // Inside CUDA graph capture an event record would become part of the graph: not timed.
  abi::cudaStreamCaptureStatus capturing{};
  if (t.rt_.stream_is_capturing(s, &capturing) != abi::cudaSuccess || capturing != abi::cudaStreamCaptureStatusNone)
    return;
  // Earlier calls' events, read now that no capture is in the way (a query during a capture in
  // global mode would invalidate it).
  t.read(false);
  if (!t.room()) return;
  int device = -1;
  if (t.rt_.get_device(&device) != abi::cudaSuccess || device < 0 || device >= kMaxDevices) return;
  cudaEvent_t e = t.take(device);
  if (!e) return;
  if (t.rt_.event_record(e, s) != abi::cudaSuccess) {
    t.give_back(device, e);
    return;
  }
  start_ = e;
  device_ = device;
}

void Timer::finish() noexcept {
  if (!start_) return;
  Timing& t = Timing::instance();
  const capture::trace::SpanRef span = capture::trace::last_span();
  cudaEvent_t end = span.valid ? t.take(device_) : nullptr;
  if (!end || t.rt_.event_record(end, static_cast<cudaStream_t>(stream_)) != abi::cudaSuccess) {
    if (end) t.give_back(device_, end);
    t.give_back(device_, static_cast<cudaEvent_t>(start_));
    return;
  }
  t.anchor(device_, static_cast<cudaEvent_t>(start_));
  t.queue(Pending{static_cast<cudaEvent_t>(start_), end, device_, t.track(stream_, device_), span});
}

void drain() noexcept {
  Timing& t = Timing::instance();
  if (t.ready()) t.read(true);
}

}  // namespace sol::interpose::cublas::timing
