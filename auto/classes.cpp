#include "auto/classes.hpp"

#include <algorithm>
#include <string>

namespace sol::autosel::profile {

namespace {

// Bits: op 0-7, dtype 8-11, layout 12-13, transa 14-15, transb 16-17, uplo 18-19, side 20-21,
// diag 22-23, real alpha 24, strided vectors 25, size classes of m, n, k 26-30, 31-35, 36-40;
// a sub-class (sub_class_of) sets bit 41 and its halves in 42-44.

// Every routed call's class is computed: no library call here (strchr's six calls were a tenth of
// what routing a 40^3 SGEMM cost).
int code(char c, const char* alphabet) noexcept {
  if (!c) return 0;
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  for (int i = 0; alphabet[i]; ++i)
    if (alphabet[i] == c) return i + 1;
  return 0;
}
constexpr const char* kLayout = "CR";
constexpr const char* kUplo = "UL";
constexpr const char* kSide = "LR";
constexpr const char* kDiag = "NU";

// A size's class, numbered from 1: each octave [2^b, 2^(b+1)) in two, split at 1.5 * 2^b (sizes 1,
// 2, 3, 4-5, 6-7, 8-11, 12-15 ... 256-383, 384-511 ...); kLargest and up share the last, 25.
int size_class(int64_t size) noexcept {
  if (size <= 0) return 0;
  size = std::min(size, kLargest);
  const int b = 63 - __builtin_clzll(static_cast<unsigned long long>(size));  // 2^b <= size < 2^(b+1)
  return 1 + 2 * b + (b > 0 && size >= int64_t{3} << (b - 1) ? 1 : 0);
}
constexpr int kLargestClass = 25;
int64_t lower_end(int c) noexcept {
  const int b = (c - 1) / 2;
  return (c - 1) % 2 ? int64_t{3} << (b - 1) : int64_t{1} << b;
}

bool is_real(capture::DType d) noexcept {
  return d != capture::DType::c64 && d != capture::DType::c128;
}

}  // namespace

uint64_t field(uint64_t key, int shift, int bits) noexcept {
  return (key >> shift) & ((uint64_t{1} << bits) - 1);
}

int dim_class(uint64_t key, int i) noexcept {
  return static_cast<int>(field(key, 26 + 5 * i, 5));
}

int64_t class_floor(int64_t size) noexcept {
  return size <= 0 ? 0 : lower_end(size_class(size));
}

namespace {
// Where the upper half of class c begins: its lower end plus half its width (0 for the classes
// of one or two sizes, and for the largest, which has no upper end).
int64_t upper_half(int c) noexcept {
  if (c <= 0 || c >= kLargestClass) return 0;
  const int64_t width = lower_end(c + 1) - lower_end(c);
  return width >= 2 ? lower_end(c) + width / 2 : 0;
}
}  // namespace

int halves(int64_t m, int64_t n, int64_t k) noexcept {
  int h = 0, bit = 0;
  for (const int64_t d : {m, n, k}) {
    const int64_t half = d > 0 ? upper_half(size_class(d)) : 0;
    if (half && d >= half) h |= 1 << bit;
    ++bit;
  }
  return h;
}

int halves_of(const capture::Node& node) noexcept {
  return halves(node.blas.m, node.blas.n, node.blas.k);
}

// The sub-class of class `key` for a call in halves `h` (halves_of).
uint64_t sub_class(uint64_t key, int h) noexcept {
  return key | kSubClass | static_cast<uint64_t>(h) << kHalvesShift;
}

uint64_t sub_class_of(const capture::Node& node) noexcept {
  return sub_class(class_of(node), halves_of(node));
}

uint64_t class_of(const capture::Node& node) noexcept {
  const capture::BlasArgs& b = node.blas;
  const bool real = is_real(node.dtype);
  auto trans = [&](char t) {
    const int c = code(t, kTrans);
    return real && c == 3 ? 2 : c;  // a real matrix's conjugate transpose is its transpose
  };
  // Vectors at a stride other than 1 run other kernels.
  const bool strided = (b.incx != 0 && b.incx != 1) || (b.incy != 0 && b.incy != 1);
  uint64_t k = static_cast<uint64_t>(node.op) | static_cast<uint64_t>(node.dtype) << 8;
  k |= static_cast<uint64_t>(code(b.layout, kLayout)) << 12;
  k |= static_cast<uint64_t>(trans(b.transa)) << 14;
  k |= static_cast<uint64_t>(trans(b.transb)) << 16;
  k |= static_cast<uint64_t>(code(b.uplo, kUplo)) << 18;
  k |= static_cast<uint64_t>(code(b.side, kSide)) << 20;
  k |= static_cast<uint64_t>(code(b.diag, kDiag)) << 22;
  k |= static_cast<uint64_t>(b.real_alpha) << 24;
  k |= static_cast<uint64_t>(strided) << 25;
  k |= static_cast<uint64_t>(size_class(b.m)) << 26;
  k |= static_cast<uint64_t>(size_class(b.n)) << 31;
  k |= static_cast<uint64_t>(size_class(b.k)) << 36;
  return k;
}

std::string class_text(uint64_t key) {
  const auto op = static_cast<capture::Op>(field(key, 0, 8));
  const auto dt = static_cast<capture::DType>(field(key, 8, 4));
  std::string s = std::string(capture::op_name(op)) + " " + capture::dtype_name(dt);
  if (field(key, 12, 2) == 2) s += " row-major";
  auto flag = [&](const char* name, int shift, const char* alphabet) {
    const uint64_t c = field(key, shift, 2);
    if (c) s += std::string(" ") + name + "=" + alphabet[c - 1];
  };
  flag("transa", 14, kTrans);
  flag("transb", 16, kTrans);
  flag("side", 20, kSide);
  flag("uplo", 18, kUplo);
  flag("diag", 22, kDiag);
  if (field(key, 24, 1)) s += " real-alpha";
  if (field(key, 25, 1)) s += " strided";
  const char* names[] = {"m", "n", "k"};
  for (int i = 0; i < 3; ++i)
    if (const int c = dim_class(key, i)) {
      const bool upper = (key & kSubClass) && field(key, kHalvesShift + i, 1);
      s += std::string(" ") + names[i] + "=" + std::to_string(upper ? upper_half(c) : lower_end(c));
      if (c == kLargestClass) s += "+";
    }
  return s;
}

}  // namespace sol::autosel::profile
