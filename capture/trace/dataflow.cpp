#include "capture/trace/dataflow.hpp"

#include <algorithm>

namespace sol::capture::trace {

void Dataflow::link_reads(uint32_t sig, uintptr_t lo, uintptr_t hi, Seen& seen) {
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < hi; ++it) {
    if (it->second.end <= lo) continue;
    const uint32_t from = it->second.sig;
    // One edge per producer and call, however many of the call's operands it wrote.
    if (std::find(seen.ids, seen.ids + seen.count, from) != seen.ids + seen.count) continue;
    if (seen.count < Seen::kMax) seen.ids[seen.count++] = from;
    add_edge(static_cast<uint64_t>(from) << 32 | sig);
  }
}

void Dataflow::write(uint32_t sig, uintptr_t lo, uintptr_t hi) {
  // Programs rewrite the same buffers over and over: then only the writer changes.
  auto exact = ranges_.find(lo);
  if (exact != ranges_.end() && exact->second.end == hi) {
    exact->second.sig = sig;
    return;
  }
  // Otherwise cut every range overlapping [lo, hi) down to its parts outside it, then insert [lo, hi).
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
    if (w.end > hi) ranges_.emplace(hi, Written{w.end, w.sig});
  }
  if (ranges_.size() >= kMaxRanges) ranges_.clear();
  ranges_[lo] = Written{hi, sig};
}

void Dataflow::record(uint32_t sig, const blas::Operand* ops, int n) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    Seen seen;
    for (int i = 0; i < n; ++i) {
      if (!ops[i].read || !ops[i].bytes) continue;
      const auto lo = reinterpret_cast<uintptr_t>(ops[i].ptr);
      link_reads(sig, lo, lo + ops[i].bytes, seen);
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

void Dataflow::add_edge(uint64_t key) noexcept {
  if (key == last_edge_) {
    ++last_count_;
    return;
  }
  flush_edge();
  last_edge_ = key;
  last_count_ = 1;
}

void Dataflow::flush_edge() const {
  if (last_count_) edges_[last_edge_] += last_count_;
  last_count_ = 0;
}

std::vector<Dataflow::Edge> Dataflow::edges() const {
  std::lock_guard<std::mutex> lock(mu_);
  flush_edge();
  std::vector<Edge> out;
  out.reserve(edges_.size());
  for (const auto& [key, count] : edges_)
    out.push_back(Edge{static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key), count});
  return out;
}

void Dataflow::clear() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  ranges_.clear();
  edges_.clear();
  last_edge_ = ~uint64_t{0};
  last_count_ = 0;
}

}  // namespace sol::capture::trace
