// Call stacks without libunwind: glibc's backtrace() is the fallback (a GPU host with pip's
// PyTorch has no libunwind.so.8), and it must see the same frames as libunwind. The per-thread
// cache that recognises a repeated stack without a walk, and the flat tables of ids.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capture/trace/hash_slots.hpp"
#include "capture/trace/stacks.hpp"

namespace sol::capture::trace {
namespace {

// The frames above libsol's own code (here: above this test executable, which links the capture
// library statically, so the frames of gtest's runner and of the C library's start-up).
std::vector<uintptr_t> walk(const Unwinder& u) {
  uintptr_t ips[64];
  const int n = u.capture(ips, 64);
  return std::vector<uintptr_t>(ips, ips + (n > 0 ? n : 0));
}

TEST(Unwinder, GlibcBacktraceIsTheFallback) {
  Unwinder libc;
  std::string why;
  ASSERT_TRUE(libc.load(why, /*libunwind=*/false));
  EXPECT_TRUE(libc.loaded());
  EXPECT_NE(why.find("glibc's backtrace()"), std::string::npos) << why;
  EXPECT_FALSE(walk(libc).empty());
}

TEST(Unwinder, GlibcBacktraceSeesTheFramesLibunwindSees) {
  Unwinder libunwind, libc;
  std::string why;
  ASSERT_TRUE(libunwind.load(why));
  if (!why.empty()) GTEST_SKIP() << "no libunwind here: " << why;
  ASSERT_TRUE(libc.load(why, false));
  // Both walks start below the same frame of this test (skipped as the executable's own code),
  // so the frames of the runner above it are the same return addresses.
  std::vector<uintptr_t> a, b;
  for (int i = 0; i < 2; ++i) (i == 0 ? a : b) = walk(i == 0 ? libunwind : libc);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

// A stack as StackCache sees it: words of memory, each frame's return address at its slot.
struct FakeStack {
  uintptr_t words[64] = {};
  uintptr_t ips[8], slots[8];
  int n = 0;
  // Frames at words 0, 3, 5, 9, ... (frames of different sizes), return addresses from `base`.
  explicit FakeStack(uintptr_t base, int frames = 6) : n(frames) {
    int at = 0;
    for (int i = 0; i < n; ++i) {
      at += i % 3 + 1;
      words[at] = ips[i] = base + 16 * i;
      slots[i] = reinterpret_cast<uintptr_t>(&words[at]);
    }
  }
};

TEST(StackCache, RecognisesARememberedStackUntilAFrameChanges) {
  StackCache cache;
  FakeStack st(0x401000);
  EXPECT_EQ(cache.find(7, st.slots[0]), 0u);
  cache.add(7, st.slots[0], st.ips, st.slots, st.n, 42);
  EXPECT_EQ(cache.find(7, st.slots[0]), 42u);
  EXPECT_EQ(cache.find(8, st.slots[0]), 0u);  // another symbol
  EXPECT_EQ(cache.find(7, 0), 0u);            // no slot known: always a miss
  // The outermost caller changed: another stack.
  *reinterpret_cast<uintptr_t*>(st.slots[st.n - 1]) += 4;
  EXPECT_EQ(cache.find(7, st.slots[0]), 0u);
  *reinterpret_cast<uintptr_t*>(st.slots[st.n - 1]) -= 4;
  EXPECT_EQ(cache.find(7, st.slots[0]), 42u);
  // The innermost return address changed: another stack.
  *reinterpret_cast<uintptr_t*>(st.slots[0]) += 4;
  EXPECT_EQ(cache.find(7, st.slots[0]), 0u);
}

TEST(StackCache, StacksSharingTheirInnermostFrameAreToldApart) {
  // One function (same innermost slot and return address) called from three places.
  StackCache cache;
  FakeStack st(0x401000);
  uintptr_t& outer = *reinterpret_cast<uintptr_t*>(st.slots[st.n - 1]);
  for (uint32_t caller = 0; caller < 3; ++caller) {
    outer = st.ips[st.n - 1] = 0x900000 + caller;
    cache.add(7, st.slots[0], st.ips, st.slots, st.n, 100 + caller);
  }
  for (uint32_t caller = 0; caller < 3; ++caller) {
    outer = 0x900000 + caller;
    EXPECT_EQ(cache.find(7, st.slots[0]), 100 + caller);
  }
  outer = 0x900003;
  EXPECT_EQ(cache.find(7, st.slots[0]), 0u);
}

TEST(StackCache, ManyStacksStayFindableAndTheCacheStartsOverWhenFull) {
  StackCache cache;
  std::vector<FakeStack> stacks;
  stacks.reserve(9000);
  for (uint32_t i = 0; i < 9000; ++i) stacks.emplace_back(0x401000 + 0x1000 * i, 1 + i % 8);
  for (uint32_t i = 0; i < 5000; ++i) cache.add(1, stacks[i].slots[0], stacks[i].ips, stacks[i].slots, stacks[i].n, i + 1);
  EXPECT_EQ(cache.size(), 5000u);
  for (uint32_t i = 0; i < 5000; ++i) ASSERT_EQ(cache.find(1, stacks[i].slots[0]), i + 1);
  for (uint32_t i = 5000; i < 9000; ++i) cache.add(1, stacks[i].slots[0], stacks[i].ips, stacks[i].slots, stacks[i].n, i + 1);
  EXPECT_LE(cache.size(), 8192u);
  EXPECT_EQ(cache.find(1, stacks[8999].slots[0]), 9000u);  // the newest survive a start-over
}

TEST(HashSlots, FindsWhatWasPutAcrossGrowth) {
  HashSlots<uint32_t> ids;
  EXPECT_EQ(ids.find(12345), nullptr);
  for (uint64_t k = 1; k <= 10000; ++k) ids.put(k * 0x9e3779b97f4a7c15ull | 1, static_cast<uint32_t>(k));
  EXPECT_EQ(ids.size(), 10000u);
  for (uint64_t k = 1; k <= 10000; ++k) {
    const uint32_t* v = ids.find(k * 0x9e3779b97f4a7c15ull | 1);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, k);
  }
  ids.put(0x9e3779b97f4a7c15ull | 1, 7);  // replaces
  EXPECT_EQ(*ids.find(0x9e3779b97f4a7c15ull | 1), 7u);
  EXPECT_EQ(ids.size(), 10000u);
  // Keys that differ only above the low bits (hashes of nearby values) do not all collide.
  HashSlots<uint32_t> near;
  for (uint64_t k = 1; k <= 1000; ++k) near.put(k << 32 | 1, static_cast<uint32_t>(k));
  for (uint64_t k = 1; k <= 1000; ++k) EXPECT_EQ(*near.find(k << 32 | 1), k);
}

}  // namespace
}  // namespace sol::capture::trace
