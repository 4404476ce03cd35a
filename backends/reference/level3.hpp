// BLAS level 3 as netlib's reference BLAS 3.11 computes it, column-major, after the argument
// checks. One kernel per family; the real and complex routines share it, the complex ones
// adding conjugation (CONJG) where the reference does.
#pragma once

#include <cstdint>
#include <utility>

#include "backends/reference/scalar.hpp"

namespace sol::backends::reference {

// A column-major matrix with leading dimension ld.
template <class T>
struct Mat {
  T* p;
  int64_t ld;
  T& operator()(int64_t i, int64_t j) const { return p[i + j * ld]; }
};

// C := beta*C for the alpha == 0 exits of GEMM, SYMM, HEMM, TRMM and TRSM (C is never read for
// beta == 0).
template <class T>
void scale_matrix(Mat<T> c, int64_t m, int64_t n, T beta) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) c(i, j) = beta == zero<T>() ? zero<T>() : beta * c(i, j);
  }
}

// ------------------------------------------------------------------------- GEMM

template <class T>
void gemm(char transa, char transb, int64_t m, int64_t n, int64_t k, T alpha, Mat<const T> a, Mat<const T> b,
          T beta, Mat<T> c) {
  if (m == 0 || n == 0 || ((alpha == zero<T>() || k == 0) && beta == one<T>())) return;
  if (alpha == zero<T>()) return scale_matrix(c, m, n, beta);
  bool nota = lsame(transa, 'N'), notb = lsame(transb, 'N');
  bool conja = lsame(transa, 'C'), conjb = lsame(transb, 'C');
  if (nota) {
    // C := alpha*A*op(B) + beta*C, one column of C at a time.
    for (int64_t j = 0; j < n; ++j) {
      if (beta == zero<T>()) {
        for (int64_t i = 0; i < m; ++i) c(i, j) = zero<T>();
      } else if (beta != one<T>()) {
        for (int64_t i = 0; i < m; ++i) c(i, j) = beta * c(i, j);
      }
      for (int64_t l = 0; l < k; ++l) {
        T temp = alpha * (notb ? b(l, j) : conj_if(conjb, b(j, l)));
        for (int64_t i = 0; i < m; ++i) c(i, j) = c(i, j) + temp * a(i, l);
      }
    }
  } else {
    // C := alpha*op(A)*op(B) + beta*C with op(A) = A**T or A**H: dot products.
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        T temp = zero<T>();
        for (int64_t l = 0; l < k; ++l) {
          T bl = notb ? b(l, j) : conj_if(conjb, b(j, l));
          temp = temp + conj_if(conja, a(l, i)) * bl;
        }
        c(i, j) = beta == zero<T>() ? alpha * temp : alpha * temp + beta * c(i, j);
      }
    }
  }
}

// ------------------------------------------------------------------------- SYMM, HEMM

