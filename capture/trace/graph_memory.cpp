#include "capture/trace/graph_memory.hpp"

#include <algorithm>

#include "capture/alloc/observers.hpp"

namespace sol::capture::trace {

GraphMemory::Map::iterator GraphMemory::holder(uintptr_t lo) noexcept {
  auto it = map_.upper_bound(lo);
  if (it == map_.begin()) return map_.end();
  --it;
  return it->second.hi > lo ? it : map_.end();
}

GraphMemory::Ref GraphMemory::locate(uintptr_t lo, uintptr_t hi, Born& born) {
  born.buf = 0;
  born.parts.clear();
  auto it = holder(lo);
  if (it != map_.end() && it->second.hi >= hi)
    return Ref{it->second.id, lo - it->first, it->second.version, &it->second};
  // A new buffer: [lo, hi) and every buffer it overlaps, whole.
  uintptr_t b = lo, e = hi;
  auto first = it != map_.end() ? it : map_.lower_bound(lo);
  auto last = first;
  while (last != map_.end() && last->first < hi) {
    b = std::min(b, last->first);
    e = std::max(e, last->second.hi);
    ++last;
  }
  ++generation_;
  if (map_.size() >= kMaxBuffers) {
    map_.clear();
    pages_.clear();
    first = last = map_.end();
  }
  Buffer joined{e, next_id_++, 0, {}};
  for (auto p = first; p != last; ++p) {
    born.parts.push_back(Part{p->second.id, p->first - b, p->second.version});
    joined.known.insert(joined.known.end(), p->second.known.begin(), p->second.known.end());
  }
  map_.erase(first, last);
  born.buf = joined.id;
  born.bytes = e - b;
  Buffer& made = map_.emplace(b, std::move(joined)).first->second;
  // Known to the free path before the program can give this memory back.
  pages_.add(b, e);
  alloc::watch(reinterpret_cast<const void*>(b), reinterpret_cast<const void*>(e));
  return Ref{made.id, lo - b, 0, &made};
}

bool GraphMemory::known(const Buffer* b, uint64_t key, uint64_t content) noexcept {
  for (const Buffer::Known& k : b->known)
    if (k.key == key) return k.content == content;
  return false;
}

void GraphMemory::learn(Buffer* b, uintptr_t lo, uintptr_t hi, uint64_t key, uint64_t content) {
  std::erase_if(b->known, [&](const Buffer::Known& k) { return k.key == key || (k.lo < hi && k.hi > lo); });
  b->known.push_back(Buffer::Known{lo, hi, key, content});
}

void GraphMemory::unknown(Buffer* b, uintptr_t lo, uintptr_t hi) noexcept {
  if (!b->known.empty())
    std::erase_if(b->known, [&](const Buffer::Known& k) { return k.lo < hi && k.hi > lo; });
}

void GraphMemory::forget(const void* p, size_t bytes) noexcept {
  const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  if (!pages_.any(lo, hi)) return;
  auto it = map_.upper_bound(lo);
  if (it != map_.begin() && std::prev(it)->second.hi > lo) --it;
  if (it != map_.end() && it->first < hi) ++generation_;
  while (it != map_.end() && it->first < hi) it = map_.erase(it);
  pages_.remove_inside(lo, hi);
  constexpr uintptr_t kPage = uintptr_t{1} << PageSet::kPageBits;
  // The pages the block shares with its neighbours keep their bits while a buffer is there.
  for (const uintptr_t page : {lo & ~(kPage - 1), (hi - 1) & ~(kPage - 1)}) {
    auto n = map_.upper_bound(page + kPage - 1);
    const bool used = n != map_.begin() && std::prev(n)->second.hi > page;
    if (!used) pages_.remove_inside(page, page + kPage);
  }
}

void GraphMemory::clear() noexcept {
  map_.clear();
  pages_.clear();
  next_id_ = 1;
  ++generation_;
}

}  // namespace sol::capture::trace
