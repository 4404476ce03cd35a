// BLAS level 1 as netlib's reference BLAS 3.11 computes it. Each function names the routines
// it stands for; loops run in the reference's order (its unrolled unit-stride loops accumulate
// in the same order as its strided ones, so one loop serves both).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/reference/scalar.hpp"

namespace sol::backends::reference {

// SCABS1, DCABS1
template <class R>
R cabs1(Complex<R> z) {
  return std::fabs(z.re) + std::fabs(z.im);
}

// SASUM, DASUM, SCASUM, DZASUM
template <class T>
Real<T> asum(int64_t n, const T* xp, int64_t incx) {
  Real<T> s = 0;
  if (n <= 0 || incx <= 0) return s;
  Vec x(xp, n, incx);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (!kComplex<T>) {
      s = s + std::fabs(x[i]);
    } else if constexpr (std::is_same_v<T, Complex<float>>) {
      s = s + std::fabs(x[i].re) + std::fabs(x[i].im);  // SCASUM adds the parts one at a time
    } else {
      s = s + cabs1(x[i]);  // DZASUM adds DCABS1 of each element
    }
  }
  return s;
}

// SNRM2, DNRM2, SCNRM2, DZNRM2 (the *nrm2.f90 of 3.10+): Blue's algorithm with three
// accumulators. The thresholds are the f90 source's expressions of radix, digits and exponents.
template <class R>
struct Blue;
template <>
struct Blue<float> {
  static constexpr float tsml = 0x1p-63f, tbig = 0x1p52f, ssml = 0x1p75f, sbig = 0x1p-76f;
};
template <>
struct Blue<double> {
  static constexpr double tsml = 0x1p-511, tbig = 0x1p486, ssml = 0x1p537, sbig = 0x1p-538;
};

template <class T>
Real<T> nrm2(int64_t n, const T* xp, int64_t incx) {
  using R = Real<T>;
  using B = Blue<R>;
  constexpr R max_n = std::numeric_limits<R>::max();
  if (n <= 0) return 0;
  bool notbig = true;
  R asml = 0, amed = 0, abig = 0;
  auto accumulate = [&](R ax) {
    if (ax > B::tbig) {
      R t = ax * B::sbig;
      abig = abig + t * t;
      notbig = false;
    } else if (ax < B::tsml) {
      R t = ax * B::ssml;
      if (notbig) asml = asml + t * t;
    } else {
      amed = amed + ax * ax;
    }
  };
  Vec x(xp, n, incx);  // incx == 0 sums x(1) n times, as the f90 source does
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kComplex<T>) {
      accumulate(std::fabs(x[i].re));
      accumulate(std::fabs(x[i].im));
    } else {
      accumulate(std::fabs(x[i]));
    }
  }
  R scl = 1, sumsq = 0;
  bool amed_used = amed > 0 || amed > max_n || amed != amed;
  if (abig > 0) {
    if (amed_used) abig = abig + (amed * B::sbig) * B::sbig;
    scl = R(1) / B::sbig;
    sumsq = abig;
  } else if (asml > 0) {
    if (amed_used) {
      amed = std::sqrt(amed);
      asml = std::sqrt(asml) / B::ssml;
      R ymin = asml > amed ? amed : asml;
      R ymax = asml > amed ? asml : amed;
      scl = 1;
      R q = ymin / ymax;
      sumsq = ymax * ymax * (R(1) + q * q);
    } else {
      scl = R(1) / B::ssml;
      sumsq = asml;
    }
  } else {
    scl = 1;
    sumsq = amed;
  }
  return scl * std::sqrt(sumsq);
}

// ISAMAX, IDAMAX, ICAMAX, IZAMAX: 1-based, 0 when n < 1 or incx <= 0.
template <class T>
int64_t iamax(int64_t n, const T* xp, int64_t incx) {
  if (n < 1 || incx <= 0) return 0;
  if (n == 1) return 1;
  auto mag = [](T v) {
    if constexpr (kComplex<T>) {
      return cabs1(v);
    } else {
      return std::fabs(v);
    }
  };
  Vec x(xp, n, incx);
  int64_t best = 1;
  Real<T> smax = mag(x[0]);
  for (int64_t i = 1; i < n; ++i) {
    if (mag(x[i]) > smax) {
      best = i + 1;
      smax = mag(x[i]);
    }
  }
  return best;
}

