// SOL's own pages for large allocations (capture/lazy/served.hpp), driven directly (no hooks):
// carving, coalescing, the cache of given-back blocks, resizing in place, served_block() on every
// kind of address, zero pages after a block that was left protected, threads, fork.
//
// serve_from() holds for the rest of a process, and the layout a test expects (blocks carved one
// after the other from the front of the region) only holds in a fresh one: each test runs its body
// in a child forked from this process, which never serves itself. A failed expectation in the child
// prints as usual and makes it exit 1.
#include "capture/lazy/served.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace sol::capture::lazy {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
constexpr size_t kMin = 64 << 10;
constexpr size_t kMiB = 1 << 20;
// Larger than the whole cache (64 MiB): given back to the OS and to the free lists at once. Never
// touched beyond a few pages, so they cost address space only.
constexpr size_t kBig = 80 * kMiB;

void in_fresh_process(void (*body)()) {
  ASSERT_FALSE(serving()) << "the test process itself must never serve";
  fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (serve_from(kMin)) body();
    else ADD_FAILURE() << "serve_from failed";
    fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "expectations failed in the child (above)";
}

uintptr_t addr(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

// [b, e) as served_block() reports it for p; {0, 0} when p is not served.
std::pair<uintptr_t, uintptr_t> block_of(const void* p) {
  uintptr_t b = 0, e = 0;
  if (!served_block(p, b, e)) return {0, 0};
  return {b, e};
}

bool all_bytes(const void* p, size_t n, unsigned char v) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (c[i] != v) return false;
  return true;
}

TEST(Served, NothingIsServedBeforeServeFrom) {
  EXPECT_FALSE(serving());
  EXPECT_EQ(allocate(kMiB), nullptr);
  int local = 0;
  EXPECT_EQ(block_of(&local), std::make_pair(uintptr_t{0}, uintptr_t{0}));
  in_fresh_process([] {
    EXPECT_TRUE(serving());
    // A second call changes nothing: the threshold stays the first one.
    EXPECT_TRUE(serve_from(kPage));
    EXPECT_EQ(allocate(kMin - 1), nullptr);
    EXPECT_EQ(allocate(2 * kPage), nullptr);
    EXPECT_NE(allocate(kMin), nullptr);
  });
}

TEST(Served, CarvesWholePagesOneAfterTheOther) {
  in_fresh_process([] {
    char* a = static_cast<char*>(allocate(kMin));
    char* b = static_cast<char*>(allocate(kMin + 1));
    char* c = static_cast<char*>(allocate(3 * kMiB));
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(addr(a) % kPage, 0u);
    EXPECT_EQ(b, a + kMin);
    EXPECT_EQ(c, b + kMin + kPage);  // kMin + 1 bytes take one page more
    EXPECT_TRUE(all_bytes(a, kMin, 0) && all_bytes(b, kMin + kPage, 0) && all_bytes(c, 3 * kMiB, 0));

    // Every address of a block names it, up to its last byte; its end is the next block's start.
    const auto ab = std::make_pair(addr(a), addr(a) + kMin);
    const auto bb = std::make_pair(addr(b), addr(b) + kMin + kPage);
    EXPECT_EQ(block_of(a), ab);
    EXPECT_EQ(block_of(a + 1), ab);
    EXPECT_EQ(block_of(a + kPage + 17), ab);
    EXPECT_EQ(block_of(a + kMin - 1), ab);
    EXPECT_EQ(block_of(a + kMin), bb);
    EXPECT_EQ(block_of(b + kMin + kPage - 1), bb);
    EXPECT_EQ(block_of(c + 3 * kMiB - 1), std::make_pair(addr(c), addr(c) + 3 * kMiB));
    // Past the last block, before the region, not in it.
    EXPECT_EQ(block_of(c + 3 * kMiB).first, 0u);
    EXPECT_EQ(block_of(a - 1).first, 0u);
    int local = 0;
    EXPECT_EQ(block_of(&local).first, 0u);
    void* small = std::malloc(100);
    EXPECT_EQ(block_of(small).first, 0u);
    std::free(small);

    // Below the threshold, or larger than the region: the next allocator's.
    EXPECT_EQ(allocate(kMin - 1), nullptr);
    EXPECT_EQ(allocate(size_t{1} << 50), nullptr);
    EXPECT_EQ(allocate(SIZE_MAX), nullptr);

    release(addr(b));
    EXPECT_EQ(block_of(b).first, 0u);
    EXPECT_EQ(block_of(a + kMin).first, 0u);
    EXPECT_EQ(block_of(a), ab);
    EXPECT_EQ(block_of(c).first, addr(c));
  });
}

