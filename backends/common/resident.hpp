// The lazy executor's device copies, for any device backend: device copies of host operands that
// outlive a node, and the pending work that wrote them (hal/coherence.hpp has the
// protocol). The bookkeeping is here; what it takes of a device is ResidentDevice below (make a
// buffer from host bytes in the operand's device layout, retain and release one, read one back,
// wait for the queued work). backends/opencl/resident.hpp and backends/cuda/resident.hpp
// implement it.
//
// - A node's operand is a copy: the host range, its geometry and its device layout (a gathered
//   vector, a packed matrix), as the backend's transfer.hpp describes it; a DNN tensor is a raw
//   copy (its buffer's bytes, the same on the device). A later node with the same operand finds
//   the copy and moves nothing. Only operands inside a block SOL serves are kept (their pages can
//   be protected); others move each time, results among them come back at once.
// - A copy is worth keeping only if a later node finds it. Where host and device take turns on a
//   block (LAPACK's factorizations: each BLAS call a different piece of the matrix, the host's
//   pivoting and scaling between them), most copies are dropped unused, and keeping them only adds
//   page protection, faults and write-backs to eager's transfers. Each block keeps a score: a
//   copy dropped unused takes one off, one that later nodes found adds their number (both within
//   +-kTurnsEager); at -kTurnsEager the block's operands run eagerly until it is given back.
// - Copies of different kinds may overlap (a raw copy of a DNN tensor, a BLAS matrix in the same
//   bytes) only while all of them are current: a written operand drops every other copy it
//   overlaps, and a copy is made from the host only after what is dirty there has been flushed.
// - Deferral is the device's in-order queue (a command queue, a stream): a node's commands are
//   enqueued and the call returns; its results stay on the device (dirty, pages inaccessible)
//   until the host needs them. A flush waits for the queue and writes every dirty copy back into
//   host pages that stay closed while it happens (write_guarded), so no other thread reads a
//   half-written result.
// - Uploads are synchronous (the host data is consumed before make() returns): the host may change
//   an input as soon as the call returns, whatever is still queued.
// - Limits: pending nodes and dirty bytes ([lazy] max_nodes, max_bytes) flush; the copies' total
//   ([lazy] device_memory, else half the device's memory) evicts the least recently used, written
//   back first when dirty.
//
// Every method but flush/drop/forget runs under the backend's lock (the caller holds it, through
// ResidentLock); those three take it. None touches a guarded page while holding it.
//
// The core is a template over the backend's Operand, which has `ext` (capture::blas::Operand:
// host range and access), `device_bytes` and `buf` (the device buffer handle); everything else
// about it is the device's business (ResidentDevice's hooks).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/macros.hpp"
#include "hal/backend.hpp"
#include "hal/coherence.hpp"
#include "hal/transfers.hpp"

namespace sol::config {
struct Config;
}

namespace sol::backends {

// The thread holding a lazy backend's lock: a fault it takes on a guarded page (which the rules
// above exclude) must not wait for that lock; the fault handler then lifts the page.
// Initial-exec TLS: read by the SIGSEGV handler's path, where a first access through
// __tls_get_addr could allocate.
inline constinit SOL_TLS bool t_resident_holding = false;

// The backend's lock, taken for a node: marks this thread as holding it.
class ResidentLock {
 public:
  explicit ResidentLock(std::mutex& mu) : lock_(mu) { t_resident_holding = true; }
  ~ResidentLock() { t_resident_holding = false; }
  ResidentLock(const ResidentLock&) = delete;
  ResidentLock& operator=(const ResidentLock&) = delete;

 private:
  std::lock_guard<std::mutex> lock_;
};

// What the core needs of a device. Called under the backend's lock, in the process that opened
// the device, never while it exits.
template <class Operand>
class ResidentDevice {
 public:
  using Buffer = decltype(Operand::buf);

  virtual ~ResidentDevice() = default;

  // "opencl", "cuda": the prefix of messages.
  virtual const char* name() const noexcept = 0;
  // Whether the process is exiting (the device's runtime may be gone: nothing is released).
  virtual bool exiting() const noexcept = 0;
  // An operand read on the host (rotm's param), and one whose device bytes are the host's (a DNN
  // tensor's buffer).
  virtual bool on_host(const Operand& o) const noexcept = 0;
  virtual bool raw(const Operand& o) const noexcept = 0;
  // Whether two operands are the same host data in the same device layout (a copy made for one
  // serves the other).
  virtual bool same(const Operand& a, const Operand& b) const noexcept = 0;