// SAXPY, DAXPY, CAXPY, ZAXPY
template <class T>
void axpy(int64_t n, T alpha, const T* xp, int64_t incx, T* yp, int64_t incy) {
  if (n <= 0 || alpha == zero<T>()) return;  // CAXPY tests SCABS1(CA) == 0, the same thing
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] + alpha * x[i];
}

// SCOPY, DCOPY, CCOPY, ZCOPY
template <class T>
void copy(int64_t n, const T* xp, int64_t incx, T* yp, int64_t incy) {
  if (n <= 0) return;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

// SSWAP, DSWAP, CSWAP, ZSWAP
template <class T>
void swap(int64_t n, T* xp, int64_t incx, T* yp, int64_t incy) {
  if (n <= 0) return;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  for (int64_t i = 0; i < n; ++i) {
    T t = x[i];
    x[i] = y[i];
    y[i] = t;
  }
}

// SSCAL, DSCAL, CSCAL, ZSCAL (S = T) and CSSCAL, ZDSCAL (S real). 3.11 returns early for
// alpha == 1; CSSCAL and ZDSCAL scale each part (CMPLX(SA*REAL(X), SA*AIMAG(X))).
template <class T, class S>
void scal(int64_t n, S alpha, T* xp, int64_t incx) {
  if (n <= 0 || incx <= 0 || alpha == one<S>()) return;
  Vec x(xp, n, incx);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<S, T>) {
      x[i] = alpha * x[i];
    } else {
      x[i] = T{alpha * x[i].re, alpha * x[i].im};
    }
  }
}

// SDOT, DDOT, CDOTU, ZDOTU, CDOTC, ZDOTC (conjugate: x is conjugated)
template <class T>
T dot(int64_t n, const T* xp, int64_t incx, const T* yp, int64_t incy, bool conjugate) {
  T s = zero<T>();
  if (n <= 0) return s;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  for (int64_t i = 0; i < n; ++i) s = s + conj_if(conjugate, x[i]) * y[i];
  return s;
}

// SDSDOT (start = sb) and DSDOT (start = 0): accumulated in double.
inline double dot_in_double(int64_t n, double start, const float* xp, int64_t incx, const float* yp,
                            int64_t incy) {
  double s = start;
  if (n <= 0) return s;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  for (int64_t i = 0; i < n; ++i) s = s + double(x[i]) * double(y[i]);
  return s;
}

// SROT, DROT, CSROT, ZDROT
template <class T>
void rot(int64_t n, T* xp, int64_t incx, T* yp, int64_t incy, Real<T> c, Real<T> s) {
  if (n <= 0) return;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  const T ct = from_real<T>(c), st = from_real<T>(s);  // CSROT: REAL*COMPLEX
  for (int64_t i = 0; i < n; ++i) {
    T t = ct * x[i] + st * y[i];
    y[i] = ct * y[i] - st * x[i];
    x[i] = t;
  }
}

// Scaling constants of *rotg.f90 (radix, exponents and epsilon of the precision).
template <class R>
struct RotgConst {
  static constexpr int min_exp = std::numeric_limits<R>::min_exponent;  // Fortran MINEXPONENT
  static constexpr int max_exp = std::numeric_limits<R>::max_exponent;
  static R safmin() { return std::ldexp(R(1), std::max(min_exp - 1, 1 - max_exp)); }
  static R safmax() { return std::ldexp(R(1), std::max(1 - min_exp, max_exp - 1)); }
};

// SROTG, DROTG (srotg.f90)
template <class R>
void rotg(R& a, R& b, R& c, R& s) {
  using K = RotgConst<R>;
  R anorm = std::fabs(a);
  R bnorm = std::fabs(b);
  if (bnorm == 0) {
    c = 1;
    s = 0;
    b = 0;
  } else if (anorm == 0) {
    c = 0;
    s = 1;
    a = b;
    b = 1;
  } else {
    R scl = std::min(K::safmax(), std::max(K::safmin(), std::max(anorm, bnorm)));
    R sigma = anorm > bnorm ? std::copysign(R(1), a) : std::copysign(R(1), b);
    R as = a / scl;
    R bs = b / scl;
    R r = sigma * (scl * std::sqrt(as * as + bs * bs));
    c = a / r;
    s = b / r;
    R z;
    if (anorm > bnorm) {
      z = s;
    } else if (c != 0) {
      z = R(1) / c;
    } else {
      z = 1;
    }
    a = r;
    b = z;
  }
}

