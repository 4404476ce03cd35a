// Device time of the CUDA libraries' traced calls (cuBLAS, cuBLASLt, cuDNN): one mechanism for
// every CUDA frontend. A pair of CUDA events is recorded on the call's stream around the native
// call; the elapsed time between them is read once the device has passed the second one and
// reported to the trace against the call's record (capture::trace::add_device_time).
//
// Nothing waits on the hot path: pending pairs are queried (cudaEventQuery) at later timed calls,
// and only the process's end waits for the ones still pending (an atexit handler registered after
// the CUDA runtime's own, so that it runs first, and the trace's own end for a process that ends
// in _exit). Never a device-wide sync.
//
// The CUDA runtime is the program's own (libcudart as PyTorch loaded it, RTLD_LOCAL included),
// found among the loaded objects at the first timed call: libsol neither links nor needs CUDA
// (cudart.hpp declares what it uses). Without one, calls are traced without device time.
#pragma once

namespace sol::interpose::cuda {

// Around one native call that queues work on `stream` (a cudaStream_t; nullptr is the legacy
// default stream), made by the frontend while tracing:
//
//     cuda::DeviceTimer timer(stream);
//     capture::submit(node, native);
//     timer.finish();
//
// Not timed (both no-ops): no CUDA runtime in the process, the stream being captured into a CUDA
// graph (its work does not run now; nothing is queried either, as a query during a capture in
// global mode would invalidate it), too many pairs pending, or a call the trace did not record.
class DeviceTimer {
 public:
  explicit DeviceTimer(void* stream) noexcept;  // reads completed pairs, records the start event
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  // Records the end event and queues the pair for the call the trace recorded last on this thread
  // (capture::trace::last_span()).
  void finish() noexcept;

 private:
  void* stream_;
  void* start_ = nullptr;
  int device_ = -1;
};

}  // namespace sol::interpose::cuda
