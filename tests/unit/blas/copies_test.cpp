// capture::blas::WrittenCopies: what auto's measurements and verify mode run a call on instead of
// the caller's memory.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "capture/blas/copies.hpp"

namespace sol::capture::blas {
namespace {

constexpr int64_t kM = 1000, kN = 64, kLd = 1024;  // C's columns padded: 24 elements unused each
constexpr int64_t kExtent = kLd * (kN - 1) + kM;   // what the call spans of C

struct Gemm {
  std::vector<float> a = std::vector<float>(kLd * kN, 1.0f), b = std::vector<float>(kN * kN, 1.0f);
  Node node{Sym{}, Op::gemm, DType::f32};
  explicit Gemm(float* c, double beta) {
    BlasArgs& x = node.blas;
    x.layout = 'C';
    x.transa = x.transb = 'N';
    x.m = kM;
    x.n = x.k = kN;
    x.lda = kLd;
    x.ldb = kN;
    x.ldc = kLd;
    x.alpha = Scalar(1.0);
    x.beta = Scalar(beta);
    x.a = a.data();
    x.b = b.data();
    x.c = c;
  }
};

// C in pages of its own, never touched by the test: mincore says which of them a take() read.
struct FreshPages {
  size_t bytes = kLd * kN * sizeof(float);
  float* c = static_cast<float*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ~FreshPages() { munmap(c, bytes); }
  size_t resident() const {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in((bytes + page - 1) / page);
    if (mincore(c, bytes, in.data()) != 0) return SIZE_MAX;
    size_t n = 0;
    for (unsigned char v : in) n += v & 1;
    return n;
  }
};

TEST(WrittenCopies, AMeasurementDoesNotReadAnOutputTheCallOnlyWrites) {
  FreshPages fresh;
  ASSERT_NE(fresh.c, MAP_FAILED);
  ASSERT_EQ(fresh.resident(), 0u);
  Gemm g(fresh.c, 0.0);
  WrittenCopies copies;
  ASSERT_TRUE(copies.take(g.node, SIZE_MAX, WrittenCopies::Unread::zeroed));
  // Reading the program's untouched C would map each page (and the program's call would fault it
  // again to write it).
  EXPECT_EQ(fresh.resident(), 0u);
  const float* copy = static_cast<const float*>(copies.node().blas.c);
  ASSERT_NE(copy, fresh.c);
  for (int64_t i = 0; i < kExtent; ++i) ASSERT_EQ(copy[i], 0.0f) << i;
}

TEST(WrittenCopies, VerifyGetsTheCallersBytesPaddingIncluded) {
  std::vector<float> c(kLd * kN);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i);
  for (double beta : {0.0, 1.0}) {
    Gemm g(c.data(), beta);
    WrittenCopies copies;
    ASSERT_TRUE(copies.take(g.node));
    EXPECT_EQ(std::memcmp(copies.node().blas.c, c.data(), kExtent * sizeof(float)), 0) << beta;
  }
}

// C's copy, as a measurement takes it, of a call on a C of threes.
struct Measured {
  std::vector<float> c = std::vector<float>(kLd * kN, 3.0f);
  Gemm g;
  WrittenCopies copies;
  float* copy = nullptr;
  explicit Measured(double beta) : g(c.data(), beta) {
    if (copies.take(g.node, SIZE_MAX, WrittenCopies::Unread::zeroed)) copy = static_cast<float*>(copies.node().blas.c);
  }
};

TEST(WrittenCopies, AnOutputTheCallReadsIsCopiedAndRefreshed) {
  Measured m(1.0);
  ASSERT_NE(m.copy, nullptr);
  WrittenCopies& copies = m.copies;
  float* copy = m.copy;
  EXPECT_EQ(copy[0], 3.0f);
  copy[0] = copy[kExtent - 1] = -1.0f;  // what a candidate's run left
  copies.refresh_read();
  EXPECT_EQ(copy[0], 3.0f);
  EXPECT_EQ(copy[kExtent - 1], 3.0f);
}

TEST(WrittenCopies, RefreshReadLeavesAnOnlyWrittenOutputAsTheLastRunLeftIt) {
  Measured m(0.0);
  ASSERT_NE(m.copy, nullptr);
  WrittenCopies& copies = m.copies;
  float* copy = m.copy;
  copy[5] = -1.0f;
  copies.refresh_read();
  EXPECT_EQ(copy[5], -1.0f);  // no 4 MB copy between two runs of a measurement
  copies.refresh();
  EXPECT_EQ(copy[5], 3.0f);
}

TEST(WrittenCopies, TakeKeepsItsMemoryForTheNextNodeThatFits) {
  std::vector<float> c(kLd * kN, 3.0f);
  Gemm big(c.data(), 1.0);
  WrittenCopies copies;
  ASSERT_TRUE(copies.take(big.node));
  const void* first = copies.node().blas.c;
  const size_t capacity = copies.capacity();
  EXPECT_GE(capacity, kExtent * sizeof(float));
  Gemm small(c.data(), 1.0);
  small.node.blas.m = 10;  // fits: the same memory, its pages already mapped
  ASSERT_TRUE(copies.take(small.node));
  EXPECT_EQ(copies.node().blas.c, first);
  EXPECT_EQ(copies.capacity(), capacity);
  EXPECT_EQ(static_cast<const float*>(copies.node().blas.c)[0], 3.0f);
  copies.release();
  EXPECT_EQ(copies.capacity(), 0u);
  ASSERT_TRUE(copies.take(small.node));  // usable after release()
  EXPECT_EQ(static_cast<const float*>(copies.node().blas.c)[0], 3.0f);
}

// Whether the kernel may back the mapping that holds `p` with huge pages (/proc/self/smaps), or -1
// when it does not say.
int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
      continue;
    }
    int v = 0;
    if (inside && std::sscanf(line.c_str(), "THPeligible: %d", &v) == 1) return v;
  }
  return -1;
}

