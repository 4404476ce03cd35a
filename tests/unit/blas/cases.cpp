#include "cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace sol::test {

using capture::Api;
using capture::BlasArgs;
using capture::DType;
using capture::Node;
using capture::Op;
using capture::Scalar;

namespace {

constexpr int64_t kSlack = 3;  // elements after each array that no call may touch

bool complex_type(DType d) {
  return d == DType::c64 || d == DType::c128;
}

void* data_or_null(std::vector<unsigned char>& v) {
  return v.empty() ? nullptr : v.data();
}

}  // namespace

void bind(Node& node, Buffers& buf) {
  BlasArgs& b = node.blas;
  b.a = data_or_null(buf.a);
  b.b = data_or_null(buf.b);
  b.c = data_or_null(buf.c);
  b.x = data_or_null(buf.x);
  b.y = data_or_null(buf.y);
  b.param = data_or_null(buf.param);
  b.ra = data_or_null(buf.ra);
  b.rb = data_or_null(buf.rb);
  b.rc = data_or_null(buf.rc);
  b.rs = data_or_null(buf.rs);
  b.rd1 = data_or_null(buf.rd1);
  b.rd2 = data_or_null(buf.rd2);
  b.rx1 = data_or_null(buf.rx1);
}

std::string describe(const Node& node) {
  const BlasArgs& b = node.blas;
  auto ch = [](char c) { return c ? std::string(1, c) : std::string("<bad>"); };
  std::ostringstream s;
  s << capture::symbol_name(node.sym) << "(";
  if (b.layout) s << "layout=" << b.layout << " ";
  s << "transa=" << ch(b.transa) << " transb=" << ch(b.transb) << " uplo=" << ch(b.uplo)
    << " side=" << ch(b.side) << " diag=" << ch(b.diag) << " m=" << b.m << " n=" << b.n << " k=" << b.k
    << " kl=" << b.kl << " ku=" << b.ku << " lda=" << b.lda << " ldb=" << b.ldb << " ldc=" << b.ldc
    << " incx=" << b.incx << " incy=" << b.incy << " alpha=(" << b.alpha.re << "," << b.alpha.im << ") beta=("
    << b.beta.re << "," << b.beta.im << ")"
    << " cs=" << b.cs.re << " sn=" << b.sn.re << " ry1=" << b.ry1.re << ")";
  return s.str();
}

bool reference_hangs(const Node& node) {
  const BlasArgs& b = node.blas;
  return node.api == Api::cblas && complex_type(node.dtype) && (node.op == Op::gemv || node.op == Op::gbmv) &&
         b.layout == 'R' && b.transa == 'C' && b.m <= 0 && b.n > 0;
}

namespace {
// The first stage of SROTMG, to see whether the rest is defined and ends.
template <class R>
bool rotmg_undefined(const BlasArgs& b) {
  R d1 = *static_cast<const R*>(b.rd1), d2 = *static_cast<const R*>(b.rd2),
    x1 = *static_cast<const R*>(b.rx1);
  R y1 = R(b.ry1.re);
  if (d1 < 0) return false;
  R p2 = d2 * y1;
  if (p2 == 0) return false;
  R p1 = d1 * x1, q2 = p2 * y1, q1 = p1 * x1;
  if (std::fabs(q1) > std::fabs(q2)) {
    R u = R(1) - (p2 / p1) * (-y1 / x1);
    if (!(u > 0)) return true;
    d1 = d1 / u;
    d2 = d2 / u;
  } else if (q2 < 0) {
    return false;
  } else {
    R u = R(1) + (p1 / p2) * (x1 / y1);
    R t = d2 / u;
    d2 = d1 / u;
    d1 = t;
  }
  // The rescaling loops never end for an infinite d1 or d2, or a negative d1 (which a
  // negative d2 can produce).
  return std::isinf(d1) || std::isinf(d2) || d1 < 0;
}
}  // namespace

bool reference_undefined(const Node& node) {
  if (node.op != Op::rotmg) return false;
  return node.dtype == DType::f32 ? rotmg_undefined<float>(node.blas) : rotmg_undefined<double>(node.blas);
}

