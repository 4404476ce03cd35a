// What every device backend reads of a BLAS node's arguments the way the reference does: the
// character arguments (either case), the special scalars, the reference's vector indexing, the
// element types' real parts; and the gather/scatter of strided vectors into packed device order.
// One copy for opencl and cuda (their transfer.hpp bring these names into their namespaces).
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ir/node.hpp"

namespace sol::backends {

// BLAS character arguments, as the reference reads them (either case).
inline char upper_case(char c) noexcept {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
inline bool notrans(char t) noexcept {
  return upper_case(t) == 'N';
}
inline bool is_upper(char u) noexcept {
  return upper_case(u) == 'U';
}
inline bool is_left(char s) noexcept {
  return upper_case(s) == 'L';
}
inline bool is_unit(char d) noexcept {
  return upper_case(d) == 'U';
}
// A BLAS library's enums for the character arguments (cuBLAS's, CLBlast's), read as the reference
// reads them.
template <class Trans, class Uplo, class Side, class Diag>
struct BlasEnums {
  Trans no, transpose, conjugate;
  Uplo upper, lower;
  Side left, right;
  Diag unit, non_unit;

  Trans trans(char t, bool complex) const noexcept {
    switch (upper_case(t)) {
      case 'N': return no;
      case 'T': return transpose;
      default: return complex ? conjugate : transpose;  // 'C' on real data is 'T'
    }
  }
  Uplo uplo(char u) const noexcept { return is_upper(u) ? upper : lower; }
  Side side(char s) const noexcept { return is_left(s) ? left : right; }
  Diag diag(char d) const noexcept { return is_unit(d) ? unit : non_unit; }
};

inline bool is_zero(const capture::Scalar& s) noexcept {
  return s.re == 0 && s.im == 0;
}
inline bool is_one(const capture::Scalar& s) noexcept {
  return s.re == 1 && s.im == 0;
}

// The logical i-th element of a vector of n elements at increment inc, as the reference indexes
// it: a negative increment starts from the far end.
inline size_t vector_at(int64_t i, int64_t n, int64_t inc) noexcept {
  return static_cast<size_t>(inc >= 0 ? i * inc : (n - 1 - i) * -inc);
}

// A written vector at increment 0 makes the reference's loop a sequential recurrence on one
// element (axpy accumulates into it, copy keeps the last value...): not a parallel operation, so
// no device backend takes it.
inline bool sequential_recurrence(const capture::Node& node) noexcept {
  const capture::BlasArgs& b = node.blas;
  if (b.n <= 1) return false;
  switch (node.op) {
    case capture::Op::swap:
    case capture::Op::rot:
    case capture::Op::rotm: return b.incx == 0 || b.incy == 0;
    case capture::Op::axpy:
    case capture::Op::copy: return b.incy == 0;
    default: return false;
  }
}

// Element types: E's real type, and whether E is complex.
template <class E>
struct RealType {
  using type = E;
};
template <class R>
struct RealType<std::complex<R>> {
  using type = R;
};
template <class E>
using RealOf = typename RealType<E>::type;
template <class E>
inline constexpr bool kComplex = !std::is_same_v<E, RealOf<E>>;

// The variant of a routine for element type E among its S, D, C and Z variants (a library's
// function pointers, say): pick4<E>(api.Sgemm, api.Dgemm, api.Cgemm, api.Zgemm).
template <class E, class S, class D, class C, class Z>
auto pick4(S s, D d, C c, Z z) {
  if constexpr (std::is_same_v<E, float>)
    return s;
  else if constexpr (std::is_same_v<E, double>)
    return d;
  else if constexpr (std::is_same_v<E, cfloat>)
    return c;
  else
    return z;
}

// A strided vector of n elements of `es` bytes (4, 8 or 16) into packed order (gather) and back
// (scatter), element i at vector_at(i, n, inc).
namespace detail {
template <size_t ES>
void gather_fixed(unsigned char* dst, const unsigned char* src, int64_t n, int64_t inc) noexcept {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ES, src + vector_at(i, n, inc) * ES, ES);
}
template <size_t ES>
void scatter_fixed(unsigned char* dst, const unsigned char* src, int64_t n, int64_t inc) noexcept {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + vector_at(i, n, inc) * ES, src + i * ES, ES);
}
}  // namespace detail
inline void gather(unsigned char* dst, const unsigned char* src, int64_t n, int64_t inc, size_t es) noexcept {
  switch (es) {
    case 4: return detail::gather_fixed<4>(dst, src, n, inc);
    case 8: return detail::gather_fixed<8>(dst, src, n, inc);
    default: return detail::gather_fixed<16>(dst, src, n, inc);
  }
}
inline void scatter(unsigned char* dst, const unsigned char* src, int64_t n, int64_t inc, size_t es) noexcept {
  switch (es) {
    case 4: return detail::scatter_fixed<4>(dst, src, n, inc);
    case 8: return detail::scatter_fixed<8>(dst, src, n, inc);
    default: return detail::scatter_fixed<16>(dst, src, n, inc);
  }
}

}  // namespace sol::backends
