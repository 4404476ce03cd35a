// BLAS level 2 as netlib's reference BLAS 3.11 computes it, column-major, after the argument
// checks (the caller validated the call).
//
// The reference has one routine per storage scheme (GEMV/GBMV, SYMV/SBMV/SPMV, TRMV/TBMV/TPMV,
// ...) and, inside each, one loop for unit strides and one for general strides. All of these
// perform the same operations in the same order on the same logical elements; they differ only
// in how an element is addressed. So each family is one kernel here, over a matrix view (dense,
// band or packed) and strided vectors (Vec).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/reference/scalar.hpp"

namespace sol::backends::reference {

// ------------------------------------------------------------------------- matrix views
// A view maps a 0-based (i, j) to the element's storage and says which rows of column j are
// stored: [lo(j), hi(j)].

// General m-by-n matrix, dense (GEMV) or with kl sub- and ku super-diagonals (GBMV).
template <class T>
struct GeneralView {
  T* a;
  int64_t lda, m;
  int64_t kl = -1, ku = -1;  // -1: dense
  T& operator()(int64_t i, int64_t j) const { return kl < 0 ? a[i + j * lda] : a[ku + i - j + j * lda]; }
  int64_t lo(int64_t j) const { return kl < 0 ? 0 : std::max<int64_t>(0, j - ku); }
  int64_t hi(int64_t j) const { return kl < 0 ? m - 1 : std::min<int64_t>(m - 1, j + kl); }
};

enum class Storage { dense, band, packed };

// One triangle of an n-by-n matrix: dense with leading dimension lda, band with k off-diagonals
// (SBMV, TBMV...), or packed column by column (SPMV, TPMV...).
template <class T>
struct TriangleView {
  T* a;
  int64_t n;
  bool upper;
  Storage storage;
  int64_t lda = 0, k = 0;
  T& operator()(int64_t i, int64_t j) const {
    switch (storage) {
      case Storage::dense: return a[i + j * lda];
      case Storage::band: return upper ? a[k + i - j + j * lda] : a[i - j + j * lda];
      case Storage::packed: break;
    }
    return upper ? a[i + j * (j + 1) / 2] : a[i + j * (2 * n - j - 1) / 2];
  }
  // Stored rows of column j: [lo(j), j] for upper, [j, hi(j)] for lower.
  int64_t lo(int64_t j) const { return storage == Storage::band ? std::max<int64_t>(0, j - k) : 0; }
  int64_t hi(int64_t j) const { return storage == Storage::band ? std::min<int64_t>(n - 1, j + k) : n - 1; }
};

// y := beta*y over leny elements, as every "first form y := beta*y" block does.
template <class T>
void scale_by_beta(int64_t leny, T beta, Vec<T> y) {
  if (beta == one<T>()) return;
  for (int64_t i = 0; i < leny; ++i) y[i] = beta == zero<T>() ? zero<T>() : beta * y[i];
}

// ------------------------------------------------------------------------- GEMV, GBMV

template <class T>
void gemv(char trans, int64_t m, int64_t n, T alpha, GeneralView<const T> a, const T* xp, int64_t incx,
          T beta, T* yp, int64_t incy) {
  if (m == 0 || n == 0 || (alpha == zero<T>() && beta == one<T>())) return;
  bool notrans = lsame(trans, 'N');
  bool conjugate = lsame(trans, 'C');
  int64_t lenx = notrans ? n : m, leny = notrans ? m : n;
  Vec x(xp, lenx, incx);
  Vec y(yp, leny, incy);
  scale_by_beta(leny, beta, y);
  if (alpha == zero<T>()) return;
  if (notrans) {
    for (int64_t j = 0; j < n; ++j) {
      T temp = alpha * x[j];
      for (int64_t i = a.lo(j); i <= a.hi(j); ++i) y[i] = y[i] + temp * a(i, j);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      T temp = zero<T>();
      for (int64_t i = a.lo(j); i <= a.hi(j); ++i) temp = temp + conj_if(conjugate, a(i, j)) * x[i];
      y[j] = y[j] + alpha * temp;
    }
  }
}

// ------------------------------------------------------------------------- SYMV, HEMV and kin
// SYMV, SBMV, SPMV (herm false); HEMV, HBMV, HPMV (herm true: the diagonal is taken real and
// the other triangle is the conjugate).

template <bool herm, class T>
T diagonal_times(T temp, T d) {
  if constexpr (herm) {
    return temp * from_real<T>(real(d));  // TEMP1*REAL(A(J,J))
  } else {
    return temp * d;
  }
}

template <bool herm, class T>
void symv(TriangleView<const T> a, T alpha, const T* xp, int64_t incx, T beta, T* yp, int64_t incy) {
  int64_t n = a.n;
  if (n == 0 || (alpha == zero<T>() && beta == one<T>())) return;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  scale_by_beta(n, beta, y);
  if (alpha == zero<T>()) return;
  if (a.upper) {
    for (int64_t j = 0; j < n; ++j) {
      T temp1 = alpha * x[j];
      T temp2 = zero<T>();
      for (int64_t i = a.lo(j); i < j; ++i) {
        y[i] = y[i] + temp1 * a(i, j);
        temp2 = temp2 + conj_if(herm, a(i, j)) * x[i];
      }
      y[j] = y[j] + diagonal_times<herm>(temp1, a(j, j)) + alpha * temp2;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      T temp1 = alpha * x[j];
      T temp2 = zero<T>();
      y[j] = y[j] + diagonal_times<herm>(temp1, a(j, j));
      for (int64_t i = j + 1; i <= a.hi(j); ++i) {
        y[i] = y[i] + temp1 * a(i, j);
        temp2 = temp2 + conj_if(herm, a(i, j)) * x[i];
      }
      y[j] = y[j] + alpha * temp2;
    }
  }
}

// ------------------------------------------------------------------------- TRMV, TBMV, TPMV

template <class T>
void trmv(char trans, char diag, TriangleView<const T> a, T* xp, int64_t incx) {
  int64_t n = a.n;
  if (n == 0) return;
  bool conjugate = lsame(trans, 'C');
  bool nounit = lsame(diag, 'N');
  Vec x(xp, n, incx);
  if (lsame(trans, 'N')) {
    if (a.upper) {
      for (int64_t j = 0; j < n; ++j) {
        if (x[j] == zero<T>()) continue;
        T temp = x[j];
        for (int64_t i = a.lo(j); i < j; ++i) x[i] = x[i] + temp * a(i, j);
        if (nounit) x[j] = x[j] * a(j, j);
      }
    } else {
      for (int64_t j = n - 1; j >= 0; --j) {
        if (x[j] == zero<T>()) continue;
        T temp = x[j];
        for (int64_t i = a.hi(j); i > j; --i) x[i] = x[i] + temp * a(i, j);
        if (nounit) x[j] = x[j] * a(j, j);
      }
    }
  } else if (a.upper) {
    for (int64_t j = n - 1; j >= 0; --j) {
      T temp = x[j];
      if (nounit) temp = temp * conj_if(conjugate, a(j, j));
      for (int64_t i = j - 1; i >= a.lo(j); --i) temp = temp + conj_if(conjugate, a(i, j)) * x[i];
      x[j] = temp;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      T temp = x[j];
      if (nounit) temp = temp * conj_if(conjugate, a(j, j));
      for (int64_t i = j + 1; i <= a.hi(j); ++i) temp = temp + conj_if(conjugate, a(i, j)) * x[i];
      x[j] = temp;
    }
  }
}

// ------------------------------------------------------------------------- TRSV, TBSV, TPSV

template <class T>
void trsv(char trans, char diag, TriangleView<const T> a, T* xp, int64_t incx) {
  int64_t n = a.n;
  if (n == 0) return;
  bool conjugate = lsame(trans, 'C');
  bool nounit = lsame(diag, 'N');
  Vec x(xp, n, incx);
  if (lsame(trans, 'N')) {
    if (a.upper) {
      for (int64_t j = n - 1; j >= 0; --j) {
        if (x[j] == zero<T>()) continue;
        if (nounit) x[j] = x[j] / a(j, j);
        T temp = x[j];
        for (int64_t i = j - 1; i >= a.lo(j); --i) x[i] = x[i] - temp * a(i, j);
      }
    } else {
      for (int64_t j = 0; j < n; ++j) {
        if (x[j] == zero<T>()) continue;
        if (nounit) x[j] = x[j] / a(j, j);
        T temp = x[j];
        for (int64_t i = j + 1; i <= a.hi(j); ++i) x[i] = x[i] - temp * a(i, j);
      }
    }
  } else if (a.upper) {
    for (int64_t j = 0; j < n; ++j) {
      T temp = x[j];
      for (int64_t i = a.lo(j); i < j; ++i) temp = temp - conj_if(conjugate, a(i, j)) * x[i];
      if (nounit) temp = temp / conj_if(conjugate, a(j, j));
      x[j] = temp;
    }
  } else {
    for (int64_t j = n - 1; j >= 0; --j) {
      T temp = x[j];
      for (int64_t i = a.hi(j); i > j; --i) temp = temp - conj_if(conjugate, a(i, j)) * x[i];
      if (nounit) temp = temp / conj_if(conjugate, a(j, j));
      x[j] = temp;
    }
  }
}

// ------------------------------------------------------------------------- GER, GERU, GERC

template <class T>
void ger(int64_t m, int64_t n, T alpha, const T* xp, int64_t incx, const T* yp, int64_t incy, T* ap,
         int64_t lda, bool conjugate_y) {
  if (m == 0 || n == 0 || alpha == zero<T>()) return;
  Vec x(xp, m, incx);
  Vec y(yp, n, incy);
  for (int64_t j = 0; j < n; ++j) {
    if (y[j] == zero<T>()) continue;
    T temp = alpha * conj_if(conjugate_y, y[j]);
    for (int64_t i = 0; i < m; ++i) ap[i + j * lda] = ap[i + j * lda] + x[i] * temp;
  }
}

// ------------------------------------------------------------------------- SYR, SPR, HER, HPR

// SYR, SPR (herm false, S = T) and HER, HPR (herm true, S real: TEMP = ALPHA*CONJG(X(J))).
template <bool herm, class T, class S>
void syr(TriangleView<T> a, S alpha, const T* xp, int64_t incx) {
  int64_t n = a.n;
  if (n == 0 || alpha == zero<S>()) return;
  Vec x(xp, n, incx);
  for (int64_t j = 0; j < n; ++j) {
    if (x[j] == zero<T>()) {
      if constexpr (herm) a(j, j) = from_real<T>(real(a(j, j)));
      continue;
    }
    T temp = to_element<T>(alpha) * conj_if(herm, x[j]);
    int64_t first = a.upper ? 0 : j, last = a.upper ? j : n - 1;
    for (int64_t i = first; i <= last; ++i) {
      if constexpr (herm) {
        if (i == j) {
          a(j, j) = from_real<T>(real(a(j, j)) + real(x[j] * temp));
          continue;
        }
      }
      a(i, j) = a(i, j) + x[i] * temp;
    }
  }
}

// ------------------------------------------------------------------------- SYR2, SPR2, HER2, HPR2

template <bool herm, class T>
void syr2(TriangleView<T> a, T alpha, const T* xp, int64_t incx, const T* yp, int64_t incy) {
  int64_t n = a.n;
  if (n == 0 || alpha == zero<T>()) return;
  Vec x(xp, n, incx);
  Vec y(yp, n, incy);
  for (int64_t j = 0; j < n; ++j) {
    if (x[j] == zero<T>() && y[j] == zero<T>()) {
      if constexpr (herm) a(j, j) = from_real<T>(real(a(j, j)));
      continue;
    }
    T temp1 = alpha * conj_if(herm, y[j]);
    T temp2 = conj_if(herm, alpha * x[j]);
    int64_t first = a.upper ? 0 : j, last = a.upper ? j : n - 1;
    for (int64_t i = first; i <= last; ++i) {
      if constexpr (herm) {
        if (i == j) {
          a(j, j) = from_real<T>(real(a(j, j)) + (real(x[j] * temp1) + real(y[j] * temp2)));
          continue;
        }
      }
      a(i, j) = a(i, j) + x[i] * temp1 + y[i] * temp2;
    }
  }
}

}  // namespace sol::backends::reference
