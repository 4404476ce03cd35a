// Argument checks of netlib's reference BLAS 3.11 (BLAS/SRC/*.f) and its CBLAS layer
// (CBLAS/src/cblas_*.c), in their order and with their numbering. No level 1 routine checks its
// arguments (a bad n or increment makes it return early), so only levels 2 and 3 can fail.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "capture/blas/blas.hpp"
#include "capture/blas/detail.hpp"
#include "common/macros.hpp"

namespace sol::capture::blas {
namespace {

bool lsame(char a, char b) {
  auto up = [](char c) { return (c >= 'a' && c <= 'z') ? char(c - 'a' + 'A') : c; };
  return up(a) == up(b);
}
bool is_trans(char c) {
  return lsame(c, 'N') || lsame(c, 'T') || lsame(c, 'C');
}
bool is_uplo(char c) {
  return lsame(c, 'U') || lsame(c, 'L');
}
bool is_diag(char c) {
  return lsame(c, 'U') || lsame(c, 'N');
}
bool is_side(char c) {
  return lsame(c, 'L') || lsame(c, 'R');
}
int64_t max1(int64_t v) {
  return std::max<int64_t>(1, v);
}

// The INFO a Fortran routine passes to XERBLA for these arguments, 0 when they are valid.
// `complex`: CSYRK/CSYR2K accept only N and T where SSYRK/SSYR2K also take C. `conj_trans`:
// whether a gemm may be 'C' (not for dnnl_sgemm, which takes N and T only).
int fortran_info(Op op, bool complex, const BlasArgs& a, bool conj_trans = true) {
  switch (op) {
    case Op::gemv:
      if (!is_trans(a.transa)) return 1;
      if (a.m < 0) return 2;
      if (a.n < 0) return 3;
      if (a.lda < max1(a.m)) return 6;
      if (a.incx == 0) return 8;
      if (a.incy == 0) return 11;
      return 0;
    case Op::gbmv:
      if (!is_trans(a.transa)) return 1;
      if (a.m < 0) return 2;
      if (a.n < 0) return 3;
      if (a.kl < 0) return 4;
      if (a.ku < 0) return 5;
      if (a.lda < a.kl + a.ku + 1) return 8;
      if (a.incx == 0) return 10;
      if (a.incy == 0) return 13;
      return 0;
    case Op::symv:
    case Op::hemv:
      if (!is_uplo(a.uplo)) return 1;
      if (a.n < 0) return 2;
      if (a.lda < max1(a.n)) return 5;
      if (a.incx == 0) return 7;
      if (a.incy == 0) return 10;
      return 0;
    case Op::sbmv:
    case Op::hbmv:
      if (!is_uplo(a.uplo)) return 1;
      if (a.n < 0) return 2;
      if (a.k < 0) return 3;
      if (a.lda < a.k + 1) return 6;
      if (a.incx == 0) return 8;
      if (a.incy == 0) return 11;
      return 0;
    case Op::spmv:
    case Op::hpmv:
      if (!is_uplo(a.uplo)) return 1;
      if (a.n < 0) return 2;
      if (a.incx == 0) return 6;
      if (a.incy == 0) return 9;
      return 0;
    case Op::trmv:
    case Op::trsv:
    case Op::tbmv:
    case Op::tbsv:
    case Op::tpmv:
    case Op::tpsv: {
      if (!is_uplo(a.uplo)) return 1;
      if (!is_trans(a.transa)) return 2;
      if (!is_diag(a.diag)) return 3;
      if (a.n < 0) return 4;
      if (op == Op::trmv || op == Op::trsv) {
        if (a.lda < max1(a.n)) return 6;
        return a.incx == 0 ? 8 : 0;
      }
      if (op == Op::tbmv || op == Op::tbsv) {
        if (a.k < 0) return 5;
        if (a.lda < a.k + 1) return 7;
        return a.incx == 0 ? 9 : 0;
      }
      return a.incx == 0 ? 7 : 0;
    }
    case Op::ger:
    case Op::geru:
    case Op::gerc:
      if (a.m < 0) return 1;
      if (a.n < 0) return 2;
      if (a.incx == 0) return 5;
      if (a.incy == 0) return 7;
      if (a.lda < max1(a.m)) return 9;
      return 0;
    case Op::syr:
    case Op::her:
    case Op::spr:
    case Op::hpr:
      if (!is_uplo(a.uplo)) return 1;
      if (a.n < 0) return 2;
      if (a.incx == 0) return 5;
      if ((op == Op::syr || op == Op::her) && a.lda < max1(a.n)) return 7;
      return 0;
    case Op::syr2:
    case Op::her2:
    case Op::spr2:
    case Op::hpr2:
      if (!is_uplo(a.uplo)) return 1;
      if (a.n < 0) return 2;
      if (a.incx == 0) return 5;
      if (a.incy == 0) return 7;
      if ((op == Op::syr2 || op == Op::her2) && a.lda < max1(a.n)) return 9;
      return 0;
    case Op::gemm: {
      auto trans_ok = [&](char c) { return lsame(c, 'N') || lsame(c, 'T') || (conj_trans && lsame(c, 'C')); };
      bool nota = lsame(a.transa, 'N'), notb = lsame(a.transb, 'N');
      if (!trans_ok(a.transa)) return 1;
      if (!trans_ok(a.transb)) return 2;
      if (a.m < 0) return 3;
      if (a.n < 0) return 4;
      if (a.k < 0) return 5;
      if (a.lda < max1(nota ? a.m : a.k)) return 8;
      if (a.ldb < max1(notb ? a.k : a.n)) return 10;
      if (a.ldc < max1(a.m)) return 13;
      return 0;
    }
    case Op::symm:
    case Op::hemm:
      if (!is_side(a.side)) return 1;
      if (!is_uplo(a.uplo)) return 2;
      if (a.m < 0) return 3;
      if (a.n < 0) return 4;
      if (a.lda < max1(lsame(a.side, 'L') ? a.m : a.n)) return 7;
      if (a.ldb < max1(a.m)) return 9;
      if (a.ldc < max1(a.m)) return 12;
      return 0;
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k: {
      bool trans_ok = lsame(a.transa, 'N');
      if (op == Op::herk || op == Op::her2k) {
        trans_ok = trans_ok || lsame(a.transa, 'C');
      } else {
        trans_ok = trans_ok || lsame(a.transa, 'T') || (!complex && lsame(a.transa, 'C'));
      }
      int64_t nrowa = lsame(a.transa, 'N') ? a.n : a.k;
      bool two = op == Op::syr2k || op == Op::her2k;
      if (!is_uplo(a.uplo)) return 1;
      if (!trans_ok) return 2;
      if (a.n < 0) return 3;
      if (a.k < 0) return 4;
      if (a.lda < max1(nrowa)) return 7;
      if (two && a.ldb < max1(nrowa)) return 9;
      if (a.ldc < max1(a.n)) return two ? 12 : 10;
      return 0;
    }
    case Op::trmm:
    case Op::trsm:
      if (!is_side(a.side)) return 1;
      if (!is_uplo(a.uplo)) return 2;
      if (!is_trans(a.transa)) return 3;
      if (!is_diag(a.diag)) return 4;
      if (a.m < 0) return 5;
      if (a.n < 0) return 6;
      if (a.lda < max1(lsame(a.side, 'L') ? a.m : a.n)) return 9;
      if (a.ldb < max1(a.m)) return 11;
      return 0;
    default: return 0;
  }
}

// ------------------------------------------------------------------------- CBLAS layer

constexpr const char* kLayout = "Illegal layout setting, %d\n";
constexpr const char* kTransA = "Illegal TransA setting, %d\n";
constexpr const char* kTransB = "Illegal TransB setting, %d\n";
constexpr const char* kTrans = "Illegal Trans setting, %d\n";
constexpr const char* kUplo = "Illegal Uplo setting, %d\n";
constexpr const char* kDiag = "Illegal Diag setting, %d\n";
constexpr const char* kSide = "Illegal Side setting, %d\n";

// One enum argument a cblas_ routine checks: its position as reported for each layout, and the
// message. Invalid enums reach the node as 0 (see capture::cblas_trans and friends).
struct EnumCheck {
  char BlasArgs::*field;
  int col_major_info;
  int row_major_info;
  const char* message;
};

// The enum checks of each cblas_ routine, in its order. The numbering is not always the argument
// position: in row-major cblas_?syrk, cblas_?herk and cblas_?syr2k report a bad Uplo as 3, and
// cblas_?gemm a bad TransB as 2.
int enum_checks(Op op, EnumCheck out[4]) {
  const EnumCheck transa2{&BlasArgs::transa, 2, 2, kTransA}, uplo2{&BlasArgs::uplo, 2, 2, kUplo};
  switch (op) {
    case Op::gemv:
    case Op::gbmv: out[0] = transa2; return 1;
    case Op::symv:
    case Op::hemv:
    case Op::sbmv:
    case Op::hbmv:
    case Op::spmv:
    case Op::hpmv:
    case Op::syr:
    case Op::her:
    case Op::spr:
    case Op::hpr:
    case Op::syr2:
    case Op::her2:
    case Op::spr2:
    case Op::hpr2: out[0] = uplo2; return 1;
    case Op::trmv:
    case Op::tbmv:
    case Op::tpmv:
    case Op::trsv:
    case Op::tbsv:
    case Op::tpsv:
      out[0] = uplo2;
      out[1] = {&BlasArgs::transa, 3, 3, kTransA};
      out[2] = {&BlasArgs::diag, 4, 4, kDiag};
      return 3;
    case Op::gemm:
      out[0] = transa2;
      out[1] = {&BlasArgs::transb, 3, 2, kTransB};
      return 2;
    case Op::symm:
    case Op::hemm:
      out[0] = {&BlasArgs::side, 2, 2, kSide};
      out[1] = {&BlasArgs::uplo, 3, 3, kUplo};
      return 2;
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
      out[0] = {&BlasArgs::uplo, 2, 3, kUplo};
      out[1] = {&BlasArgs::transa, 3, 3, kTrans};
      return 2;
    case Op::her2k:
      out[0] = uplo2;
      out[1] = {&BlasArgs::transa, 3, 3, kTrans};
      return 2;
    case Op::trmm:
    case Op::trsm:
      out[0] = {&BlasArgs::side, 2, 2, kSide};
      out[1] = {&BlasArgs::uplo, 3, 3, kUplo};
      out[2] = {&BlasArgs::transa, 4, 4, kTrans};
      out[3] = {&BlasArgs::diag, 5, 5, kDiag};
      return 4;
    default: return 0;
  }
}

void set_routine(ArgError& e, const char* name) {
  std::strncpy(e.routine, name, sizeof e.routine - 1);
}

ArgError cblas_error(const Node& node, int info, const char* message, int value) {
  ArgError e;
  e.level = ArgError::cblas;
  e.info = info;
  set_routine(e, symbol_name(node.sym));
  e.row_major = node.blas.layout == 'R';  // RowMajorStrg is set on entry to the RowMajor branch
  e.message = message;
  e.bad_value = value;
  return e;
}

// The value the program passed for the enum behind a character field.
int32_t raw_enum(const BlasArgs& a, char BlasArgs::*field) {
  if (field == &BlasArgs::transa) return a.cblas.transa;
  if (field == &BlasArgs::transb) return a.cblas.transb;
  if (field == &BlasArgs::uplo) return a.cblas.uplo;
  if (field == &BlasArgs::side) return a.cblas.side;
  if (field == &BlasArgs::diag) return a.cblas.diag;
  return a.cblas.layout;
}

// The layout and enum checks of cblas_<routine>.c; the message carries the invalid value as the
// program passed it.
ArgError check_cblas(const Node& node) {
  const BlasArgs& a = node.blas;
  if (a.layout != 'C' && a.layout != 'R') return cblas_error(node, 1, kLayout, a.cblas.layout);
  const bool row = a.layout == 'R';
  EnumCheck checks[4];
  int count = enum_checks(node.op, checks);
  for (int i = 0; i < count; ++i) {
    if (a.*checks[i].field != 0) continue;
    // Row-major cblas_?tbmv reports a bad Diag as an Illegal Uplo, printing the Uplo enum.
    if (row && node.op == Op::tbmv && checks[i].field == &BlasArgs::diag) {
      return cblas_error(node, 4, kUplo, a.uplo == 'U' ? 121 : a.uplo == 'L' ? 122 : a.cblas.uplo);
    }
    return cblas_error(node, row ? checks[i].row_major_info : checks[i].col_major_info, checks[i].message,
                       raw_enum(a, checks[i].field));
  }
  return {};
}

// The error of the Fortran call `op` with `args` that `node` makes (its own, column-major).
ArgError fortran_error(const Node& node, Op op, const BlasArgs& args) noexcept {
  const bool dnnl = node.api == Api::dnnl;
  const bool complex = node.dtype == DType::c64 || node.dtype == DType::c128;
  int info = fortran_info(op, complex, args, !dnnl);
  if (info == 0) return {};

  ArgError e;
  e.level = ArgError::fortran;
  e.info = info;
  // SRNAME as the routine passes it to XERBLA: six characters, blank-padded ("SGEMM ").
  char letter = 'S';
  switch (dnnl ? DType::f32 : node.dtype) {
    case DType::f64: letter = 'D'; break;
    case DType::c64: letter = 'C'; break;
    case DType::c128: letter = 'Z'; break;
    default: break;
  }
  std::memset(e.routine, ' ', 6);
  e.routine[0] = letter;
  const char* name = op_name(op);
  for (int i = 0; name[i] && i < 5; ++i)
    e.routine[i + 1] = char(std::toupper(static_cast<unsigned char>(name[i])));
  e.routine[6] = 0;
  // RowMajorStrg is 1 while a RowMajor cblas_ call runs; dnnl_sgemm never reaches XERBLA.
  e.row_major = node.api == Api::cblas && node.blas.layout == 'R';
  return e;
}

}  // namespace

ArgError check(const Node& node) noexcept {
  int level = detail::level(node.op);
  if (level != 2 && level != 3) return {};
  if (node.api == Api::cblas) {
    if (ArgError e = check_cblas(node); e.level != ArgError::none) return e;
  }
  // A column-major node is its own Fortran call: the row-major one is built only when needed
  // (building it, a copy of the arguments, cost a routed 8^3 SGEMM a tenth of its time).
  if (node.blas.layout != 'R') return fortran_error(node, node.op, node.blas);
  const detail::FortranCall fc = detail::fortran_call(node);
  return fortran_error(node, fc.op, fc.args);
}

namespace {
int64_t test_dim_limit() noexcept {
  static const int64_t limit = [] {
    const char* v = secure_getenv("SOL_TEST_DIM_LIMIT");
    return v && *v ? std::max<int64_t>(0, std::strtoll(v, nullptr, 10)) : 0;
  }();
  return limit;
}
}  // namespace

hal::Reason fits_backend(const Node& node, const hal::Backend& backend) noexcept {
  const int64_t test = test_dim_limit();
  if (SOL_LIKELY(!node.ilp64 && !test)) return hal::Reason::ok;  // an LP64 call fits every backend
  if (op_family(node.op)[0] != 'b') return hal::Reason::ok;
  const int64_t limit = test ? test : backend.wide_dims() ? INT64_MAX : INT32_MAX;
  const BlasArgs& b = node.blas;
  for (int64_t v : {b.m, b.n, b.k, b.kl, b.ku, b.lda, b.ldb, b.ldc, b.incx, b.incy})
    if (v > limit || v < -limit) return hal::Reason::dims_exceed_backend;
  return hal::Reason::ok;
}

}  // namespace sol::capture::blas
