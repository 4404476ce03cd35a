#include "netlib.hpp"

#include <dlfcn.h>

#include <complex>
#include <cstdarg>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace sol::test {

using capture::Api;
using capture::BlasArgs;
using capture::DType;
using capture::Node;
using capture::Op;
using capture::Ret;

namespace {

constexpr const char* kLibrary = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";

Report g_report;

}  // namespace

void reset_reports() {
  g_report = Report{};
}
const Report& first_report() {
  return g_report;
}

}  // namespace sol::test

// The reference library calls these instead of its own (they are exported from this
// executable). Both return, so the routine returns right after reporting, as it does under the
// BLAS test programs.
extern "C" __attribute__((visibility("default"))) void xerbla_(const char* srname, const int* info, size_t) {
  using sol::test::g_report;
  if (g_report.count++ > 0) return;
  g_report.level = sol::test::Report::fortran;
  g_report.info = *info;
  g_report.routine.assign(srname, 6);
  g_report.row_major = sol::test::Netlib::get().row_major_strg() == 1;
}

extern "C" __attribute__((visibility("default"))) void cblas_xerbla(int info, const char* rout,
                                                                    const char* form, ...) {
  using sol::test::g_report;
  if (g_report.count++ > 0) return;
  g_report.level = sol::test::Report::cblas;
  g_report.info = info;
  g_report.routine = rout;
  g_report.message = form;
  g_report.row_major = sol::test::Netlib::get().row_major_strg() == 1;
  if (std::strstr(form, "%d")) {
    va_list ap;
    va_start(ap, form);
    g_report.value = va_arg(ap, int);
    va_end(ap);
  }
}

namespace sol::test {

const std::vector<Routine>& blas_routines() {
  static const std::vector<Routine> routines = [] {
    std::vector<Routine> out;
    for (size_t i = 0; i < capture::kNumSymbols; ++i) {
      const auto sym = static_cast<capture::Sym>(i);
      const Api api = capture::symbol_api(sym);
      const Op op = capture::symbol_op(sym);
      const DType dtype = capture::symbol_dtype(sym);
      std::string_view family = capture::op_family(op);
      if (family.substr(0, 4) != "blas") continue;
      if (api == Api::cublas || api == Api::cublaslt) continue;  // device memory: no host reference
      // The other name families share the plain names' checks and semantics.
      if (api != Api::dnnl && capture::symbol_family(sym) != capture::Family::plain) continue;
      // Of oneDNN only dnnl_sgemm is BLAS; dnnl_gemm_[us]8s8s32 take offsets a node lacks.
      if (api == Api::dnnl && dtype != DType::f32) continue;
      out.push_back({sym, api, op, dtype, capture::symbol_name(sym), family[4] - '0'});
    }
    return out;
  }();
  return routines;
}

Netlib& Netlib::get() {
  static Netlib netlib;
  return netlib;
}

Netlib::Netlib() {
  lib_ = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    error_ = dlerror();
    return;
  }
  row_major_strg_ = static_cast<int*>(dlsym(lib_, "RowMajorStrg"));
}

void* Netlib::sym(const std::string& name) {
  void* p = dlsym(lib_, name.c_str());
  if (!p) error_ = "no symbol " + name;
  return p;
}

