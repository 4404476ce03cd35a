// capture::blas::operands() and cost(): which memory a BLAS call touches and how much work it is.
#include <algorithm>
#include <cstring>

#include "capture/blas/blas.hpp"

namespace sol::capture::blas {
namespace {

bool is_complex(DType d) noexcept {
  return d == DType::c64 || d == DType::c128;
}

bool notrans(char t) noexcept { return t == 'N' || t == 'n'; }
bool left(char s) noexcept { return s == 'L' || s == 'l'; }
bool upper(char u) noexcept { return u == 'U' || u == 'u'; }
bool unit(char d) noexcept { return d == 'U' || d == 'u'; }
bool is_zero(const Scalar& s) noexcept { return s.present && s.re == 0 && s.im == 0; }

// The elements an operand spans, from its geometry: the one place extents are computed.
int64_t elements(const Operand& o) noexcept {
  const int64_t ld = std::max<int64_t>(o.ld, 1);
  switch (o.shape) {
    case Shape::scalar: return o.n;
    case Shape::vector: return o.n > 0 ? 1 + (o.n - 1) * (o.inc < 0 ? -o.inc : o.inc) : 0;
    case Shape::general:
    case Shape::triangle: return o.rows > 0 && o.cols > 0 ? ld * (o.cols - 1) + o.rows : 0;
    case Shape::band: return o.rows > 0 && o.cols > 0 ? ld * (o.cols - 1) + o.kl + o.ku + 1 : 0;
    case Shape::packed: return o.n > 0 ? o.n * (o.n + 1) / 2 : 0;
  }
  return 0;
}

// Builds the operands of one node, each from its geometry in the node's own terms; row-major
// operands are turned into the column-major view of the same memory here, once.
class Builder {
 public:
  Builder(const Node& n, Operand* out) : out_(out), esize_(dtype_size(n.dtype)), row_major_(n.blas.layout == 'R') {}

  Operand& scalar(const char* name, void* p, int64_t n, bool read, bool written, size_t esize = 0) {
    Operand& o = next(name, p, read, written);
    o.shape = Shape::scalar;
    o.n = n;
    return finish(o, esize);
  }
  Operand& vector(const char* name, void* p, int64_t n, int64_t inc, bool read, bool written) {
    Operand& o = next(name, p, read, written);
    o.shape = Shape::vector;
    o.n = std::max<int64_t>(n, 0);
    o.inc = inc;
    return finish(o);
  }
  Operand& general(const char* name, void* p, int64_t rows, int64_t cols, int64_t ld, bool read, bool written) {
    Operand& o = next(name, p, read, written);
    o.shape = Shape::general;
    o.rows = row_major_ ? cols : rows;
    o.cols = row_major_ ? rows : cols;
    o.ld = ld;
    return finish(o);
  }
  Operand& triangle(const char* name, void* p, int64_t n, int64_t ld, bool up, bool read, bool written) {
    Operand& o = next(name, p, read, written);
    o.shape = Shape::triangle;
    o.rows = o.cols = n;
    o.ld = ld;
    o.upper = up != row_major_;  // the transpose of an upper triangle is a lower one
    return finish(o);
  }
  // A band matrix of rows x cols with kl sub- and ku super-diagonals: a general one (gbmv), or a
  // symmetric or triangular one whose stored triangle `up` says (then kl or ku is 0).
  Operand& band(const char* name, void* p, int64_t rows, int64_t cols, int64_t kl, int64_t ku, int64_t ld,
                bool general_band, bool up, bool read, bool written) {
    Operand& o = next(name, p, read, written);
    o.shape = Shape::band;
    o.rows = row_major_ ? cols : rows;
    o.cols = row_major_ ? rows : cols;
    o.kl = row_major_ ? ku : kl;  // transposing swaps the sub- and super-diagonals
    o.ku = row_major_ ? kl : ku;
    o.ld = ld;
    o.upper = general_band || up != row_major_;
    return finish(o);
  }
  Operand& packed(const char* name, void* p, int64_t n, bool up, bool read, bool written) {
    Operand& o = next(name, p, read, written);
    o.shape = Shape::packed;
    o.n = std::max<int64_t>(n, 0);
    o.upper = up != row_major_;
    return finish(o);
  }
  int count() const { return count_; }

