// Dataflow: an edge joins a call to the latest writer of each byte it reads; memory given back
// starts over. And the registry through which the allocator hooks report memory given back.
#include "capture/trace/dataflow.hpp"

#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "capture/alloc/observers.hpp"

namespace sol::capture::trace {
namespace {

blas::Operand in(const void* p, size_t bytes) {
  blas::Operand o;
  o.ptr = const_cast<void*>(p);
  o.bytes = bytes;
  o.read = true;
  return o;
}
blas::Operand out(const void* p, size_t bytes) {
  blas::Operand o = in(p, bytes);
  o.read = false;
  o.written = true;
  return o;
}

// Edges as (from, to, calls, bytes, operands), sorted.
using Row = std::tuple<uint32_t, uint32_t, uint64_t, uint64_t, uint32_t>;
std::vector<Row> rows(const Dataflow& d) {
  std::vector<Row> r;
  for (const auto& e : d.edges()) r.emplace_back(e.from, e.to, e.calls, e.bytes, e.operands);
  std::sort(r.begin(), r.end());
  return r;
}

alignas(64) char mem[4096];

TEST(Dataflow, ReadLinksToTheLatestWriter) {
  Dataflow d;
  const blas::Operand w1[] = {out(mem, 256)};
  const blas::Operand w2[] = {out(mem, 256)};
  const blas::Operand r[] = {in(mem + 1024, 64), in(mem, 256)};
  d.record(1, w1, 1);
  d.record(2, w2, 1);  // a new version: 1 no longer wrote these bytes
  d.record(3, r, 2);
  d.record(3, r, 2);
  EXPECT_EQ(rows(d), (std::vector<Row>{{2, 3, 2, 512, 0b10}}));
}

TEST(Dataflow, ReadAcrossVersionsLinksToEachWriter) {
  Dataflow d;
  const blas::Operand w1[] = {out(mem, 256)};
  const blas::Operand w2[] = {out(mem + 64, 64)};  // overwrites the middle of 1's range
  const blas::Operand r[] = {in(mem, 256), in(mem + 96, 16)};
  d.record(1, w1, 1);
  d.record(2, w2, 1);
  d.record(3, r, 2);
  // 1 wrote [0, 64) and [128, 256) of what was read; 2 wrote [64, 128) (read as operand 0) and
  // [96, 112) (operand 1): one edge per producer, its bytes summed over the operands.
  EXPECT_EQ(rows(d), (std::vector<Row>{{1, 3, 1, 192, 0b01}, {2, 3, 1, 64 + 16, 0b11}}));
}

TEST(Dataflow, AnOperandReadAndWrittenReadsTheVersionBefore) {
  Dataflow d;
  blas::Operand c = in(mem, 128);
  c.written = true;
  const blas::Operand w[] = {out(mem, 128)};
  d.record(1, w, 1);
  d.record(2, &c, 1);
  d.record(2, &c, 1);
  EXPECT_EQ(rows(d), (std::vector<Row>{{1, 2, 1, 128, 1}, {2, 2, 1, 128, 1}}));
}

TEST(Dataflow, MemoryGivenBackStartsOver) {
  Dataflow d;
  const blas::Operand w[] = {out(mem, 1024)};
  const blas::Operand r[] = {in(mem, 1024)};
  d.record(1, w, 1);
  d.forget(mem + 256, 512);  // a block inside the range: the range keeps its two ends
  d.record(2, r, 1);
  EXPECT_EQ(rows(d), (std::vector<Row>{{1, 2, 1, 512, 1}}));
  d.forget(mem, 1024);
  d.record(3, r, 1);
  EXPECT_EQ(rows(d), (std::vector<Row>{{1, 2, 1, 512, 1}}));
  d.forget(mem + 2048, 64);  // outside every range: nothing to do
  d.clear();
  EXPECT_TRUE(rows(d).empty());
}

// The range map's nodes come from a pool of the tracer's own: recording leaves the program's heap
// as it is (its blocks among the program's changed how glibc grew and trimmed the heap).
TEST(Dataflow, RangesLeaveTheProgramsHeapAlone) {
  Dataflow d;
  static char big[64 << 10];
  d.record(1, std::vector<blas::Operand>{out(big, 64)}.data(), 1);  // the edge table's first allocations
  const size_t before = mallinfo2().uordblks;
  for (int i = 1; i < 1000; ++i) {  // a range each: 999 map nodes
    const blas::Operand w[] = {out(big + 64 * i, 32)};
    d.record(1, w, 1);
  }
  const size_t grew = mallinfo2().uordblks - before;
  EXPECT_LT(grew, 999u * 56 / 10) << "bytes of the heap in use after 999 new ranges";
  for (int i = 0; i < 1000; ++i) d.forget(big + 64 * i, 64);  // and their nodes are used again
  for (int i = 0; i < 1000; ++i) {
    const blas::Operand w[] = {out(big + 64 * i, 32)};
    d.record(2, w, 1);
  }
  EXPECT_LT(mallinfo2().uordblks - before, 999u * 56 / 10);
}

// Addresses only: a PageSet never touches the memory it describes.
constexpr uintptr_t kPage = 4096, kGiB = uintptr_t{1} << 30;

TEST(PageSet, PagesOfRangesAndNothingElse) {
  PageSet pages;
  EXPECT_FALSE(pages.any(0x10000, 0x20000));
  pages.add(0x10100, 0x12010);  // pages 0x10, 0x11, 0x12
  EXPECT_TRUE(pages.any(0x12000, 0x12001));
  EXPECT_TRUE(pages.any(0x0f000, 0x10101));
  EXPECT_FALSE(pages.any(0x0f000, 0x10000));
  EXPECT_FALSE(pages.any(0x13000, 0x20000));
  pages.remove_inside(0x10800, 0x13000);  // pages 0x11 and 0x12 wholly, 0x10 only in part
  EXPECT_TRUE(pages.any(0x10000, 0x10001));
  EXPECT_FALSE(pages.any(0x11000, 0x13000));
  pages.clear();
  EXPECT_FALSE(pages.any(0, 0x100000));
}

TEST(PageSet, RangesAcrossRegionsAndOutOfReach) {
  PageSet pages;
  pages.add(3 * kGiB - kPage, 3 * kGiB + kPage);  // the last page of one GiB, the first of the next
  EXPECT_TRUE(pages.any(3 * kGiB - 1, 3 * kGiB));
  EXPECT_TRUE(pages.any(3 * kGiB, 3 * kGiB + 1));
  EXPECT_FALSE(pages.any(3 * kGiB + kPage, 4 * kGiB));
  EXPECT_FALSE(pages.any(2 * kGiB, 3 * kGiB - kPage));
  pages.remove_inside(2 * kGiB, 4 * kGiB);
  EXPECT_FALSE(pages.any(2 * kGiB, 4 * kGiB));
  EXPECT_TRUE(pages.any(uintptr_t{1} << 50, (uintptr_t{1} << 50) + 1));  // beyond 48 bits: maybe
}

TEST(Dataflow, APageSharedWithALiveRangeKeepsItsBit) {
  // Two ranges on one page; freeing the block of one leaves the other found, then none.
  alignas(4096) static char page[2 * 4096];
  Dataflow d;
  const blas::Operand w1[] = {out(page, 64)};
  const blas::Operand w2[] = {out(page + 128, 64)};
  const blas::Operand r[] = {in(page + 128, 64)};
  d.record(1, w1, 1);
  d.record(2, w2, 1);
  d.forget(page, 64);
  d.record(3, r, 1);
  d.forget(page + 128, 64);
  d.record(4, r, 1);
  EXPECT_EQ(rows(d), (std::vector<Row>{{2, 3, 1, 64, 1}}));
}

// The observer the trace registers, on a Dataflow of the test's.
Dataflow* g_observed_flow = nullptr;
void observe(void* p, size_t bytes) noexcept {
  g_observed_flow->forget(p, bytes);
}

TEST(FreeObservers, NotifyReachesObserversUnlessQuiet) {
  Dataflow d;
  g_observed_flow = &d;
  const blas::Operand w[] = {out(mem, 64)};
  const blas::Operand r[] = {in(mem, 64)};
  ASSERT_TRUE(alloc::add(observe));
  ASSERT_TRUE(alloc::add(observe));  // once only
  EXPECT_TRUE(alloc::observed());
  d.record(1, w, 1);
  {
    alloc::Quiet q;
    alloc::notify(mem, 64);  // this thread's frees are not observed
  }
  d.record(2, r, 1);
  alloc::notify(mem, 64);
  d.record(3, r, 1);
  alloc::remove(observe);
  EXPECT_FALSE(alloc::observed());
  d.record(1, w, 1);
  alloc::notify(mem, 64);  // nobody listens
  d.record(4, r, 1);
  EXPECT_EQ(rows(d), (std::vector<Row>{{1, 2, 1, 64, 1}, {1, 4, 1, 64, 1}}));
}

// Threads recording and forgetting at once: the map stays consistent (and ThreadSanitizer, when
// built with it, sees the locking).
TEST(Dataflow, ThreadsRecordAndForgetAtOnce) {
  Dataflow d;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&d, t] {
      char* base = mem + t * 1024;
      for (int i = 0; i < 20000; ++i) {
        const blas::Operand ops[] = {in(base, 512), out(base + 512, 256)};
        d.record(static_cast<uint32_t>(t), ops, 2);
        const blas::Operand next[] = {in(base + 512, 256), out(base, 512)};
        d.record(static_cast<uint32_t>(t + 4), next, 2);
        if (i % 7 == 0) d.forget(base, 1024);
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& [from, to, calls, bytes, operands] : rows(d)) {
    EXPECT_EQ(from % 4, to % 4);  // each thread's own buffers
    EXPECT_NE(from, to);
  }
}

}  // namespace
}  // namespace sol::capture::trace
