// capture::blas::operands() and cost(): which memory a BLAS call touches and how much work it is.
#include <algorithm>

#include "capture/blas.hpp"

namespace sol::capture::blas {
namespace {

size_t elem_size(DType d) noexcept {
  switch (d) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::c64: return 8;
    case DType::c128: return 16;
    default: return 0;
  }
}

size_t real_size(DType d) noexcept {
  return d == DType::c64 ? 4 : d == DType::c128 ? 8 : elem_size(d);
}

bool is_complex(DType d) noexcept {
  return d == DType::c64 || d == DType::c128;
}

// Elements spanned by a rows x cols matrix stored with leading dimension ld, in the node's layout.
int64_t matrix_elems(int64_t rows, int64_t cols, int64_t ld, char layout) noexcept {
  if (rows <= 0 || cols <= 0) return 0;
  if (layout == 'R') std::swap(rows, cols);
  return std::max<int64_t>(ld, 1) * (cols - 1) + rows;
}

// Band storage: `lines` stored columns (column-major) or rows (row-major) of `width` entries each.
int64_t band_elems(int64_t lines, int64_t width, int64_t ld) noexcept {
  if (lines <= 0 || width <= 0) return 0;
  return std::max<int64_t>(ld, 1) * (lines - 1) + width;
}

int64_t vector_elems(int64_t n, int64_t inc) noexcept {
  if (n <= 0) return 0;
  return 1 + (n - 1) * (inc < 0 ? -inc : inc);
}

int64_t packed_elems(int64_t n) noexcept {
  return n > 0 ? n * (n + 1) / 2 : 0;
}

bool is_zero(const Scalar& s) noexcept {
  return s.present && s.re == 0 && s.im == 0;
}

class Builder {
 public:
  Builder(const Node& n, Operand* out) : node_(n), out_(out), esize_(elem_size(n.dtype)) {}

  void add(const char* name, void* ptr, int64_t elems, bool read, bool written, size_t esize = 0) {
    if (count_ >= kMaxOperands) return;
    Operand& o = out_[count_++];
    o.name = name;
    o.ptr = ptr;
    o.bytes = ptr && elems > 0 ? static_cast<size_t>(elems) * (esize ? esize : esize_) : 0;
    o.read = read;
    o.written = written;
  }
  int count() const { return count_; }

 private:
  const Node& node_;
  Operand* out_;
  size_t esize_;
  int count_ = 0;
};

bool notrans(char t) noexcept {
  return t == 'N' || t == 'n';
}
bool left(char s) noexcept {
  return s == 'L' || s == 'l';
}

}  // namespace

