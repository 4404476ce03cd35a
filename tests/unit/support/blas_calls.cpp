// The calls backend tests make for each BLAS routine (blas_calls.hpp).
#include "blas_calls.hpp"

#include <functional>

#include "ir/node.hpp"

namespace sol::test {
namespace {

using capture::Op;
using capture::Scalar;

const Scalar kAlpha(0.7, 0.3);
const Scalar kBeta(1.3, -0.2);
const Scalar kZero(0.0);
const Scalar kOne(1.0);

struct Inc {
  int64_t x, y;
};
const Inc kIncs[] = {{1, 1}, {2, -3}, {-1, 2}};

std::vector<char> transposes(Op op, bool complex) {
  if (op == Op::herk || op == Op::her2k) return {'N', 'C'};
  if ((op == Op::syrk || op == Op::syr2k) && complex) return {'N', 'T'};
  return {'N', 'T', 'C'};
}

// The calls made for one routine.
}  // namespace

std::vector<Call> blas_calls(const std::string& routine) {
  const capture::Node node = blas_node(routine);
  const Op op = node.op;
  const bool cx = node.dtype == capture::DType::c64 || node.dtype == capture::DType::c128;
  std::vector<Call> out;
  Call base;
  base.routine = routine;
  auto add = [&](const std::function<void(Call&)>& set) {
    Call c = base;
    set(c);
    out.push_back(c);
  };
  const Scalar betas[] = {kZero, kOne, kBeta};

  switch (op) {
    case Op::gemm:
      for (char ta : {'N', 'T', 'C'})
        for (char tb : {'N', 'T', 'C'})
          for (int size = 0; size < 2; ++size)
            for (const Scalar& beta : betas)
              add([&](Call& c) {
                c.transa = ta, c.transb = tb, c.beta = beta;
                c.m = size ? 33 : 7, c.n = size ? 17 : 5, c.k = size ? 9 : 3, c.pad = size ? 0 : 2;
              });
      for (const Scalar& beta : betas) {
        add([&](Call& c) { c.m = 6, c.n = 4, c.k = 3, c.alpha = kZero, c.beta = beta, c.transa = 'T'; });
        add([&](Call& c) { c.m = 6, c.n = 4, c.k = 0, c.beta = beta; });
      }
      add([&](Call& c) { c.m = 0, c.n = 4, c.k = 3; });
      add([&](Call& c) { c.m = 4, c.n = 0, c.k = 3; });
      // Large enough for CLBlast's indirect kernel and its temporary buffer.
      add([&](Call& c) { c.m = 300, c.n = 200, c.k = 260, c.transa = 'T', c.transb = 'C', c.pad = 3; });
      break;
    case Op::symm:
    case Op::hemm:
      for (char side : {'L', 'R'})
        for (char uplo : {'U', 'L'})
          for (int size = 0; size < 2; ++size)
            for (const Scalar& beta : betas)
              add([&](Call& c) {
                c.side = side, c.uplo = uplo, c.beta = beta;
                c.m = size ? 17 : 7, c.n = size ? 33 : 5, c.pad = size ? 1 : 0;
              });
      for (const Scalar& beta : betas)
        add([&](Call& c) { c.m = 5, c.n = 6, c.alpha = kZero, c.beta = beta; });
      add([&](Call& c) { c.m = 0, c.n = 6; });
      break;
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k:
      for (char uplo : {'U', 'L'})
        for (char t : transposes(op, cx))
          for (int size = 0; size < 2; ++size)
            for (const Scalar& beta : betas)
              add([&](Call& c) {
                c.uplo = uplo, c.transa = t, c.beta = beta;
                c.n = size ? 33 : 7, c.k = size ? 9 : 3, c.pad = size ? 0 : 3;
              });
      for (const Scalar& beta : betas) {
        add([&](Call& c) { c.n = 6, c.k = 4, c.alpha = kZero, c.beta = beta, c.uplo = 'L'; });
        add([&](Call& c) { c.n = 6, c.k = 0, c.beta = beta; });
      }
      add([&](Call& c) { c.n = 0, c.k = 3; });
      break;
    case Op::trmm:
    case Op::trsm:
      for (char side : {'L', 'R'})
        for (char uplo : {'U', 'L'})
          for (char t : {'N', 'T', 'C'})
            for (char diag : {'N', 'U'})
              for (int size = 0; size < 2; ++size)
                add([&](Call& c) {
                  c.side = side, c.uplo = uplo, c.transa = t, c.diag = diag;
                  c.m = size ? 17 : 7, c.n = size ? 9 : 5, c.pad = size ? 0 : 2;
                });
      add([&](Call& c) { c.m = 5, c.n = 4, c.alpha = kZero; });
      add([&](Call& c) { c.m = 0, c.n = 4; });
      break;
    case Op::gemv:
    case Op::gbmv: {
      struct Band {
        int64_t m, n, kl, ku;
      };
      const std::vector<Band> shapes =
          op == Op::gemv ? std::vector<Band>{{7, 5, 0, 0}, {33, 17, 0, 0}}
                         : std::vector<Band>{{7, 5, 1, 2}, {9, 12, 3, 0}, {6, 9, 8, 2}, {5, 7, 0, 0}};
      for (char t : {'N', 'T', 'C'})
        for (const Band& s : shapes)
          for (const Inc& inc : kIncs)
            for (const Scalar& beta : betas)
              add([&](Call& c) {
                c.transa = t, c.m = s.m, c.n = s.n, c.kl = s.kl, c.ku = s.ku, c.pad = 1;
                c.incx = inc.x, c.incy = inc.y, c.beta = beta;
              });
      for (const Scalar& beta : betas)
        add([&](Call& c) {
          c.m = 5, c.n = 4, c.kl = 1, c.ku = 1, c.alpha = kZero, c.beta = beta, c.incy = -2;
        });
      add([&](Call& c) { c.m = 0, c.n = 4, c.kl = 1, c.ku = 1; });
      break;
    }
    case Op::symv:
    case Op::hemv:
    case Op::spmv:
    case Op::hpmv:
    case Op::sbmv:
    case Op::hbmv: {
      const bool banded = op == Op::sbmv || op == Op::hbmv;
      for (char uplo : {'U', 'L'})
        for (int size = 0; size < 3; ++size)
          for (const Inc& inc : kIncs)
            for (const Scalar& beta : betas)
              add([&](Call& c) {
                c.uplo = uplo,
                c.n = size == 2 ? 33
                      : size    ? 9
                                : 7,
                c.k = banded ? (size == 2 ? 40
                                : size    ? 0
                                          : 2)
                             : 0;
                c.pad = 2, c.incx = inc.x, c.incy = inc.y, c.beta = beta;
              });
      for (const Scalar& beta : betas)
        add([&](Call& c) { c.n = 6, c.k = 1, c.alpha = kZero, c.beta = beta; });
      add([&](Call& c) { c.n = 0, c.k = 1; });
      break;
    }
    case Op::trmv:
    case Op::trsv:
    case Op::tpmv:
    case Op::tpsv:
    case Op::tbmv:
    case Op::tbsv: {
      const bool banded = op == Op::tbmv || op == Op::tbsv;
      for (char uplo : {'U', 'L'})
        for (char t : {'N', 'T', 'C'})
          for (char diag : {'N', 'U'})
            for (int size = 0; size < 3; ++size)
              add([&](Call& c) {
                c.uplo = uplo, c.transa = t, c.diag = diag, c.pad = 1;
                c.n = size == 2 ? 33 : size ? 9 : 7, c.k = banded ? (size == 2 ? 40 : size ? 0 : 2) : 0;
                c.incx = size == 1 ? -2 : size == 2 ? 3 : 1;
              });
      add([&](Call& c) { c.n = 0; });
      break;
    }
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      for (int size = 0; size < 2; ++size)
        for (const Inc& inc : kIncs)
          add([&](Call& c) {
            c.m = size ? 33 : 7, c.n = size ? 17 : 5, c.pad = 2, c.incx = inc.x, c.incy = inc.y;
          });
      add([&](Call& c) { c.m = 5, c.n = 4, c.alpha = kZero; });
      add([&](Call& c) { c.m = 0, c.n = 4; });
      break;
    case Op::syr:
    case Op::her:
    case Op::spr:
    case Op::hpr:
    case Op::syr2:
    case Op::her2:
    case Op::spr2:
    case Op::hpr2:
      for (char uplo : {'U', 'L'})
        for (int size = 0; size < 2; ++size)
          for (const Inc& inc : kIncs)
            add([&](Call& c) {
              c.uplo = uplo, c.n = size ? 33 : 7, c.pad = 1, c.incx = inc.x, c.incy = inc.y;
            });
      add([&](Call& c) { c.n = 5, c.alpha = kZero; });
      add([&](Call& c) { c.n = 0; });
      break;
    case Op::axpy:
    case Op::copy:
    case Op::swap:
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
    case Op::sdsdot:
    case Op::dsdot:
    case Op::rot: {
      // Zero increments only where the routine reads the vector.
      const bool x_read_only = op != Op::swap && op != Op::rot;
      const bool y_read_only =
          op == Op::dot || op == Op::dotu || op == Op::dotc || op == Op::sdsdot || op == Op::dsdot;
      std::vector<Inc> incs = {{1, 1}, {2, -3}, {-1, 1}, {-2, -2}};
      if (x_read_only) incs.push_back({0, 1});
      if (y_read_only) incs.push_back({3, 0});
      for (int64_t n : {0, 1, 7, 1000})
        for (const Inc& inc : incs) add([&](Call& c) { c.n = n, c.incx = inc.x, c.incy = inc.y; });
      if (op == Op::axpy) add([&](Call& c) { c.n = 7, c.alpha = kZero, c.incx = 2; });
      if (op == Op::sdsdot) add([&](Call& c) { c.n = 0, c.alpha = Scalar(2.5); });
      break;
    }
    case Op::rotm:
      for (double flag : {-1.0, 0.0, 1.0, -2.0})
        for (int64_t n : {0, 7, 1000})
          for (const Inc& inc : {Inc{1, 1}, Inc{2, -3}, Inc{-1, 1}})
            add([&](Call& c) { c.n = n, c.incx = inc.x, c.incy = inc.y, c.param[0] = flag; });
      break;
    case Op::scal:
      for (int64_t n : {0, 1, 7, 1000})
        for (int64_t inc : {1, 3, -1, 0})
          for (const Scalar& alpha : {kAlpha, kZero})
            add([&](Call& c) { c.n = n, c.incx = inc, c.alpha = alpha; });
      break;
    case Op::asum:
    case Op::nrm2:
    case Op::iamax:
      for (int64_t n : {0, 1, 2, 7, 1000, 5000})
        for (int64_t inc : {1, 2, -1, 0}) add([&](Call& c) { c.n = n, c.incx = inc; });
      break;
    default: break;
  }
  return out;
}

// Every Fortran BLAS routine a device backend may compute (all of blas.toml but rotg, rotmg, cabs1).
const std::vector<const char*> kBlasRoutines = {
    "sasum",  "dasum",  "scasum", "dzasum", "snrm2", "dnrm2", "scnrm2", "dznrm2", "isamax", "idamax",
    "icamax", "izamax", "saxpy",  "daxpy",  "caxpy", "zaxpy", "scopy",  "dcopy",  "ccopy",  "zcopy",
    "sswap",  "dswap",  "cswap",  "zswap",  "sscal", "dscal", "cscal",  "zscal",  "csscal", "zdscal",
    "sdot",   "ddot",   "cdotu",  "zdotu",  "cdotc", "zdotc", "sdsdot", "dsdot",  "srot",   "drot",
    "csrot",  "zdrot",  "srotm",  "drotm",  "sgemv", "dgemv", "cgemv",  "zgemv",  "sgbmv",  "dgbmv",
    "cgbmv",  "zgbmv",  "ssymv",  "dsymv",  "chemv", "zhemv", "ssbmv",  "dsbmv",  "chbmv",  "zhbmv",
    "sspmv",  "dspmv",  "chpmv",  "zhpmv",  "strmv", "dtrmv", "ctrmv",  "ztrmv",  "stbmv",  "dtbmv",
    "ctbmv",  "ztbmv",  "stpmv",  "dtpmv",  "ctpmv", "ztpmv", "strsv",  "dtrsv",  "ctrsv",  "ztrsv",
    "stbsv",  "dtbsv",  "ctbsv",  "ztbsv",  "stpsv", "dtpsv", "ctpsv",  "ztpsv",  "sger",   "dger",
    "cgeru",  "zgeru",  "cgerc",  "zgerc",  "ssyr",  "dsyr",  "cher",   "zher",   "sspr",   "dspr",
    "chpr",   "zhpr",   "ssyr2",  "dsyr2",  "cher2", "zher2", "sspr2",  "dspr2",  "chpr2",  "zhpr2",
    "sgemm",  "dgemm",  "cgemm",  "zgemm",  "ssymm", "dsymm", "csymm",  "zsymm",  "chemm",  "zhemm",
    "ssyrk",  "dsyrk",  "csyrk",  "zsyrk",  "cherk", "zherk", "ssyr2k", "dsyr2k", "csyr2k", "zsyr2k",
    "cher2k", "zher2k", "strmm",  "dtrmm",  "ctrmm", "ztrmm", "strsm",  "dtrsm",  "ctrsm",  "ztrsm",
};


}  // namespace sol::test