// Blocks given back to the free lists merge with free neighbours on either side: a block the size
// of three then fits where the three were (first fit takes it before the rest of the region,
// which is in a larger class).
TEST(Served, CoalescesNeighboursOnRelease) {
  in_fresh_process([] {
    char* a = static_cast<char*>(allocate(kBig));
    char* b = static_cast<char*>(allocate(kBig));
    char* c = static_cast<char*>(allocate(kBig));
    char* d = static_cast<char*>(allocate(kBig));  // keeps a-c apart from the rest of the region
    ASSERT_TRUE(a && b && c && d);
    ASSERT_EQ(b, a + kBig);
    ASSERT_EQ(c, b + kBig);
    // Both neighbours free when b goes.
    release(addr(a));
    release(addr(c));
    release(addr(b));
    for (const char* p : {a, a + kBig - 1, b, b + kBig / 2, c, c + kBig - 1}) EXPECT_EQ(block_of(p).first, 0u);
    char* abc = static_cast<char*>(allocate(3 * kBig));
    EXPECT_EQ(abc, a);
    EXPECT_EQ(block_of(c + kBig - 1), std::make_pair(addr(a), addr(a) + 3 * kBig));
    release(addr(abc));
    // Left, then right.
    char* x = static_cast<char*>(allocate(kBig));
    char* y = static_cast<char*>(allocate(kBig));
    char* z = static_cast<char*>(allocate(kBig));
    ASSERT_EQ(x, a);
    ASSERT_EQ(y, b);
    ASSERT_EQ(z, c);
    release(addr(x));
    release(addr(y));  // merges with x on its left
    EXPECT_EQ(allocate(2 * kBig), a);
    release(addr(a));
    release(addr(z));  // merges with x + y on its left
    EXPECT_EQ(allocate(3 * kBig), a);
  });
}

// A moderate block given back is kept (not remapped) and reused for a request of about its size:
// zeroed for a caller that asks for zero, as it was for one that does not.
TEST(Served, ReusesCachedBlocks) {
  in_fresh_process([] {
    char* a = static_cast<char*>(allocate(kMiB, false));
    ASSERT_NE(a, nullptr);
    std::memset(a, 0xab, kMiB);
    release(addr(a));
    char* b = static_cast<char*>(allocate(kMiB - kPage, false));
    EXPECT_EQ(b, a);
    EXPECT_EQ(block_of(b), std::make_pair(addr(a), addr(a) + kMiB - kPage));
    EXPECT_EQ(block_of(b + kMiB - 1).first, 0u);  // the page it did not need went back
    EXPECT_EQ(b[0], static_cast<char>(0xab));  // not zeroed: malloc's
    release(addr(b));
    char* c = static_cast<char*>(allocate(kMiB - kPage, true));
    EXPECT_EQ(c, a);
    EXPECT_TRUE(all_bytes(c, kMiB - kPage, 0));
    // Far too small for the cached block: a fresh one.
    release(addr(c));
    char* d = static_cast<char*>(allocate(kMin));
    EXPECT_NE(d, a);
    EXPECT_TRUE(all_bytes(d, kMin, 0));
  });
}

