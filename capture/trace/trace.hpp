// Trace mode: every intercepted call recorded with its problem, time, thread, backend and call
// stack, into the files described in docs/trace-format.md.
//
// Per call, the recorder takes the stack (raw addresses, deduplicated into a site id), the
// time around the call, formats one Chrome trace event into a memory-mapped file and updates
// per-thread aggregates. Names of stack frames are resolved only when the process ends.
#pragma once

#include <cstdint>
#include <string>

#include "capture/ir/node.hpp"

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

// Device time. A call that queues work on a device (cudnnBackendExecute) is recorded like any
// other, its host time being the launch; its frontend learns later, asynchronously, when the work
// ran on the device, and reports it against the call's record.
struct CallRef {
  uint32_t sig = 0;   // signature id
  uint64_t seq = 0;   // the event's "seq"; 0: no record (not traced, filtered out, failed)
  uint32_t site = 0;  // the call's stack
};
// The record the calling thread's last Span::finish() wrote.
CallRef last_call() noexcept;
// The device ran the work of `call` from `start_ns` (monotonic clock, estimated by the frontend)
// for `dur_ns`, on `track` (a short static name: "cuda:0 stream 0x5571..."): an event on that
// track of trace.json, and the signature's device time in the summaries. Any thread may call it
// until the process's trace is finished.
void device_span(const CallRef& call, const char* track, uint64_t start_ns, uint64_t dur_ns) noexcept;

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