template <bool herm, class T>
void symm(char side, char uplo, int64_t m, int64_t n, T alpha, Mat<const T> a, Mat<const T> b, T beta,
          Mat<T> c) {
  if (m == 0 || n == 0 || (alpha == zero<T>() && beta == one<T>())) return;
  if (alpha == zero<T>()) return scale_matrix(c, m, n, beta);
  bool upper = lsame(uplo, 'U');
  // The diagonal of a Hermitian matrix is taken real; its other triangle is the conjugate.
  auto diag_times = [](T t, T d) {
    if constexpr (herm) {
      return t * from_real<T>(real(d));  // TEMP1*REAL(A(I,I)), ALPHA*REAL(A(J,J))
    } else {
      return t * d;
    }
  };
  if (lsame(side, 'L')) {
    // C := alpha*A*B + beta*C
    auto column = [&](int64_t i, int64_t j, int64_t kfirst, int64_t klast) {
      T temp1 = alpha * b(i, j);
      T temp2 = zero<T>();
      for (int64_t kk = kfirst; kk <= klast; ++kk) {
        c(kk, j) = c(kk, j) + temp1 * a(kk, i);
        temp2 = temp2 + b(kk, j) * conj_if(herm, a(kk, i));
      }
      if (beta == zero<T>()) {
        c(i, j) = diag_times(temp1, a(i, i)) + alpha * temp2;
      } else {
        c(i, j) = beta * c(i, j) + diag_times(temp1, a(i, i)) + alpha * temp2;
      }
    };
    for (int64_t j = 0; j < n; ++j) {
      if (upper) {
        for (int64_t i = 0; i < m; ++i) column(i, j, 0, i - 1);
      } else {
        for (int64_t i = m - 1; i >= 0; --i) column(i, j, i + 1, m - 1);
      }
    }
  } else {
    // C := alpha*B*A + beta*C
    for (int64_t j = 0; j < n; ++j) {
      T temp1 = diag_times(alpha, a(j, j));
      for (int64_t i = 0; i < m; ++i) {
        c(i, j) = beta == zero<T>() ? temp1 * b(i, j) : beta * c(i, j) + temp1 * b(i, j);
      }
      for (int64_t kk = 0; kk < n; ++kk) {
        if (kk == j) continue;
        // Element (kk, j) of the full matrix, from the stored triangle.
        bool stored = upper ? kk < j : kk > j;
        temp1 = alpha * (stored ? a(kk, j) : conj_if(herm, a(j, kk)));
        for (int64_t i = 0; i < m; ++i) c(i, j) = c(i, j) + temp1 * b(i, kk);
      }
    }
  }
}

// ------------------------------------------------------------------------- SYRK, HERK, SYR2K, HER2K

// Rows [first, last] of column j in the stored triangle of an n-by-n matrix.
inline std::pair<int64_t, int64_t> triangle_rows(bool upper, int64_t n, int64_t j) {
  return upper ? std::pair<int64_t, int64_t>(0, j) : std::pair<int64_t, int64_t>(j, n - 1);
}

// C := beta*C on column j of the triangle, before the rank-k update (and for alpha == 0). The
// Hermitian routines keep the diagonal real: BETA*REAL(C(J,J)), and REAL(C(J,J)) for beta == 1.
template <bool herm, class T, class S>
void scale_triangle_column(Mat<T> c, bool upper, int64_t n, int64_t j, S beta) {
  if (beta == one<S>()) {
    if constexpr (herm) c(j, j) = from_real<T>(real(c(j, j)));
    return;
  }
  auto [first, last] = triangle_rows(upper, n, j);
  for (int64_t i = first; i <= last; ++i) {
    if (beta == zero<S>()) {
      c(i, j) = zero<T>();
    } else if constexpr (herm) {
      c(i, j) = i == j ? from_real<T>(beta * real(c(j, j))) : to_element<T>(beta) * c(i, j);
    } else {
      c(i, j) = beta * c(i, j);
    }
  }
}

// SYRK (herm false: alpha, beta of the element type) and HERK (herm true: real alpha, beta).
template <bool herm, class T, class S>
void syrk(char uplo, char trans, int64_t n, int64_t k, S alpha, Mat<const T> a, S beta, Mat<T> c) {
  if (n == 0 || ((alpha == zero<S>() || k == 0) && beta == one<S>())) return;
  bool upper = lsame(uplo, 'U');
  if (alpha == zero<S>()) {
    for (int64_t j = 0; j < n; ++j) scale_triangle_column<herm>(c, upper, n, j, beta);
    return;
  }
  if (lsame(trans, 'N')) {
    // C := alpha*A*A**T + beta*C  or  alpha*A*A**H + beta*C
    for (int64_t j = 0; j < n; ++j) {
      scale_triangle_column<herm>(c, upper, n, j, beta);
      auto [first, last] = triangle_rows(upper, n, j);
      for (int64_t l = 0; l < k; ++l) {
        if (a(j, l) == zero<T>()) continue;
        T temp = to_element<T>(alpha) * conj_if(herm, a(j, l));
        for (int64_t i = first; i <= last; ++i) {
          if constexpr (herm) {
            if (i == j) {
              c(j, j) = from_real<T>(real(c(j, j)) + real(temp * a(j, l)));
              continue;
            }
          }
          c(i, j) = c(i, j) + temp * a(i, l);
        }
      }
    }
  } else {
    // C := alpha*A**T*A + beta*C  or  alpha*A**H*A + beta*C
    for (int64_t j = 0; j < n; ++j) {
      auto [first, last] = triangle_rows(upper, n, j);
      for (int64_t i = first; i <= last; ++i) {
        if constexpr (herm) {
          if (i == j) {
            Real<T> rtemp = 0;
            for (int64_t l = 0; l < k; ++l) rtemp = rtemp + real(conj(a(l, j)) * a(l, j));
            c(j, j) = from_real<T>(beta == zero<S>() ? alpha * rtemp : alpha * rtemp + beta * real(c(j, j)));
            continue;
          }
        }
        T temp = zero<T>();
        for (int64_t l = 0; l < k; ++l) temp = temp + conj_if(herm, a(l, i)) * a(l, j);
        c(i, j) = beta == zero<S>() ? to_element<T>(alpha) * temp
                                    : to_element<T>(alpha) * temp + to_element<T>(beta) * c(i, j);
      }
    }
  }
}

