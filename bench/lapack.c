/* One LAPACK factorization, timed: bench_lapack getrf|potrf N.
 *
 * Calls dgetrf_ (LU with partial pivoting of a general matrix) or dpotrf_ (Cholesky, lower, of a
 * symmetric positive definite one) of whatever liblapack.so.3 the loader gives; with Debian's
 * reference LAPACK the factorization is blocked (64 columns) and its work is BLAS calls (dgemm_,
 * dtrsm_, dsyrk_, idamax_, dswap_...) into libblas.so.3, which is what scripts/gpu/lapack_bench.sh
 * swaps: OpenBLAS, NVBLAS preloaded over it, or libsol.
 *
 * The matrices are built from a hash of (i, j), the same in every process: the general one has
 * entries uniform in [-1, 1); the SPD one is symmetric with those entries off the diagonal and N
 * on it (strictly diagonally dominant with a positive diagonal, hence positive definite).
 *
 * Checks here use no BLAS, so they hold whatever library is under test: b = A x for a known x,
 * the system solved with the factors by plain substitution, and the scaled backward error
 * ||A x' - b||_inf / (||A||_inf ||x'||_inf N eps), which LAPACK's own tests accept below 30. The
 * checksum (sum of |entries| of the factors) is for comparing the libraries' factors with each
 * other: equal pivots and rounding-level differences give equal checksums to about 1e-12.
 *
 * Before the timed call, one 256x256x256 dgemm_ (timed on its own as "first"): the library's
 * start-up (a GPU context, cuBLAS's handle) is not the factorization's.
 *
 * Prints one line:
 *   lapack getrf n=N seconds=S gflops=G residual=R checksum=C first=F lapack=PATH dgemm=PATH
 * and exits 1 when the factorization reports an error or the residual is not below 30. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*, const int*,
            const double*, const int*, const double*, double*, const int*, size_t, size_t);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Uniform in [-1, 1) from (i, j): splitmix64's finaliser over the pair. */
static double entry(uint64_t i, uint64_t j) {
  uint64_t z = (i << 32 | j) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* The file the loader took `fn` from, for the report. */
static const char* origin(void* fn) {
  Dl_info info;
  return dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "?";
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "getrf") != 0 && strcmp(argv[1], "potrf") != 0) || atoi(argv[2]) <= 0) {
    fprintf(stderr, "usage: bench_lapack getrf|potrf N\n");
    return 2;
  }
  const int lu = strcmp(argv[1], "getrf") == 0, n = atoi(argv[2]);
  const size_t nn = (size_t)n * n;
  double *a = malloc(nn * sizeof(double)), *a0 = malloc(nn * sizeof(double));
  double *x = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)), *r = malloc(n * sizeof(double));
  int* ipiv = malloc(n * sizeof(int));
  if (!a || !a0 || !x || !b || !r || !ipiv) {
    fprintf(stderr, "bench_lapack: out of memory for n=%d\n", n);
    return 1;
  }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      double v;
      if (lu)
        v = entry(i, j);
      else
        v = i == j ? n : entry(i < j ? i : j, i < j ? j : i);
      a[i + (size_t)j * n] = a0[i + (size_t)j * n] = v;
    }

  /* The library's start-up, outside the timed call. */
  const int w = 256;
  double *wa = calloc((size_t)w * w, sizeof(double)), *wc = calloc((size_t)w * w, sizeof(double));
  const double one = 1, zero = 0;
  double t0 = now();
  dgemm_("N", "N", &w, &w, &w, &one, wa, &w, wa, &w, &zero, wc, &w, 1, 1);
  const double first = now() - t0;
  free(wa);
  free(wc);

  int info = 0;
  t0 = now();
  if (lu)
    dgetrf_(&n, &n, a, &n, ipiv, &info);
  else
    dpotrf_("L", &n, a, &n, &info, 1);
  const double seconds = now() - t0;
  if (info != 0) {
    fprintf(stderr, "bench_lapack: d%s returned info=%d\n", argv[1], info);
    return 1;
  }

  /* b = A0 x, column by column (unit stride through A0). */
  for (int i = 0; i < n; ++i) x[i] = entry(n + 1, i), b[i] = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) b[i] += a0[i + (size_t)j * n] * x[j];
  /* Solve with the factors into r: getrf: P A = L U (unit L); potrf: A = L L^T, lower triangle. */
  memcpy(r, b, n * sizeof(double));
  if (lu)
    for (int i = 0; i < n; ++i) {
      const int p = ipiv[i] - 1;
      const double t = r[i];
      r[i] = r[p], r[p] = t;
    }
  for (int j = 0; j < n; ++j) { /* forward: L y = r, by columns */
    const double* col = a + (size_t)j * n;
    if (!lu) r[j] /= col[j];
    for (int i = j + 1; i < n; ++i) r[i] -= col[i] * r[j];
  }
  if (lu)
    for (int j = n - 1; j >= 0; --j) { /* back: U x = y, by columns */
      const double* col = a + (size_t)j * n;
      r[j] /= col[j];
      for (int i = 0; i < j; ++i) r[i] -= col[i] * r[j];
    }
  else
    for (int i = n - 1; i >= 0; --i) { /* back: L^T x = y: row i of L^T is column i of L */
      const double* col = a + (size_t)i * n;
      double s = r[i];
      for (int k = i + 1; k < n; ++k) s -= col[k] * r[k];
      r[i] = s / col[i];
    }
  /* Backward error of r: ||A0 r - b|| / (||A0|| ||r|| n eps), infinity norms. */
  double *ar = calloc(n, sizeof(double)), *rowsum = calloc(n, sizeof(double));
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      const double v = a0[i + (size_t)j * n];
      ar[i] += v * r[j];
      rowsum[i] += fabs(v);
    }
  double resid = 0, anorm = 0, xnorm = 0;
  for (int i = 0; i < n; ++i) {
    resid = fmax(resid, fabs(ar[i] - b[i]));
    anorm = fmax(anorm, rowsum[i]);
    xnorm = fmax(xnorm, fabs(r[i]));
  }
  const double scaled = resid / (anorm * xnorm * n * DBL_EPSILON);
  double checksum = 0;
  for (int j = 0; j < n; ++j)
    for (int i = lu ? 0 : j; i < n; ++i) checksum += fabs(a[i + (size_t)j * n]);

  const double flops = lu ? 2.0 / 3.0 * n * (double)n * n : 1.0 / 3.0 * n * (double)n * n;
  printf("lapack %s n=%d seconds=%.4f gflops=%.1f residual=%.3g checksum=%.15e first=%.4f lapack=%s dgemm=%s\n",
         argv[1], n, seconds, flops / seconds * 1e-9, scaled, checksum, first,
         origin(lu ? (void*)dgetrf_ : (void*)dpotrf_), origin((void*)dgemm_));
  if (!(scaled < 30)) {
    fprintf(stderr, "bench_lapack: residual %.3g is not below 30\n", scaled);
    return 1;
  }
  return 0;
}