// CROTG, ZROTG (crotg.f90 of 3.11, the algorithm of CLARTG). Real operands of complex
// operations are converted to complex, as gfortran does (see scalar.hpp).
template <class R>
void rotg(Complex<R>& a, const Complex<R>& b, R& c, Complex<R>& s) {
  using K = RotgConst<R>;
  using C = Complex<R>;
  const R safmin = K::safmin(), safmax = K::safmax(), rtmin = std::sqrt(safmin);
  auto abssq = [](C t) { return t.re * t.re + t.im * t.im; };
  auto cx = [](R v) { return from_real<C>(v); };
  C f = a;
  C g = b;
  C r;
  if (g == zero<C>()) {
    c = 1;
    s = zero<C>();
    r = f;
  } else if (f == zero<C>()) {
    c = 0;
    if (g.re == 0) {
      r = cx(std::fabs(g.im));
      s = conj(g) / r;
    } else if (g.im == 0) {
      r = cx(std::fabs(g.re));
      s = conj(g) / r;
    } else {
      R g1 = std::max(std::fabs(g.re), std::fabs(g.im));
      R rtmax = std::sqrt(safmax / 2);
      if (g1 > rtmin && g1 < rtmax) {
        R d = std::sqrt(abssq(g));
        s = conj(g) / cx(d);
        r = cx(d);
      } else {
        R u = std::min(safmax, std::max(safmin, g1));
        C gs = g / cx(u);
        R d = std::sqrt(abssq(gs));
        s = conj(gs) / cx(d);
        r = cx(d * u);
      }
    }
  } else {
    R f1 = std::max(std::fabs(f.re), std::fabs(f.im));
    R g1 = std::max(std::fabs(g.re), std::fabs(g.im));
    R rtmax = std::sqrt(safmax / 4);
    // The unscaled and the scaled algorithm share this tail, on f, g or their scaled copies.
    auto finish = [&](C fs, C gs, R f2, R h2) {
      if (f2 >= h2 * safmin) {
        c = std::sqrt(f2 / h2);
        r = fs / cx(c);
        rtmax = rtmax * 2;
        if (f2 > rtmin && h2 < rtmax) {
          s = conj(gs) * (fs / cx(std::sqrt(f2 * h2)));
        } else {
          s = conj(gs) * (r / cx(h2));
        }
      } else {
        R d = std::sqrt(f2 * h2);
        c = f2 / d;
        r = c >= safmin ? fs / cx(c) : fs * cx(h2 / d);
        s = conj(gs) * (fs / cx(d));
      }
    };
    if (f1 > rtmin && f1 < rtmax && g1 > rtmin && g1 < rtmax) {
      R f2 = abssq(f);
      R g2 = abssq(g);
      finish(f, g, f2, f2 + g2);
    } else {
      R u = std::min(safmax, std::max(std::max(safmin, f1), g1));
      C gs = g / cx(u);
      R g2 = abssq(gs);
      R w, f2, h2;
      C fs;
      if (f1 / u < rtmin) {
        // f is not well-scaled when scaled by g1: scale it on its own.
        R v = std::min(safmax, std::max(safmin, f1));
        w = v / u;
        fs = f / cx(v);
        f2 = abssq(fs);
        h2 = f2 * (w * w) + g2;
      } else {
        w = 1;
        fs = f / cx(u);
        f2 = abssq(fs);
        h2 = f2 + g2;
      }
      finish(fs, gs, f2, h2);
      c = c * w;
      r = r * cx(u);
    }
  }
  a = r;
}

// SROTM, DROTM
template <class R>
void rotm(int64_t n, R* xp, int64_t incx, R* yp, int64_t incy, const R* param) {
  R flag = param[0];
  if (n <= 0 || flag + R(2) == 0) return;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  if (flag < 0) {
    R h11 = param[1], h21 = param[2], h12 = param[3], h22 = param[4];
    for (int64_t i = 0; i < n; ++i) {
      R w = x[i], z = y[i];
      x[i] = w * h11 + z * h12;
      y[i] = w * h21 + z * h22;
    }
  } else if (flag == 0) {
    R h21 = param[2], h12 = param[3];
    for (int64_t i = 0; i < n; ++i) {
      R w = x[i], z = y[i];
      x[i] = w + z * h12;
      y[i] = w * h21 + z;
    }
  } else {
    R h11 = param[1], h22 = param[4];
    for (int64_t i = 0; i < n; ++i) {
      R w = x[i], z = y[i];
      x[i] = w * h11 + z;
      y[i] = -w + h22 * z;
    }
  }
}

