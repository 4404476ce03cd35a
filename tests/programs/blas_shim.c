// A BLAS under another name family, as Julia's libblastrampoline exports OpenBLAS (dgemm_64_,
// cblas_dgemm64_) and oneMKL its ILP64 interface (dgemm_64, cblas_dgemm_64): each name forwards
// to Debian's ILP64 OpenBLAS, loaded privately (RTLD_LOCAL), through a pointer. Built once per
// family: F_SUFFIX and C_SUFFIX spell the Fortran and C names (family_names.h).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "family_names.h"

static void* target(const char* name) {
  static void* lib;
  if (!lib) lib = dlopen("libopenblas64.so.0", RTLD_NOW | RTLD_LOCAL);
  void* fn = lib ? dlsym(lib, name) : NULL;
  if (!fn) {
    fprintf(stderr, "blas_shim: no %s in libopenblas64.so.0\n", name);
    abort();
  }
  return fn;
}

// FORWARD(return type, name, (parameters), (arguments)): the family's name of `name`.
#define FORWARD(R, name, NAME, params, args)  \
  R NAME params {                             \
    static R(*fn) params;                     \
    if (!fn) fn = (R(*) params)target(#name); \
    return fn args;                           \
  }

FORWARD(void, daxpy_, F(daxpy),
        (const I* n, const double* a, const double* x, const I* ix, double* y, const I* iy),
        (n, a, x, ix, y, iy))
FORWARD(double, ddot_, F(ddot), (const I* n, const double* x, const I* ix, const double* y, const I* iy),
        (n, x, ix, y, iy))
FORWARD(I, idamax_, F(idamax), (const I* n, const double* x, const I* ix), (n, x, ix))
FORWARD(void, dscal_, F(dscal), (const I* n, const double* a, double* x, const I* ix), (n, a, x, ix))
FORWARD(void, dgemm_, F(dgemm),
        (const char* ta, const char* tb, const I* m, const I* n, const I* k, const double* al,
         const double* a, const I* lda, const double* b, const I* ldb, const double* be, double* c,
         const I* ldc, size_t la, size_t lb),
        (ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, la, lb))
FORWARD(void, cblas_daxpy, C(cblas_daxpy), (I n, double a, const double* x, I ix, double* y, I iy),
        (n, a, x, ix, y, iy))
FORWARD(double, cblas_ddot, C(cblas_ddot), (I n, const double* x, I ix, const double* y, I iy),
        (n, x, ix, y, iy))
FORWARD(size_t, cblas_idamax, C(cblas_idamax), (I n, const double* x, I ix), (n, x, ix))
FORWARD(void, cblas_dscal, C(cblas_dscal), (I n, double a, double* x, I ix), (n, a, x, ix))
FORWARD(void, cblas_dgemm, C(cblas_dgemm),
        (int lo, int ta, int tb, I m, I n, I k, double al, const double* a, I lda, const double* b, I ldb,
         double be, double* c, I ldc),
        (lo, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc))
