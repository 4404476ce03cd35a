// Invalid calls on the backend path, reported as the reference BLAS and CBLAS report them:
// through the program's own xerbla_ / cblas_xerbla, which the program may override (the BLAS
// test programs do, to check error exits), with the reference's routine name and parameter number.
#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "capture/blas/blas.hpp"
#include "common/native.hpp"

namespace sol::capture::blas {
namespace {

// INFO is the call's INTEGER (32 or 64 bits, Node::ilp64): by address in XERBLA; by value in
// cblas_xerbla, where the whole register holds it for either width.
using XerblaFn = void (*)(const char* srname, const void* info, size_t len);
using CblasXerblaFn = void (*)(int64_t info, const char* routine, const char* form, ...);

// The program's own definition: the global scope's (an executable that overrides xerbla_, or the
// BLAS it links), else the one in the library that defines the call's native symbol (a BLAS a
// framework loaded privately). Never one in a library SOL loaded for a backend, nor libsol's.
void* program_symbol(const char* name, const Node& node) noexcept {
  void* p = dlsym(RTLD_DEFAULT, name);
  if (p && !in_libsol(p)) return p;
  if (!node.native) return nullptr;
  Dl_info info{};
  if (!dladdr(node.native, &info) || !info.dli_fname) return nullptr;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return nullptr;
  p = dlsym(lib, name);
  dlclose(lib);
  return p && !in_libsol(p) ? p : nullptr;
}

// What the reference XERBLA does when no library provides one (a program linked against libsol
// alone): print the Fortran message and STOP, which ends the program with status 0.
[[noreturn]] void reference_xerbla(const char* srname, int info) {
  size_t n = std::strlen(srname);
  while (n > 0 && srname[n - 1] == ' ') --n;
  std::printf(" ** On entry to %.*s parameter number %2d had an illegal value\n", static_cast<int>(n), srname,
              info);
  std::fflush(stdout);
  std::exit(0);
}

// The reference cblas_xerbla: a message on stderr, then exit(-1).
[[noreturn]] void reference_cblas_xerbla(int info, const char* routine, const char* form, int value) {
  if (info) std::fprintf(stderr, "Parameter %d to routine %s was incorrect\n", info, routine);
  if (form && *form) std::fprintf(stderr, form, value);
  std::fflush(stderr);
  std::exit(-1);
}

}  // namespace

void report_invalid(const Node& node, const ArgError& e) noexcept {
  // The reference CBLAS keeps two globals while a call runs; the test programs' error handlers
  // read RowMajorStrg to renumber parameters of row-major calls.
  int* row_major = nullptr;
  int* from_c = nullptr;
  if (node.api == Api::cblas) {
    row_major = static_cast<int*>(program_symbol("RowMajorStrg", node));
    from_c = static_cast<int*>(program_symbol("CBLAS_CallFromC", node));
    if (row_major) *row_major = e.row_major ? 1 : 0;
    if (from_c) *from_c = 1;
  }
  // The error handlers as the call's name family spells them (scipy_xerbla_64_...).
  const Family family = symbol_family(node.sym);
  if (e.level == blas::ArgError::cblas) {
    const std::string name = family_c_name(family, "cblas_xerbla");
    auto fn = reinterpret_cast<CblasXerblaFn>(program_symbol(name.c_str(), node));
    if (fn)
      fn(e.info, e.routine, e.message, e.bad_value);
    else
      reference_cblas_xerbla(e.info, e.routine, e.message, e.bad_value);
  } else {
    const std::string name = family_fortran_name(family, "xerbla");
    auto fn = reinterpret_cast<XerblaFn>(program_symbol(name.c_str(), node));
    const int info = e.info;
    const int64_t info64 = e.info;
    if (fn)
      fn(e.routine, node.ilp64 ? static_cast<const void*>(&info64) : &info, std::strlen(e.routine));
    else
      reference_xerbla(e.routine, info);
  }
  if (row_major) *row_major = 0;
  if (from_c) *from_c = 0;
}

}  // namespace sol::capture::blas
