#include "backends/cuda/blas.hpp"

#include <algorithm>
#include <climits>
#include <complex>
#include <cstring>
#include <type_traits>

#include "backends/common/blas_host.hpp"
#include "backends/cuda/resident.hpp"
#include "backends/cuda/transfer.hpp"
#include "capture/blas/blas.hpp"

namespace sol::backends::cuda {
namespace {

using capture::DType;
using capture::Node;
using capture::Op;
using capture::Scalar;
using hal::Reason;

// ------------------------------------------------------------------------- element types

// cuBLAS's element type for E (std::complex<float> and cuComplex have the same layout).
template <class E>
using Cu = std::conditional_t<std::is_same_v<E, cfloat>, cuComplex,
                              std::conditional_t<std::is_same_v<E, cdouble>, cuDoubleComplex, E>>;
static_assert(sizeof(cuComplex) == sizeof(cfloat) && sizeof(cuDoubleComplex) == sizeof(cdouble));

// The cuBLAS function of E's precision among the S, D, C, Z variants of a routine. SOL_CUB_SH
// takes the real variants of `real` and the complex ones of `cplx`: the Hermitian routines are
// the symmetric ones on real data, with the same arguments (real alpha and beta where the
// Hermitian routine has them real).
#define SOL_CUB(name) pick4<E>(api.cublasS##name, api.cublasD##name, api.cublasC##name, api.cublasZ##name)
#define SOL_CUB_SH(real, cplx) pick4<E>(api.cublasS##real, api.cublasD##real, api.cublasC##cplx, api.cublasZ##cplx)

template <class E>
const Cu<E>* cu(const E& v) {
  return reinterpret_cast<const Cu<E>*>(&v);
}

constexpr BlasEnums<cublasOperation_t, cublasFillMode_t, cublasSideMode_t, cublasDiagType_t> kCu{
    .no = CUBLAS_OP_N,
    .transpose = CUBLAS_OP_T,
    .conjugate = CUBLAS_OP_C,
    .upper = CUBLAS_FILL_MODE_UPPER,
    .lower = CUBLAS_FILL_MODE_LOWER,
    .left = CUBLAS_SIDE_LEFT,
    .right = CUBLAS_SIDE_RIGHT,
    .unit = CUBLAS_DIAG_UNIT,
    .non_unit = CUBLAS_DIAG_NON_UNIT,
};

// ------------------------------------------------------------------------- host-side cases
// (backends/common/blas_host.hpp)

void host_side(Device& dev, const Node& node) {
  make_host_current(dev, node);
}

// ------------------------------------------------------------------------- level 3

template <class E>
Reason run_level3(Device& dev, Node& node) {
  using R = RealOf<E>;
  using T = Cu<E>;
  const capture::BlasArgs& b = node.blas;
  const CublasApi& api = dev.blas();
  constexpr bool cx = kComplex<E>;

  // Quick returns and the alpha == 0 / k == 0 cases, as the reference orders them.
  if (const HostCase c = level3_on_host<E>(node, [&] { host_side(dev, node); }); c != HostCase::device)
    return host_reason(c);

  Job job(dev, node);
  if (Reason r = job.upload(); r != Reason::ok) return r;
  cublasHandle_t h = dev.handle();
  const int m = static_cast<int>(b.m), n = static_cast<int>(b.n), k = static_cast<int>(b.k);
  const int lda = job.ld('a'), ldb = job.ld('b'), ldc = job.ld('c');
  const E alpha = host_scalar<E>(b.alpha), beta = host_scalar<E>(b.beta);
  const R ralpha = static_cast<R>(b.alpha.re), rbeta = static_cast<R>(b.beta.re);
  const cublasOperation_t ta = kCu.trans(b.transa, cx), tb = kCu.trans(b.transb, cx);
  auto* A = static_cast<T*>(job.ptr('a'));
  auto* B = static_cast<T*>(job.ptr('b'));
  auto* C = static_cast<T*>(job.ptr('c'));
  cublasStatus_t st;

  switch (node.op) {
    case Op::gemm:
      st = SOL_CUB(gemm)(h, ta, tb, m, n, k, cu(alpha), A, lda, B, ldb, cu(beta), C, ldc);
      break;
    case Op::symm:
      st = SOL_CUB(symm)(h, kCu.side(b.side), kCu.uplo(b.uplo), m, n, cu(alpha), A, lda, B, ldb, cu(beta), C,
                         ldc);
      break;
    case Op::hemm:
      st = SOL_CUB_SH(symm, hemm)(h, kCu.side(b.side), kCu.uplo(b.uplo), m, n, cu(alpha), A, lda, B, ldb,
                                  cu(beta), C, ldc);
      break;
    case Op::syrk:
      st = SOL_CUB(syrk)(h, kCu.uplo(b.uplo), ta, n, k, cu(alpha), A, lda, cu(beta), C, ldc);
      break;
    case Op::herk:  // real alpha and beta
      st = SOL_CUB_SH(syrk, herk)(h, kCu.uplo(b.uplo), ta, n, k, &ralpha, A, lda, &rbeta, C, ldc);
      break;
    case Op::syr2k:
      st = SOL_CUB(syr2k)(h, kCu.uplo(b.uplo), ta, n, k, cu(alpha), A, lda, B, ldb, cu(beta), C, ldc);
      break;
    case Op::her2k:  // real beta
      st = SOL_CUB_SH(syr2k, her2k)(h, kCu.uplo(b.uplo), ta, n, k, cu(alpha), A, lda, B, ldb, &rbeta, C, ldc);
      break;
    case Op::trmm:
      // cuBLAS's trmm is out of place (C = alpha op(A) B); B passed as C is the in-place BLAS
      // routine, which cuBLAS documents as supported.
      st = SOL_CUB(trmm)(h, kCu.side(b.side), kCu.uplo(b.uplo), ta, kCu.diag(b.diag), m, n, cu(alpha), A, lda,
                         B, ldb, B, ldb);
      break;
    default:  // trsm
      st = SOL_CUB(trsm)(h, kCu.side(b.side), kCu.uplo(b.uplo), ta, kCu.diag(b.diag), m, n, cu(alpha), A, lda,
                         B, ldb);
  }
  if (Reason r = job.check(st, capture::op_name(node.op)); r != Reason::ok) return r;
  return job.download();
}

// ------------------------------------------------------------------------- level 2

template <class E>
Reason run_level2(Device& dev, Node& node) {
  using R = RealOf<E>;
  using T = Cu<E>;
  const capture::BlasArgs& b = node.blas;
  const CublasApi& api = dev.blas();
  constexpr bool cx = kComplex<E>;

  if (level2_on_host<E>(node, [&] { host_side(dev, node); })) return Reason::ok;

  Job job(dev, node);
  if (Reason r = job.upload(); r != Reason::ok) return r;
  cublasHandle_t h = dev.handle();
  const int m = static_cast<int>(b.m), n = static_cast<int>(b.n), k = static_cast<int>(b.k);
  const int lda = job.ld('a');
  const E alpha = host_scalar<E>(b.alpha), beta = host_scalar<E>(b.beta);
  const R ralpha = static_cast<R>(b.alpha.re);
  const cublasOperation_t ta = kCu.trans(b.transa, cx);
  const cublasFillMode_t uplo = kCu.uplo(b.uplo);
  const cublasDiagType_t diag = kCu.diag(b.diag);
  auto* A = static_cast<T*>(job.ptr('a'));
  auto* x = static_cast<T*>(job.ptr('x'));
  auto* y = static_cast<T*>(job.ptr('y'));
  cublasStatus_t st;

  switch (node.op) {
    case Op::gemv: st = SOL_CUB(gemv)(h, ta, m, n, cu(alpha), A, lda, x, 1, cu(beta), y, 1); break;
    case Op::gbmv:
      st = SOL_CUB(gbmv)(h, ta, m, n, static_cast<int>(b.kl), static_cast<int>(b.ku), cu(alpha), A, lda, x, 1,
                         cu(beta), y, 1);
      break;
    case Op::trmv: st = SOL_CUB(trmv)(h, uplo, ta, diag, n, A, lda, x, 1); break;
    case Op::tbmv: st = SOL_CUB(tbmv)(h, uplo, ta, diag, n, k, A, lda, x, 1); break;
    case Op::tpmv: st = SOL_CUB(tpmv)(h, uplo, ta, diag, n, A, x, 1); break;
    case Op::trsv: st = SOL_CUB(trsv)(h, uplo, ta, diag, n, A, lda, x, 1); break;
    case Op::tbsv: st = SOL_CUB(tbsv)(h, uplo, ta, diag, n, k, A, lda, x, 1); break;
    case Op::tpsv: st = SOL_CUB(tpsv)(h, uplo, ta, diag, n, A, x, 1); break;
    case Op::symv:
    case Op::hemv: st = SOL_CUB_SH(symv, hemv)(h, uplo, n, cu(alpha), A, lda, x, 1, cu(beta), y, 1); break;
    case Op::sbmv:
    case Op::hbmv: st = SOL_CUB_SH(sbmv, hbmv)(h, uplo, n, k, cu(alpha), A, lda, x, 1, cu(beta), y, 1); break;
    case Op::spmv:
    case Op::hpmv: st = SOL_CUB_SH(spmv, hpmv)(h, uplo, n, cu(alpha), A, x, 1, cu(beta), y, 1); break;
    case Op::ger:
    case Op::geru: st = SOL_CUB_SH(ger, geru)(h, m, n, cu(alpha), x, 1, y, 1, A, lda); break;
    case Op::gerc: st = SOL_CUB_SH(ger, gerc)(h, m, n, cu(alpha), x, 1, y, 1, A, lda); break;
    case Op::syr:
    case Op::her: st = SOL_CUB_SH(syr, her)(h, uplo, n, &ralpha, x, 1, A, lda); break;  // real alpha
    case Op::spr:
    case Op::hpr: st = SOL_CUB_SH(spr, hpr)(h, uplo, n, &ralpha, x, 1, A); break;
    case Op::syr2:
    case Op::her2: st = SOL_CUB_SH(syr2, her2)(h, uplo, n, cu(alpha), x, 1, y, 1, A, lda); break;
    default:  // spr2, hpr2
      st = SOL_CUB_SH(spr2, hpr2)(h, uplo, n, cu(alpha), x, 1, y, 1, A);
  }
  if (Reason r = job.check(st, capture::op_name(node.op)); r != Reason::ok) return r;
  return job.download();
}

// ------------------------------------------------------------------------- level 1

template <class E>
Reason run_level1(Device& dev, Node& node) {
  using R = RealOf<E>;
  using T = Cu<E>;
  const capture::BlasArgs& b = node.blas;
  const CublasApi& api = dev.blas();
  const int64_t n64 = b.n;

  if (const HostCase c = level1_on_host<E>(node); c != HostCase::device) return host_reason(c);

  Job job(dev, node);
  if (Reason r = job.upload(); r != Reason::ok) return r;
  cublasHandle_t h = dev.handle();
  const int n = static_cast<int>(n64);
  auto* x = static_cast<T*>(job.ptr('x'));
  auto* y = static_cast<T*>(job.ptr('y'));
  const E alpha = host_scalar<E>(b.alpha);
  const R ralpha = static_cast<R>(b.alpha.re), c = static_cast<R>(b.cs.re), s = static_cast<R>(b.sn.re);
  R real_result = 0;
  E result{};
  int index = 0;
  cublasStatus_t st;

  switch (node.op) {
    case Op::asum: st = pick4<E>(api.cublasSasum, api.cublasDasum, api.cublasScasum, api.cublasDzasum)(h, n, x, 1, &real_result); break;
    case Op::nrm2: st = pick4<E>(api.cublasSnrm2, api.cublasDnrm2, api.cublasScnrm2, api.cublasDznrm2)(h, n, x, 1, &real_result); break;
    case Op::iamax: st = pick4<E>(api.cublasIsamax, api.cublasIdamax, api.cublasIcamax, api.cublasIzamax)(h, n, x, 1, &index); break;
    case Op::dot:
    case Op::dotu: st = SOL_CUB_SH(dot, dotu)(h, n, x, 1, y, 1, reinterpret_cast<T*>(&result)); break;
    case Op::dotc: st = SOL_CUB_SH(dot, dotc)(h, n, x, 1, y, 1, reinterpret_cast<T*>(&result)); break;
    case Op::axpy: st = SOL_CUB(axpy)(h, n, cu(alpha), x, 1, y, 1); break;
    case Op::copy: st = SOL_CUB(copy)(h, n, x, 1, y, 1); break;
    case Op::swap: st = SOL_CUB(swap)(h, n, x, 1, y, 1); break;
    case Op::scal:
      if (b.real_alpha)  // csscal, zdscal (real data never has real_alpha set)
        st = pick4<E>(api.cublasSscal, api.cublasDscal, api.cublasCsscal, api.cublasZdscal)(h, n, &ralpha, x, 1);
      else
        st = SOL_CUB(scal)(h, n, cu(alpha), x, 1);
      break;
    case Op::rot:  // real c and s: srot, drot, csrot, zdrot
      st = pick4<E>(api.cublasSrot, api.cublasDrot, api.cublasCsrot, api.cublasZdrot)(h, n, x, 1, y, 1, &c, &s);
      break;
    default:  // rotm: real types only (supports() declines the rest)
      if constexpr (kComplex<E>)
        return Reason::op_unsupported;
      else
        st = pick4<E>(api.cublasSrotm, api.cublasDrotm, api.cublasSrotm, api.cublasDrotm)(
            h, n, x, 1, y, 1, static_cast<const E*>(b.param));
  }
  if (Reason r = job.check(st, capture::op_name(node.op)); r != Reason::ok) return r;
  // Host pointer mode: cuBLAS returned the result only once it was computed; download() still
  // waits for the stream, and stores written vectors (lazily: a scalar result is a wait).
  const bool scalar = node.op == Op::asum || node.op == Op::nrm2 || node.op == Op::iamax || node.op == Op::dot ||
                      node.op == Op::dotu || node.op == Op::dotc;
  if (Reason r = job.download(scalar); r != Reason::ok) return r;
  switch (node.op) {
    case Op::asum:
    case Op::nrm2: node.ret.set(real_result); break;
    case Op::iamax: node.ret.set(index); break;  // 1-based, as BLAS
    case Op::dot:
    case Op::dotu:
    case Op::dotc: node.ret.set(result); break;
    default: break;
  }
  return Reason::ok;
}

bool fits_int(int64_t v) noexcept {
  return v >= INT_MIN && v <= INT_MAX;
}

}  // namespace

Reason blas_supports(const Device& dev, const Node& node) noexcept {
  if (Reason r = device_blas_op(node); r != Reason::ok) return r;
  if (node.op == Op::sdsdot || node.op == Op::dsdot) return Reason::op_unsupported;  // not in cuBLAS
  switch (node.dtype) {
    case DType::f32:
    case DType::f64:
    case DType::c64:
    case DType::c128: break;
    default: return Reason::dtype_unsupported;
  }
  if (node.op == Op::rotm && (node.dtype == DType::c64 || node.dtype == DType::c128)) return Reason::dtype_unsupported;
  if (Reason r = device_blas_strides(node); r != Reason::ok) return r;
  const capture::BlasArgs& b = node.blas;
  // cuBLAS's 32-bit interface: dimensions, and the leading dimensions on the device (at most the
  // dimensions: operands are packed there).
  for (int64_t v : {b.m, b.n, b.k, b.kl, b.ku})
    if (!fits_int(v)) return Reason::too_large;
  DeviceOperand ops[kMaxJobOperands];
  const int count = describe_operands<DeviceOperand, kMaxJobOperands>(node, ops);
  for (int i = 0; i < count; ++i)
    if (!fits_int(ops[i].dld) || ops[i].device_bytes > dev.total_memory()) return Reason::too_large;
  return Reason::ok;
}

Reason blas_run(Device& dev, Node& node) {
  return run_by_type_and_level(node, [&](int level, auto e) {
    using E = decltype(e);
    return level == 3   ? run_level3<E>(dev, node)
           : level == 2 ? run_level2<E>(dev, node)
                        : run_level1<E>(dev, node);
  });
}

}  // namespace sol::backends::cuda