namespace {

template <class T>
struct Types {
  using R = T;
  static constexpr bool complex = false;
};
template <class R_>
struct Types<std::complex<R_>> {
  using R = R_;
  static constexpr bool complex = true;
};

// A scalar as the CBLAS interface passes it: real by value, complex by pointer.
template <class T>
using CS = std::conditional_t<Types<T>::complex, const void*, T>;

template <class T>
T value(const capture::Scalar& s) {
  using R = typename Types<T>::R;
  if constexpr (Types<T>::complex) {
    return T(R(s.re), R(s.im));
  } else {
    return T(s.re);
  }
}

// A character field back to the CBLAS enum; an invalid one (0) is the value the program passed,
// which the node keeps in blas.cblas.
int layout_enum(char c, int32_t raw) {
  return c == 'R' ? 101 : c == 'C' ? 102 : raw;
}
int trans_enum(char c, int32_t raw) {
  switch (c) {
    case 'N':
    case 'n': return 111;
    case 'T':
    case 't': return 112;
    case 'C': return 113;
    default: return raw;
  }
}
int uplo_enum(char c, int32_t raw) {
  return c == 'U' ? 121 : c == 'L' ? 122 : raw;
}
int diag_enum(char c, int32_t raw) {
  return c == 'N' ? 131 : c == 'U' ? 132 : raw;
}
int side_enum(char c, int32_t raw) {
  return c == 'L' ? 141 : c == 'R' ? 142 : raw;
}

// The node's arguments in the types the interfaces take.
template <class T>
struct Call {
  using R = typename Types<T>::R;
  const BlasArgs& b;
  void* fn;
  bool fortran;
  int m = int(b.m), n = int(b.n), k = int(b.k), kl = int(b.kl), ku = int(b.ku);
  int lda = int(b.lda), ldb = int(b.ldb), ldc = int(b.ldc), incx = int(b.incx), incy = int(b.incy);
  T alpha = value<T>(b.alpha), beta = value<T>(b.beta);
  R ralpha = R(b.alpha.re), rbeta = R(b.beta.re);
  T* a = static_cast<T*>(b.a);
  T* bm = static_cast<T*>(b.b);
  T* c = static_cast<T*>(b.c);
  T* x = static_cast<T*>(b.x);
  T* y = static_cast<T*>(b.y);
  int L = layout_enum(b.layout, b.cblas.layout), TA = trans_enum(b.transa, b.cblas.transa);
  int TB = trans_enum(b.transb, b.cblas.transb), UL = uplo_enum(b.uplo, b.cblas.uplo);
  int DI = diag_enum(b.diag, b.cblas.diag), SD = side_enum(b.side, b.cblas.side);