// SROTMG, DROTMG. The constants are the sources' DATA statements (single precision writes them
// as decimal literals, which are not exact powers of two).
template <class R>
struct RotmgConst;
template <>
struct RotmgConst<float> {
  static constexpr float gam = 4096.0f, gamsq = 1.67772E7f, rgamsq = 5.96046E-8f;
};
template <>
struct RotmgConst<double> {
  static constexpr double gam = 4096.0, gamsq = 16777216.0, rgamsq = 5.9604645E-8;
};

template <class R>
void rotmg(R& d1, R& d2, R& x1, R y1, R* param) {
  using K = RotmgConst<R>;
  // SFLAG is undefined in the reference when SU <= 0 below (possible only for d2 < 0); 0 is as
  // good a value as any there.
  R flag = 0, h11 = 0, h12 = 0, h21 = 0, h22 = 0;
  auto zero_all = [&] {
    flag = -1;
    h11 = h12 = h21 = h22 = 0;
    d1 = d2 = x1 = 0;
  };
  if (d1 < 0) {
    zero_all();
  } else {
    R p2 = d2 * y1;
    if (p2 == 0) {
      param[0] = -2;
      return;
    }
    R p1 = d1 * x1;
    R q2 = p2 * y1;
    R q1 = p1 * x1;
    if (std::fabs(q1) > std::fabs(q2)) {
      h21 = -y1 / x1;
      h12 = p2 / p1;
      R u = R(1) - h12 * h21;
      if (u > 0) {
        flag = 0;
        d1 = d1 / u;
        d2 = d2 / u;
        x1 = x1 * u;
      }
    } else if (q2 < 0) {
      zero_all();
    } else {
      flag = 1;
      h11 = p1 / p2;
      h22 = x1 / y1;
      R u = R(1) + h11 * h22;
      R t = d2 / u;
      d2 = d1 / u;
      d1 = t;
      x1 = y1 * u;
    }
    // The reference's rescaling: note that it resets h21/h12 whenever flag is not 0, even when
    // flag is already -1.
    auto to_full = [&] {
      if (flag == 0) {
        h11 = 1;
        h22 = 1;
      } else {
        h21 = -1;
        h12 = 1;
      }
      flag = -1;
    };
    constexpr R gam2 = K::gam * K::gam;
    // The reference rescales forever when d1 ends up negative (possible for d2 < 0) or d1 or d2
    // infinite; we stop instead, leaving that value unscaled.
    if (d1 != 0) {
      while ((d1 <= K::rgamsq || d1 >= K::gamsq) && d1 > 0 && std::isfinite(d1)) {
        to_full();
        if (d1 <= K::rgamsq) {
          d1 = d1 * gam2;
          x1 = x1 / K::gam;
          h11 = h11 / K::gam;
          h12 = h12 / K::gam;
        } else {
          d1 = d1 / gam2;
          x1 = x1 * K::gam;
          h11 = h11 * K::gam;
          h12 = h12 * K::gam;
        }
      }
    }
    if (d2 != 0) {
      while ((std::fabs(d2) <= K::rgamsq || std::fabs(d2) >= K::gamsq) && std::isfinite(d2)) {
        to_full();
        if (std::fabs(d2) <= K::rgamsq) {
          d2 = d2 * gam2;
          h21 = h21 / K::gam;
          h22 = h22 / K::gam;
        } else {
          d2 = d2 / gam2;
          h21 = h21 * K::gam;
          h22 = h22 * K::gam;
        }
      }
    }
  }
  if (flag < 0) {
    param[1] = h11;
    param[2] = h21;
    param[3] = h12;
    param[4] = h22;
  } else if (flag == 0) {
    param[2] = h21;
    param[3] = h12;
  } else {
    param[1] = h11;
    param[4] = h22;
  }
  param[0] = flag;
}

}  // namespace sol::backends::reference
