// The primitive graph's memory: buffers made, found and joined, versions, what a buffer is known
// to hold, and memory given back; and the hashes of operands' elements that tell contents apart.
#include "capture/trace/graph_memory.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "capture/graph/content.hpp"

namespace sol::capture::trace {
namespace {

uintptr_t at(const std::vector<char>& v, size_t off = 0) {
  return reinterpret_cast<uintptr_t>(v.data()) + off;
}

TEST(GraphMemory, AnOperandInsideABufferIsFoundThereAtItsOffset) {
  std::vector<char> mem(4096);
  GraphMemory m;
  GraphMemory::Born born;
  const GraphMemory::Ref a = m.locate(at(mem), at(mem, 1024), born);
  EXPECT_EQ(born.buf, a.buf);
  EXPECT_EQ(born.bytes, 1024u);
  EXPECT_TRUE(born.parts.empty());
  const GraphMemory::Ref b = m.locate(at(mem, 256), at(mem, 512), born);
  EXPECT_EQ(born.buf, 0u);  // nothing new
  EXPECT_EQ(b.buf, a.buf);
  EXPECT_EQ(b.off, 256u);
}

TEST(GraphMemory, AnOperandOverlappingBuffersJoinsThemIntoANewOne) {
  std::vector<char> mem(4096);
  GraphMemory m;
  GraphMemory::Born born;
  const auto a = m.locate(at(mem, 0), at(mem, 100), born);
  const auto b = m.locate(at(mem, 200), at(mem, 300), born);
  GraphMemory::bump(b.at);
  const uint64_t before = m.generation();
  const auto c = m.locate(at(mem, 50), at(mem, 250), born);
  EXPECT_NE(m.generation(), before);  // Refs taken before may point nowhere now
  EXPECT_NE(c.buf, a.buf);
  EXPECT_NE(c.buf, b.buf);
  EXPECT_EQ(c.off, 50u);
  EXPECT_EQ(born.bytes, 300u);
  ASSERT_EQ(born.parts.size(), 2u);
  EXPECT_EQ(born.parts[0].buf, a.buf);
  EXPECT_EQ(born.parts[0].off, 0u);
  EXPECT_EQ(born.parts[1].buf, b.buf);
  EXPECT_EQ(born.parts[1].off, 200u);
  EXPECT_EQ(born.parts[1].ver, 1u);  // the part's version when it was joined
  EXPECT_EQ(m.buffers(), 1u);
}

TEST(GraphMemory, EachWriteIsANewVersion) {
  std::vector<char> mem(64);
  GraphMemory m;
  GraphMemory::Born born;
  const auto whole = m.locate(at(mem), at(mem, 64), born);
  EXPECT_EQ(whole.ver, 0u);
  const uint64_t gen = m.generation();
  const auto part = m.locate(at(mem, 8), at(mem, 16), born);
  EXPECT_EQ(part.at, whole.at);
  EXPECT_EQ(m.generation(), gen);  // nothing made
  EXPECT_EQ(GraphMemory::bump(part.at), 0u);
  EXPECT_EQ(GraphMemory::bump(whole.at), 1u);
  EXPECT_EQ(m.locate(at(mem), at(mem, 16), born).ver, 2u);
}

TEST(GraphMemory, KnownContentsHoldUntilTheirBytesChange) {
  std::vector<char> mem(256);
  GraphMemory m;
  GraphMemory::Born born;
  GraphMemory::Buffer* b = m.locate(at(mem), at(mem, 256), born).at;
  GraphMemory::learn(b, at(mem), at(mem, 64), 7, 1234);
  GraphMemory::learn(b, at(mem, 128), at(mem, 192), 8, 5678);
  EXPECT_TRUE(GraphMemory::known(b, 7, 1234));
  EXPECT_FALSE(GraphMemory::known(b, 7, 1235));       // the same elements, other contents
  EXPECT_FALSE(GraphMemory::known(b, 9, 1234));       // other elements
  GraphMemory::unknown(b, at(mem, 32), at(mem, 40));  // written, contents unknown
  EXPECT_FALSE(GraphMemory::known(b, 7, 1234));
  EXPECT_TRUE(GraphMemory::known(b, 8, 5678));
}

TEST(GraphMemory, MemoryGivenBackEndsItsBuffers) {
  std::vector<char> mem(8192);
  GraphMemory m;
  GraphMemory::Born born;
  const auto a = m.locate(at(mem, 0), at(mem, 100), born);
  m.locate(at(mem, 5000), at(mem, 6000), born);
  EXPECT_TRUE(m.maybe(at(mem), at(mem, 100)));
  m.forget(mem.data(), 4096);
  EXPECT_EQ(m.buffers(), 1u);
  const auto again = m.locate(at(mem, 0), at(mem, 100), born);
  EXPECT_NE(again.buf, a.buf);  // the same addresses, another buffer
  EXPECT_EQ(again.ver, 0u);
}

blas::Operand general(void* p, int64_t rows, int64_t cols, int64_t ld) {
  blas::Operand o;
  o.name = "c";
  o.ptr = p;
  o.shape = blas::Shape::general;
  o.rows = rows, o.cols = cols, o.ld = ld;
  o.bytes = static_cast<size_t>(ld * (cols - 1) + rows) * 4;
  return o;
}

TEST(GraphContent, TheBytesALeadingDimensionSkipsAreNotTheOperands) {
  std::vector<float> a(4 * 3, 1.0f);
  const blas::Operand op = general(a.data(), 2, 3, 4);  // rows 0-1 of each column of 4
  const uint64_t before = graph::content(op, DType::f32);
  a[2] = a[3] = 99;  // not elements of op
  EXPECT_EQ(graph::content(op, DType::f32), before);
  a[4] = 2;  // column 1, row 0
  EXPECT_NE(graph::content(op, DType::f32), before);
}

TEST(GraphContent, ADenseMatrixAndTheSameBytesAsATensorAreOneElementSet) {
  std::vector<float> a(6 * 5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  const blas::Operand op = general(a.data(), 6, 5, 6);
  dnn::TensorDesc t;
  t.dtype = DType::f32;
  t.layout.ndims = 2;
  t.layout.dims[0] = t.layout.padded[0] = 5;
  t.layout.dims[1] = t.layout.padded[1] = 6;
  t.layout.strides[0] = 6;
  t.layout.strides[1] = 1;
  t.bytes = a.size() * 4;
  EXPECT_EQ(graph::key(op, DType::f32), graph::key(t, a.data()));
  EXPECT_EQ(graph::content(op, DType::f32), graph::content(t, a.data()));
}

}  // namespace
}  // namespace sol::capture::trace
