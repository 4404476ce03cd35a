// Row-major CBLAS calls (and dnnl_sgemm) as the column-major Fortran calls netlib's CBLAS 3.11
// makes for them (CBLAS/src/cblas_*.c), including the complex cases that conjugate copies of
// vectors, negate imaginary parts in place around the call, or conjugate alpha and beta.
#include <cstdlib>
#include <string_view>
#include <utility>

#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"
#include "capture/blas/detail.hpp"

namespace sol::capture::blas {
namespace detail {

int level(Op op) noexcept {
  std::string_view family = op_family(op);
  if (family == "blas1") return 1;
  if (family == "blas2") return 2;
  if (family == "blas3") return 3;
  return 0;
}

namespace {

bool is_complex(DType d) {
  return d == DType::c64 || d == DType::c128;
}

char flip_uplo(char c) {
  return c == 'U' ? 'L' : 'U';
}
char flip_side(char c) {
  return c == 'L' ? 'R' : 'L';
}
// Level 2 and SYRK/SYR2K: the transpose of a row-major matrix is the column-major matrix
// itself. ConjTrans becomes 'N', the conjugation handled separately where the data is complex.
char flip_trans(char c) {
  return c == 'N' ? 'T' : 'N';
}
// HERK, HER2K: NoTrans becomes 'C', Trans and ConjTrans 'N'.
char flip_trans_hermitian(char c) {
  return c == 'N' ? 'C' : 'N';
}

Scalar conj(Scalar s) {
  s.im = -s.im;
  return s;
}

// Row-major to column-major, after cblas_<routine>.c's RowMajor branch.
void row_major_call(const Node& node, FortranCall& fc) {
  const BlasArgs& in = node.blas;
  BlasArgs& out = fc.args;
  const bool complex = is_complex(node.dtype);
  auto conjugated_copy = [&](void* BlasArgs::*field, const void* src, int64_t n, int64_t inc,
                             int64_t BlasArgs::*inc_field) {
    fc.copies[fc.num_copies++] = ConjugatedCopy{field, src, n, inc};
    out.*inc_field = 1;
  };
  switch (node.op) {
    case Op::gemv:
    case Op::gbmv:
      std::swap(out.m, out.n);
      std::swap(out.kl, out.ku);
      out.transa = flip_trans(in.transa);
      if (complex && in.transa == 'C') {
        // y := alpha*A**H*x + beta*y as conj(conj(alpha)*A*conj(x) + conj(beta)*conj(y)).
        // The reference conjugates only when M > 0 (and hangs for M <= 0 < N; we do not).
        out.alpha = conj(in.alpha);
        out.beta = conj(in.beta);
        if (in.m > 0) {
          conjugated_copy(&BlasArgs::x, in.x, in.m, in.incx, &BlasArgs::incx);
          if (in.n > 0) fc.in_place = InPlaceConjugation{in.y, in.n, in.incy};
        }
      }
      break;
    case Op::symv:
    case Op::sbmv:
    case Op::spmv:
    case Op::syr:
    case Op::spr:
    case Op::syr2:
    case Op::spr2: out.uplo = flip_uplo(in.uplo); break;
    case Op::hemv:
    case Op::hbmv:
    case Op::hpmv:
      out.uplo = flip_uplo(in.uplo);
      out.alpha = conj(in.alpha);
      out.beta = conj(in.beta);
      if (in.n > 0) {
        conjugated_copy(&BlasArgs::x, in.x, in.n, in.incx, &BlasArgs::incx);
        fc.in_place = InPlaceConjugation{in.y, in.n, in.incy};
      }
      break;
    case Op::trmv:
    case Op::tbmv:
    case Op::tpmv:
    case Op::trsv:
    case Op::tbsv:
    case Op::tpsv:
      out.uplo = flip_uplo(in.uplo);
      out.transa = flip_trans(in.transa);
      if (complex && in.transa == 'C' && in.n > 0) fc.in_place = InPlaceConjugation{in.x, in.n, in.incx};
      break;
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      // A**T = y*x**T: the vectors and dimensions trade places.
      std::swap(out.m, out.n);
      std::swap(out.x, out.y);
      std::swap(out.incx, out.incy);
      if (node.op == Op::gerc) {
        fc.op = Op::geru;  // with a conjugated copy of y
        if (in.n > 0) conjugated_copy(&BlasArgs::x, in.y, in.n, in.incy, &BlasArgs::incx);
      }
      break;
    case Op::her:
    case Op::hpr:
      out.uplo = flip_uplo(in.uplo);
      if (in.n > 0) conjugated_copy(&BlasArgs::x, in.x, in.n, in.incx, &BlasArgs::incx);
      break;
    case Op::her2:
    case Op::hpr2:
      out.uplo = flip_uplo(in.uplo);
      std::swap(out.x, out.y);
      std::swap(out.incx, out.incy);
      if (in.n > 0) {
        conjugated_copy(&BlasArgs::x, in.y, in.n, in.incy, &BlasArgs::incx);
        conjugated_copy(&BlasArgs::y, in.x, in.n, in.incx, &BlasArgs::incy);
      }
      break;
    case Op::gemm:
      // C**T = op(B)**T * op(A)**T
      std::swap(out.m, out.n);
      std::swap(out.a, out.b);
      std::swap(out.lda, out.ldb);
      std::swap(out.transa, out.transb);
      break;
    case Op::symm:
    case Op::hemm:
    case Op::trmm:
    case Op::trsm:
      out.side = flip_side(in.side);
      out.uplo = flip_uplo(in.uplo);
      std::swap(out.m, out.n);
      break;
    case Op::syrk:
    case Op::syr2k:
      out.uplo = flip_uplo(in.uplo);
      out.transa = flip_trans(in.transa);
      break;
    case Op::herk:
      out.uplo = flip_uplo(in.uplo);
      out.transa = flip_trans_hermitian(in.transa);
      break;
    case Op::her2k:
      out.uplo = flip_uplo(in.uplo);
      out.transa = flip_trans_hermitian(in.transa);
      out.alpha = conj(in.alpha);
      break;
    default: break;
  }
}

template <class R>
void conjugate_into(R* dst, const R* src, int64_t n, int64_t inc) {
  // Logical element j of the strided vector goes to dst[j] (for inc < 0 the first logical element
  // is the last in memory), conjugated.
  const R* first = src + (inc < 0 ? (1 - n) * inc * 2 : 0);
  for (int64_t j = 0; j < n; ++j) {
    dst[2 * j] = first[2 * j * inc];
    dst[2 * j + 1] = -first[2 * j * inc + 1];
  }
}

template <class R>
void negate_imaginary(const InPlaceConjugation& v) {
  auto* p = static_cast<R*>(v.data);
  int64_t stride = v.inc < 0 ? -v.inc : v.inc;
  int64_t count = stride == 0 ? 1 : v.n;
  for (int64_t j = 0; j < count; ++j) p[2 * j * stride + 1] = -p[2 * j * stride + 1];
}

}  // namespace

FortranCall fortran_call(const Node& node) noexcept {
  FortranCall fc{node.op, node.blas, {}, 0, {}};
  if (node.blas.layout == 'R') row_major_call(node, fc);
  fc.args.layout = 'C';
  return fc;
}

}  // namespace detail

hal::Reason with_column_major(Node& node, FunctionRef<hal::Reason(Node&)> run) noexcept {
  if (node.blas.layout != 'R') return run(node);
  detail::FortranCall fc = detail::fortran_call(node);
  Node cm = node;
  cm.op = fc.op;
  cm.blas = fc.args;

  void* copies[2] = {nullptr, nullptr};
  for (int i = 0; i < fc.num_copies; ++i) {
    const detail::ConjugatedCopy& c = fc.copies[i];
    copies[i] = std::malloc(size_t(c.n) * dtype_size(node.dtype));
    if (!copies[i]) {
      for (void* p : copies) std::free(p);
      return hal::Reason::out_of_memory;
    }
    if (node.dtype == DType::c64) {
      detail::conjugate_into(static_cast<float*>(copies[i]), static_cast<const float*>(c.src), c.n, c.inc);
    } else {
      detail::conjugate_into(static_cast<double*>(copies[i]), static_cast<const double*>(c.src), c.n, c.inc);
    }
    cm.blas.*c.field = copies[i];
  }
  auto conjugate_in_place = [&] {
    if (!fc.in_place.data) return;
    if (node.dtype == DType::c64) {
      detail::negate_imaginary<float>(fc.in_place);
    } else {
      detail::negate_imaginary<double>(fc.in_place);
    }
  };

  conjugate_in_place();
  hal::Reason r = run(cm);
  conjugate_in_place();  // also after a failed run: the executor then runs the original call elsewhere
  for (void* p : copies) std::free(p);
  node.ret = cm.ret;
  return r;
}

void plain_gemm(BlasArgs& x, char transa, char transb, int64_t m, int64_t n, int64_t k, void* a, void* b,
                void* c) noexcept {
  x.layout = 'C';
  x.transa = transa;
  x.transb = transb;
  x.m = m, x.n = n, x.k = k;
  x.lda = transa == 'N' ? m : k;
  x.ldb = transb == 'N' ? k : n;
  x.ldc = m;
  x.alpha = Scalar(1.0);
  x.beta = Scalar(0.0);
  x.a = a, x.b = b, x.c = c;
}

int call_dnnl_sgemm(const void* fn, Node& node) noexcept {
  using Sgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                        int64_t, float, float*, int64_t);
  const BlasArgs& b = node.blas;
  const auto t = [](char c) { return c == 'N' || c == 'n' ? 'N' : 'T'; };
  const auto alpha = static_cast<float>(b.alpha.re), beta = static_cast<float>(b.beta.re);
  const auto *pa = static_cast<const float*>(b.a), *pb = static_cast<const float*>(b.b);
  return reinterpret_cast<Sgemm>(fn)(t(b.transb), t(b.transa), b.n, b.m, b.k, alpha, pb, b.ldb, pa, b.lda,
                                     beta, static_cast<float*>(b.c), b.ldc);
}

}  // namespace sol::capture::blas
