#include "harness.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "config/config.hpp"

namespace sol::test {
namespace {

using capture::DType;
using capture::Node;
using capture::Op;
using capture::Scalar;

bool is_complex(DType d) {
  return d == DType::c64 || d == DType::c128;
}
bool single(DType d) {
  return d == DType::f32 || d == DType::c64;
}
char up(char c) {
  return static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
}

// How the reference BLAS addresses one operand (independent of the backend's own description).
struct Layout {
  enum Kind { vector, general, triangle, band, packed } kind = vector;
  int64_t rows = 0, cols = 0, ld = 1, kl = 0, ku = 0, n = 0, inc = 1;
  bool upper = false, unit = false, herm = false;
  bool solve = false;  // the triangular matrix of a solve: kept well conditioned

  int64_t elems() const {
    switch (kind) {
      case vector: return n > 0 ? 1 + (n - 1) * std::abs(inc) : 0;
      case general: return rows > 0 && cols > 0 ? ld * (cols - 1) + rows : 0;
      case triangle: return n > 0 ? ld * (n - 1) + n : 0;
      case band: return cols > 0 ? ld * (cols - 1) + kl + ku + 1 : 0;
      case packed: return n > 0 ? n * (n + 1) / 2 : 0;
    }
    return 0;
  }
  bool is_diagonal(int64_t t) const {
    switch (kind) {
      case triangle: return t % ld == t / ld;
      case band: return t % ld == ku;
      case packed:
        for (int64_t j = 0; j < n; ++j)
          if (t == (upper ? j * (j + 3) / 2 : j * (2 * n - j + 1) / 2)) return true;
        return false;
      default: return false;
    }
  }
  bool referenced(int64_t t) const {
    switch (kind) {
      case vector: return inc == 0 ? t == 0 : t % std::abs(inc) == 0;
      case general: return t % ld < rows;
      case triangle: {
        const int64_t r = t % ld, c = t / ld;
        return r < n && (upper ? r <= c : r >= c) && !(unit && r == c);
      }
      case band: {
        const int64_t r = t % ld, j = t / ld, i = r - ku + j;
        return r <= kl + ku && i >= 0 && i < rows && !(unit && r == ku);
      }
      case packed: return !(unit && is_diagonal(t));
    }
    return false;
  }
};

struct Operand {
  char name;
  Layout layout;
};

// The operands of a valid column-major call, as the reference reads and writes them.
std::vector<Operand> layouts(const Node& node) {
  const capture::BlasArgs& b = node.blas;
  const bool na = up(b.transa) == 'N';
  const bool upper = up(b.uplo) == 'U';
  const bool unit = up(b.diag) == 'U';
  const bool herm = node.op == Op::hemm || node.op == Op::herk || node.op == Op::her2k ||
                    node.op == Op::hemv || node.op == Op::hbmv || node.op == Op::hpmv || node.op == Op::her ||
                    node.op == Op::her2 || node.op == Op::hpr || node.op == Op::hpr2;
  std::vector<Operand> out;
  auto vec = [&](char name, int64_t n, int64_t inc) {
    out.push_back({name, {.kind = Layout::vector, .n = std::max<int64_t>(n, 0), .inc = inc}});
  };
  auto gen = [&](char name, int64_t rows, int64_t cols, int64_t ld) {
    out.push_back({name, {.kind = Layout::general, .rows = rows, .cols = cols, .ld = ld}});
  };
  auto tri = [&](char name, int64_t n, int64_t ld, bool is_unit, bool solve) {
    out.push_back({name,
                   {.kind = Layout::triangle,
                    .rows = n,
                    .cols = n,
                    .ld = ld,
                    .n = n,
                    .upper = upper,
                    .unit = is_unit,
                    .herm = herm,
                    .solve = solve}});
  };
  auto band = [&](char name, int64_t rows, int64_t cols, int64_t kl, int64_t ku, bool is_unit, bool solve) {
    out.push_back({name,
                   {.kind = Layout::band,
                    .rows = rows,
                    .cols = cols,
                    .ld = b.lda,
                    .kl = kl,
                    .ku = ku,
                    .unit = is_unit,
                    .herm = herm,
                    .solve = solve}});
  };
  auto pack = [&](char name, int64_t n, bool is_unit, bool solve) {
    out.push_back(
        {name,
         {.kind = Layout::packed, .n = n, .upper = upper, .unit = is_unit, .herm = herm, .solve = solve}});
  };
  const int64_t ka = up(b.side) == 'L' ? b.m : b.n;
  switch (node.op) {
    case Op::gemm:
      gen('a', na ? b.m : b.k, na ? b.k : b.m, b.lda);
      gen('b', up(b.transb) == 'N' ? b.k : b.n, up(b.transb) == 'N' ? b.n : b.k, b.ldb);
      gen('c', b.m, b.n, b.ldc);
      break;
    case Op::symm:
    case Op::hemm:
      tri('a', ka, b.lda, false, false);
      gen('b', b.m, b.n, b.ldb);
      gen('c', b.m, b.n, b.ldc);
      break;
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k:
      gen('a', na ? b.n : b.k, na ? b.k : b.n, b.lda);
      if (node.op == Op::syr2k || node.op == Op::her2k) gen('b', na ? b.n : b.k, na ? b.k : b.n, b.ldb);
      tri('c', b.n, b.ldc, false, false);
      break;
    case Op::trmm:
    case Op::trsm:
      tri('a', ka, b.lda, unit, node.op == Op::trsm);
      gen('b', b.m, b.n, b.ldb);
      break;
    case Op::gemv:
      gen('a', b.m, b.n, b.lda);
      vec('x', na ? b.n : b.m, b.incx);
      vec('y', na ? b.m : b.n, b.incy);
      break;
    case Op::gbmv:
      band('a', b.m, b.n, b.kl, b.ku, false, false);
      vec('x', na ? b.n : b.m, b.incx);
      vec('y', na ? b.m : b.n, b.incy);
      break;
    case Op::symv:
    case Op::hemv:
      tri('a', b.n, b.lda, false, false);
      vec('x', b.n, b.incx);
      vec('y', b.n, b.incy);
      break;
    case Op::sbmv:
    case Op::hbmv:
      band('a', b.n, b.n, upper ? 0 : b.k, upper ? b.k : 0, false, false);
      vec('x', b.n, b.incx);
      vec('y', b.n, b.incy);
      break;
    case Op::spmv:
    case Op::hpmv:
      pack('a', b.n, false, false);
      vec('x', b.n, b.incx);
      vec('y', b.n, b.incy);
      break;
    case Op::trmv:
    case Op::trsv:
      tri('a', b.n, b.lda, unit, node.op == Op::trsv);
      vec('x', b.n, b.incx);
      break;
    case Op::tbmv:
    case Op::tbsv:
      band('a', b.n, b.n, upper ? 0 : b.k, upper ? b.k : 0, unit, node.op == Op::tbsv);
      vec('x', b.n, b.incx);
      break;
    case Op::tpmv:
    case Op::tpsv:
      pack('a', b.n, unit, node.op == Op::tpsv);
      vec('x', b.n, b.incx);
      break;
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      vec('x', b.m, b.incx);
      vec('y', b.n, b.incy);
      gen('a', b.m, b.n, b.lda);
      break;
    case Op::syr:
    case Op::her:
    case Op::syr2:
    case Op::her2:
      vec('x', b.n, b.incx);
      if (node.op == Op::syr2 || node.op == Op::her2) vec('y', b.n, b.incy);
      tri('a', b.n, b.lda, false, false);
      break;
    case Op::spr:
    case Op::hpr:
    case Op::spr2:
    case Op::hpr2:
      vec('x', b.n, b.incx);
      if (node.op == Op::spr2 || node.op == Op::hpr2) vec('y', b.n, b.incy);
      pack('a', b.n, false, false);
      break;
    case Op::scal:
    case Op::asum:
    case Op::nrm2:
    case Op::iamax: vec('x', b.n, b.incx); break;
    default:  // axpy, copy, swap, rot, rotm, the dot family
      vec('x', b.n, b.incx);
      vec('y', b.n, b.incy);
  }
  return out;
}

bool beta_output(Op op, char name) {
  switch (op) {
    case Op::gemm:
    case Op::symm:
    case Op::hemm:
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k: return name == 'c';
    case Op::gemv:
    case Op::gbmv:
    case Op::symv:
    case Op::hemv:
    case Op::sbmv:
    case Op::hbmv:
    case Op::spmv:
    case Op::hpmv: return name == 'y';
    default: return false;
  }
}

// Inputs the reference skips when alpha == 0.
bool skipped_when_alpha_zero(Op op, char name) {
  switch (op) {
    case Op::gemm:
    case Op::symm:
    case Op::hemm:
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k: return name == 'a' || name == 'b';
    case Op::trmm:
    case Op::trsm: return true;  // B is set to zero, A never read
    case Op::ger:
    case Op::geru:
    case Op::gerc:
    case Op::syr:
    case Op::her:
    case Op::syr2:
    case Op::her2:
    case Op::spr:
    case Op::hpr:
    case Op::spr2:
    case Op::hpr2:
    case Op::axpy: return name == 'x' || name == 'y';
    case Op::gemv:
    case Op::gbmv:
    case Op::symv:
    case Op::hemv:
    case Op::sbmv:
    case Op::hbmv:
    case Op::spmv:
    case Op::hpmv: return name == 'a' || name == 'x';
    default: return false;
  }
}

constexpr int64_t kGuard = 5;

struct Buffer {
  std::vector<unsigned char> bytes;
};

// Fills one operand: random where the reference reads, NaN elsewhere and in the guard zone.
template <class R>
void fill(Buffer& buf, const Layout& l, bool complex, bool all_nan, std::mt19937& rng) {
  const int64_t per = complex ? 2 : 1;
  const int64_t elems = l.elems();
  buf.bytes.assign(static_cast<size_t>((elems + kGuard) * per) * sizeof(R), 0);
  R* p = reinterpret_cast<R*>(buf.bytes.data());
  const R nan = std::numeric_limits<R>::quiet_NaN();
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t dim = std::max<int64_t>({l.n, l.rows, l.cols, 1});
  for (int64_t t = 0; t < elems + kGuard; ++t) {
    R* e = p + t * per;
    const bool live = t < elems && !all_nan && l.referenced(t);
    for (int64_t c = 0; c < per; ++c) e[c] = live ? static_cast<R>(u(rng)) : nan;
    if (!live || l.kind == Layout::vector) continue;
    const bool diag = l.is_diagonal(t);
    if (l.solve) {
      // Diagonally dominant: a unit or [1, 2] diagonal over small off-diagonal entries.
      if (diag)
        e[0] = static_cast<R>(1.5 + 0.5 * u(rng));
      else
        for (int64_t c = 0; c < per; ++c) e[c] /= static_cast<R>(dim + 1);
    }
    if (l.herm && diag && complex) e[1] = nan;  // not read: the diagonal of a Hermitian matrix is real
  }
}

template <class R>
std::string compare_buffers(const char* what, const Buffer& ref, const Buffer& got, double tol) {
  const R* a = reinterpret_cast<const R*>(ref.bytes.data());
  const R* b = reinterpret_cast<const R*>(got.bytes.data());
  const size_t count = ref.bytes.size() / sizeof(R);
  for (size_t i = 0; i < count; ++i) {
    const bool na = std::isnan(a[i]), nb = std::isnan(b[i]);
    if (na && nb) continue;
    const double err = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (na != nb || !(err <= tol * (1 + std::abs(static_cast<double>(a[i]))))) {
      std::ostringstream s;
      s << what << "[" << i << " (real index)]: reference " << a[i] << ", backend " << b[i];
      return s.str();
    }
  }
  return {};
}

template <class T>
std::string compare_value(const char* what, T ref, T got, double tol) {
  if constexpr (std::is_same_v<T, int>) {
    if (ref == got) return {};
  } else {
    using std::abs;
    using std::isnan;
    bool both_nan, one_nan;
    double err, mag;
    if constexpr (std::is_floating_point_v<T>) {
      both_nan = isnan(ref) && isnan(got);
      one_nan = isnan(ref) != isnan(got);
      err = std::abs(static_cast<double>(ref) - static_cast<double>(got));
      mag = std::abs(static_cast<double>(ref));
    } else {
      both_nan = isnan(ref.real()) && isnan(got.real());
      one_nan = isnan(ref.real()) != isnan(got.real()) || isnan(ref.imag()) != isnan(got.imag());
      err = std::abs(static_cast<double>(abs(ref - got)));
      mag = std::abs(static_cast<double>(abs(ref)));
    }
    if (both_nan || (!one_nan && err <= tol * (1 + mag))) return {};
  }
  std::ostringstream s;
  s << what << ": reference " << ref << ", backend " << got;
  return s.str();
}

std::string compare_ret(const Node& node, const Node& ref, double tol) {
  const bool sp = single(node.dtype);
  switch (node.op) {
    case Op::iamax: return compare_value("result", ref.ret.get<int>(), node.ret.get<int>(), 0);
    case Op::sdsdot: return compare_value("result", ref.ret.get<float>(), node.ret.get<float>(), tol);
    case Op::dsdot: return compare_value("result", ref.ret.get<double>(), node.ret.get<double>(), tol);
    case Op::asum:
    case Op::nrm2:
      return sp ? compare_value("result", ref.ret.get<float>(), node.ret.get<float>(), tol)
                : compare_value("result", ref.ret.get<double>(), node.ret.get<double>(), tol);
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
      switch (node.dtype) {
        case DType::f32: return compare_value("result", ref.ret.get<float>(), node.ret.get<float>(), tol);
        case DType::f64: return compare_value("result", ref.ret.get<double>(), node.ret.get<double>(), tol);
        case DType::c64: return compare_value("result", ref.ret.get<cfloat>(), node.ret.get<cfloat>(), tol);
        default: return compare_value("result", ref.ret.get<cdouble>(), node.ret.get<cdouble>(), tol);
      }
    default: return {};
  }
}

}  // namespace

std::string Call::describe() const {
  std::ostringstream s;
  s << routine << " transa=" << transa << " transb=" << transb << " uplo=" << uplo << " side=" << side
    << " diag=" << diag << " m=" << m << " n=" << n << " k=" << k << " kl=" << kl << " ku=" << ku
    << " pad=" << pad << " incx=" << incx << " incy=" << incy << " alpha=(" << alpha.re << "," << alpha.im
    << ") beta=(" << beta.re << "," << beta.im << ")";
  if (routine.find("rotm") != std::string::npos) s << " flag=" << param[0];
  return s.str();
}

std::string compare_with_reference(hal::Backend& backend, ReferenceBlas& reference, const Call& call,
                                   unsigned seed) {
  Node proto = blas_node(call.routine);
  capture::BlasArgs& b = proto.blas;
  b.transa = call.transa;
  b.transb = call.transb;
  b.uplo = call.uplo;
  b.side = call.side;
  b.diag = call.diag;
  b.m = call.m;
  b.n = call.n;
  b.k = call.k;
  b.kl = call.kl;
  b.ku = call.ku;
  b.incx = call.incx;
  b.incy = call.incy;
  b.alpha = call.alpha;
  b.beta = call.beta;
  b.cs = call.cs;
  b.sn = call.sn;
  if (!is_complex(proto.dtype) || b.real_alpha) b.alpha.im = 0;
  if (!is_complex(proto.dtype) || proto.op == Op::herk || proto.op == Op::her2k) b.beta.im = 0;

  // Leading dimensions: the rows of each matrix argument plus the pad.
  const bool na = up(call.transa) == 'N';
  int64_t rows_a = 0, rows_b = 0, rows_c = 0;
  const int64_t ka = up(call.side) == 'L' ? call.m : call.n;
  switch (proto.op) {
    case Op::gemm:
      rows_a = na ? call.m : call.k;
      rows_b = up(call.transb) == 'N' ? call.k : call.n;
      rows_c = call.m;
      break;
    case Op::symm:
    case Op::hemm: rows_a = ka, rows_b = rows_c = call.m; break;
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k: rows_a = rows_b = na ? call.n : call.k, rows_c = call.n; break;
    case Op::trmm:
    case Op::trsm: rows_a = ka, rows_b = call.m; break;
    case Op::gbmv: rows_a = call.kl + call.ku + 1; break;
    case Op::sbmv:
    case Op::hbmv:
    case Op::tbmv:
    case Op::tbsv: rows_a = call.k + 1; break;
    case Op::gemv:
    case Op::ger:
    case Op::geru:
    case Op::gerc: rows_a = call.m; break;
    default: rows_a = call.n;
  }
  b.lda = std::max<int64_t>(rows_a, 1) + call.pad;
  b.ldb = std::max<int64_t>(rows_b, 1) + call.pad;
  b.ldc = std::max<int64_t>(rows_c, 1) + call.pad;

  const bool cx = is_complex(proto.dtype);
  const bool sp = single(proto.dtype);
  std::mt19937 rng(seed);
  std::vector<Operand> ops = layouts(proto);
  std::vector<Buffer> init(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool all_nan =
        (beta_output(proto.op, ops[i].name) && b.beta.re == 0 && b.beta.im == 0) ||
        (skipped_when_alpha_zero(proto.op, ops[i].name) && b.alpha.re == 0 && b.alpha.im == 0);
    if (sp)
      fill<float>(init[i], ops[i].layout, cx, all_nan, rng);
    else
      fill<double>(init[i], ops[i].layout, cx, all_nan, rng);
  }
  // rotm's parameters, in the routine's precision.
  float param_f[5];
  double param_d[5];
  for (int i = 0; i < 5; ++i) param_f[i] = static_cast<float>(param_d[i] = call.param[i]);

  auto bind = [&](Node& node, std::vector<Buffer>& bufs) {
    for (size_t i = 0; i < ops.size(); ++i) {
      void* p = bufs[i].bytes.data();
      switch (ops[i].name) {
        case 'a': node.blas.a = p; break;
        case 'b': node.blas.b = p; break;
        case 'c': node.blas.c = p; break;
        case 'x': node.blas.x = p; break;
        case 'y': node.blas.y = p; break;
      }
    }
    node.blas.param = sp ? static_cast<void*>(param_f) : static_cast<void*>(param_d);
  };

  std::vector<Buffer> expect = init, got = init;
  Node ref_node = proto, node = proto;
  bind(ref_node, expect);
  bind(node, got);
  reference.run(ref_node);

  const hal::Reason supported = backend.supports(node);
  if (supported != hal::Reason::ok) return std::string("supports(): ") + reason_string(supported);
  const hal::Reason ran = backend.run(node);
  if (ran != hal::Reason::ok) return std::string("run(): ") + reason_string(ran);

  const int64_t dim = std::max<int64_t>({call.m, call.n, call.k, 1});
  const double eps = sp ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  const double tol = 16 * eps * static_cast<double>(dim + 1);
  for (size_t i = 0; i < ops.size(); ++i) {
    const char name[2] = {ops[i].name, '\0'};
    std::string diff = sp ? compare_buffers<float>(name, expect[i], got[i], tol)
                          : compare_buffers<double>(name, expect[i], got[i], tol);
    if (!diff.empty()) return diff;
  }
  return compare_ret(node, ref_node, tol);
}

config::Config test_config(const std::string& cache_dir) {
  config::Environment env;
  env.get = [](const char*) -> const char* { return nullptr; };
  config::Config cfg = config::load(env);
  cfg.opencl_cache_dir = cache_dir;
  return cfg;
}

std::string make_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/sol-test-XXXXXX";
  if (!mkdtemp(path.data())) return {};
  return path;
}

ReferenceBlas* shared_reference(std::string& why) {
  static std::string reason;
  static std::unique_ptr<ReferenceBlas> ref = [] {
    auto r = std::make_unique<ReferenceBlas>();
    if (!r->open(reason)) r.reset();
    return r;
  }();
  why = reason;
  return ref.get();
}

const char* reason_string(hal::Reason r) {
  switch (r) {
#define SOL_REASON(name, text) \
  case hal::Reason::name:      \
    return #name;
#include "hal/reasons.def"
#undef SOL_REASON
  }
  return "?";
}

}  // namespace sol::test
