#include "capture/trace/dataflow.hpp"

#include <algorithm>
#include <cstdlib>

#include "capture/alloc/observers.hpp"

namespace sol::capture::trace {
namespace {

using Locked = alloc::QuietLock;  // the free observer (forget) takes the same lock

}  // namespace

// ------------------------------------------------------------------------------------ PageSet

PageSet::~PageSet() {
  if (auto* table = table_.load(std::memory_order_relaxed)) {
    for (uint64_t r : made_) delete[] table[r].load(std::memory_order_relaxed);
    std::free(table);
  }
}

template <class Get, class F>
bool PageSet::each_word(uint64_t first, uint64_t last, Get bitmap, F f) noexcept {
  for (uint64_t page = first; page <= last;) {
    const uint64_t r = page / kPagesPerRegion;
    const uint64_t end = std::min(last, (r + 1) * kPagesPerRegion - 1);
    if (Word* bits = bitmap(r)) {
      for (uint64_t p = page; p <= end;) {
        const uint64_t in_region = p & (kPagesPerRegion - 1);
        const unsigned bit = in_region & 63;
        const uint64_t n = std::min<uint64_t>(64 - bit, end - p + 1);
        if (f(bits[in_region >> 6], (n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1) << bit)) return true;
        p += n;
      }
    }
    page = end + 1;
  }
  return false;
}

PageSet::Word* PageSet::bitmap(uint64_t r) const noexcept {
  const auto* table = table_.load(std::memory_order_acquire);
  return table ? table[r].load(std::memory_order_acquire) : nullptr;
}

PageSet::Word* PageSet::make_bitmap(uint64_t r) noexcept {
  auto* table = table_.load(std::memory_order_acquire);
  if (!table) {
    // calloc: the kernel's zero pages, touched only where a region is used (4 KiB per 512 GiB).
    // std::atomic<Word*> is a pointer that zero bytes make null.
    table = static_cast<std::atomic<Word*>*>(std::calloc(kRegions, sizeof(std::atomic<Word*>)));
    if (!table) return nullptr;
    table_.store(table, std::memory_order_release);
  }
  Word* bits = table[r].load(std::memory_order_acquire);
  if (!bits) {
    bits = new (std::nothrow) Word[kPagesPerRegion / 64]();
    if (!bits) return nullptr;
    try {
      made_.push_back(r);
    } catch (...) {
      delete[] bits;
      return nullptr;
    }
    table[r].store(bits, std::memory_order_release);
  }
  return bits;
}

bool PageSet::any(uintptr_t lo, uintptr_t hi) const noexcept {
  if (hi <= lo) return false;
  if (everywhere_.load(std::memory_order_relaxed) || (hi - 1) >> kAddressBits) return true;
  return each_word(
      lo >> kPageBits, (hi - 1) >> kPageBits, [this](uint64_t r) { return bitmap(r); },
      [](Word& w, uint64_t mask) { return (w.load(std::memory_order_relaxed) & mask) != 0; });
}

void PageSet::add(uintptr_t lo, uintptr_t hi) noexcept {
  if (hi <= lo || (hi - 1) >> kAddressBits) return;  // any() answers yes up there
  each_word(
      lo >> kPageBits, (hi - 1) >> kPageBits,
      [this](uint64_t r) {
        Word* bits = make_bitmap(r);
        if (!bits) everywhere_.store(true, std::memory_order_relaxed);
        return bits;
      },
      [](Word& w, uint64_t mask) {
        w.fetch_or(mask, std::memory_order_relaxed);
        return false;
      });
}

void PageSet::remove_inside(uintptr_t lo, uintptr_t hi) noexcept {
  constexpr uintptr_t kPage = uintptr_t{1} << kPageBits;
  if (hi < kPage || (hi - 1) >> kAddressBits) return;
  const uint64_t first = (lo + kPage - 1) >> kPageBits;  // lo's page if lo starts it, else the next
  const uint64_t last = (hi >> kPageBits) - 1;           // hi's page if hi ends it, else the one before
  if (first > last) return;
  each_word(
      first, last, [this](uint64_t r) { return bitmap(r); },
      [](Word& w, uint64_t mask) {
        w.fetch_and(~mask, std::memory_order_relaxed);
        return false;
      });
}

void PageSet::clear() noexcept {
  if (auto* table = table_.load(std::memory_order_relaxed))
    for (uint64_t r : made_)
      if (Word* bits = table[r].load(std::memory_order_relaxed))
        for (uint64_t i = 0; i < kPagesPerRegion / 64; ++i) bits[i].store(0, std::memory_order_relaxed);
  everywhere_.store(false, std::memory_order_relaxed);
}

// ----------------------------------------------------------------------------------- Dataflow

void Dataflow::link_reads(int operand, uintptr_t lo, uintptr_t hi, Producers& from) const {
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < hi; ++it) {
    if (it->second.end <= lo) continue;
    const uint64_t bytes = std::min(it->second.end, hi) - std::max(it->first, lo);
    // One edge per producer and call, however many of the call's operands and ranges it wrote.
    Producers::Entry* e = std::find_if(from.at, from.at + from.count,
                                       [&](const Producers::Entry& p) { return p.sig == it->second.sig; });
    if (e == from.at + from.count) {
      if (from.count == Producers::kMax) continue;
      *e = {it->second.sig, 0, 0};
      ++from.count;
    }
    e->operands |= operand < kMaxOperands ? 1u << operand : 0u;
    e->bytes += bytes;
  }
}

