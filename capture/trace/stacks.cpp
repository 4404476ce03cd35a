#include "capture/trace/stacks.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>

#include <algorithm>
#include <cctype>

namespace sol::capture::trace {
namespace {

// libunwind's enum unw_caching_policy_t: UNW_CACHE_PER_THREAD.
constexpr int kCachePerThread = 2;

struct Range {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  ElfW(Addr) bias = 0;
};

}  // namespace

bool Unwinder::load(std::string& why, bool libunwind) noexcept {
  Walk walk = nullptr;
  why.clear();
  if (void* lib = libunwind ? dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL) : nullptr) {
    walk = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "unw_backtrace"));
    auto set_policy = reinterpret_cast<int (*)(void*, int)>(dlsym(lib, "_ULx86_64_set_caching_policy"));
    auto* space = static_cast<void**>(dlsym(lib, "_ULx86_64_local_addr_space"));
    // A per-thread cache of unwind information makes repeated stacks cheap (heaptrack does the same).
    if (walk && set_policy && space) set_policy(*space, kCachePerThread);
    why = walk ? "" : "libunwind.so.8 has no unw_backtrace; ";
  } else if (libunwind) {
    why = std::string(dlerror()) + "; ";
  }
  if (!walk) {
    // Machines without libunwind (a GPU host with pip's PyTorch) still have glibc's backtrace(),
    // which walks with libgcc's unwinder. Slower on a new stack, but StackCache spares it repeats.
    // Its first call loads libgcc_s: made here, not on the first traced call.
    why += "walking stacks with glibc's backtrace()";
    void* warm[4];
    ::backtrace(warm, 4);
    walk = &::backtrace;
  }

  // libsol's own code: the frames to skip at the top of every stack.
  Dl_info self{};
  link_map* map = nullptr;
  dladdr1(reinterpret_cast<const void*>(&Unwinder::stack_top), &self, reinterpret_cast<void**>(&map),
          RTLD_DL_LINKMAP);
  Range range;
  range.bias = map ? map->l_addr : 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* r = static_cast<Range*>(data);
        if (info->dlpi_addr != r->bias) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
          if (lo < r->lo) r->lo = lo;
          if (lo + ph.p_memsz > r->hi) r->hi = lo + ph.p_memsz;
        }
        return 1;
      },
      &range);
  own_lo_ = range.lo;
  own_hi_ = range.hi;
  backtrace_ = walk;
  return true;
}

int Unwinder::capture(uintptr_t* ips, int max) const noexcept {
  if (!backtrace_ || max <= 0) return 0;
  constexpr int kOwnFrames = 12;  // SOL's frames above the caller: slow path, submit, recorder...
  void* raw[256 + kOwnFrames];
  const int want = max + kOwnFrames < static_cast<int>(sizeof raw / sizeof raw[0])
                       ? max + kOwnFrames
                       : static_cast<int>(sizeof raw / sizeof raw[0]);
  const int n = backtrace_(raw, want);
  int first = 0;
  while (first < n) {
    const auto ip = reinterpret_cast<uintptr_t>(raw[first]);
    if (ip < own_lo_ || ip >= own_hi_) break;
    ++first;
  }
  int count = 0;
  for (int i = first; i < n && count < max; ++i) ips[count++] = reinterpret_cast<uintptr_t>(raw[i]);
  return count;
}

int Unwinder::find_slots(uintptr_t slot, const uintptr_t* ips, int n, uintptr_t stack_hi,
                         uintptr_t* slots) noexcept {
  if (!slot || n <= 0 || !stack_hi || slot >= stack_hi || *reinterpret_cast<const uintptr_t*>(slot) != ips[0])
    return 0;
  slots[0] = slot;
  // A frame larger than this (a big array on the stack) ends the search: the stack is then
  // simply not cached.
  constexpr uintptr_t kMaxFrame = 1 << 16;
  for (int k = 1; k < n; ++k) {
    uintptr_t p = slots[k - 1] + sizeof(uintptr_t);
    const uintptr_t end = std::min(stack_hi, p + kMaxFrame);
    while (p + sizeof(uintptr_t) <= end && *reinterpret_cast<const uintptr_t*>(p) != ips[k])
      p += sizeof(uintptr_t);
    if (p + sizeof(uintptr_t) > end) return k;
    slots[k] = p;
  }
  return n;
}

