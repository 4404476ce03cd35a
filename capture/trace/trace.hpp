// Trace mode: every intercepted call recorded with its problem, time, thread, backend and call
// stack, into the files described in docs/trace-format.md.
//
// Per call, the recorder takes the stack (raw addresses, deduplicated into a site id), the
// time around the call, formats one Chrome trace event into a memory-mapped file and updates
// per-thread aggregates. Names of stack frames are resolved only when the process ends.
#pragma once

#include <cstdint>
#include <string>

#include "ir/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture::trace {

// Reads the trace settings; true when tracing is on for this process. Once per process.
bool start(const config::Config& cfg) noexcept;

// True while calls are being recorded.
bool active() noexcept;

// One traced call. Construct it right before the call runs (it takes the stack, then the start
// time) and finish() it right after.
class Span {
 public:
  explicit Span(const Node& node) noexcept;
  void finish(const Node& node, const char* backend) noexcept;

 private:
  uint64_t t0_ = 0;
  struct ThreadState* thread_ = nullptr;
  uint32_t site_ = 0;
  bool on_ = false;
};

// Device time. A call that queues work on a device (a cuBLAS GEMM, a cuDNN execution) is
// recorded like any other, its host time being the launch; its frontend learns later,
// asynchronously, how long the device ran it (interpose/cuda/device_time.cpp: CUDA events around
// the call on its stream), and reports it against the call's record.
//
// The call this thread recorded last (by Span::finish). `valid` is false when it was not
// recorded (outside the window, excluded, tracing off, a failed record).
struct SpanRef {
  uint32_t sig = 0;  // its signature
  uint64_t seq = 0;  // its trace event's "seq"
  Sym sym{};
  const char* op = nullptr;  // its signature's op (stable text)
  bool valid = false;
};
SpanRef last_span() noexcept;

// The device ran `span`'s work for `device_ns`, from `start_ns` on the monotonic clock (an
// estimate; 0 when unknown). Summed per signature (summary.json's device_calls and device_ns,
// summary.txt's "Device time" table); trace.json gets a "cat":"device" event on the device track
// `track` (a small number per device stream, tid 2^30 + track), named `track_name` ("cuda device
// 0 stream 0x...") by a thread_name event the first time. Any thread, until the trace is finished.
void add_device_time(const SpanRef& span, uint64_t device_ns, uint64_t start_ns, uint32_t track,
                     const char* track_name) noexcept;

// A frontend whose measurements complete asynchronously registers a flush, run once before the
// outputs are written (at most 4 of them), whichever way the process ends (exit, _exit...).
void on_finish(void (*flush)() noexcept) noexcept;

// Where a thread was started from, for the stacks of a thread that runs no Python: the Python
// frames of the thread that created it (interned; never freed).
struct ThreadOrigin;
// In the creating thread (pthread_create): its Python frames, or its own origin when it runs no
// Python either; nullptr when not tracing or not in a Python process. Cheap when not tracing.
const ThreadOrigin* thread_origin() noexcept;
// In the new thread, before it runs its start routine.
void adopt_thread_origin(const ThreadOrigin* origin) noexcept;

// This process's file-name tag: "<pid>", or "r<rank>-<pid>" under RANK, OMPI_COMM_WORLD_RANK or
// PMI_RANK. Verify mode names its file with it too.
std::string process_tag();

// Writes the summaries and closes the trace of this process: `how` is "exit", "_exit"...
// Idempotent; a no-op in a process that recorded nothing.
void finish_process(const char* how) noexcept;

}  // namespace sol::capture::trace