size_t CaseMaker::real_size() const {
  return (r_.dtype == DType::f64 || r_.dtype == DType::c128) ? 8 : 4;
}
size_t CaseMaker::elem_size() const {
  return real_size() * (complex_type(r_.dtype) ? 2 : 1);
}

double CaseMaker::element() {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  if (chance(0.12)) return 0.0;
  if (special_ && chance(0.06)) {
    // Inf and NaN, and magnitudes that take the scaled paths of *nrm2, *rotg and *rotmg.
    constexpr double specials[] = {inf, -inf, nan, 1e30, -1e-30, 1e300, -1e-200, 3e-9, -5e8};
    return one_of(specials);
  }
  double v = std::uniform_real_distribution<double>(-2.0, 2.0)(rng_);
  return real_size() == 4 ? double(float(v)) : v;
}

void CaseMaker::fill(std::vector<unsigned char>& buf, int64_t elements, bool real_elements) {
  size_t reals =
      size_t(std::max<int64_t>(elements, 0) + kSlack) * (real_elements || !complex_type(r_.dtype) ? 1 : 2);
  buf.assign(reals * real_size(), 0);
  for (size_t i = 0; i < reals; ++i) {
    double v = element();
    // Magnitudes across the whole exponent range, for the scaling of *nrm2, *rotg and *rotmg.
    if (wide_) v = std::ldexp(v, int(pick(real_size() == 4 ? -140 : -1070, real_size() == 4 ? 127 : 1023)));
    if (real_size() == 4) {
      float f = float(v);
      std::memcpy(buf.data() + i * 4, &f, 4);
    } else {
      std::memcpy(buf.data() + i * 8, &v, 8);
    }
  }
}

void CaseMaker::poison(std::vector<unsigned char>& buf) {
  for (size_t i = 0; i + real_size() <= buf.size(); i += real_size()) {
    if (real_size() == 4) {
      float f = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(buf.data() + i, &f, 4);
    } else {
      double d = std::numeric_limits<double>::quiet_NaN();
      std::memcpy(buf.data() + i, &d, 8);
    }
  }
}

char CaseMaker::letter(const char* valid) {
  char c = valid[pick(0, int64_t(std::strlen(valid)) - 1)];
  // LSAME is case-insensitive and dnnl_sgemm takes both cases; CBLAS enums are always upper.
  if (r_.api != Api::cblas && chance(0.3)) c = char(c - 'A' + 'a');
  return c;
}

int64_t CaseMaker::inc(double zero_chance) {
  static constexpr int64_t nonzero[] = {1, 1, 1, 2, 3, -1, -2, -3};
  if (chance(zero_chance)) return 0;
  return one_of(nonzero);
}

Scalar CaseMaker::scalar(bool real_only) {
  double r = element(), i = element();
  switch (pick(0, 6)) {
    case 0: return Scalar(0.0);
    case 1: return Scalar(1.0);
    case 2: return Scalar(-1.0);
    case 3: return real_only ? Scalar(r) : Scalar(0.0, 1.0);
    case 4: return real_only ? Scalar(r) : Scalar(r, 0.0);
    default: return real_only || !complex_type(r_.dtype) ? Scalar(r) : Scalar(r, i);
  }
}