  CS<T> cs(const T& v) const {
    if constexpr (Types<T>::complex) {
      return &v;
    } else {
      return v;
    }
  }
  template <class... A>
  auto f(A... args) const {
    return reinterpret_cast<void (*)(A...)>(fn)(args...);
  }
};

template <class T>
void level2(const Node& node, Call<T>& s) {
  const BlasArgs& b = node.blas;
  const size_t one = 1;
  const T* a = s.a;
  const T* x = s.x;
  switch (node.op) {
    case Op::gemv:
      if (s.fortran)
        return s.f(&b.transa, &s.m, &s.n, &s.alpha, a, &s.lda, x, &s.incx, &s.beta, s.y, &s.incy, one);
      return s.f(s.L, s.TA, s.m, s.n, s.cs(s.alpha), a, s.lda, x, s.incx, s.cs(s.beta), s.y, s.incy);
    case Op::gbmv:
      if (s.fortran)
        return s.f(&b.transa, &s.m, &s.n, &s.kl, &s.ku, &s.alpha, a, &s.lda, x, &s.incx, &s.beta, s.y,
                   &s.incy, one);
      return s.f(s.L, s.TA, s.m, s.n, s.kl, s.ku, s.cs(s.alpha), a, s.lda, x, s.incx, s.cs(s.beta), s.y,
                 s.incy);
    case Op::symv:
    case Op::hemv:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.alpha, a, &s.lda, x, &s.incx, &s.beta, s.y, &s.incy, one);
      return s.f(s.L, s.UL, s.n, s.cs(s.alpha), a, s.lda, x, s.incx, s.cs(s.beta), s.y, s.incy);
    case Op::sbmv:
    case Op::hbmv:
      if (s.fortran)
        return s.f(&b.uplo, &s.n, &s.k, &s.alpha, a, &s.lda, x, &s.incx, &s.beta, s.y, &s.incy, one);
      return s.f(s.L, s.UL, s.n, s.k, s.cs(s.alpha), a, s.lda, x, s.incx, s.cs(s.beta), s.y, s.incy);
    case Op::spmv:
    case Op::hpmv:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.alpha, a, x, &s.incx, &s.beta, s.y, &s.incy, one);
      return s.f(s.L, s.UL, s.n, s.cs(s.alpha), a, x, s.incx, s.cs(s.beta), s.y, s.incy);
    case Op::trmv:
    case Op::trsv:
      if (s.fortran) return s.f(&b.uplo, &b.transa, &b.diag, &s.n, a, &s.lda, s.x, &s.incx, one, one, one);
      return s.f(s.L, s.UL, s.TA, s.DI, s.n, a, s.lda, s.x, s.incx);
    case Op::tbmv:
    case Op::tbsv:
      if (s.fortran)
        return s.f(&b.uplo, &b.transa, &b.diag, &s.n, &s.k, a, &s.lda, s.x, &s.incx, one, one, one);
      return s.f(s.L, s.UL, s.TA, s.DI, s.n, s.k, a, s.lda, s.x, s.incx);
    case Op::tpmv:
    case Op::tpsv:
      if (s.fortran) return s.f(&b.uplo, &b.transa, &b.diag, &s.n, a, s.x, &s.incx, one, one, one);
      return s.f(s.L, s.UL, s.TA, s.DI, s.n, a, s.x, s.incx);
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      if (s.fortran) return s.f(&s.m, &s.n, &s.alpha, x, &s.incx, s.y, &s.incy, s.a, &s.lda);
      return s.f(s.L, s.m, s.n, s.cs(s.alpha), x, s.incx, s.y, s.incy, s.a, s.lda);
    case Op::syr:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.alpha, x, &s.incx, s.a, &s.lda, one);
      return s.f(s.L, s.UL, s.n, s.alpha, x, s.incx, s.a, s.lda);
    case Op::her:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.ralpha, x, &s.incx, s.a, &s.lda, one);
      return s.f(s.L, s.UL, s.n, s.ralpha, x, s.incx, s.a, s.lda);
    case Op::spr:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.alpha, x, &s.incx, s.a, one);
      return s.f(s.L, s.UL, s.n, s.alpha, x, s.incx, s.a);
    case Op::hpr:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.ralpha, x, &s.incx, s.a, one);
      return s.f(s.L, s.UL, s.n, s.ralpha, x, s.incx, s.a);
    case Op::syr2:
    case Op::her2:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.alpha, x, &s.incx, s.y, &s.incy, s.a, &s.lda, one);
      return s.f(s.L, s.UL, s.n, s.cs(s.alpha), x, s.incx, s.y, s.incy, s.a, s.lda);
    case Op::spr2:
    case Op::hpr2:
      if (s.fortran) return s.f(&b.uplo, &s.n, &s.alpha, x, &s.incx, s.y, &s.incy, s.a, one);
      return s.f(s.L, s.UL, s.n, s.cs(s.alpha), x, s.incx, s.y, s.incy, s.a);
    default: return;
  }
}

