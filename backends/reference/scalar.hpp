// Element arithmetic exactly as gfortran compiles the reference BLAS, so that the kernels give
// the same bits as /usr/lib/x86_64-linux-gnu/blas/libblas.so.3.
//
// Complex numbers get their own type instead of std::complex: GCC compiles C++ complex products
// with the C99 Annex G NaN/Inf recovery (__mulsc3) and divisions with __divsc3, while gfortran
// follows -fcx-fortran-rules: a plain (ac - bd, ad + bc) product and Smith's division.
//
// Mixed REAL and COMPLEX operands (ALPHA*CONJG(X) with a real ALPHA, TEMP*REAL(A(J,J)), C/D with
// a real D) are computed as gfortran computes them: the real operand becomes CMPLX(r, 0.0) and
// the full complex operation follows. GCC cannot drop the zero imaginary part while signed zeros
// are honoured, and the difference shows with Inf, NaN and signed zeros. So there is no mixed
// operator here: kernels write the conversion (from_real, to_element) where the Fortran has it.
//
// Every kernel that includes this header must be compiled with -ffp-contract=off: a fused
// multiply-add rounds once where the reference rounds twice.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>

namespace sol::backends::reference {

template <class R>
struct Complex {
  R re;
  R im;
};
static_assert(sizeof(Complex<float>) == sizeof(std::complex<float>));
static_assert(sizeof(Complex<double>) == sizeof(std::complex<double>));

template <class T>
struct RealOf {
  using type = T;
};
template <class R>
struct RealOf<Complex<R>> {
  using type = R;
};
template <class T>
using Real = typename RealOf<T>::type;

template <class T>
inline constexpr bool kComplex = !std::is_same_v<T, Real<T>>;

// ------------------------------------------------------------------------- complex operators

template <class R>
inline Complex<R> operator+(Complex<R> a, Complex<R> b) {
  return {a.re + b.re, a.im + b.im};
}
template <class R>
inline Complex<R> operator-(Complex<R> a, Complex<R> b) {
  return {a.re - b.re, a.im - b.im};
}
template <class R>
inline Complex<R> operator-(Complex<R> a) {
  return {-a.re, -a.im};
}
template <class R>
inline Complex<R> operator*(Complex<R> a, Complex<R> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
// GCC's expand_complex_div_wide (Smith's algorithm), which gfortran uses for COMPLEX/COMPLEX.
template <class R>
inline Complex<R> operator/(Complex<R> a, Complex<R> b) {
  if (std::fabs(b.re) < std::fabs(b.im)) {
    R ratio = b.re / b.im;
    R div = b.re * ratio + b.im;
    return {(a.re * ratio + a.im) / div, (a.im * ratio - a.re) / div};
  }
  R ratio = b.im / b.re;
  R div = b.im * ratio + b.re;
  return {(a.im * ratio + a.re) / div, (a.im - a.re * ratio) / div};
}
template <class R>
inline bool operator==(Complex<R> a, Complex<R> b) {
  return a.re == b.re && a.im == b.im;
}
template <class R>
inline bool operator!=(Complex<R> a, Complex<R> b) {
  return !(a == b);
}

// ------------------------------------------------------------------------- Fortran intrinsics

template <class R>
inline R conj(R x) requires std::is_floating_point_v<R> {
  return x;
}
template <class R>
inline Complex<R> conj(Complex<R> x) {
  return {x.re, -x.im};
}
template <class R>
inline R real(R x) requires std::is_floating_point_v<R> {
  return x;
}
template <class R>
inline R real(Complex<R> x) {
  return x.re;
}
// conj(x) where the routine conjugates (CONJA, NOCONJ false), x otherwise.
template <class T>
inline T conj_if(bool c, T x) {
  return c ? conj(x) : x;
}

// The element type's ZERO and ONE; for complex (0,0) and (1,0).
template <class T>
inline constexpr T zero() {
  if constexpr (kComplex<T>) {
    return T{0, 0};
  } else {
    return T(0);
  }
}
template <class T>
inline constexpr T one() {
  if constexpr (kComplex<T>) {
    return T{1, 0};
  } else {
    return T(1);
  }
}
// A real value as an element: CMPLX(r) for complex.
template <class T>
inline T from_real(Real<T> r) {
  if constexpr (kComplex<T>) {
    return T{r, Real<T>(0)};
  } else {
    return r;
  }
}

// A scalar of the element type or of its real type as an element: CMPLX(s, 0.0) for a real
// operand of a complex operation.
template <class T, class S>
inline T to_element(S s) {
  if constexpr (std::is_same_v<S, T>) {
    return s;
  } else {
    return from_real<T>(s);
  }
}

// Fortran's LSAME: one character, case-insensitive.
inline bool lsame(char a, char b) {
  auto up = [](char c) { return (c >= 'a' && c <= 'z') ? char(c - 'a' + 'A') : c; };
  return up(a) == up(b);
}

// ------------------------------------------------------------------------- strided vectors

// A BLAS vector: n logical elements at stride inc. For a negative increment the first logical
// element is the last in memory, as in the reference (KX = 1 - (N-1)*INCX).
template <class T>
class Vec {
 public:
  Vec(T* base, int64_t n, int64_t inc) : p_(base + (inc < 0 && n > 0 ? (1 - n) * inc : 0)), inc_(inc) {}
  T& operator[](int64_t i) const { return p_[i * inc_]; }

 private:
  T* p_;
  int64_t inc_;
};

}  // namespace sol::backends::reference
