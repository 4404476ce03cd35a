// The reference backend: decodes a column-major BLAS node into the kernels of level1.hpp,
// level2.hpp and level3.hpp; DNN nodes go to dnn/.
#include "backends/reference/reference.hpp"

#include <complex>
#include <string>
#include <string_view>

#include "backends/reference/level1.hpp"
#include "backends/reference/level2.hpp"
#include "backends/reference/level3.hpp"
#include "backends/reference/dnn/dnn.hpp"
#include "capture/blas/blas.hpp"

namespace sol::backends::reference {
namespace {

using capture::BlasArgs;
using capture::DType;
using capture::Node;
using capture::Op;
using capture::Scalar;
using capture::Sym;
using hal::Reason;

template <class T>
T narrow(const Scalar& s) {
  if constexpr (kComplex<T>) {
    return T{Real<T>(s.re), Real<T>(s.im)};
  } else {
    return T(s.re);
  }
}

// Function results go to node.ret in the Fortran function's own type.
template <class T>
void set_ret(Node& node, T v) {
  if constexpr (kComplex<T>) {
    node.ret.set(std::complex<Real<T>>(v.re, v.im));
  } else {
    node.ret.set(v);
  }
}

// CSSCAL and ZDSCAL share op and dtype with CSCAL and ZSCAL but scale by a real alpha, which the
// reference applies per component: (a*re, a*im) differs from (a,0)*(re,im) for Inf and NaN.
bool real_alpha_scal(Sym s) {
  return s == Sym::csscal_ || s == Sym::zdscal_ || s == Sym::cblas_csscal || s == Sym::cblas_zdscal;
}

enum class Kind { any, real, complex };

// Which element types each BLAS op exists for (interpose/spec/blas.toml).
Kind op_kind(Op op) {
  switch (op) {
    case Op::dsdot:
    case Op::sdsdot:
    case Op::rotm:
    case Op::rotmg:
    case Op::dot:
    case Op::symv:
    case Op::sbmv:
    case Op::spmv:
    case Op::ger:
    case Op::syr:
    case Op::spr:
    case Op::syr2:
    case Op::spr2: return Kind::real;
    case Op::cabs1:
    case Op::dotu:
    case Op::dotc:
    case Op::hemv:
    case Op::hbmv:
    case Op::hpmv:
    case Op::geru:
    case Op::gerc:
    case Op::her:
    case Op::hpr:
    case Op::her2:
    case Op::hpr2:
    case Op::hemm:
    case Op::herk:
    case Op::her2k: return Kind::complex;
    default: return Kind::any;
  }
}

int blas_level(Op op) {
  std::string_view family = capture::op_family(op);
  if (family == "blas1") return 1;
  if (family == "blas2") return 2;
  if (family == "blas3") return 3;
  return 0;
}

template <class T>
TriangleView<const T> triangle(const BlasArgs& b, Storage storage) {
  return {static_cast<const T*>(b.a), b.n, lsame(b.uplo, 'U'), storage, b.lda, b.k};
}
template <class T>
TriangleView<T> writable_triangle(const BlasArgs& b, Storage storage) {
  return {static_cast<T*>(b.a), b.n, lsame(b.uplo, 'U'), storage, b.lda, b.k};
}

// Level 1, every element type.
template <class T>
void run_level1(Node& node) {
  using R = Real<T>;
  const BlasArgs& b = node.blas;
  auto* x = static_cast<T*>(b.x);
  auto* y = static_cast<T*>(b.y);
  switch (node.op) {
    case Op::asum: set_ret(node, asum(b.n, x, b.incx)); break;
    case Op::nrm2: set_ret(node, nrm2(b.n, x, b.incx)); break;
    case Op::iamax: node.ret.set(iamax(b.n, x, b.incx)); break;
    case Op::axpy: axpy(b.n, narrow<T>(b.alpha), x, b.incx, y, b.incy); break;
    case Op::copy: copy(b.n, x, b.incx, y, b.incy); break;
    case Op::swap: swap(b.n, x, b.incx, y, b.incy); break;
    case Op::scal:
      if (real_alpha_scal(node.sym)) {
        scal(b.n, narrow<R>(b.alpha), x, b.incx);
      } else {
        scal(b.n, narrow<T>(b.alpha), x, b.incx);
      }
      break;
    case Op::rot: rot(b.n, x, b.incx, y, b.incy, narrow<R>(b.cs), narrow<R>(b.sn)); break;
    case Op::rotg:
      if constexpr (kComplex<T>) {
        rotg(*static_cast<T*>(b.ra), *static_cast<const T*>(b.rb), *static_cast<R*>(b.rc),
             *static_cast<T*>(b.rs));
      } else {
        rotg(*static_cast<T*>(b.ra), *static_cast<T*>(b.rb), *static_cast<T*>(b.rc), *static_cast<T*>(b.rs));
      }
      break;
    case Op::dot:
    case Op::dotu:
    case Op::dotc: set_ret(node, dot(b.n, x, b.incx, y, b.incy, node.op == Op::dotc)); break;
    default: break;
  }
  if constexpr (kComplex<T>) {
    if (node.op == Op::cabs1) set_ret(node, cabs1(narrow<T>(b.alpha)));
  } else {
    switch (node.op) {
      case Op::rotm: rotm(b.n, x, b.incx, y, b.incy, static_cast<const T*>(b.param)); break;
      case Op::rotmg:
        rotmg(*static_cast<T*>(b.rd1), *static_cast<T*>(b.rd2), *static_cast<T*>(b.rx1), narrow<T>(b.ry1),
              static_cast<T*>(b.param));
        break;
      case Op::sdsdot:
        if constexpr (std::is_same_v<T, float>) {
          node.ret.set(float(dot_in_double(b.n, float(b.alpha.re), x, b.incx, y, b.incy)));
        }
        break;
      case Op::dsdot:
        if constexpr (std::is_same_v<T, float>) node.ret.set(dot_in_double(b.n, 0.0, x, b.incx, y, b.incy));
        break;
      default: break;
    }
  }
}

// Level 2.
template <class T>
void run_level2(Node& node) {
  using R = Real<T>;
  const BlasArgs& b = node.blas;
  const T alpha = narrow<T>(b.alpha), beta = narrow<T>(b.beta);
  // HER and HPR take a real alpha, SYR and SPR one of the element type.
  const auto rank1_alpha = narrow<std::conditional_t<kComplex<T>, R, T>>(b.alpha);
  const auto* a = static_cast<const T*>(b.a);
  const auto* x = static_cast<const T*>(b.x);
  auto* y = static_cast<T*>(b.y);
  auto* xw = static_cast<T*>(b.x);
  switch (node.op) {
    case Op::gemv:
      gemv(b.transa, b.m, b.n, alpha, GeneralView<const T>{a, b.lda, b.m}, x, b.incx, beta, y, b.incy);
      break;
    case Op::gbmv:
      gemv(b.transa, b.m, b.n, alpha, GeneralView<const T>{a, b.lda, b.m, b.kl, b.ku}, x, b.incx, beta, y,
           b.incy);
      break;
    case Op::symv:
    case Op::hemv:
      symv<kComplex<T>>(triangle<T>(b, Storage::dense), alpha, x, b.incx, beta, y, b.incy);
      break;
    case Op::sbmv:
    case Op::hbmv: symv<kComplex<T>>(triangle<T>(b, Storage::band), alpha, x, b.incx, beta, y, b.incy); break;
    case Op::spmv:
    case Op::hpmv:
      symv<kComplex<T>>(triangle<T>(b, Storage::packed), alpha, x, b.incx, beta, y, b.incy);
      break;
    case Op::trmv: trmv(b.transa, b.diag, triangle<T>(b, Storage::dense), xw, b.incx); break;
    case Op::tbmv: trmv(b.transa, b.diag, triangle<T>(b, Storage::band), xw, b.incx); break;
    case Op::tpmv: trmv(b.transa, b.diag, triangle<T>(b, Storage::packed), xw, b.incx); break;
    case Op::trsv: trsv(b.transa, b.diag, triangle<T>(b, Storage::dense), xw, b.incx); break;
    case Op::tbsv: trsv(b.transa, b.diag, triangle<T>(b, Storage::band), xw, b.incx); break;
    case Op::tpsv: trsv(b.transa, b.diag, triangle<T>(b, Storage::packed), xw, b.incx); break;
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      ger(b.m, b.n, alpha, x, b.incx, static_cast<const T*>(b.y), b.incy, static_cast<T*>(b.a), b.lda,
          node.op == Op::gerc);
      break;
    case Op::syr:
    case Op::her: syr<kComplex<T>>(writable_triangle<T>(b, Storage::dense), rank1_alpha, x, b.incx); break;
    case Op::spr:
    case Op::hpr: syr<kComplex<T>>(writable_triangle<T>(b, Storage::packed), rank1_alpha, x, b.incx); break;
    case Op::syr2:
    case Op::her2:
      syr2<kComplex<T>>(writable_triangle<T>(b, Storage::dense), alpha, x, b.incx, static_cast<const T*>(b.y),
                        b.incy);
      break;
    case Op::spr2:
    case Op::hpr2:
      syr2<kComplex<T>>(writable_triangle<T>(b, Storage::packed), alpha, x, b.incx,
                        static_cast<const T*>(b.y), b.incy);
      break;
    default: break;
  }
}

// Level 3.
template <class T>
void run_level3(Node& node) {
  using R = Real<T>;
  const BlasArgs& b = node.blas;
  const T alpha = narrow<T>(b.alpha), beta = narrow<T>(b.beta);
  Mat<const T> a{static_cast<const T*>(b.a), b.lda};
  Mat<const T> bm{static_cast<const T*>(b.b), b.ldb};
  Mat<T> c{static_cast<T*>(b.c), b.ldc};
  Mat<T> bw{static_cast<T*>(b.b), b.ldb};
  switch (node.op) {
    case Op::gemm: gemm(b.transa, b.transb, b.m, b.n, b.k, alpha, a, bm, beta, c); break;
    case Op::symm: symm<false>(b.side, b.uplo, b.m, b.n, alpha, a, bm, beta, c); break;
    case Op::hemm: symm<true>(b.side, b.uplo, b.m, b.n, alpha, a, bm, beta, c); break;
    case Op::syrk: syrk<false, T, T>(b.uplo, b.transa, b.n, b.k, alpha, a, beta, c); break;
    case Op::herk: syrk<true, T, R>(b.uplo, b.transa, b.n, b.k, R(b.alpha.re), a, R(b.beta.re), c); break;
    case Op::syr2k: syr2k<false, T, T>(b.uplo, b.transa, b.n, b.k, alpha, a, bm, beta, c); break;
    case Op::her2k: syr2k<true, T, R>(b.uplo, b.transa, b.n, b.k, alpha, a, bm, R(b.beta.re), c); break;
    case Op::trmm: trmm(b.side, b.uplo, b.transa, b.diag, b.m, b.n, alpha, a, bw); break;
    case Op::trsm: trsm(b.side, b.uplo, b.transa, b.diag, b.m, b.n, alpha, a, bw); break;
    default: break;
  }
}

template <class T>
void run_typed(Node& node) {
  int level = blas_level(node.op);
  if (level == 1) {
    run_level1<T>(node);
  } else if (level == 2) {
    // Real-only and complex-only ops are never instantiated for the other kind.
    if constexpr (kComplex<T>) {
      if (op_kind(node.op) != Kind::real) run_level2<T>(node);
    } else {
      if (op_kind(node.op) != Kind::complex) run_level2<T>(node);
    }
  } else {
    run_level3<T>(node);
  }
}

class ReferenceBackend final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "reference"; }
  bool init(const config::Config&, std::string&) noexcept override { return true; }
  std::string device() const override { return "CPU, plain loops with netlib reference BLAS 3.11 semantics"; }
  bool wide_dims() const noexcept override { return true; }  // its loops count in 64 bits