 private:
  Operand& next(const char* name, void* p, bool read, bool written) {
    static Operand overflow;  // never reached: no routine has more than kMaxOperands
    if (count_ >= kMaxOperands) return overflow = Operand{};
    Operand& o = out_[count_++];
    o = Operand{};
    o.name = name;
    o.ptr = p;
    o.read = read;
    o.written = written;
    return o;
  }
  Operand& finish(Operand& o, size_t esize = 0) {
    const int64_t elems = elements(o);
    o.bytes = o.ptr && elems > 0 ? static_cast<size_t>(elems) * (esize ? esize : esize_) : 0;
    return o;
  }

  Operand* out_;
  size_t esize_;
  bool row_major_;
  int count_ = 0;
};

}  // namespace

void* BlasArgs::*operand_field(const char* name) noexcept {
  static const struct {
    const char* name;
    void* BlasArgs::*field;
  } fields[] = {{"a", &BlasArgs::a},    {"b", &BlasArgs::b},     {"c", &BlasArgs::c},
                {"x", &BlasArgs::x},    {"y", &BlasArgs::y},     {"param", &BlasArgs::param},
                {"ra", &BlasArgs::ra},  {"rb", &BlasArgs::rb},   {"rc", &BlasArgs::rc},
                {"rs", &BlasArgs::rs},  {"rd1", &BlasArgs::rd1}, {"rd2", &BlasArgs::rd2},
                {"rx1", &BlasArgs::rx1}};
  for (const auto& f : fields)
    if (std::strcmp(f.name, name) == 0) return f.field;
  return nullptr;
}

int operands(const Node& node, Operand out[kMaxOperands]) noexcept {
  if (op_family(node.op)[0] != 'b') return 0;  // not BLAS
  const BlasArgs& b = node.blas;
  Builder ops(node, out);
  const int64_t m = b.m, n = b.n, k = b.k;
  const bool c_read = !is_zero(b.beta);  // beta == 0: C (or y) is written without being read
  const size_t rsize = dtype_real_size(node.dtype);
  const bool up = upper(b.uplo), na = notrans(b.transa);
  const bool herm = node.op == Op::hemm || node.op == Op::herk || node.op == Op::her2k || node.op == Op::hemv ||
                    node.op == Op::hbmv || node.op == Op::hpmv || node.op == Op::her || node.op == Op::her2 ||
                    node.op == Op::hpr || node.op == Op::hpr2;

  switch (node.op) {
    // ---- level 3
    case Op::gemm: {
      const bool nb = notrans(b.transb);
      ops.general("a", b.a, na ? m : k, na ? k : m, b.lda, true, false);
      ops.general("b", b.b, nb ? k : n, nb ? n : k, b.ldb, true, false);
      ops.general("c", b.c, m, n, b.ldc, c_read, true);
      break;
    }
    case Op::symm:
    case Op::hemm:
      ops.triangle("a", b.a, left(b.side) ? m : n, b.lda, up, true, false).hermitian = herm;
      ops.general("b", b.b, m, n, b.ldb, true, false);
      ops.general("c", b.c, m, n, b.ldc, c_read, true);
      break;
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k:
      ops.general("a", b.a, na ? n : k, na ? k : n, b.lda, true, false);
      if (node.op == Op::syr2k || node.op == Op::her2k) ops.general("b", b.b, na ? n : k, na ? k : n, b.ldb, true, false);
      ops.triangle("c", b.c, n, b.ldc, up, c_read, true).hermitian = herm;
      break;
    case Op::trmm:
    case Op::trsm:
      ops.triangle("a", b.a, left(b.side) ? m : n, b.lda, up, true, false).unit = unit(b.diag);
      ops.general("b", b.b, m, n, b.ldb, true, true);
      break;
    // ---- level 2
    case Op::gemv:
    case Op::gbmv:
      if (node.op == Op::gemv)
        ops.general("a", b.a, m, n, b.lda, true, false);
      else
        ops.band("a", b.a, m, n, b.kl, b.ku, b.lda, true, true, true, false);
      ops.vector("x", b.x, na ? n : m, b.incx, true, false);
      ops.vector("y", b.y, na ? m : n, b.incy, c_read, true);
      break;
    case Op::symv:
    case Op::hemv:
    case Op::sbmv:
    case Op::hbmv:
    case Op::spmv:
    case Op::hpmv: {
      Operand* a;
      if (node.op == Op::symv || node.op == Op::hemv)
        a = &ops.triangle("a", b.a, n, b.lda, up, true, false);
      else if (node.op == Op::sbmv || node.op == Op::hbmv)
        a = &ops.band("a", b.a, n, n, up ? 0 : k, up ? k : 0, b.lda, false, up, true, false);
      else
        a = &ops.packed("a", b.a, n, up, true, false);
      a->hermitian = herm;
      ops.vector("x", b.x, n, b.incx, true, false);
      ops.vector("y", b.y, n, b.incy, c_read, true);
      break;
    }
    case Op::trmv:
    case Op::trsv:
      ops.triangle("a", b.a, n, b.lda, up, true, false).unit = unit(b.diag);
      ops.vector("x", b.x, n, b.incx, true, true);
      break;
    case Op::tbmv:
    case Op::tbsv:
      ops.band("a", b.a, n, n, up ? 0 : k, up ? k : 0, b.lda, false, up, true, false).unit = unit(b.diag);
      ops.vector("x", b.x, n, b.incx, true, true);
      break;
    case Op::tpmv:
    case Op::tpsv:
      ops.packed("a", b.a, n, up, true, false).unit = unit(b.diag);
      ops.vector("x", b.x, n, b.incx, true, true);
      break;
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      ops.vector("x", b.x, m, b.incx, true, false);
      ops.vector("y", b.y, n, b.incy, true, false);
      ops.general("a", b.a, m, n, b.lda, true, true);
      break;
    case Op::syr:
    case Op::her:
    case Op::syr2:
    case Op::her2:
    case Op::spr:
    case Op::hpr:
    case Op::spr2:
    case Op::hpr2: {
      const bool two = node.op == Op::syr2 || node.op == Op::her2 || node.op == Op::spr2 || node.op == Op::hpr2;
      const bool is_packed = node.op == Op::spr || node.op == Op::hpr || node.op == Op::spr2 || node.op == Op::hpr2;
      ops.vector("x", b.x, n, b.incx, true, false);
      if (two) ops.vector("y", b.y, n, b.incy, true, false);
      Operand& a = is_packed ? ops.packed("a", b.a, n, up, true, true) : ops.triangle("a", b.a, n, b.lda, up, true, true);
      a.hermitian = herm;
      break;
    }
    // ---- level 1
    case Op::axpy:
      ops.vector("x", b.x, n, b.incx, true, false);
      ops.vector("y", b.y, n, b.incy, true, true);
      break;
    case Op::copy:
      ops.vector("x", b.x, n, b.incx, true, false);
      ops.vector("y", b.y, n, b.incy, false, true);
      break;
    case Op::swap:
    case Op::rot:
      ops.vector("x", b.x, n, b.incx, true, true);
      ops.vector("y", b.y, n, b.incy, true, true);
      break;
    case Op::rotm:
      ops.vector("x", b.x, n, b.incx, true, true);
      ops.vector("y", b.y, n, b.incy, true, true);
      ops.scalar("param", b.param, 5, true, false);
      break;
    case Op::scal: ops.vector("x", b.x, n, b.incx, true, true); break;
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
    case Op::sdsdot:
    case Op::dsdot:
      ops.vector("x", b.x, n, b.incx, true, false);
      ops.vector("y", b.y, n, b.incy, true, false);
      break;
    case Op::asum:
    case Op::nrm2:
    case Op::iamax: ops.vector("x", b.x, n, b.incx, true, false); break;
    case Op::rotg:
      ops.scalar("ra", b.ra, 1, true, true);
      ops.scalar("rb", b.rb, 1, true, !is_complex(node.dtype));
      ops.scalar("rc", b.rc, 1, false, true, rsize);
      ops.scalar("rs", b.rs, 1, false, true);
      break;
    case Op::rotmg:
      ops.scalar("rd1", b.rd1, 1, true, true);
      ops.scalar("rd2", b.rd2, 1, true, true);
      ops.scalar("rx1", b.rx1, 1, true, true);
      ops.scalar("param", b.param, 5, false, true);
      break;
    case Op::cabs1:
    default: break;
  }
  return ops.count();
}

Cost cost(const Node& node) noexcept {
  Operand ops[kMaxOperands];
  const int count = operands(node, ops);
  return cost(node, ops, count);
}

Cost cost(const Node& node, const Operand* ops, int count) noexcept {
  Cost c;
  for (int i = 0; i < count; ++i) {
    const double bytes = static_cast<double>(ops[i].bytes);
    c.bytes += (ops[i].read ? bytes : 0) + (ops[i].written ? bytes : 0);
  }
  c.flops = flops(node);
  return c;
}

}  // namespace sol::capture::blas