template <class T>
void level3(const Node& node, Call<T>& s) {
  const BlasArgs& b = node.blas;
  const size_t one = 1;
  const T* a = s.a;
  const T* bm = s.bm;
  switch (node.op) {
    case Op::gemm:
      if (s.fortran)
        return s.f(&b.transa, &b.transb, &s.m, &s.n, &s.k, &s.alpha, a, &s.lda, bm, &s.ldb, &s.beta, s.c,
                   &s.ldc, one, one);
      return s.f(s.L, s.TA, s.TB, s.m, s.n, s.k, s.cs(s.alpha), a, s.lda, bm, s.ldb, s.cs(s.beta), s.c,
                 s.ldc);
    case Op::symm:
    case Op::hemm:
      if (s.fortran)
        return s.f(&b.side, &b.uplo, &s.m, &s.n, &s.alpha, a, &s.lda, bm, &s.ldb, &s.beta, s.c, &s.ldc, one,
                   one);
      return s.f(s.L, s.SD, s.UL, s.m, s.n, s.cs(s.alpha), a, s.lda, bm, s.ldb, s.cs(s.beta), s.c, s.ldc);
    case Op::syrk:
      if (s.fortran)
        return s.f(&b.uplo, &b.transa, &s.n, &s.k, &s.alpha, a, &s.lda, &s.beta, s.c, &s.ldc, one, one);
      return s.f(s.L, s.UL, s.TA, s.n, s.k, s.cs(s.alpha), a, s.lda, s.cs(s.beta), s.c, s.ldc);
    case Op::herk:
      if (s.fortran)
        return s.f(&b.uplo, &b.transa, &s.n, &s.k, &s.ralpha, a, &s.lda, &s.rbeta, s.c, &s.ldc, one, one);
      return s.f(s.L, s.UL, s.TA, s.n, s.k, s.ralpha, a, s.lda, s.rbeta, s.c, s.ldc);
    case Op::syr2k:
      if (s.fortran)
        return s.f(&b.uplo, &b.transa, &s.n, &s.k, &s.alpha, a, &s.lda, bm, &s.ldb, &s.beta, s.c, &s.ldc, one,
                   one);
      return s.f(s.L, s.UL, s.TA, s.n, s.k, s.cs(s.alpha), a, s.lda, bm, s.ldb, s.cs(s.beta), s.c, s.ldc);
    case Op::her2k:
      if (s.fortran)
        return s.f(&b.uplo, &b.transa, &s.n, &s.k, &s.alpha, a, &s.lda, bm, &s.ldb, &s.rbeta, s.c, &s.ldc,
                   one, one);
      return s.f(s.L, s.UL, s.TA, s.n, s.k, s.cs(s.alpha), a, s.lda, bm, s.ldb, s.rbeta, s.c, s.ldc);
    case Op::trmm:
    case Op::trsm:
      if (s.fortran)
        return s.f(&b.side, &b.uplo, &b.transa, &b.diag, &s.m, &s.n, &s.alpha, a, &s.lda, s.bm, &s.ldb, one,
                   one, one, one);
      return s.f(s.L, s.SD, s.UL, s.TA, s.DI, s.m, s.n, s.cs(s.alpha), a, s.lda, s.bm, s.ldb);
    default: return;
  }
}

// A Fortran function, its xxxsub_ shim or its CBLAS form; V is the result type.
template <class V, class... A>
V function(const Node& node, void* fn, A... args) {
  if (std::string_view(capture::symbol_name(node.sym)).ends_with("sub_")) {
    V v{};
    reinterpret_cast<void (*)(A..., V*)>(fn)(args..., &v);
    return v;
  }
  return reinterpret_cast<V (*)(A...)>(fn)(args...);
}