// Whether a range overlaps [lo, hi).
bool Dataflow::touches(uintptr_t lo, uintptr_t hi) const {
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin() && std::prev(it)->second.end > lo) return true;
  return it != ranges_.end() && it->first < hi;
}

// Cuts every range overlapping [lo, hi) down to its parts outside it.
void Dataflow::cut(uintptr_t lo, uintptr_t hi) {
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin()) --it;
  while (it != ranges_.end() && it->first < hi) {
    const uintptr_t start = it->first;
    const Written w = it->second;
    if (w.end <= lo) {
      ++it;
      continue;
    }
    it = ranges_.erase(it);
    if (start < lo) ranges_.emplace(start, Written{lo, w.sig});
    if (w.end > hi) it = ranges_.emplace(hi, Written{w.end, w.sig}).first;
  }
}

void Dataflow::write(uint32_t sig, uintptr_t lo, uintptr_t hi) {
  // Programs rewrite the same buffers over and over: then only the writer changes.
  auto exact = ranges_.find(lo);
  if (exact != ranges_.end() && exact->second.end == hi) {
    exact->second.sig = sig;
    return;
  }
  cut(lo, hi);
  if (ranges_.size() >= kMaxRanges) {
    ranges_.clear();
    pages_.clear();
  }
  ranges_[lo] = Written{hi, sig};
  // Known to the free path before the program can free this memory, which it does after the call.
  pages_.add(lo, hi);
  alloc::watch(reinterpret_cast<const void*>(lo), reinterpret_cast<const void*>(hi));
}

void Dataflow::add_edge(uint32_t from, uint32_t to, uint32_t operands, uint64_t bytes) {
  const uint64_t key = static_cast<uint64_t>(from) << 32 | to;
  if (key != last_key_) {
    last_ = &edges_[key];
    last_key_ = key;
  }
  ++last_->calls;
  last_->bytes += bytes;
  last_->operands |= operands;
}

void Dataflow::record(uint32_t sig, const blas::Operand* ops, int n) noexcept {
  try {
    Locked lock(mu_);
    // Reads first: a call that reads and writes the same bytes (C of a GEMM with beta != 0, y of
    // an axpy) reads the version before its own.
    if (!ranges_.empty()) {
      Producers from;
      for (int i = 0; i < n; ++i) {
        if (!ops[i].read || !ops[i].bytes) continue;
        const auto lo = reinterpret_cast<uintptr_t>(ops[i].ptr);
        link_reads(i, lo, lo + ops[i].bytes, from);
      }
      for (int j = 0; j < from.count; ++j) add_edge(from.at[j].sig, sig, from.at[j].operands, from.at[j].bytes);
    }
    for (int i = 0; i < n; ++i) {
      if (!ops[i].written || !ops[i].bytes) continue;
      const auto lo = reinterpret_cast<uintptr_t>(ops[i].ptr);
      write(sig, lo, lo + ops[i].bytes);
    }
  } catch (...) {
    // Out of memory: the graph misses an edge, the program goes on.
  }
}

void Dataflow::forget(const void* p, size_t bytes) noexcept {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  const uintptr_t hi = lo + bytes;
  if (!pages_.any(lo, hi)) return;
  try {
    Locked lock(mu_);
    cut(lo, hi);
    // The block's own pages hold nothing now; the pages it shares at its ends may.
    pages_.remove_inside(lo, hi);
    constexpr uintptr_t kPage = uintptr_t{1} << PageSet::kPageBits;
    for (const uintptr_t page : {lo & ~(kPage - 1), (hi - 1) & ~(kPage - 1)})
      if (!touches(page, page + kPage)) pages_.remove_inside(page, page + kPage);
  } catch (...) {
    // A range cut in two needs a node: without memory, the block keeps a stale writer.
  }
}

std::vector<Dataflow::Edge> Dataflow::edges() const {
  Locked lock(mu_);
  std::vector<Edge> out;
  out.reserve(edges_.size());
  for (const auto& [key, e] : edges_)
    out.push_back(Edge{static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key), e.calls, e.bytes, e.operands});
  return out;
}

void Dataflow::reset() noexcept {
  ranges_.clear();
  edges_.clear();
  last_key_ = ~uint64_t{0};
  last_ = nullptr;
  pages_.clear();
}

void Dataflow::clear() noexcept {
  Locked lock(mu_);
  reset();
}

// The forking thread holds the lock from the prepare handler to the parent's or child's: frees it
// makes meanwhile (other libraries' fork handlers free) must not be observed, or the observer
// would wait for the lock this thread holds. Hence the quiet count, held as long as the lock.
void Dataflow::lock_for_fork() noexcept {
  ++alloc::t_quiet;
  mu_.lock();
}

void Dataflow::unlock_in_parent() noexcept {
  mu_.unlock();
  --alloc::t_quiet;
}

void Dataflow::reset_in_child() noexcept {
  reset();
  mu_.unlock();
  --alloc::t_quiet;
}

}  // namespace sol::capture::trace