bool thp_never() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.empty() || s.find("[never]") != std::string::npos;
}

TEST(WrittenCopies, LargeCopiesAreInWholeHugePagesSmallOnesOnTheHeap) {
  constexpr int64_t kBig = 1024;  // a 1024x1024 SGEMM's C: 4 MiB, 1024 page faults in 4 KiB pages
  std::vector<float> c(kBig * kBig, 3.0f), a(kBig * kN, 1.0f), b(kN * kBig, 1.0f);
  Gemm g(c.data(), 0.0);
  g.node.blas.m = g.node.blas.n = g.node.blas.lda = g.node.blas.ldc = kBig;
  g.node.blas.k = g.node.blas.ldb = kN;
  g.node.blas.a = a.data();
  g.node.blas.b = b.data();
  WrittenCopies copies;
  ASSERT_TRUE(copies.take(g.node, SIZE_MAX, WrittenCopies::Unread::zeroed));
  const float* copy = static_cast<const float*>(copies.node().blas.c);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy) % (size_t{2} << 20), 0u);
  EXPECT_EQ(copies.capacity() % (size_t{2} << 20), 0u);
  for (int64_t i = 0; i < kBig * kBig; i += 997) {
    ASSERT_EQ(copy[i], 0.0f) << i;
  }
  if (!thp_never() && thp_eligible(copy) >= 0) {
    EXPECT_EQ(thp_eligible(copy), 1);
  }
  // 256 KiB: a huge page would fault in and zero 2 MiB for it.
  Measured small(0.0);
  ASSERT_NE(small.copy, nullptr);
  EXPECT_LT(small.copies.capacity(), size_t{1} << 20);
  copies.release();  // unmapped whole: a take() after it maps again
  ASSERT_TRUE(copies.take(g.node, SIZE_MAX, WrittenCopies::Unread::zeroed));
  EXPECT_EQ(static_cast<const float*>(copies.node().blas.c)[kBig * kBig - 1], 0.0f);
}

}  // namespace
}  // namespace sol::capture::blas
