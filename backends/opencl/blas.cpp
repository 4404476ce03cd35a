#include "backends/opencl/blas.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/common/blas_host.hpp"
#include "backends/opencl/clblast_programs.hpp"
#include "backends/opencl/resident.hpp"
#include "backends/opencl/transfer.hpp"
#include "capture/blas/blas.hpp"
#include "common/log.hpp"

namespace sol::backends::opencl {
namespace {

using capture::DType;
using capture::Node;
using capture::Op;
using capture::Scalar;
using hal::Reason;

// ------------------------------------------------------------------------- element types

template <class E>
inline constexpr bool kSingle = std::is_same_v<RealOf<E>, float>;
// CLBlast's scalar arguments: the element type, or cl_float2 / cl_double2 for complex.
template <class E>
using ClScalar = std::conditional_t<kComplex<E>, std::conditional_t<kSingle<E>, cl_float2, cl_double2>, E>;
// The precision's letter in BLAS names.
template <class E>
inline constexpr char kPrecLetter = kComplex<E> ? (kSingle<E> ? 'c' : 'z') : (kSingle<E> ? 's' : 'd');
// Our kernels' program for E.
template <class E>
inline constexpr Prec kPrec = kComplex<E> ? (kSingle<E> ? Prec::c : Prec::z)
                                          : (kSingle<E> ? Prec::s : Prec::d);

// The CLBlast function of E's precision among the S, D, C, Z variants of a routine; SOL_CLB_SH
// takes the real variants of `real` and the complex ones of `cplx` (symv and hemv: the Hermitian
// routine is the symmetric one on real data, with the same arguments).
#define SOL_CLB(name) pick4<E>(api.S##name, api.D##name, api.C##name, api.Z##name)
#define SOL_CLB_SH(real, cplx) pick4<E>(api.S##real, api.D##real, api.C##cplx, api.Z##cplx)

template <class E>
ClScalar<E> cl_scalar(const Scalar& s) {
  if constexpr (kComplex<E>) {
    ClScalar<E> v;
    v.s[0] = static_cast<RealOf<E>>(s.re);
    v.s[1] = static_cast<RealOf<E>>(s.im);
    return v;
  } else {
    return static_cast<E>(s.re);
  }
}

template <class E>
RealOf<E> cl_real(const Scalar& s) {
  return static_cast<RealOf<E>>(s.re);
}

constexpr CLBlastLayout kColMajor = CLBlastLayoutColMajor;
constexpr BlasEnums<CLBlastTranspose, CLBlastTriangle, CLBlastSide, CLBlastDiagonal> kCl{
    .no = CLBlastTransposeNo,
    .transpose = CLBlastTransposeYes,
    .conjugate = CLBlastTransposeConjugate,
    .upper = CLBlastTriangleUpper,
    .lower = CLBlastTriangleLower,
    .left = CLBlastSideLeft,
    .right = CLBlastSideRight,
    .unit = CLBlastDiagonalUnit,
    .non_unit = CLBlastDiagonalNonUnit,
};

// One of our kernels, or nullptr (its program does not build: logged).
cl_kernel our_kernel(Device& dev, Prec prec, Kernel which) {
  std::string why;
  cl_kernel k = dev.kernel(prec, which, why);
  if (!k) log::once(log::Level::info, why, "opencl: %s", why.c_str());
  return k;
}

// ------------------------------------------------------------------------- host-side cases
// (backends/common/blas_host.hpp)

void host_side(Device& dev, const Node& node) {
  make_host_current(dev, node);
}

// ------------------------------------------------------------------------- level 3

template <class E>
Reason run_level3(Device& dev, Node& node) {
  const capture::BlasArgs& b = node.blas;
  const ClblastApi& api = dev.clblast();
  constexpr bool cx = kComplex<E>;

  // Quick returns and the alpha == 0 / k == 0 cases, as the reference orders them.
  if (const HostCase c = level3_on_host<E>(node, [&] { host_side(dev, node); }); c != HostCase::device)
    return host_reason(c);

  Job job(dev, node);
  if (Reason r = job.upload(); r != Reason::ok) return r;
  cl_command_queue* q = job.queue();
  const size_t m = static_cast<size_t>(b.m), n = static_cast<size_t>(b.n), k = static_cast<size_t>(b.k);
  const size_t lda = job.ld('a'), ldb = job.ld('b'), ldc = job.ld('c');
  const auto alpha = cl_scalar<E>(b.alpha);
  const auto beta = cl_scalar<E>(b.beta);
  const CLBlastTranspose ta = kCl.trans(b.transa, cx), tb = kCl.trans(b.transb, cx);
  cl_event ev = nullptr;
  CLBlastStatusCode st = CLBlastSuccess;

  switch (node.op) {
    case Op::gemm: {
      // CLBlast allocates its padding buffers per call unless given one: keep ours.
      size_t temp_bytes = 0;
      st = SOL_CLB(GemmTempBufferSize)(kColMajor, ta, tb, m, n, k, 0, lda, 0, ldb, 0, ldc, q, &temp_bytes);
      if (st != CLBlastSuccess) return job.fail(st, "CLBlast GemmTempBufferSize");
      cl_mem temp = nullptr;
      if (Reason r = job.scratch(kSlotTemp, temp_bytes, temp); r != Reason::ok) return r;
      st = SOL_CLB(gemmWithTempBuffer)(kColMajor, ta, tb, m, n, k, alpha, job.buf('a'), 0, lda, job.buf('b'),
                                       0, ldb, beta, job.buf('c'), 0, ldc, q, &ev, temp);
      break;
    }
    case Op::symm:
      st = SOL_CLB(symm)(kColMajor, kCl.side(b.side), kCl.uplo(b.uplo), m, n, alpha, job.buf('a'), 0, lda,
                         job.buf('b'), 0, ldb, beta, job.buf('c'), 0, ldc, q, &ev);
      break;
    case Op::hemm:
      st = SOL_CLB_SH(symm, hemm)(kColMajor, kCl.side(b.side), kCl.uplo(b.uplo), m, n, alpha, job.buf('a'), 0,
                                  lda, job.buf('b'), 0, ldb, beta, job.buf('c'), 0, ldc, q, &ev);
      break;
    case Op::syrk:
      st = SOL_CLB(syrk)(kColMajor, kCl.uplo(b.uplo), ta, n, k, alpha, job.buf('a'), 0, lda, beta,
                         job.buf('c'), 0, ldc, q, &ev);
      break;
    case Op::herk:  // real alpha and beta
      st = SOL_CLB_SH(syrk, herk)(kColMajor, kCl.uplo(b.uplo), ta, n, k, cl_real<E>(b.alpha), job.buf('a'), 0,
                                  lda, cl_real<E>(b.beta), job.buf('c'), 0, ldc, q, &ev);
      break;
    case Op::syr2k:
      st = SOL_CLB(syr2k)(kColMajor, kCl.uplo(b.uplo), ta, n, k, alpha, job.buf('a'), 0, lda, job.buf('b'), 0,
                          ldb, beta, job.buf('c'), 0, ldc, q, &ev);
      break;
    case Op::her2k:  // real beta
      st = SOL_CLB_SH(syr2k, her2k)(kColMajor, kCl.uplo(b.uplo), ta, n, k, alpha, job.buf('a'), 0, lda,
                                    job.buf('b'), 0, ldb, cl_real<E>(b.beta), job.buf('c'), 0, ldc, q, &ev);
      break;
    case Op::trmm:
      st = SOL_CLB(trmm)(kColMajor, kCl.side(b.side), kCl.uplo(b.uplo), ta, kCl.diag(b.diag), m, n, alpha,
                         job.buf('a'), 0, lda, job.buf('b'), 0, ldb, q, &ev);
      break;
    default:  // trsm
      st = SOL_CLB(trsm)(kColMajor, kCl.side(b.side), kCl.uplo(b.uplo), ta, kCl.diag(b.diag), m, n, alpha,
                         job.buf('a'), 0, lda, job.buf('b'), 0, ldb, q, &ev);
  }
  if (Reason r = job.clblast(st, ev, capture::op_name(node.op)); r != Reason::ok) return r;
  return job.download();
}

// ------------------------------------------------------------------------- level 2

// A power-of-two work-group size (our reductions are trees) for `k`: at least `want` where the
// device allows, at most 256.
size_t work_group_size(Device& dev, cl_kernel k, size_t want) {
  size_t kwg = 1;
  dev.cl().clGetKernelWorkGroupInfo(k, dev.id(), CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, nullptr);
  const size_t cap = std::min<size_t>({256, kwg, dev.max_work_group()});
  size_t local = 1;
  while (local * 2 <= cap && local < want) local *= 2;
  return local;
}

// Our triangular solve (tbsv, tpsv: not in CLBlast 1.5.3): one work-group.
template <class E>
Reason run_tsv(Device& dev, Job& job, const Node& node) {
  const capture::BlasArgs& b = node.blas;
  const bool trans = !notrans(b.transa);
  cl_kernel k = our_kernel(dev, kPrec<E>, trans ? Kernel::tsv_t : Kernel::tsv_n);
  if (!k) return Reason::device_error;
  const cl_int storage = node.op == Op::tbsv ? 1 : node.op == Op::tpsv ? 2 : 0;
  const cl_long n = b.n;
  const cl_long band = storage == 1 ? b.k : n - 1;
  const cl_long lda = static_cast<cl_long>(job.ld('a'));
  const cl_int upper = is_upper(b.uplo), unit = is_unit(b.diag);
  const cl_int conj = kComplex<E> && upper_case(b.transa) == 'C';
  // Enough work-items for the longest column.
  const size_t local = work_group_size(dev, k, static_cast<size_t>(std::max<cl_long>(band, 1)));
  const cl_mem a = job.buf('a'), x = job.buf('x');
  const cl_int err =
      trans ? job.args(k, n, band, a, lda, x, storage, upper, unit, conj, Local{local * sizeof(E)})
            : job.args(k, n, band, a, lda, x, storage, upper, unit);
  if (err != CL_SUCCESS) return job.fail(err, "clSetKernelArg");
  return job.launch(k, local, local, trans ? "sol_tsv_t" : "sol_tsv_n");
}

template <class E>
Reason run_level2(Device& dev, Node& node) {
  const capture::BlasArgs& b = node.blas;
  const ClblastApi& api = dev.clblast();
  constexpr bool cx = kComplex<E>;

  if (level2_on_host<E>(node, [&] { host_side(dev, node); })) return Reason::ok;

  Job job(dev, node);
  const bool own = node.op == Op::tbsv || node.op == Op::tpsv;
  const int64_t widened = own ? 0 : job.widen_diagonal_band();
  if (Reason r = job.upload(); r != Reason::ok) return r;
  if (own) {
    if (Reason r = run_tsv<E>(dev, job, node); r != Reason::ok) return r;
    return job.download();
  }

  cl_command_queue* q = job.queue();
  const size_t m = static_cast<size_t>(b.m), n = static_cast<size_t>(b.n),
               k = static_cast<size_t>(b.k + widened);
  const size_t lda = job.ld('a');
  const auto alpha = cl_scalar<E>(b.alpha);
  const auto beta = cl_scalar<E>(b.beta);
  const CLBlastTranspose ta = kCl.trans(b.transa, cx);
  const CLBlastTriangle uplo = kCl.uplo(b.uplo);
  const CLBlastDiagonal diag = kCl.diag(b.diag);
  const cl_mem a = job.buf('a'), x = job.buf('x'), y = job.buf('y');
  cl_event ev = nullptr;
  CLBlastStatusCode st = CLBlastNotImplemented;

  switch (node.op) {
    case Op::gemv:
      st = SOL_CLB(gemv)(kColMajor, ta, m, n, alpha, a, 0, lda, x, 0, 1, beta, y, 0, 1, q, &ev);
      break;
    case Op::gbmv:
      st = SOL_CLB(gbmv)(kColMajor, ta, m, n, static_cast<size_t>(b.kl), static_cast<size_t>(b.ku + widened),
                         alpha, a, 0, lda, x, 0, 1, beta, y, 0, 1, q, &ev);
      break;
    case Op::trmv: st = SOL_CLB(trmv)(kColMajor, uplo, ta, diag, n, a, 0, lda, x, 0, 1, q, &ev); break;
    case Op::tbmv: st = SOL_CLB(tbmv)(kColMajor, uplo, ta, diag, n, k, a, 0, lda, x, 0, 1, q, &ev); break;
    case Op::tpmv: st = SOL_CLB(tpmv)(kColMajor, uplo, ta, diag, n, a, 0, x, 0, 1, q, &ev); break;
    case Op::trsv: st = SOL_CLB(trsv)(kColMajor, uplo, ta, diag, n, a, 0, lda, x, 0, 1, q, &ev); break;
    case Op::symv:
    case Op::hemv:
      st = SOL_CLB_SH(symv, hemv)(kColMajor, uplo, n, alpha, a, 0, lda, x, 0, 1, beta, y, 0, 1, q, &ev);
      break;
    case Op::sbmv:
    case Op::hbmv:
      st = SOL_CLB_SH(sbmv, hbmv)(kColMajor, uplo, n, k, alpha, a, 0, lda, x, 0, 1, beta, y, 0, 1, q, &ev);
      break;
    case Op::spmv:
    case Op::hpmv:
      st = SOL_CLB_SH(spmv, hpmv)(kColMajor, uplo, n, alpha, a, 0, x, 0, 1, beta, y, 0, 1, q, &ev);
      break;
    case Op::ger:
    case Op::geru:
      st = SOL_CLB_SH(ger, geru)(kColMajor, m, n, alpha, x, 0, 1, y, 0, 1, a, 0, lda, q, &ev);
      break;
    case Op::gerc:
      st = SOL_CLB_SH(ger, gerc)(kColMajor, m, n, alpha, x, 0, 1, y, 0, 1, a, 0, lda, q, &ev);
      break;
    case Op::syr:
    case Op::her:  // real alpha
      st = SOL_CLB_SH(syr, her)(kColMajor, uplo, n, cl_real<E>(b.alpha), x, 0, 1, a, 0, lda, q, &ev);
      break;
    case Op::spr:
    case Op::hpr:
      st = SOL_CLB_SH(spr, hpr)(kColMajor, uplo, n, cl_real<E>(b.alpha), x, 0, 1, a, 0, q, &ev);
      break;
    case Op::syr2:
    case Op::her2:
      st = SOL_CLB_SH(syr2, her2)(kColMajor, uplo, n, alpha, x, 0, 1, y, 0, 1, a, 0, lda, q, &ev);
      break;
    default:  // spr2, hpr2
      st = SOL_CLB_SH(spr2, hpr2)(kColMajor, uplo, n, alpha, x, 0, 1, y, 0, 1, a, 0, q, &ev);
  }
  if (Reason r = job.clblast(st, ev, capture::op_name(node.op)); r != Reason::ok) return r;
  return job.download();
}

// ------------------------------------------------------------------------- level 1

// Launch shape of a reduction: the largest work-group, at most 64 groups (the host adds the
// partials).
struct Reduction {
  size_t local = 1;
  size_t groups = 1;
};
Reduction reduction_shape(Device& dev, cl_kernel k, int64_t n) {
  Reduction r;
  r.local = work_group_size(dev, k, 256);
  r.groups = std::clamp<size_t>((static_cast<size_t>(n) + r.local - 1) / r.local, 1, 64);
  return r;
}

// The constants of the reference's nrm2 (dnrm2.f90, LAPACK 3.10+, Blue's algorithm): squares of
// values above tbig are accumulated scaled by sbig, below tsml scaled by ssml.
template <class R>
struct Nrm2Constants {
  static constexpr int minexp = std::numeric_limits<R>::min_exponent;
  static constexpr int maxexp = std::numeric_limits<R>::max_exponent;
  static constexpr int digits = std::numeric_limits<R>::digits;
  const R tsml = std::ldexp(R(1), static_cast<int>(std::ceil((minexp - 1) * 0.5)));
  const R tbig = std::ldexp(R(1), static_cast<int>(std::floor((maxexp - digits + 1) * 0.5)));
  const R ssml = std::ldexp(R(1), -static_cast<int>(std::floor((minexp - digits) * 0.5)));
  const R sbig = std::ldexp(R(1), -static_cast<int>(std::ceil((maxexp + digits - 1) * 0.5)));
};

// The reference's combination of the three accumulators.
template <class R>
R nrm2_combine(R abig, R amed, R asml) {
  const Nrm2Constants<R> c;
  const R max_n = std::numeric_limits<R>::max();
  R scl = 1, sumsq = 0;
  if (abig > 0) {
    if (amed > 0 || amed > max_n || amed != amed) abig = abig + (amed * c.sbig) * c.sbig;
    scl = R(1) / c.sbig;
    sumsq = abig;
  } else if (asml > 0) {
    if (amed > 0 || amed > max_n || amed != amed) {
      amed = std::sqrt(amed);
      asml = std::sqrt(asml) / c.ssml;
      const R ymin = asml > amed ? amed : asml;
      const R ymax = asml > amed ? asml : amed;
      scl = 1;
      sumsq = ymax * ymax * (R(1) + (ymin / ymax) * (ymin / ymax));
    } else {
      scl = R(1) / c.ssml;
      sumsq = asml;
    }
  } else {
    sumsq = amed;
  }
  return scl * std::sqrt(sumsq);
}

// The function result of a reduction from the partial results of its `g` work-groups (`host`;
// iamax's positions in `host2`).
template <class E>
void set_reduction_result(Node& node, const void* host, const void* host2, size_t g) {
  using R = RealOf<E>;
  switch (node.op) {
    case Op::asum: {
      const R* p = static_cast<const R*>(host);
      R sum = 0;
      for (size_t i = 0; i < g; ++i) sum += p[i];
      node.ret.set(sum);
      break;
    }
    case Op::nrm2: {
      const R* p = static_cast<const R*>(host);
      R big = 0, med = 0, sml = 0;
      for (size_t i = 0; i < g; ++i) {
        big += p[3 * i];
        med += p[3 * i + 1];
        sml += p[3 * i + 2];
      }
      node.ret.set(nrm2_combine(big, med, sml));
      break;
    }
    case Op::iamax: {
      const R* v = static_cast<const R*>(host);
      const cl_long* at = static_cast<const cl_long*>(host2);
      R best = v[0];
      cl_long where = at[0];
      for (size_t i = 1; i < g; ++i)
        if (v[i] > best || (v[i] == best && at[i] < where)) {
          best = v[i];
          where = at[i];
        }
      node.ret.set(static_cast<int>(where + 1));
      break;
    }
    default: {
      const double* p = static_cast<const double*>(host);
      double sum = node.op == Op::sdsdot ? static_cast<double>(static_cast<float>(node.blas.alpha.re)) : 0.0;
      for (size_t i = 0; i < g; ++i) sum += p[i];
      if (node.op == Op::sdsdot)
        node.ret.set(static_cast<float>(sum));
      else
        node.ret.set(sum);
    }
  }
}

// asum, nrm2, iamax, sdsdot, dsdot: our reductions.
template <class E>
Reason run_reduction(Device& dev, Node& node) {
  using R = RealOf<E>;
  const capture::BlasArgs& b = node.blas;
  const int64_t n = b.n;
  const bool dsdot = node.op == Op::sdsdot || node.op == Op::dsdot;
  const Kernel which = node.op == Op::asum    ? Kernel::asum
                       : node.op == Op::nrm2  ? Kernel::nrm2
                       : node.op == Op::iamax ? Kernel::iamax
                                              : Kernel::dsdot;
  cl_kernel k = our_kernel(dev, dsdot ? Prec::d : kPrec<E>, which);
  if (!k) return Reason::device_error;
  Job job(dev, node);
  if (Reason r = job.upload(); r != Reason::ok) return r;
  const Reduction shape = reduction_shape(dev, k, n);
  const size_t g = shape.groups, l = shape.local;
  const cl_long cn = n;
  cl_mem part = nullptr, part2 = nullptr;
  const void* host = nullptr;
  const void* host2 = nullptr;
  cl_int err = CL_SUCCESS;
  switch (node.op) {
    case Op::asum: {
      if (Reason r = job.scratch(kSlotResult, g * sizeof(R), part); r != Reason::ok) return r;
      err = job.args(k, cn, job.buf('x'), part, Local{l * sizeof(R)});
      host = job.fetch(part, g * sizeof(R));
      break;
    }
    case Op::nrm2: {
      if (Reason r = job.scratch(kSlotResult, 3 * g * sizeof(R), part); r != Reason::ok) return r;
      const Nrm2Constants<R> c;
      err = job.args(k, cn, job.buf('x'), part, Local{3 * l * sizeof(R)}, c.tsml, c.tbig, c.ssml, c.sbig);
      host = job.fetch(part, 3 * g * sizeof(R));
      break;
    }
    case Op::iamax: {
      if (Reason r = job.scratch(kSlotResult, g * sizeof(R), part); r != Reason::ok) return r;
      if (Reason r = job.scratch(kSlotResult2, g * sizeof(cl_long), part2); r != Reason::ok) return r;
      err = job.args(k, cn, job.buf('x'), part, part2, Local{l * sizeof(R)}, Local{l * sizeof(cl_long)});
      host = job.fetch(part, g * sizeof(R));
      host2 = job.fetch(part2, g * sizeof(cl_long));
      break;
    }
    default: {
      if (Reason r = job.scratch(kSlotResult, g * sizeof(double), part); r != Reason::ok) return r;
      err = job.args(k, cn, job.buf('x'), job.buf('y'), part, Local{l * sizeof(double)});
      host = job.fetch(part, g * sizeof(double));
    }
  }
  if (err != CL_SUCCESS) return job.fail(err, "clSetKernelArg");
  if (Reason r = job.launch(k, g * l, l, capture::op_name(node.op)); r != Reason::ok) return r;
  if (Reason r = job.download(); r != Reason::ok) return r;

  set_reduction_result<E>(node, host, host2, g);
  return Reason::ok;
}

template <class E>
Reason run_level1(Device& dev, Node& node) {
  const capture::BlasArgs& b = node.blas;
  const ClblastApi& api = dev.clblast();
  constexpr bool cx = kComplex<E>;
  const size_t n = static_cast<size_t>(std::max<int64_t>(b.n, 0));

  if (const HostCase c = level1_on_host<E>(node); c != HostCase::device) return host_reason(c);
  switch (node.op) {
    case Op::asum:
    case Op::nrm2:
    case Op::iamax:
    case Op::sdsdot:
    case Op::dsdot: return run_reduction<E>(dev, node);
    default: break;
  }

  Job job(dev, node);
  if (Reason r = job.upload(); r != Reason::ok) return r;
  cl_command_queue* q = job.queue();
  const cl_mem x = job.buf('x'), y = job.buf('y');
  cl_event ev = nullptr;
  CLBlastStatusCode st = CLBlastSuccess;
  const void* result = nullptr;

  // Our kernels: rot, rotm, and csscal/zdscal.
  if (node.op == Op::rot || node.op == Op::rotm || (node.op == Op::scal && b.real_alpha)) {
    const Kernel which = node.op == Op::rot    ? Kernel::rot
                         : node.op == Op::rotm ? Kernel::rotm
                                               : Kernel::scal_real;
    cl_kernel k = our_kernel(dev, kPrec<E>, which);
    if (!k) return Reason::device_error;
    const cl_long cn = b.n;
    cl_int err = CL_SUCCESS;
    if (node.op == Op::rot) {
      err = job.args(k, cn, x, y, cl_real<E>(b.cs), cl_real<E>(b.sn));
    } else if (node.op == Op::scal) {
      err = job.args(k, cn, cl_real<E>(b.alpha), x);
    } else if constexpr (!cx) {
      const E* p = static_cast<const E*>(b.param);
      const cl_int flag = p[0] < 0 ? -1 : p[0] == 0 ? 0 : 1;
      err = job.args(k, cn, x, y, flag, p[1], p[2], p[3], p[4]);
    }
    if (err != CL_SUCCESS) return job.fail(err, "clSetKernelArg");
    if (Reason r = job.launch(k, (n + 63) / 64 * 64, 64, capture::op_name(node.op)); r != Reason::ok)
      return r;
    return job.download();
  }

  switch (node.op) {
    case Op::axpy: st = SOL_CLB(axpy)(n, cl_scalar<E>(b.alpha), x, 0, 1, y, 0, 1, q, &ev); break;
    case Op::copy: st = SOL_CLB(copy)(n, x, 0, 1, y, 0, 1, q, &ev); break;
    case Op::swap: st = SOL_CLB(swap)(n, x, 0, 1, y, 0, 1, q, &ev); break;
    case Op::scal: st = SOL_CLB(scal)(n, cl_scalar<E>(b.alpha), x, 0, 1, q, &ev); break;
    case Op::dot:
    case Op::dotu:
    case Op::dotc: {
      cl_mem out = nullptr;
      if (Reason r = job.scratch(kSlotResult, sizeof(E), out); r != Reason::ok) return r;
      if (node.op == Op::dotc)
        st = SOL_CLB_SH(dot, dotc)(n, out, 0, x, 0, 1, y, 0, 1, q, &ev);
      else
        st = SOL_CLB_SH(dot, dotu)(n, out, 0, x, 0, 1, y, 0, 1, q, &ev);
      result = job.fetch(out, sizeof(E));
      break;
    }
    default: return Reason::op_unsupported;
  }
  if (Reason r = job.clblast(st, ev, capture::op_name(node.op)); r != Reason::ok) return r;
  if (Reason r = job.download(); r != Reason::ok) return r;
  if (result) {
    E v;
    std::memcpy(&v, result, sizeof v);
    node.ret.set(v);
  }
  return Reason::ok;
}

// A 1x1x1 product, which makes CLBlast build its GEMM program of E's precision (all its GEMM
// kernels: one program per routine and precision, whatever the size). On uninitialised buffers:
// C is not read (beta = 0) and nothing looks at the result.
template <class E>
void warm_gemm(Device& dev, cl_mem a, cl_mem b, cl_mem c) {
  const clblast_programs::Routine routine(kPrecLetter<E>, "gemm");
  const ClblastApi& api = dev.clblast();
  cl_command_queue q = dev.queue();
  const CLBlastTranspose no = CLBlastTransposeNo;
  size_t temp_bytes = 0;
  cl_mem temp = nullptr;
  if (SOL_CLB(GemmTempBufferSize)(kColMajor, no, no, 1, 1, 1, 0, 1, 0, 1, 0, 1, &q, &temp_bytes) != CLBlastSuccess ||
      dev.buffer(kSlotTemp, temp_bytes, temp) != CL_SUCCESS)
    return;
  SOL_CLB(gemmWithTempBuffer)(kColMajor, no, no, 1, 1, 1, cl_scalar<E>(Scalar(1.0)), a, 0, 1, b, 0, 1,
                              cl_scalar<E>(Scalar(0.0)), c, 0, 1, &q, nullptr, temp);
}

}  // namespace

Reason blas_supports(const Device& dev, const Node& node) noexcept {
  if (Reason r = device_blas_op(node); r != Reason::ok) return r;
  switch (node.dtype) {
    case DType::f32:
    case DType::c64: break;
    case DType::f64:
    case DType::c128:
      if (!dev.has_fp64()) return Reason::dtype_unsupported;
      break;
    default: return Reason::dtype_unsupported;
  }
  if ((node.op == Op::sdsdot || node.op == Op::dsdot) && !dev.has_fp64()) return Reason::dtype_unsupported;
  if (Reason r = device_blas_strides(node); r != Reason::ok) return r;

  DeviceOperand ops[kMaxJobOperands];
  const int count = describe_operands<DeviceOperand, kMaxJobOperands>(node, ops);
  for (int i = 0; i < count; ++i)
    if (ops[i].device_bytes > dev.max_alloc()) return Reason::too_large;
  return Reason::ok;
}

Reason blas_run(Device& dev, Node& node) {
  return run_by_type_and_level(node, [&](int level, auto e) {
    using E = decltype(e);
    // Names the programs CLBlast builds during the call (their files in the disk cache).
    const clblast_programs::Routine routine(kPrecLetter<E>, capture::op_name(node.op));
    return level == 3   ? run_level3<E>(dev, node)
           : level == 2 ? run_level2<E>(dev, node)
                        : run_level1<E>(dev, node);
  });
}

void blas_warm_up(Device& dev, const std::atomic<bool>& stop) {
  cl_mem a = nullptr, b = nullptr, c = nullptr;
  if (dev.buffer(0, 16, a) != CL_SUCCESS || dev.buffer(1, 16, b) != CL_SUCCESS || dev.buffer(2, 16, c) != CL_SUCCESS)
    return;
  // Only what the disk cache holds: a compile takes seconds, and exit() would wait for it.
  auto ready = [&](char precision) {
    return !stop.load(std::memory_order_relaxed) &&
           clblast_programs::preload(dev.context(), (std::string(1, precision) + "gemm").c_str());
  };
  if (ready('s')) warm_gemm<float>(dev, a, b, c);
  if (dev.has_fp64() && ready('d')) warm_gemm<double>(dev, a, b, c);
  if (ready('c')) warm_gemm<cfloat>(dev, a, b, c);
  if (dev.has_fp64() && ready('z')) warm_gemm<cdouble>(dev, a, b, c);
  dev.cl().clFinish(dev.queue());
}

}  // namespace sol::backends::opencl