int operands(const Node& node, Operand out[kMaxOperands]) noexcept {
  if (op_family(node.op)[0] != 'b') return 0;  // not BLAS
  const BlasArgs& b = node.blas;
  const char lay = b.layout == 'R' ? 'R' : 'C';
  Builder ops(node, out);
  const int64_t m = b.m, n = b.n, k = b.k;
  const bool c_read = !is_zero(b.beta);  // beta == 0: C (or y) is written without being read
  const size_t rsize = real_size(node.dtype);

  switch (node.op) {
    // ---- level 3
    case Op::gemm: {
      const bool na = notrans(b.transa), nb = notrans(b.transb);
      ops.add("a", b.a, matrix_elems(na ? m : k, na ? k : m, b.lda, lay), true, false);
      ops.add("b", b.b, matrix_elems(nb ? k : n, nb ? n : k, b.ldb, lay), true, false);
      ops.add("c", b.c, matrix_elems(m, n, b.ldc, lay), c_read, true);
      break;
    }
    case Op::symm:
    case Op::hemm: {
      const int64_t ka = left(b.side) ? m : n;
      ops.add("a", b.a, matrix_elems(ka, ka, b.lda, lay), true, false);
      ops.add("b", b.b, matrix_elems(m, n, b.ldb, lay), true, false);
      ops.add("c", b.c, matrix_elems(m, n, b.ldc, lay), c_read, true);
      break;
    }
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k: {
      const bool na = notrans(b.transa);
      ops.add("a", b.a, matrix_elems(na ? n : k, na ? k : n, b.lda, lay), true, false);
      if (node.op == Op::syr2k || node.op == Op::her2k)
        ops.add("b", b.b, matrix_elems(na ? n : k, na ? k : n, b.ldb, lay), true, false);
      ops.add("c", b.c, matrix_elems(n, n, b.ldc, lay), c_read, true);
      break;
    }
    case Op::trmm:
    case Op::trsm: {
      const int64_t ka = left(b.side) ? m : n;
      ops.add("a", b.a, matrix_elems(ka, ka, b.lda, lay), true, false);
      ops.add("b", b.b, matrix_elems(m, n, b.ldb, lay), true, true);
      break;
    }
    // ---- level 2
    case Op::gemv:
    case Op::gbmv: {
      const bool na = notrans(b.transa);
      if (node.op == Op::gemv)
        ops.add("a", b.a, matrix_elems(m, n, b.lda, lay), true, false);
      else
        ops.add("a", b.a, band_elems(lay == 'R' ? m : n, b.kl + b.ku + 1, b.lda), true, false);
      ops.add("x", b.x, vector_elems(na ? n : m, b.incx), true, false);
      ops.add("y", b.y, vector_elems(na ? m : n, b.incy), c_read, true);
      break;
    }
    case Op::symv:
    case Op::hemv:
    case Op::sbmv:
    case Op::hbmv:
    case Op::spmv:
    case Op::hpmv: {
      int64_t a_elems = packed_elems(n);
      if (node.op == Op::symv || node.op == Op::hemv) a_elems = matrix_elems(n, n, b.lda, lay);
      if (node.op == Op::sbmv || node.op == Op::hbmv) a_elems = band_elems(n, k + 1, b.lda);
      ops.add("a", b.a, a_elems, true, false);
      ops.add("x", b.x, vector_elems(n, b.incx), true, false);
      ops.add("y", b.y, vector_elems(n, b.incy), c_read, true);
      break;
    }
    case Op::trmv:
    case Op::trsv:
      ops.add("a", b.a, matrix_elems(n, n, b.lda, lay), true, false);
      ops.add("x", b.x, vector_elems(n, b.incx), true, true);
      break;
    case Op::tbmv:
    case Op::tbsv:
      ops.add("a", b.a, band_elems(n, k + 1, b.lda), true, false);
      ops.add("x", b.x, vector_elems(n, b.incx), true, true);
      break;
    case Op::tpmv:
    case Op::tpsv:
      ops.add("a", b.a, packed_elems(n), true, false);
      ops.add("x", b.x, vector_elems(n, b.incx), true, true);
      break;
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      ops.add("x", b.x, vector_elems(m, b.incx), true, false);
      ops.add("y", b.y, vector_elems(n, b.incy), true, false);
      ops.add("a", b.a, matrix_elems(m, n, b.lda, lay), true, true);
      break;
    case Op::syr:
    case Op::her:
    case Op::syr2:
    case Op::her2:
    case Op::spr:
    case Op::hpr:
    case Op::spr2:
    case Op::hpr2: {
      const bool two =
          node.op == Op::syr2 || node.op == Op::her2 || node.op == Op::spr2 || node.op == Op::hpr2;
      const bool packed =
          node.op == Op::spr || node.op == Op::hpr || node.op == Op::spr2 || node.op == Op::hpr2;
      ops.add("x", b.x, vector_elems(n, b.incx), true, false);
      if (two) ops.add("y", b.y, vector_elems(n, b.incy), true, false);
      ops.add("a", b.a, packed ? packed_elems(n) : matrix_elems(n, n, b.lda, lay), true, true);
      break;
    }
    // ---- level 1
    case Op::axpy:
      ops.add("x", b.x, vector_elems(n, b.incx), true, false);
      ops.add("y", b.y, vector_elems(n, b.incy), true, true);
      break;
    case Op::copy:
      ops.add("x", b.x, vector_elems(n, b.incx), true, false);
      ops.add("y", b.y, vector_elems(n, b.incy), false, true);
      break;
    case Op::swap:
    case Op::rot:
      ops.add("x", b.x, vector_elems(n, b.incx), true, true);
      ops.add("y", b.y, vector_elems(n, b.incy), true, true);
      break;
    case Op::rotm:
      ops.add("x", b.x, vector_elems(n, b.incx), true, true);
      ops.add("y", b.y, vector_elems(n, b.incy), true, true);
      ops.add("param", b.param, 5, true, false);
      break;
    case Op::scal: ops.add("x", b.x, vector_elems(n, b.incx), true, true); break;
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
    case Op::sdsdot:
    case Op::dsdot:
      ops.add("x", b.x, vector_elems(n, b.incx), true, false);
      ops.add("y", b.y, vector_elems(n, b.incy), true, false);
      break;
    case Op::asum:
    case Op::nrm2:
    case Op::iamax: ops.add("x", b.x, vector_elems(n, b.incx), true, false); break;
    case Op::rotg:
      ops.add("ra", b.ra, 1, true, true);
      ops.add("rb", b.rb, 1, true, !is_complex(node.dtype));
      ops.add("rc", b.rc, 1, false, true, rsize);
      ops.add("rs", b.rs, 1, false, true);
      break;
    case Op::rotmg:
      ops.add("rd1", b.rd1, 1, true, true);
      ops.add("rd2", b.rd2, 1, true, true);
      ops.add("rx1", b.rx1, 1, true, true);
      ops.add("param", b.param, 5, false, true);
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