  Reason supports(const Node& node) const noexcept override {
    if (node.dnn) return dnn::dnn_supports(node);
    if (blas_level(node.op) == 0) return Reason::not_blas;
    // Of the oneDNN calls only dnnl_sgemm is a BLAS operation; its int8 siblings have offsets
    // that a BLAS node does not carry.
    if (node.api == capture::Api::dnnl && node.dtype != DType::f32) return Reason::not_blas;
    DType d = node.dtype;
    bool complex = d == DType::c64 || d == DType::c128;
    if (!complex && d != DType::f32 && d != DType::f64) return Reason::dtype_unsupported;
    Kind kind = op_kind(node.op);
    if ((kind == Kind::real && complex) || (kind == Kind::complex && !complex))
      return Reason::dtype_unsupported;
    if ((node.op == Op::sdsdot || node.op == Op::dsdot) && d != DType::f32) return Reason::dtype_unsupported;
    return Reason::ok;
  }

  Reason run(Node& node) noexcept override {
    if (node.dnn) return dnn::dnn_run(node);
    if (Reason r = supports(node); r != Reason::ok) return r;
    // The executor hands over column-major nodes; a row-major one is converted here the same way.
    if (node.blas.layout == 'R') {
      auto column_major = [this](Node& n) { return run(n); };
      return capture::blas::with_column_major(node, column_major);
    }
    switch (node.dtype) {
      case DType::f32: run_typed<float>(node); break;
      case DType::f64: run_typed<double>(node); break;
      case DType::c64: run_typed<Complex<float>>(node); break;
      case DType::c128: run_typed<Complex<double>>(node); break;
      default: return Reason::dtype_unsupported;
    }
    return Reason::ok;
  }
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<ReferenceBackend>();
}

}  // namespace sol::backends::reference