uintptr_t Unwinder::stack_top() noexcept {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* base = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &base, &size);
  pthread_attr_destroy(&attr);
  return rc == 0 ? reinterpret_cast<uintptr_t>(base) + size : 0;
}

uint64_t StackCache::key_of(uint32_t sym, uintptr_t slot, uintptr_t ip) noexcept {
  uint64_t h = (slot * 0x9e3779b97f4a7c15ull) ^ (ip * 0xc2b2ae3d27d4eb4full) ^ sym;
  return (h ^ (h >> 29)) | 1;  // never 0, the empty entry
}

uint32_t StackCache::find(uint32_t sym, uintptr_t slot) const noexcept {
  if (!slot || used_ == 0) return 0;
  const uintptr_t ip = *reinterpret_cast<const uintptr_t*>(slot);
  const uint64_t key = key_of(sym, slot, ip);
  for (size_t i = key & mask_;; i = (i + 1) & mask_) {
    const Entry& e = table_[i];
    if (e.key == 0) return 0;
    if (e.key != key || e.sym != sym) continue;
    // Every remembered slot lies between `slot` and the top of the stack (each was found above
    // the previous one), so once the innermost slot is the same, all are live stack words.
    const uintptr_t* f = frames_.data() + e.at;
    if (f[0] != slot) continue;
    uint32_t k = 0;
    while (k < e.n && *reinterpret_cast<const uintptr_t*>(f[2 * k]) == f[2 * k + 1]) ++k;
    if (k == e.n) return e.site;
  }
}

void StackCache::add(uint32_t sym, uintptr_t slot, const uintptr_t* ips, const uintptr_t* slots, int n,
                     uint32_t site) {
  if (!slot || n <= 0 || slots[0] != slot || site == 0) return;
  if (used_ >= kMaxStacks) {
    table_.clear();
    frames_.clear();
    used_ = 0;
  }
  if ((used_ + 1) * 2 > table_.size()) {
    std::vector<Entry> old(table_.empty() ? 256 : table_.size() * 2);
    old.swap(table_);
    mask_ = table_.size() - 1;
    for (const Entry& e : old)
      if (e.key) place(e);
  }
  Entry e;
  e.key = key_of(sym, slot, ips[0]);
  e.sym = sym;
  e.site = site;
  e.at = static_cast<uint32_t>(frames_.size());
  e.n = static_cast<uint32_t>(n);
  for (int k = 0; k < n; ++k) {
    frames_.push_back(slots[k]);
    frames_.push_back(ips[k]);
  }
  place(e);
  ++used_;
}

void StackCache::place(const Entry& e) noexcept {
  size_t i = e.key & mask_;
  while (table_[i].key) i = (i + 1) & mask_;
  table_[i] = e;
}

bool is_python_frame(const std::string& frame) {
  // "qualname (file:line)"; native ones end in "(object+0xoffset)".
  if (frame.size() < 4 || frame.back() != ')') return false;
  size_t i = frame.size() - 1;
  while (i > 0 && std::isdigit(static_cast<unsigned char>(frame[i - 1]))) --i;
  return i < frame.size() - 1 && i > 0 && frame[i - 1] == ':' && frame.rfind(" (") != std::string::npos &&
         frame.find("+0x", frame.rfind(" (")) == std::string::npos;
}

std::string short_frame(const std::string& frame) {
  // "ns::f(int, x<y>) const (libfoo.so+0x10)" -> "ns::f"; "libfoo.so+0x10" stays.
  const size_t loc = frame.rfind(" (");
  if (loc == std::string::npos) return frame;
  if (is_python_frame(frame)) {
    // "train (/home/me/work/train.py:42)" -> "train (train.py:42)": the line is the point.
    const size_t slash = frame.rfind('/');
    return frame.substr(0, loc) + " (" + frame.substr(slash != std::string::npos && slash > loc ? slash + 1 : loc + 2);
  }
  std::string name = frame.substr(0, loc);
  // The parameter list is the last balanced (...) group of the name (templates may contain
  // parentheses too, so match from the end).
  int depth = 0;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') {
      ++depth;
    } else if (name[i] == '(') {
      if (--depth == 0) {
        name.resize(i);
        break;
      }
    }
  }
  return name.empty() ? frame.substr(loc + 2, frame.size() - loc - 3) : name;
}

}  // namespace sol::capture::trace