// SYR2K (herm false) and HER2K (herm true: beta real, C := alpha*A*B**H + conj(alpha)*B*A**H).
template <bool herm, class T, class S>
void syr2k(char uplo, char trans, int64_t n, int64_t k, T alpha, Mat<const T> a, Mat<const T> b, S beta,
           Mat<T> c) {
  if (n == 0 || ((alpha == zero<T>() || k == 0) && beta == one<S>())) return;
  bool upper = lsame(uplo, 'U');
  if (alpha == zero<T>()) {
    for (int64_t j = 0; j < n; ++j) scale_triangle_column<herm>(c, upper, n, j, beta);
    return;
  }
  if (lsame(trans, 'N')) {
    for (int64_t j = 0; j < n; ++j) {
      scale_triangle_column<herm>(c, upper, n, j, beta);
      auto [first, last] = triangle_rows(upper, n, j);
      for (int64_t l = 0; l < k; ++l) {
        if (a(j, l) == zero<T>() && b(j, l) == zero<T>()) continue;
        T temp1 = alpha * conj_if(herm, b(j, l));
        T temp2 = conj_if(herm, alpha * a(j, l));
        for (int64_t i = first; i <= last; ++i) {
          if constexpr (herm) {
            if (i == j) {
              c(j, j) = from_real<T>(real(c(j, j)) + (real(a(j, l) * temp1) + real(b(j, l) * temp2)));
              continue;
            }
          }
          c(i, j) = c(i, j) + a(i, l) * temp1 + b(i, l) * temp2;
        }
      }
    }
  } else {
    const T calpha = conj_if(herm, alpha);
    for (int64_t j = 0; j < n; ++j) {
      auto [first, last] = triangle_rows(upper, n, j);
      for (int64_t i = first; i <= last; ++i) {
        T temp1 = zero<T>(), temp2 = zero<T>();
        for (int64_t l = 0; l < k; ++l) {
          temp1 = temp1 + conj_if(herm, a(l, i)) * b(l, j);
          temp2 = temp2 + conj_if(herm, b(l, i)) * a(l, j);
        }
        if constexpr (herm) {
          if (i == j) {
            Real<T> sum = real(alpha * temp1 + calpha * temp2);
            c(j, j) = from_real<T>(beta == zero<S>() ? sum : beta * real(c(j, j)) + sum);
            continue;
          }
        }
        if (beta == zero<S>()) {
          c(i, j) = alpha * temp1 + calpha * temp2;
        } else {
          c(i, j) = to_element<T>(beta) * c(i, j) + alpha * temp1 + calpha * temp2;
        }
      }
    }
  }
}

// ------------------------------------------------------------------------- TRMM