Case CaseMaker::valid(char layout) {
  Case cs{Node(r_.sym, r_.op, r_.dtype), {}};
  Node& node = cs.node;
  BlasArgs& b = node.blas;
  Buffers& buf = cs.buffers;
  const bool cblas = r_.api == Api::cblas;
  const bool cx = complex_type(r_.dtype);
  const bool row = layout == 'R';
  if (r_.level > 1 && r_.api != Api::blas) b.layout = layout;
  special_ = chance(0.15);
  wide_ = (r_.op == Op::nrm2 || r_.op == Op::rotg || r_.op == Op::rotmg) && chance(0.5);

  auto dim = [&](int64_t hi) {
    if (chance(0.1)) return int64_t(0);
    if (chance(0.15)) return int64_t(1);
    return pick(0, hi);
  };
  auto vector = [&](std::vector<unsigned char>& v, int64_t len, int64_t inc) {
    int64_t extent = len > 0 ? 1 + (len - 1) * std::abs(inc) : 0;
    fill(v, extent);
  };
  // A rows-by-cols matrix stored in the call's layout; returns a valid leading dimension.
  auto matrix = [&](std::vector<unsigned char>& v, int64_t rows, int64_t cols) {
    int64_t ld = std::max<int64_t>(1, row ? cols : rows) + (chance(0.5) ? pick(1, 3) : 0);
    fill(v, ld * (row ? rows : cols));
    return ld;
  };
  auto packed = [&](std::vector<unsigned char>& v, int64_t n) { fill(v, n * (n + 1) / 2); };
  auto band = [&](std::vector<unsigned char>& v, int64_t min_ld, int64_t cols) {
    int64_t ld = min_ld + (chance(0.5) ? pick(1, 2) : 0);
    fill(v, ld * cols);
    return ld;
  };
  // beta == 0: the output is never read, so fill it with NaN now and then.
  auto maybe_poison = [&](std::vector<unsigned char>& v, const Scalar& beta) {
    if (beta.re == 0 && beta.im == 0 && chance(0.5)) poison(v);
  };

  const char* trans = "NTC";
  switch (r_.op) {
    // ---------------------------------------------------------------- level 1
    case Op::asum:
    case Op::nrm2:
    case Op::iamax:
      b.n = pick(-1, 12);
      b.incx = inc(0.1);
      vector(buf.x, b.n, b.incx);
      break;
    case Op::cabs1: b.alpha = Scalar(element(), element()); break;
    case Op::axpy:
    case Op::copy:
    case Op::swap:
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
    case Op::sdsdot:
    case Op::dsdot:
    case Op::rot:
    case Op::rotm:
      b.n = pick(-1, 12);
      b.incx = inc(0.1);
      b.incy = inc(0.1);
      vector(buf.x, b.n, b.incx);
      vector(buf.y, b.n, b.incy);
      b.alpha = scalar(r_.op == Op::sdsdot);
      b.cs = Scalar(element());
      b.sn = Scalar(element());
      if (r_.op == Op::rotm) {
        fill(buf.param, 5, true);
        static constexpr double flags[] = {-2, -1, 0, 1};
        double flag = one_of(flags);
        if (real_size() == 4) {
          float f = float(flag);
          std::memcpy(buf.param.data(), &f, 4);
        } else {
          std::memcpy(buf.param.data(), &flag, 8);
        }
      }
      break;
    case Op::scal:
      b.n = pick(-1, 12);
      b.incx = inc(0.1);
      vector(buf.x, b.n, b.incx);
      // CSSCAL and ZDSCAL scale by a real alpha.
      b.alpha = scalar(
          cx && (r_.name.find("csscal") != std::string::npos || r_.name.find("zdscal") != std::string::npos));
      break;
    case Op::rotg:
      fill(buf.ra, 1);
      fill(buf.rb, 1);
      fill(buf.rc, 1, true);
      fill(buf.rs, 1);
      break;
    case Op::rotmg:
      fill(buf.rd1, 1, true);
      fill(buf.rd2, 1, true);
      fill(buf.rx1, 1, true);
      fill(buf.param, 5, true);
      b.ry1 = Scalar(wide_ ? std::ldexp(element(), int(pick(-60, 60))) : element());
      break;
    // ---------------------------------------------------------------- level 2
    case Op::gemv:
    case Op::gbmv: {
      b.transa = letter(trans);
      b.m = dim(7);
      b.n = dim(7);
      b.incx = inc(0.04);
      b.incy = inc(0.04);
      b.alpha = scalar(false);
      b.beta = scalar(false);
      bool notrans = b.transa == 'N' || b.transa == 'n';
      vector(buf.x, notrans ? b.n : b.m, b.incx);
      vector(buf.y, notrans ? b.m : b.n, b.incy);
      maybe_poison(buf.y, b.beta);
      if (r_.op == Op::gemv) {
        b.lda = matrix(buf.a, b.m, b.n);
      } else {
        b.kl = pick(0, 3);
        b.ku = pick(0, 3);
        b.lda = band(buf.a, b.kl + b.ku + 1, row ? b.m : b.n);
      }
      break;
    }
    case Op::symv:
    case Op::hemv:
    case Op::sbmv:
    case Op::hbmv:
    case Op::spmv:
    case Op::hpmv:
      b.uplo = letter("UL");
      b.n = dim(7);
      b.incx = inc(0.04);
      b.incy = inc(0.04);
      b.alpha = scalar(false);
      b.beta = scalar(false);
      vector(buf.x, b.n, b.incx);
      vector(buf.y, b.n, b.incy);
      maybe_poison(buf.y, b.beta);
      if (r_.op == Op::symv || r_.op == Op::hemv) {
        b.lda = matrix(buf.a, b.n, b.n);
      } else if (r_.op == Op::sbmv || r_.op == Op::hbmv) {
        b.k = pick(0, 3);
        b.lda = band(buf.a, b.k + 1, b.n);
      } else {
        packed(buf.a, b.n);
      }
      break;
    case Op::trmv:
    case Op::tbmv:
    case Op::tpmv:
    case Op::trsv:
    case Op::tbsv:
    case Op::tpsv:
      b.uplo = letter("UL");
      b.transa = letter(trans);
      b.diag = letter("NU");
      b.n = dim(7);
      b.incx = inc(0.04);
      vector(buf.x, b.n, b.incx);
      if (r_.op == Op::trmv || r_.op == Op::trsv) {
        b.lda = matrix(buf.a, b.n, b.n);
      } else if (r_.op == Op::tbmv || r_.op == Op::tbsv) {
        b.k = pick(0, 3);
        b.lda = band(buf.a, b.k + 1, b.n);
      } else {
        packed(buf.a, b.n);
      }
      break;
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      b.m = dim(7);
      b.n = dim(7);
      b.incx = inc(0.04);
      b.incy = inc(0.04);
      b.alpha = scalar(false);
      vector(buf.x, b.m, b.incx);
      vector(buf.y, b.n, b.incy);
      b.lda = matrix(buf.a, b.m, b.n);
      break;
    case Op::syr:
    case Op::her:
    case Op::spr:
    case Op::hpr:
    case Op::syr2:
    case Op::her2:
    case Op::spr2:
    case Op::hpr2:
      b.uplo = letter("UL");
      b.n = dim(7);
      b.incx = inc(0.04);
      b.incy = inc(0.04);
      b.alpha = scalar(r_.op == Op::her || r_.op == Op::hpr);
      vector(buf.x, b.n, b.incx);
      if (r_.op != Op::syr && r_.op != Op::her && r_.op != Op::spr && r_.op != Op::hpr) {
        vector(buf.y, b.n, b.incy);
      }
      if (r_.op == Op::syr || r_.op == Op::her || r_.op == Op::syr2 || r_.op == Op::her2) {
        b.lda = matrix(buf.a, b.n, b.n);
      } else {
        packed(buf.a, b.n);
      }
      break;
    // ---------------------------------------------------------------- level 3
    case Op::gemm: {
      const char* t = r_.api == Api::dnnl ? "NT" : trans;
      b.transa = letter(t);
      b.transb = letter(t);
      b.m = dim(6);
      b.n = dim(6);
      b.k = dim(6);
      b.alpha = scalar(false);
      b.beta = scalar(false);
      bool nota = b.transa == 'N' || b.transa == 'n', notb = b.transb == 'N' || b.transb == 'n';
      b.lda = matrix(buf.a, nota ? b.m : b.k, nota ? b.k : b.m);
      b.ldb = matrix(buf.b, notb ? b.k : b.n, notb ? b.n : b.k);
      b.ldc = matrix(buf.c, b.m, b.n);
      maybe_poison(buf.c, b.beta);
      break;
    }
    case Op::symm:
    case Op::hemm: {
      b.side = letter("LR");
      b.uplo = letter("UL");
      b.m = dim(6);
      b.n = dim(6);
      b.alpha = scalar(false);
      b.beta = scalar(false);
      int64_t ka = (b.side == 'L' || b.side == 'l') ? b.m : b.n;
      b.lda = matrix(buf.a, ka, ka);
      b.ldb = matrix(buf.b, b.m, b.n);
      b.ldc = matrix(buf.c, b.m, b.n);
      maybe_poison(buf.c, b.beta);
      break;
    }
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k: {
      bool herm = r_.op == Op::herk || r_.op == Op::her2k;
      // What each interface accepts: the Fortran routines take N/T/C (real), N/T (complex
      // symmetric) or N/C (Hermitian); row-major CBLAS maps all three enums.
      if (cblas && row) {
        b.transa = letter("NTC");
      } else {
        b.transa = letter(herm ? "NC" : cx ? "NT" : "NTC");
      }
      b.uplo = letter("UL");
      b.n = dim(6);
      b.k = dim(6);
      b.alpha = scalar(r_.op == Op::herk);
      b.beta = scalar(herm);
      bool notrans = b.transa == 'N' || b.transa == 'n';
      b.lda = matrix(buf.a, notrans ? b.n : b.k, notrans ? b.k : b.n);
      if (r_.op == Op::syr2k || r_.op == Op::her2k) {
        b.ldb = matrix(buf.b, notrans ? b.n : b.k, notrans ? b.k : b.n);
      }
      b.ldc = matrix(buf.c, b.n, b.n);
      maybe_poison(buf.c, b.beta);
      break;
    }
    case Op::trmm:
    case Op::trsm: {
      b.side = letter("LR");
      b.uplo = letter("UL");
      b.transa = letter(trans);
      b.diag = letter("NU");
      b.m = dim(6);
      b.n = dim(6);
      b.alpha = scalar(false);
      int64_t ka = (b.side == 'L' || b.side == 'l') ? b.m : b.n;
      b.lda = matrix(buf.a, ka, ka);
      b.ldb = matrix(buf.b, b.m, b.n);
      maybe_poison(buf.b, b.alpha);
      break;
    }
    default: break;
  }
  return cs;
}