template <class T>
Ret level1(const Node& node, Call<T>& s) {
  using R = typename Types<T>::R;
  const BlasArgs& b = node.blas;
  Ret ret{};
  const T* x = s.x;
  const bool f = s.fortran;
  const bool cblas_complex_sub = node.api == Api::cblas && Types<T>::complex;
  switch (node.op) {
    case Op::asum:
    case Op::nrm2:
      ret.set(f ? function<R>(node, s.fn, &s.n, x, &s.incx) : function<R>(node, s.fn, s.n, x, s.incx));
      break;
    case Op::iamax:
      if (f) {
        ret.set(function<int>(node, s.fn, &s.n, x, &s.incx));
      } else {
        // CBLAS_INDEX is 0-based and 0 also for an empty vector; back to the Fortran value.
        size_t i = function<size_t>(node, s.fn, s.n, x, s.incx);
        ret.set(int(i) + ((s.n > 0 && s.incx > 0) ? 1 : 0));
      }
      break;
    case Op::cabs1: {
      T z = s.alpha;
      ret.set(f ? function<R>(node, s.fn, &z) : function<R>(node, s.fn, static_cast<const void*>(&z)));
      break;
    }
    case Op::axpy:
      if (f)
        s.f(&s.n, &s.alpha, x, &s.incx, s.y, &s.incy);
      else
        s.f(s.n, s.cs(s.alpha), x, s.incx, s.y, s.incy);
      break;
    case Op::copy:
    case Op::swap:
      if (f)
        s.f(&s.n, s.x, &s.incx, s.y, &s.incy);
      else
        s.f(s.n, s.x, s.incx, s.y, s.incy);
      break;
    case Op::scal: {
      std::string_view name = capture::symbol_name(node.sym);
      bool real_alpha = name.find("csscal") != name.npos || name.find("zdscal") != name.npos;
      if (f && real_alpha)
        s.f(&s.n, &s.ralpha, s.x, &s.incx);
      else if (f)
        s.f(&s.n, &s.alpha, s.x, &s.incx);
      else if (real_alpha)
        s.f(s.n, s.ralpha, s.x, s.incx);
      else
        s.f(s.n, s.cs(s.alpha), s.x, s.incx);
      break;
    }
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
      if (f) {
        ret.set(function<T>(node, s.fn, &s.n, x, &s.incx, static_cast<const T*>(s.y), &s.incy));
      } else if (cblas_complex_sub) {
        T v{};
        s.f(s.n, static_cast<const void*>(x), s.incx, static_cast<const void*>(s.y), s.incy,
            static_cast<void*>(&v));
        ret.set(v);
      } else {
        ret.set(function<T>(node, s.fn, s.n, x, s.incx, static_cast<const T*>(s.y), s.incy));
      }
      break;
    case Op::sdsdot:
      if constexpr (std::is_same_v<T, float>) {
        float sb = float(b.alpha.re);
        ret.set(f ? function<float>(node, s.fn, &s.n, &sb, x, &s.incx, static_cast<const T*>(s.y), &s.incy)
                  : function<float>(node, s.fn, s.n, sb, x, s.incx, static_cast<const T*>(s.y), s.incy));
      }
      break;
    case Op::dsdot:
      if constexpr (std::is_same_v<T, float>) {
        ret.set(f ? function<double>(node, s.fn, &s.n, x, &s.incx, static_cast<const T*>(s.y), &s.incy)
                  : function<double>(node, s.fn, s.n, x, s.incx, static_cast<const T*>(s.y), s.incy));
      }
      break;
    case Op::rot: {
      R c = R(b.cs.re), sn = R(b.sn.re);
      if (f)
        s.f(&s.n, s.x, &s.incx, s.y, &s.incy, &c, &sn);
      else
        s.f(s.n, s.x, s.incx, s.y, s.incy, c, sn);
      break;
    }
    case Op::rotg:
      s.f(static_cast<T*>(b.ra), static_cast<T*>(b.rb), static_cast<R*>(b.rc), static_cast<T*>(b.rs));
      break;
    case Op::rotm:
      if (f)
        s.f(&s.n, s.x, &s.incx, s.y, &s.incy, static_cast<const T*>(b.param));
      else
        s.f(s.n, s.x, s.incx, s.y, s.incy, static_cast<const T*>(b.param));
      break;
    case Op::rotmg: {
      T y1 = value<T>(b.ry1);
      if (f)
        s.f(static_cast<T*>(b.rd1), static_cast<T*>(b.rd2), static_cast<T*>(b.rx1), &y1,
            static_cast<T*>(b.param));
      else
        s.f(static_cast<T*>(b.rd1), static_cast<T*>(b.rd2), static_cast<T*>(b.rx1), y1,
            static_cast<T*>(b.param));
      break;
    }
    default: break;
  }
  return ret;
}

template <class T>
Ret dispatch(const Node& node, void* fn, int level) {
  Call<T> s{node.blas, fn, node.api == Api::blas};
  if (level == 1) return level1(node, s);
  if (level == 2) {
    level2(node, s);
  } else {
    level3(node, s);
  }
  return {};
}

}  // namespace

Ret Netlib::call(const Node& node) {
  std::string name = capture::symbol_name(node.sym);
  Node n = node;
  if (node.api == Api::dnnl) {
    // dnnl_sgemm is a row-major sgemm.
    name = "cblas_sgemm";
    n.api = Api::cblas;
    n.dtype = DType::f32;
  }
  void* fn = sym(name);
  if (!fn) return {};
  int level = capture::op_family(n.op)[4] - '0';
  switch (n.dtype) {
    case DType::f32: return dispatch<float>(n, fn, level);
    case DType::f64: return dispatch<double>(n, fn, level);
    case DType::c64: return dispatch<std::complex<float>>(n, fn, level);
    case DType::c128: return dispatch<std::complex<double>>(n, fn, level);
    default: return {};
  }
}

}  // namespace sol::test
