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

size_t StackCache::set_of(uint32_t sym, uintptr_t slot, uintptr_t ip) noexcept {
  uint64_t h = (slot * 0x9e3779b97f4a7c15ull) ^ (ip * 0xc2b2ae3d27d4eb4full) ^ sym;
  return static_cast<size_t>(h ^ (h >> 29)) % kSets;
}

uint32_t StackCache::find(uint32_t sym, uintptr_t slot) const noexcept {
  if (!slot) return 0;
  const uintptr_t ip = *reinterpret_cast<const uintptr_t*>(slot);
  const Entry* way = &entries_[set_of(sym, slot, ip) * kWays];
  for (size_t w = 0; w < kWays; ++w) {
    const Entry& e = way[w];
    if (e.slot != slot || e.ip != ip || e.sym != sym) continue;
    size_t k = 1;
    while (k < e.slots.size() && *reinterpret_cast<const uintptr_t*>(e.slots[k]) == e.ips[k]) ++k;
    if (k == e.slots.size()) return e.site;
  }
  return 0;
}

void StackCache::add(uint32_t sym, uintptr_t slot, const uintptr_t* ips, const uintptr_t* slots, int n,
                     uint32_t site) {
  if (!slot || n == 0 || slots[0] != slot || site == 0) return;
  const size_t set = set_of(sym, slot, ips[0]);
  Entry& e = entries_[set * kWays + next_[set]];
  next_[set] = static_cast<uint8_t>((next_[set] + 1) % kWays);
  e.slot = slot;
  e.ip = ips[0];
  e.sym = sym;
  e.site = site;
  e.ips.assign(ips, ips + n);
  e.slots.assign(slots, slots + n);
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