// The lazy executor may leave a block's pages inaccessible when the program frees it: the next
// block there is read-write and zero all the same, cached or remapped.
TEST(Served, ZeroAndWritableAfterAProtectedRelease) {
  in_fresh_process([] {
    for (const size_t bytes : {kMiB, kBig}) {
      char* a = static_cast<char*>(allocate(bytes));
      ASSERT_NE(a, nullptr);
      std::memset(a, 0x5a, 4 * kPage);
      std::memset(a + bytes - 4 * kPage, 0x5a, 4 * kPage);
      ASSERT_EQ(mprotect(a, bytes, PROT_NONE), 0);
      release(addr(a));
      char* b = static_cast<char*>(allocate(bytes));
      ASSERT_EQ(b, a) << bytes;
      EXPECT_TRUE(all_bytes(b, 4 * kPage, 0)) << bytes;
      EXPECT_TRUE(all_bytes(b + bytes - 4 * kPage, 4 * kPage, 0)) << bytes;
      b[0] = 1;  // faults (the child dies) unless writable
      b[bytes - 1] = 1;
      ASSERT_EQ(mprotect(b, bytes / 2, PROT_READ), 0);
      release(addr(b));
      char* c = static_cast<char*>(allocate(bytes, false));
      ASSERT_EQ(c, a);
      c[0] = 2;
      c[bytes / 2 - 1] = 2;
      release(addr(c));
    }
  });
}

TEST(Served, ResizesInPlace) {
  in_fresh_process([] {
    unsigned char* a = static_cast<unsigned char*>(allocate(kMiB));
    unsigned char* b = static_cast<unsigned char*>(allocate(kBig));
    ASSERT_TRUE(a && b);
    ASSERT_EQ(b, a + kMiB);
    for (size_t i = 0; i < kMiB; ++i) a[i] = static_cast<unsigned char>(i * 7);
    EXPECT_FALSE(resize(addr(a), kMiB + 1));  // b follows
    EXPECT_TRUE(resize(addr(a), kMiB));
    EXPECT_FALSE(resize(addr(a), kMin - 1));  // below the threshold: the caller moves it

    // Shrinking gives the tail back: no longer served, and zero when grown into again.
    EXPECT_TRUE(resize(addr(a), kMiB / 2 - 10));
    EXPECT_EQ(block_of(a), std::make_pair(addr(a), addr(a) + kMiB / 2));
    EXPECT_EQ(block_of(a + kMiB / 2).first, 0u);
    EXPECT_EQ(block_of(a + kMiB - 1).first, 0u);
    EXPECT_TRUE(resize(addr(a), kMiB));
    EXPECT_EQ(block_of(a + kMiB - 1), std::make_pair(addr(a), addr(a) + kMiB));
    bool kept = true;
    for (size_t i = 0; i < kMiB / 2; ++i) kept = kept && a[i] == static_cast<unsigned char>(i * 7);
    EXPECT_TRUE(kept);
    EXPECT_TRUE(all_bytes(a + kMiB / 2, kMiB / 2, 0));

    // With b gone, a grows over it (b was large: straight back to the free lists).
    release(addr(b));
    EXPECT_TRUE(resize(addr(a), 3 * kMiB + 5));
    EXPECT_EQ(block_of(a + 3 * kMiB + kPage - 1), std::make_pair(addr(a), addr(a) + 3 * kMiB + kPage));
    EXPECT_EQ(a[kMiB / 2 - 1], static_cast<unsigned char>((kMiB / 2 - 1) * 7));
    // What follows is free again after a shrink: the next block starts where a now ends.
    EXPECT_TRUE(resize(addr(a), 2 * kMiB));
    EXPECT_EQ(allocate(kBig), a + 2 * kMiB);
  });
}