  // A new buffer in o.buf (one reference, the caller's): the host's data in the operand's device
  // layout when o.ext.read (consumed before it returns), else zero-filled (elements of `es`
  // bytes), or left as it is for a raw operand. Logs a failure at debug level.
  virtual hal::Reason make(Operand& o, size_t es) = 0;
  // Zero-fills an existing buffer (a kept copy the node overwrites, beta == 0).
  virtual hal::Reason zero(Operand& o, size_t es) = 0;
  virtual void retain(Buffer b) noexcept = 0;
  virtual void release(Buffer b) noexcept = 0;
  // Reads o.device_bytes of o.buf into `host`, waiting for it; false (logged as an error) when
  // the device failed.
  virtual bool read(const Operand& o, void* host) noexcept = 0;
  // Waits for every queued command: nullptr, or the device's error.
  virtual const char* finish() noexcept = 0;
  // The device's memory, or 0 when unknown.
  virtual size_t memory_bytes() const noexcept = 0;
  // Calls hal::transfers::node_done(node, now) when the device's queue has passed every command
  // enqueued so far (any thread). false: the device cannot tell (the trace then shows no time).
  virtual bool mark(uint64_t /*node*/) noexcept { return false; }
  // Stores the elements the routine writes from `staged` (device layout) into `host`, laid out
  // as the caller's memory at o.ext.ptr (host may be a copy of it).
  virtual void store(const Operand& o, unsigned char* host, unsigned char* staged, size_t es) const noexcept = 0;
};

template <class Operand>
class Resident : public hal::coherence::Holder {
 public:
  using Device = ResidentDevice<Operand>;
  using Lock = ResidentLock;

  Resident(Device& dev, std::mutex& mu, const config::Config& cfg);
  ~Resident() override;

  // Whether nodes are deferred now (lazy on, not exiting, this process's device).
  bool active() const noexcept;

  // Job::upload, DnnJob::raw: `o.buf` becomes a buffer holding the operand's data in its device
  // layout (a reference the caller releases): a kept copy, or a new one made from the host
  // (flushed first where a pending result lies there). A written operand's other copies are
  // dropped. A BLAS operand that is not read is zero-filled (beta == 0); a raw one is left as it
  // is (the node writes every byte of it), and a new one is kept only once keep() says so.
  hal::Reason bind(Operand& o, size_t es);
  // After the node's commands: whether a written operand's result stays on the device (dirty);
  // false: the caller must copy it back now, into host pages that are open.
  bool keep(Operand& o);
  // The node's commands are enqueued and nothing was waited for (one more pending node).
  void deferred();
  // The Job waited for the queue (a scalar result, a result that could not stay): every pending
  // node has run. From `start_ns` (monotonic) on, writing `bytes_back` back: the trace's flush.
  void waited(hal::transfers::Cause cause, uint64_t start_ns, uint64_t bytes_back);

  // Holder (coherence.hpp): take the lock.
  void flush(hal::transfers::Cause cause) noexcept override;
  void drop(uintptr_t b, uintptr_t e, bool discard) noexcept override;
  void forget() noexcept override;

  // Whether bind() would leave `o` on the device without a transfer or keep it there: nullptr;
  // else why not ("too small to guard", "host and device take turns on its block"...).
  const char* comes_back(const Operand& o) noexcept;
  // Under the lock: makes the host's [p, p + n) current for reading (flush) or for writing
  // (flush, and drop the copies of the blocks there, so that their pages open).
  void host_ready(const void* p, size_t n, bool writes) noexcept;
  // Under the lock: writes back every result and drops every copy (their pages open), for a node
  // that reads and writes host memory without the Resident.
  void settle() noexcept { drop_locked(0, UINTPTR_MAX, false); }

 private:
  struct Copy {
    Operand op;  // host range, geometry, device layout; op.buf is the device buffer (owned)
    size_t es = 0;
    uintptr_t block_b = 0, block_e = 0;  // the served block holding it
    bool dirty = false;
    uint64_t used = 0;   // for eviction
    uint32_t found = 0;  // later nodes that used it
  };
  // A served block's score: its dropped copies, found by later nodes (+) or not (-).
  struct Turns {
    uintptr_t block_b;
    int score;
  };
  static constexpr int kTurnsEager = 8;

  bool live() const noexcept;  // this process's device, not exiting
  void flush_locked(hal::transfers::Cause cause) noexcept;
  bool write_back(Copy& c) noexcept;
  // Keeps a copy of `o` (o.buf) when its host range can be guarded; the new copy, or nullptr.
  Copy* adopt(const Operand& o, size_t es) noexcept;
  void drop_locked(uintptr_t b, uintptr_t e, bool discard) noexcept;
  void release(Copy& c) noexcept;
  // A copy leaves (dropped, not given back): counts towards its block's turns.
  void retire(const Copy& c) noexcept;
  // nullptr when a copy of `o` can be kept (its served block in bb, be), else why not.
  const char* unkeepable(const Operand& o, uintptr_t& bb, uintptr_t& be) const noexcept;
  // Whether the block at block_b runs its operands eagerly (with the reason).
  bool taking_turns(uintptr_t block_b, const char*& why) const noexcept;
  // Sets the protection of a block from the copies in it.
  void update_block(uintptr_t b, uintptr_t e) noexcept;
  void evict_beyond_budget() noexcept;
  Copy* find(const Operand& o) noexcept;

  Device& dev_;
  std::mutex& mu_;
  const pid_t pid_;
  std::vector<Copy> copies_;
  std::vector<Turns> turns_;
  size_t pending_ = 0;  // nodes enqueued since the last wait
  size_t dirty_bytes_ = 0;
  size_t held_bytes_ = 0;  // device bytes of every copy
  uint64_t clock_ = 0;
  size_t max_nodes_, max_bytes_, budget_;
};

}  // namespace sol::backends