template <class T>
void trmm(char side, char uplo, char transa, char diag, int64_t m, int64_t n, T alpha, Mat<const T> a,
          Mat<T> b) {
  if (m == 0 || n == 0) return;
  if (alpha == zero<T>()) return scale_matrix(b, m, n, zero<T>());  // B := 0, never read
  bool upper = lsame(uplo, 'U');
  bool nounit = lsame(diag, 'N');
  bool conjugate = lsame(transa, 'C');
  auto op_a = [&](int64_t i, int64_t j) { return conj_if(conjugate, a(i, j)); };
  if (lsame(side, 'L')) {
    if (lsame(transa, 'N')) {
      // B := alpha*A*B
      for (int64_t j = 0; j < n; ++j) {
        if (upper) {
          for (int64_t kk = 0; kk < m; ++kk) {
            if (b(kk, j) == zero<T>()) continue;
            T temp = alpha * b(kk, j);
            for (int64_t i = 0; i < kk; ++i) b(i, j) = b(i, j) + temp * a(i, kk);
            if (nounit) temp = temp * a(kk, kk);
            b(kk, j) = temp;
          }
        } else {
          for (int64_t kk = m - 1; kk >= 0; --kk) {
            if (b(kk, j) == zero<T>()) continue;
            T temp = alpha * b(kk, j);
            b(kk, j) = temp;
            if (nounit) b(kk, j) = b(kk, j) * a(kk, kk);
            for (int64_t i = kk + 1; i < m; ++i) b(i, j) = b(i, j) + temp * a(i, kk);
          }
        }
      }
    } else {
      // B := alpha*A**T*B  or  alpha*A**H*B
      for (int64_t j = 0; j < n; ++j) {
        if (upper) {
          for (int64_t i = m - 1; i >= 0; --i) {
            T temp = b(i, j);
            if (nounit) temp = temp * op_a(i, i);
            for (int64_t kk = 0; kk < i; ++kk) temp = temp + op_a(kk, i) * b(kk, j);
            b(i, j) = alpha * temp;
          }
        } else {
          for (int64_t i = 0; i < m; ++i) {
            T temp = b(i, j);
            if (nounit) temp = temp * op_a(i, i);
            for (int64_t kk = i + 1; kk < m; ++kk) temp = temp + op_a(kk, i) * b(kk, j);
            b(i, j) = alpha * temp;
          }
        }
      }
    }
  } else if (lsame(transa, 'N')) {
    // B := alpha*B*A
    auto column = [&](int64_t j, int64_t kfirst, int64_t klast) {
      T temp = alpha;
      if (nounit) temp = temp * a(j, j);
      for (int64_t i = 0; i < m; ++i) b(i, j) = temp * b(i, j);
      for (int64_t kk = kfirst; kk <= klast; ++kk) {
        if (a(kk, j) == zero<T>()) continue;
        temp = alpha * a(kk, j);
        for (int64_t i = 0; i < m; ++i) b(i, j) = b(i, j) + temp * b(i, kk);
      }
    };
    if (upper) {
      for (int64_t j = n - 1; j >= 0; --j) column(j, 0, j - 1);
    } else {
      for (int64_t j = 0; j < n; ++j) column(j, j + 1, n - 1);
    }
  } else {
    // B := alpha*B*A**T  or  alpha*B*A**H
    auto column = [&](int64_t kk, int64_t jfirst, int64_t jlast) {
      for (int64_t j = jfirst; j <= jlast; ++j) {
        if (a(j, kk) == zero<T>()) continue;
        T temp = alpha * op_a(j, kk);
        for (int64_t i = 0; i < m; ++i) b(i, j) = b(i, j) + temp * b(i, kk);
      }
      T temp = alpha;
      if (nounit) temp = temp * op_a(kk, kk);
      if (temp != one<T>()) {
        for (int64_t i = 0; i < m; ++i) b(i, kk) = temp * b(i, kk);
      }
    };
    if (upper) {
      for (int64_t kk = 0; kk < n; ++kk) column(kk, 0, kk - 1);
    } else {
      for (int64_t kk = n - 1; kk >= 0; --kk) column(kk, kk + 1, n - 1);
    }
  }
}

// ------------------------------------------------------------------------- TRSM

