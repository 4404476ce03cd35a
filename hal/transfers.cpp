#include "hal/transfers.hpp"

#include "common/macros.hpp"

namespace sol::hal::transfers {
namespace {

constexpr size_t kCauses = static_cast<size_t>(Cause::count);

// Each on a cache line of its own: backends on several threads add to them at once.
struct alignas(64) Counter {
  std::atomic<uint64_t> v{0};
};
Counter g_nodes, g_to_device, g_to_host;
Counter g_flushes[kCauses];

}  // namespace

const char* cause_name(Cause c) noexcept {
  switch (c) {
    case Cause::eager: return "eager";
    case Cause::host_read: return "host_read";
    case Cause::host_write: return "host_write";
    case Cause::syscall: return "syscall";
    case Cause::other_backend: return "other_backend";
    case Cause::sync: return "sync";
    case Cause::fork: return "fork";
    case Cause::limit: return "limit";
    case Cause::exit: return "exit";
    case Cause::count: break;
  }
  return "?";
}

uint64_t Totals::flush_total() const noexcept {
  uint64_t n = 0;
  for (uint64_t f : flushes) n += f;
  return n;
}

void node_ran() noexcept {
  g_nodes.v.fetch_add(1, std::memory_order_relaxed);
}
void flushed(Cause cause) noexcept {
  g_flushes[static_cast<size_t>(cause)].v.fetch_add(1, std::memory_order_relaxed);
}
namespace {
std::atomic<FlushListener> g_flush_listener{nullptr};
constinit SOL_TLS const char* t_eager_note = nullptr;
}  // namespace

namespace {
std::atomic<NodeListener> g_node_listener{nullptr};
std::atomic<uint64_t> g_lazy_nodes{0};
constinit SOL_TLS uint64_t t_lazy_node = 0;
}  // namespace

void set_node_listener(NodeListener listener) noexcept {
  g_node_listener.store(listener, std::memory_order_release);
}

bool node_listener_set() noexcept {
  return g_node_listener.load(std::memory_order_relaxed) != nullptr;
}

uint64_t next_lazy_node() noexcept {
  return g_lazy_nodes.fetch_add(1, std::memory_order_relaxed) + 1;
}

void note_lazy_node(uint64_t node) noexcept {
  t_lazy_node = node;
}

uint64_t take_lazy_node() noexcept {
  const uint64_t node = t_lazy_node;
  t_lazy_node = 0;
  return node;
}

void node_done(uint64_t node, uint64_t done_ns) noexcept {
  if (NodeListener l = g_node_listener.load(std::memory_order_acquire)) l(node, done_ns);
}

void note_eager(const char* why) noexcept {
  t_eager_note = why;
}

const char* take_eager_note() noexcept {
  const char* why = t_eager_note;
  t_eager_note = nullptr;
  return why;
}

void set_flush_listener(FlushListener listener) noexcept {
  g_flush_listener.store(listener, std::memory_order_release);
}

void flush_span(Cause cause, uint64_t start_ns, uint64_t end_ns, uint64_t nodes, uint64_t bytes_back) noexcept {
  if (FlushListener l = g_flush_listener.load(std::memory_order_acquire)) l(cause, start_ns, end_ns, nodes, bytes_back);
}

void to_device(size_t bytes) noexcept {
  g_to_device.v.fetch_add(bytes, std::memory_order_relaxed);
}
void to_host(size_t bytes) noexcept {
  g_to_host.v.fetch_add(bytes, std::memory_order_relaxed);
}

Totals totals() noexcept {
  Totals t;
  t.nodes = g_nodes.v.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kCauses; ++i) t.flushes[i] = g_flushes[i].v.load(std::memory_order_relaxed);
  t.to_device = g_to_device.v.load(std::memory_order_relaxed);
  t.to_host = g_to_host.v.load(std::memory_order_relaxed);
  return t;
}

void reset() noexcept {
  g_nodes.v.store(0, std::memory_order_relaxed);
  for (Counter& c : g_flushes) c.v.store(0, std::memory_order_relaxed);
  g_to_device.v.store(0, std::memory_order_relaxed);
  g_to_host.v.store(0, std::memory_order_relaxed);
}

std::string line(const Totals& t) {
  return "transfers: " + std::to_string(t.nodes) + " nodes, " + std::to_string(t.flush_total()) + " flushes, " +
         std::to_string(t.to_device) + " bytes to the device, " + std::to_string(t.to_host) + " bytes back";
}

std::string json(const Totals& t) {
  std::string out = "{\"nodes\": " + std::to_string(t.nodes) + ", \"flushes\": " + std::to_string(t.flush_total()) +
                    ", \"flushes_by_cause\": {";
  bool first = true;
  for (size_t i = 0; i < kCauses; ++i) {
    if (!t.flushes[i]) continue;
    out += first ? "\"" : ", \"";
    first = false;
    out += cause_name(static_cast<Cause>(i));
    out += "\": " + std::to_string(t.flushes[i]);
  }
  out += "}, \"bytes_to_device\": " + std::to_string(t.to_device) +
         ", \"bytes_to_host\": " + std::to_string(t.to_host) + "}";
  return out;
}

}  // namespace sol::hal::transfers
