// What device backends moved, for the process: nodes run on a device, the flushes that ran them
// (by cause), bytes to the device and bytes back. Reported at exit by one `sol: transfers:` line
// (at info, when a device backend ran work) and in summary.json under process.transfers.
//
// Counters are process-wide relaxed atomics, written by device backends as they enqueue copies
// and by the executor as nodes complete; a forked child starts from zero (its line reports its
// own work). Eager execution flushes every node on its own: flushes = nodes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sol::hal::transfers {

// Why pending device work ran. Eager execution has one cause; the others are the lazy
// executor's (a host access to pending data, a system call given it, a node that runs elsewhere,
// an API sync point, fork, a pending-graph limit, process exit).
enum class Cause : uint8_t { eager, host_read, host_write, syscall, other_backend, sync, fork, limit, exit, count };
const char* cause_name(Cause c) noexcept;

struct Totals {
  uint64_t nodes = 0;
  uint64_t flushes[static_cast<size_t>(Cause::count)] = {};
  uint64_t to_device = 0, to_host = 0;  // bytes
  uint64_t flush_total() const noexcept;
};

void node_ran() noexcept;            // a node computed by a device backend
void flushed(Cause cause) noexcept;  // pending work ran (eager: once per node)
void to_device(size_t bytes) noexcept;
void to_host(size_t bytes) noexcept;

// A flush as a span of time, for the trace: a lazy device backend reports each (its cause, when it
// started and ended on the monotonic clock, the nodes it completed, the bytes it wrote back), and
// the listener (the trace recorder, while tracing) records it. Without a listener, nothing.
using FlushListener = void (*)(Cause cause, uint64_t start_ns, uint64_t end_ns, uint64_t nodes,
                               uint64_t bytes_back) noexcept;
void set_flush_listener(FlushListener listener) noexcept;
void flush_span(Cause cause, uint64_t start_ns, uint64_t end_ns, uint64_t nodes, uint64_t bytes_back) noexcept;

// When each deferred node ran, for the trace (while a listener is set: the trace recorder). A lazy
// backend numbers a node it defers (next_lazy_node), notes the number for the call's trace event
// (note_lazy_node; the trace takes it when the call ends: "lazy_node": N) and asks its device to
// report when its queue has passed the node; then node_done(N, monotonic ns) is called, from
// whichever thread the device's runtime calls back on.
using NodeListener = void (*)(uint64_t node, uint64_t done_ns) noexcept;
void set_node_listener(NodeListener listener) noexcept;
bool node_listener_set() noexcept;
uint64_t next_lazy_node() noexcept;
void note_lazy_node(uint64_t node) noexcept;
uint64_t take_lazy_node() noexcept;  // 0: none
void node_done(uint64_t node, uint64_t done_ns) noexcept;

// Why the node this thread is running could not wait lazily for the host (its result had to come
// back at once: "too small to guard", "not in a block SOL serves"...), for the trace of the call
// ("lazy": "eager: <why>"). A static string; the trace takes (and clears) it when the call ends.
void note_eager(const char* why) noexcept;
const char* take_eager_note() noexcept;

Totals totals() noexcept;
void reset() noexcept;  // in a forked child

// "sol: transfers: 3 nodes, 3 flushes, 3072 bytes to the device, 1024 bytes back" without the
// prefix, and the JSON object for summary.json.
std::string line(const Totals& t);
std::string json(const Totals& t);

}  // namespace sol::hal::transfers
