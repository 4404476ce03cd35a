/* An independent call counter for the trace tests: a minimal preload library, sharing no code with
 * SOL, that counts calls of a few symbols and forwards them. At exit it prints one line per
 * symbol to the file named by COUNT_CALLS_OUT:  <symbol> <calls>
 *
 * The native definitions are found by name in the libraries that define them (opened with
 * RTLD_NOLOAD), since PyTorch and NumPy load them privately where RTLD_NEXT does not look. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long n_sgemm, n_dgemm, n_execute, n_cblas_sgemm, n_cblas_dgemm, n_cblas_zgemm, n_cblas_sgemv;

static void* find(const char* name) {
  static const char* libs[] = {"libblas.so.3", "libdnnl.so.2", "libcblas.so.3", "libopenblas.so.0"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; ++i) {
    void* h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
    void* p = h ? dlsym(h, name) : NULL;
    if (p) return p;
  }
  fprintf(stderr, "count_calls: %s not found\n", name);
  abort();
}

#define FORWARD(ret, name, counter, params, args) \
  ret name params {                               \
    static ret(*fn) params;                       \
    if (!fn) fn = (ret(*) params)find(#name);     \
    atomic_fetch_add(&counter, 1);                \
    return fn args;                               \
  }

typedef const char cc;
FORWARD(void, sgemm_, n_sgemm,
        (cc * ta, cc* tb, const int* m, const int* n, const int* k, const float* al, const float* a,
         const int* lda, const float* b, const int* ldb, const float* be, float* c, const int* ldc, size_t l1,
         size_t l2),
        (ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, l1, l2))
FORWARD(void, dgemm_, n_dgemm,
        (cc * ta, cc* tb, const int* m, const int* n, const int* k, const double* al, const double* a,
         const int* lda, const double* b, const int* ldb, const double* be, double* c, const int* ldc,
         size_t l1, size_t l2),
        (ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, l1, l2))
FORWARD(int, dnnl_primitive_execute, n_execute, (const void* p, void* s, int n, const void* args),
        (p, s, n, args))
FORWARD(void, cblas_sgemm, n_cblas_sgemm,
        (int o, int ta, int tb, int m, int n, int k, float al, const float* a, int lda, const float* b,
         int ldb, float be, float* c, int ldc),
        (o, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc))
FORWARD(void, cblas_dgemm, n_cblas_dgemm,
        (int o, int ta, int tb, int m, int n, int k, double al, const double* a, int lda, const double* b,
         int ldb, double be, double* c, int ldc),
        (o, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc))
FORWARD(void, cblas_zgemm, n_cblas_zgemm,
        (int o, int ta, int tb, int m, int n, int k, const void* al, const void* a, int lda, const void* b,
         int ldb, const void* be, void* c, int ldc),
        (o, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc))
FORWARD(void, cblas_sgemv, n_cblas_sgemv,
        (int o, int ta, int m, int n, float al, const float* a, int lda, const float* x, int incx, float be,
         float* y, int incy),
        (o, ta, m, n, al, a, lda, x, incx, be, y, incy))

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("COUNT_CALLS_OUT");
  FILE* f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  fprintf(f,
          "sgemm_ %ld\ndgemm_ %ld\ndnnl_primitive_execute %ld\ncblas_sgemm %ld\ncblas_dgemm %ld\n"
          "cblas_zgemm %ld\ncblas_sgemv %ld\n",
          (long)n_sgemm, (long)n_dgemm, (long)n_execute, (long)n_cblas_sgemm, (long)n_cblas_dgemm,
          (long)n_cblas_zgemm, (long)n_cblas_sgemv);
  fclose(f);
}