template <class T>
void trsm(char side, char uplo, char transa, char diag, int64_t m, int64_t n, T alpha, Mat<const T> a,
          Mat<T> b) {
  if (m == 0 || n == 0) return;
  if (alpha == zero<T>()) return scale_matrix(b, m, n, zero<T>());  // B := 0, never read
  bool upper = lsame(uplo, 'U');
  bool nounit = lsame(diag, 'N');
  bool conjugate = lsame(transa, 'C');
  auto op_a = [&](int64_t i, int64_t j) { return conj_if(conjugate, a(i, j)); };
  auto scale_column = [&](int64_t j) {
    if (alpha != one<T>()) {
      for (int64_t i = 0; i < m; ++i) b(i, j) = alpha * b(i, j);
    }
  };
  if (lsame(side, 'L')) {
    if (lsame(transa, 'N')) {
      // B := alpha*inv(A)*B
      for (int64_t j = 0; j < n; ++j) {
        scale_column(j);
        auto eliminate = [&](int64_t kk, int64_t ifirst, int64_t ilast) {
          if (b(kk, j) == zero<T>()) return;
          if (nounit) b(kk, j) = b(kk, j) / a(kk, kk);
          for (int64_t i = ifirst; i <= ilast; ++i) b(i, j) = b(i, j) - b(kk, j) * a(i, kk);
        };
        if (upper) {
          for (int64_t kk = m - 1; kk >= 0; --kk) eliminate(kk, 0, kk - 1);
        } else {
          for (int64_t kk = 0; kk < m; ++kk) eliminate(kk, kk + 1, m - 1);
        }
      }
    } else {
      // B := alpha*inv(A**T)*B  or  alpha*inv(A**H)*B
      for (int64_t j = 0; j < n; ++j) {
        auto solve = [&](int64_t i, int64_t kfirst, int64_t klast) {
          T temp = alpha * b(i, j);
          for (int64_t kk = kfirst; kk <= klast; ++kk) temp = temp - op_a(kk, i) * b(kk, j);
          if (nounit) temp = temp / op_a(i, i);
          b(i, j) = temp;
        };
        if (upper) {
          for (int64_t i = 0; i < m; ++i) solve(i, 0, i - 1);
        } else {
          for (int64_t i = m - 1; i >= 0; --i) solve(i, i + 1, m - 1);
        }
      }
    }
  } else if (lsame(transa, 'N')) {
    // B := alpha*B*inv(A)
    auto column = [&](int64_t j, int64_t kfirst, int64_t klast) {
      scale_column(j);
      for (int64_t kk = kfirst; kk <= klast; ++kk) {
        if (a(kk, j) == zero<T>()) continue;
        for (int64_t i = 0; i < m; ++i) b(i, j) = b(i, j) - a(kk, j) * b(i, kk);
      }
      if (nounit) {
        T temp = one<T>() / a(j, j);
        for (int64_t i = 0; i < m; ++i) b(i, j) = temp * b(i, j);
      }
    };
    if (upper) {
      for (int64_t j = 0; j < n; ++j) column(j, 0, j - 1);
    } else {
      for (int64_t j = n - 1; j >= 0; --j) column(j, j + 1, n - 1);
    }
  } else {
    // B := alpha*B*inv(A**T)  or  alpha*B*inv(A**H)
    auto column = [&](int64_t kk, int64_t jfirst, int64_t jlast) {
      if (nounit) {
        T temp = one<T>() / op_a(kk, kk);
        for (int64_t i = 0; i < m; ++i) b(i, kk) = temp * b(i, kk);
      }
      for (int64_t j = jfirst; j <= jlast; ++j) {
        if (a(j, kk) == zero<T>()) continue;
        T temp = op_a(j, kk);
        for (int64_t i = 0; i < m; ++i) b(i, j) = b(i, j) - temp * b(i, kk);
      }
      if (alpha != one<T>()) {
        for (int64_t i = 0; i < m; ++i) b(i, kk) = alpha * b(i, kk);
      }
    };
    if (upper) {
      for (int64_t kk = n - 1; kk >= 0; --kk) column(kk, 0, kk - 1);
    } else {
      for (int64_t kk = 0; kk < n; ++kk) column(kk, kk + 1, n - 1);
    }
  }
}

}  // namespace sol::backends::reference
