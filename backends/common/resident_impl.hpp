// The definitions of backends/common/resident.hpp's Resident, included by the one .cpp of each
// backend that instantiates it (template class Resident<Operand>;).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "backends/common/resident.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "config/config.hpp"

namespace sol::backends {
namespace resident_detail {

inline uintptr_t addr(const void* p) noexcept {
  return reinterpret_cast<uintptr_t>(p);
}

template <class Operand>
bool overlaps(const Operand& o, uintptr_t b, uintptr_t e) noexcept {
  const uintptr_t lo = addr(o.ext.ptr);
  return lo < e && lo + o.ext.bytes > b;
}

}  // namespace resident_detail

template <class Operand>
Resident<Operand>::Resident(Device& dev, std::mutex& mu, const config::Config& cfg)
    : dev_(dev),
      mu_(mu),
      pid_(::getpid()),
      max_nodes_(static_cast<size_t>(cfg.lazy_max_nodes)),
      max_bytes_(static_cast<size_t>(cfg.lazy_max_bytes)),
      budget_(static_cast<size_t>(cfg.lazy_device_memory)) {
  if (budget_ == 0) {
    const size_t global = dev.memory_bytes();
    budget_ = global ? global / 2 : size_t{1} << 30;
  }
}

template <class Operand>
Resident<Operand>::~Resident() {
  // Copies are released with the device, or leaked at exit.
  if (dev_.exiting()) return;
  for (Copy& c : copies_) dev_.release(c.op.buf);
}

template <class Operand>
bool Resident<Operand>::live() const noexcept {
  return ::getpid() == pid_ && !dev_.exiting();
}

template <class Operand>
bool Resident<Operand>::active() const noexcept {
  return hal::coherence::active() && live();
}

template <class Operand>
typename Resident<Operand>::Copy* Resident<Operand>::find(const Operand& o) noexcept {
  for (Copy& c : copies_)
    if (dev_.same(c.op, o)) return &c;
  return nullptr;
}

template <class Operand>
hal::Reason Resident<Operand>::bind(Operand& o, size_t es) {
  using hal::transfers::Cause;
  using resident_detail::addr;
  using resident_detail::overlaps;
  if (dev_.on_host(o)) {  // read where it is
    host_ready(o.ext.ptr, o.ext.bytes, false);
    return hal::Reason::ok;
  }
  if (o.device_bytes == 0) return hal::Reason::ok;
  Copy* kept = find(o);
  if (o.ext.written) {
    // Other copies of these bytes go stale: drop them, after writing back what only they hold
    // (it must reach the host before this result does).
    const uintptr_t b = addr(o.ext.ptr), e = b + o.ext.bytes;
    bool dirty = false, others = false;
    for (Copy& c : copies_)
      if (&c != kept && overlaps(c.op, b, e)) {
        others = true;
        dirty |= c.dirty;
      }
    if (dirty) flush_locked(Cause::host_write);
    if (others) {
      kept = nullptr;  // the vector is compacted below
      for (size_t i = 0; i < copies_.size();) {
        Copy& c = copies_[i];
        if (!dev_.same(c.op, o) && overlaps(c.op, b, e)) {
          const uintptr_t bb = c.block_b, be = c.block_e;
          retire(c);
          release(c);
          copies_.erase(copies_.begin() + static_cast<long>(i));
          update_block(bb, be);
        } else {
          ++i;
        }
      }
      kept = find(o);
    }
  }
  const bool raw = dev_.raw(o);
  if (kept) {
    if (o.ext.read) {
      // Nothing else overlapping it can be dirty (a write drops the others, a copy is made from
      // a flushed host), but a stale read would be silent: check, it is a short walk.
      const uintptr_t b = addr(o.ext.ptr), e = b + o.ext.bytes;
      for (const Copy& c : copies_)
        if (c.dirty && &c != kept && overlaps(c.op, b, e)) {
          flush_locked(Cause::host_read);
          break;
        }
    }
    kept->used = ++clock_;
    ++kept->found;
    dev_.retain(kept->op.buf);
    o.buf = kept->op.buf;
    if (!o.ext.read && !raw) return dev_.zero(o, es);  // beta == 0: no NaN of the caller's may survive
    return hal::Reason::ok;
  }

  // A new buffer, from the host (current first) or zero-filled.
  if (o.ext.read) host_ready(o.ext.ptr, o.ext.bytes, false);
  if (hal::Reason r = dev_.make(o, es); r != hal::Reason::ok) return r;

  // Kept when the host range can be guarded: an input becomes a clean copy now, a result a dirty
  // one in keep(). A raw result that is not read holds nothing yet: it is kept in keep(), once
  // the node has written it (a node that leaves it unwritten must not leave a copy behind).
  uintptr_t bb, be;
  if (const char* why = unkeepable(o, bb, be); !why) {
    if (!raw || o.ext.read) adopt(o, es);
  } else if (o.ext.written) {
    host_ready(o.ext.ptr, o.ext.bytes, true);  // its result comes back at once: pages open
    hal::transfers::note_eager(why);
  }
  return hal::Reason::ok;
}

template <class Operand>
const char* Resident<Operand>::unkeepable(const Operand& o, uintptr_t& bb, uintptr_t& be) const noexcept {
  if (o.ext.bytes < hal::coherence::layer()->min_bytes()) return "too small to guard";
  const char* why = nullptr;
  if (!hal::coherence::layer()->block_of(o.ext.ptr, o.ext.bytes, bb, be, why) || taking_turns(bb, why))
    return why;
  return nullptr;
}

template <class Operand>
const char* Resident<Operand>::comes_back(const Operand& o) noexcept {
  uintptr_t bb, be;
  return find(o) ? nullptr : unkeepable(o, bb, be);
}

template <class Operand>
typename Resident<Operand>::Copy* Resident<Operand>::adopt(const Operand& o, size_t es) noexcept {
  uintptr_t bb, be;
  if (unkeepable(o, bb, be)) return nullptr;
  try {
    Copy c;
    c.op = o;
    c.es = es;
    c.block_b = bb;
    c.block_e = be;
    c.used = ++clock_;
    copies_.push_back(c);
  } catch (...) {  // out of memory: not kept
    return nullptr;
  }
  dev_.retain(o.buf);  // the copy's own reference
  held_bytes_ += o.device_bytes;
  if (o.ext.read) update_block(bb, be);
  evict_beyond_budget();  // never the copy just made; the others may move
  return find(o);
}

template <class Operand>
bool Resident<Operand>::keep(Operand& o) {
  Copy* c = find(o);
  if (!c && dev_.raw(o) && o.buf && !o.ext.read) {
    c = adopt(o, 1);
    if (!c) {  // not guarded (bind said why where it knew): it comes back into open pages
      host_ready(o.ext.ptr, o.ext.bytes, true);
      return false;
    }
  }
  if (!c || c->op.buf != o.buf) return false;
  if (!c->dirty) {
    c->dirty = true;
    dirty_bytes_ += c->op.device_bytes;
  }
  const char* why = nullptr;
  if (!hal::coherence::layer()->set_state(c->block_b, c->block_e, hal::coherence::State::dirty, why)) {
    SOL_LOG(debug, "%s: lazy: result at %p comes back at once: %s", dev_.name(), o.ext.ptr, why ? why : "");
    hal::transfers::note_eager(why ? why : "its pages could not be protected");
    c->dirty = false;
    dirty_bytes_ -= c->op.device_bytes;
    // The Job downloads it into open pages: the block's copies go.
    drop_locked(c->block_b, c->block_e, false);
    return false;
  }
  return true;
}

template <class Operand>
void Resident<Operand>::deferred() {
  ++pending_;
  // While tracing: the node's number on its call, and the time its work is done on the device.
  if (hal::transfers::node_listener_set()) {
    const uint64_t node = hal::transfers::next_lazy_node();
    if (dev_.mark(node)) hal::transfers::note_lazy_node(node);
  }
  if (pending_ >= max_nodes_ || dirty_bytes_ > max_bytes_) flush_locked(hal::transfers::Cause::limit);
}

template <class Operand>
void Resident<Operand>::waited(hal::transfers::Cause cause, uint64_t start_ns, uint64_t bytes_back) {
  const uint64_t nodes = pending_ + 1;  // the pending ones and the node that waited
  pending_ = 0;
  hal::transfers::flushed(cause);
  hal::transfers::flush_span(cause, start_ns, monotonic_ns(), nodes, bytes_back);
}

template <class Operand>
void Resident<Operand>::flush(hal::transfers::Cause cause) noexcept {
  if (t_resident_holding) return;
  ResidentLock lock(mu_);
  flush_locked(cause);
}

template <class Operand>
void Resident<Operand>::drop(uintptr_t b, uintptr_t e, bool discard) noexcept {
  if (t_resident_holding) return;
  ResidentLock lock(mu_);
  drop_locked(b, e, discard);
}

template <class Operand>
void Resident<Operand>::forget() noexcept {
  // A forked child (no device) or exit: the handles are leaked, never released.
  std::vector<Copy>().swap(copies_);
  std::vector<Turns>().swap(turns_);
  pending_ = dirty_bytes_ = held_bytes_ = 0;
}

template <class Operand>
void Resident<Operand>::flush_locked(hal::transfers::Cause cause) noexcept {
  if (pending_ == 0 && dirty_bytes_ == 0) return;
  if (!live()) return;
  const uint64_t t0 = monotonic_ns();
  const uint64_t nodes = pending_;
  uint64_t back = 0;
  if (const char* err = dev_.finish())
    log::write(log::Level::error, "error: %s: the device failed deferred work (%s): results may be wrong", dev_.name(),
               err);
  std::vector<std::pair<uintptr_t, uintptr_t>> blocks;
  for (Copy& c : copies_) {
    if (!c.dirty) continue;
    write_back(c);
    back += c.op.device_bytes;
    c.dirty = false;
    blocks.emplace_back(c.block_b, c.block_e);
  }
  pending_ = 0;
  dirty_bytes_ = 0;
  for (const auto& [b, e] : blocks) update_block(b, e);
  hal::transfers::flushed(cause);
  hal::transfers::flush_span(cause, t0, monotonic_ns(), nodes, back);
}

template <class Operand>
bool Resident<Operand>::write_back(Copy& c) noexcept {
  const Operand& o = c.op;
  try {
    std::vector<unsigned char> staged(o.device_bytes);
    if (!dev_.read(o, staged.data())) return false;
    hal::transfers::to_host(o.device_bytes);
    // A raw copy is the host's bytes themselves: straight into its pages.
    if (dev_.raw(o)) return hal::coherence::layer()->write_guarded(o.ext.ptr, staged.data(), o.ext.bytes);
    // The host's bytes around the elements written (other elements of a strided vector, the rows
    // beyond a matrix's, a triangle's other half) are kept: the result is stored into an image of
    // the whole range, which goes back in one write.
    std::vector<unsigned char> image(o.ext.bytes);
    if (!hal::coherence::layer()->read_guarded(image.data(), o.ext.ptr, o.ext.bytes)) return false;
    Operand at = o;
    at.ext.ptr = image.data();
    dev_.store(at, image.data(), staged.data(), c.es);
    return hal::coherence::layer()->write_guarded(o.ext.ptr, image.data(), o.ext.bytes);
  } catch (...) {
    log::write(log::Level::error, "error: %s: out of memory writing back a result: it is lost", dev_.name());
    return false;
  }
}

template <class Operand>
void Resident<Operand>::host_ready(const void* p, size_t n, bool writes) noexcept {
  if (!p || !n) return;
  const uintptr_t b = resident_detail::addr(p), e = b + n;
  bool dirty = false, any = false;
  for (const Copy& c : copies_)
    if (c.block_b < e && c.block_e > b) {
      any = true;
      dirty |= c.dirty;
    }
  if (dirty) flush_locked(writes ? hal::transfers::Cause::host_write : hal::transfers::Cause::host_read);
  if (writes && any) drop_locked(b, e, false);
}

template <class Operand>
void Resident<Operand>::drop_locked(uintptr_t b, uintptr_t e, bool discard) noexcept {
  bool dirty = false;
  for (const Copy& c : copies_)
    if (c.block_b < e && c.block_e > b) dirty |= c.dirty;
  if (dirty && !discard) flush_locked(hal::transfers::Cause::host_write);
  // Whole blocks go: the pages of a block open only when no copy is left in it.
  std::vector<std::pair<uintptr_t, uintptr_t>> blocks;
  for (size_t i = 0; i < copies_.size();) {
    Copy& c = copies_[i];
    if (c.block_b < e && c.block_e > b) {
      if (c.dirty) dirty_bytes_ -= c.op.device_bytes;
      blocks.emplace_back(c.block_b, c.block_e);
      if (!discard) retire(c);
      release(c);
      copies_.erase(copies_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  for (const auto& [bb, be] : blocks) update_block(bb, be);
  // Given back (free, realloc): the next block there starts afresh.
  if (!discard) return;
  for (size_t i = 0; i < turns_.size();) {
    if (turns_[i].block_b >= b && turns_[i].block_b < e) {
      turns_[i] = turns_.back();
      turns_.pop_back();
    } else {
      ++i;
    }
  }
}

template <class Operand>
void Resident<Operand>::retire(const Copy& c) noexcept {
  Turns* t = nullptr;
  for (Turns& x : turns_)
    if (x.block_b == c.block_b) t = &x;
  if (!t) {
    if (c.found > 0) return;  // a block that starts well needs no record
    try {
      turns_.push_back(Turns{c.block_b, 0});
    } catch (...) {
      return;
    }
    t = &turns_.back();
  }
  if (t->score <= -kTurnsEager) return;
  t->score = c.found > 0 ? std::min(t->score + static_cast<int>(std::min<uint32_t>(c.found, kTurnsEager)), kTurnsEager)
                         : t->score - 1;
  if (t->score <= -kTurnsEager) {
    SOL_LOG(debug, "%s: lazy: copies at %p go unused: the block's operands run eagerly", dev_.name(),
            reinterpret_cast<void*>(c.block_b));
  }
}

template <class Operand>
bool Resident<Operand>::taking_turns(uintptr_t block_b, const char*& why) const noexcept {
  for (const Turns& t : turns_)
    if (t.block_b == block_b && t.score <= -kTurnsEager) {
      why = "host and device take turns on its block";
      return true;
    }
  return false;
}

template <class Operand>
void Resident<Operand>::release(Copy& c) noexcept {
  held_bytes_ -= c.op.device_bytes;
  if (live()) dev_.release(c.op.buf);
  c.op.buf = nullptr;
}

template <class Operand>
void Resident<Operand>::update_block(uintptr_t b, uintptr_t e) noexcept {
  using hal::coherence::State;
  State s = State::none;
  for (const Copy& c : copies_)
    if (c.block_b == b) s = c.dirty ? State::dirty : (s == State::dirty ? s : State::clean);
  const char* why = nullptr;
  if (hal::coherence::layer()->set_state(b, e, s, why) || s == State::dirty) return;
  // A clean block that cannot be made read-only: its copies cannot be trusted to stay current.
  SOL_LOG(debug, "%s: lazy: device copies at %p dropped: %s", dev_.name(), reinterpret_cast<void*>(b),
          why ? why : "");
  for (size_t i = 0; i < copies_.size();) {
    if (copies_[i].block_b == b) {
      retire(copies_[i]);
      release(copies_[i]);
      copies_.erase(copies_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  hal::coherence::layer()->set_state(b, e, State::none, why);
}

template <class Operand>
void Resident<Operand>::evict_beyond_budget() noexcept {
  while (held_bytes_ > budget_ && copies_.size() > 1) {
    // The least recently used copy, not the one just made.
    size_t victim = 0;
    for (size_t i = 1; i + 1 < copies_.size(); ++i)
      if (copies_[i].used < copies_[victim].used) victim = i;
    if (copies_[victim].dirty) flush_locked(hal::transfers::Cause::limit);
    const uintptr_t bb = copies_[victim].block_b, be = copies_[victim].block_e;
    release(copies_[victim]);
    copies_.erase(copies_.begin() + static_cast<long>(victim));
    update_block(bb, be);
  }
}

}  // namespace sol::backends