// Threads carving and giving back at once: every block stays its owner's (each page carries its
// owner's tag, checked before the block goes back), and served_block() agrees throughout.
TEST(Served, ThreadsAllocateAndReleaseConcurrently) {
  in_fresh_process([] {
    constexpr int kThreads = 8;
    std::vector<std::thread> threads;
    std::atomic<int> bad{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, &bad] {
        std::mt19937 rng(t);
        struct Live {
          uint32_t* p;
          size_t bytes;
          uint32_t tag;
        };
        std::vector<Live> live;
        for (uint32_t i = 0; i < 600; ++i) {
          if (live.size() < 6 && (live.empty() || rng() % 2)) {
            const size_t bytes = kMin + rng() % (2 * kMiB);
            const bool zero = rng() % 2;
            auto* p = static_cast<uint32_t*>(allocate(bytes, zero));
            if (!p) {
              ++bad;
              continue;
            }
            const uint32_t tag = (static_cast<uint32_t>(t) << 24) | i;
            for (size_t off = 0; off < bytes / 4; off += kPage / 4) {
              if (zero && p[off] != 0) ++bad;
              p[off] = tag;
            }
            p[bytes / 4 - 1] = tag;
            live.push_back({p, bytes, tag});
          } else {
            const size_t k = rng() % live.size();
            const Live l = live[k];
            live.erase(live.begin() + static_cast<long>(k));
            for (size_t off = 0; off < l.bytes / 4; off += kPage / 4)
              if (l.p[off] != l.tag) ++bad;
            if (l.p[l.bytes / 4 - 1] != l.tag) ++bad;
            uintptr_t b = 0, e = 0;
            const char* inside = reinterpret_cast<const char*>(l.p) + rng() % l.bytes;
            if (!served_block(inside, b, e) || b != addr(l.p) || e < b + l.bytes || e - b - l.bytes >= kPage) ++bad;
            if (rng() % 4 == 0) {
              // Sometimes resized first: shrunk, or grown where it can.
              const size_t n = kMin + rng() % l.bytes;
              if (resize(addr(l.p), n)) {
                if (!served_block(l.p, b, e) || e - b < n) ++bad;
              }
            }
            release(addr(l.p));
          }
        }
        for (const Live& l : live) release(addr(l.p));
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(bad.load(), 0);
  });
}

// fork() while other threads carve: the child finds the lists whole (no lock held), its blocks are
// copies, and it serves on its own.
TEST(Served, ForkChildServes) {
  in_fresh_process([] {
    auto* kept = static_cast<unsigned char*>(allocate(2 * kMiB));
    ASSERT_NE(kept, nullptr);
    std::memset(kept, 0x3c, 2 * kMiB);
    std::atomic<bool> stop{false};
    std::vector<std::thread> churn;
    for (int t = 0; t < 3; ++t)
      churn.emplace_back([&stop, t] {
        size_t n = kMin * static_cast<size_t>(t + 1);
        while (!stop.load(std::memory_order_relaxed)) {
          void* p = allocate(n);
          if (p) release(addr(p));
          n = n % (40 * kMiB) + 3 * kPage;
        }
      });
    for (int i = 0; i < 20; ++i) {
      fflush(nullptr);
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        alarm(30);  // a lock the child inherited held would hang it: let that fail the test instead
        int ok = all_bytes(kept, 2 * kMiB, 0x3c) && block_of(kept + kMiB).first == addr(kept);
        std::memset(kept, 1, kMiB);  // the child's copy
        for (int j = 0; j < 50; ++j) {
          void* p = allocate(kMiB + static_cast<size_t>(j) * kPage);
          ok = ok && p && block_of(p).first == addr(p);
          if (p) release(addr(p));
        }
        _exit(ok ? 0 : 1);
      }
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "fork " << i;
    }
    stop = true;
    for (auto& th : churn) th.join();
    EXPECT_TRUE(all_bytes(kept, 2 * kMiB, 0x3c));  // the children wrote their own copies
  });
}

}  // namespace
}  // namespace sol::capture::lazy