Case CaseMaker::arbitrary(char layout) {
  Case cs{arbitrary_call(layout), {}};
  Buffers& buf = cs.buffers;
  for (auto* v : {&buf.a, &buf.b, &buf.c, &buf.x, &buf.y, &buf.ra, &buf.rb, &buf.rs}) fill(*v, 256);
  for (auto* v : {&buf.param, &buf.rc, &buf.rd1, &buf.rd2, &buf.rx1}) fill(*v, 8, true);
  return cs;
}

Node CaseMaker::arbitrary_call(char layout) {
  Node node(r_.sym, r_.op, r_.dtype);
  BlasArgs& b = node.blas;
  special_ = false;
  wide_ = false;
  if (r_.api != Api::blas) b.layout = layout;
  // Characters: Fortran sees any character (LSAME ignores case); CBLAS enums are valid or bad.
  auto ch = [&](const char* valid) -> char {
    if (r_.api == Api::cblas) return chance(0.2) ? 0 : valid[pick(0, int64_t(std::strlen(valid)) - 1)];
    static constexpr char any[] = {'N', 'n', 'T', 't', 'C', 'c', 'U', 'u', 'L', 'l', 'R', 'r', 'X', ' '};
    return chance(0.7) ? letter(valid) : one_of(any);
  };
  b.transa = ch("NTC");
  b.transb = ch("NTC");
  b.uplo = ch("UL");
  b.side = ch("LR");
  b.diag = ch("NU");
  auto small = [&] { return pick(-1, 3); };
  b.m = small();
  b.n = small();
  b.k = small();
  b.kl = small();
  b.ku = small();
  b.lda = pick(-1, 8);
  b.ldb = pick(-1, 8);
  b.ldc = pick(-1, 8);
  b.incx = pick(-2, 2);
  b.incy = pick(-2, 2);
  b.alpha = scalar(false);
  b.beta = scalar(false);
  b.cs = Scalar(element());
  b.sn = Scalar(element());
  b.ry1 = Scalar(element());
  return node;
}

}  // namespace sol::test
