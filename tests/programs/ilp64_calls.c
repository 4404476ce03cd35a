// BLAS calls with 64-bit integers through the plain names (dgemm_, cblas_dgemm), as a program
// linked to Debian's libblas64.so.3 or openblas64 makes them: negative increments, every level,
// functions returning an INTEGER, GEMMs large enough for auto to measure, and with "big" a call
// whose N does not fit 32 bits (a quick return: INCX is 0). Prints what the calls computed.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int64_t I;  // INTEGER, CBLAS_INT

// The ILP64 prototypes (cblas64-netlib.h and the Fortran interface compiled -fdefault-integer-8).
void daxpy_(const I* n, const double* alpha, const double* x, const I* incx, double* y, const I* incy);
double ddot_(const I* n, const double* x, const I* incx, const double* y, const I* incy);
I idamax_(const I* n, const double* x, const I* incx);
void dscal_(const I* n, const double* alpha, double* x, const I* incx);
void dgemv_(const char* trans, const I* m, const I* n, const double* alpha, const double* a, const I* lda,
            const double* x, const I* incx, const double* beta, double* y, const I* incy, size_t);
void dgemm_(const char* ta, const char* tb, const I* m, const I* n, const I* k, const double* alpha,
            const double* a, const I* lda, const double* b, const I* ldb, const double* beta, double* c,
            const I* ldc, size_t, size_t);
void sgemm_(const char* ta, const char* tb, const I* m, const I* n, const I* k, const float* alpha,
            const float* a, const I* lda, const float* b, const I* ldb, const float* beta, float* c,
            const I* ldc, size_t, size_t);
void cblas_daxpy(I n, double alpha, const double* x, I incx, double* y, I incy);
double cblas_ddot(I n, const double* x, I incx, const double* y, I incy);
size_t cblas_idamax(I n, const double* x, I incx);
void cblas_dscal(I n, double alpha, double* x, I incx);
void cblas_dgemv(int layout, int trans, I m, I n, double alpha, const double* a, I lda, const double* x,
                 I incx, double beta, double* y, I incy);
void cblas_dgemm(int layout, int ta, int tb, I m, I n, I k, double alpha, const double* a, I lda,
                 const double* b, I ldb, double beta, double* c, I ldc);
void cblas_zdotc_sub(I n, const void* x, I incx, const void* y, I incy, void* dotc);
enum { RowMajor = 101, ColMajor = 102, NoTrans = 111, Trans = 112 };

static double digest(const double* v, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += v[i] * (i % 13 + 1);
  return s;
}

int main(int argc, char** argv) {
  double x[8], y[8];
  for (int i = 0; i < 8; ++i) x[i] = i + 1, y[i] = 10 * (i + 1);
  const I n = 5, minus1 = -1, one = 1, two = 2, minus2 = -2;
  const double three = 3;
  daxpy_(&n, &three, x, &minus1, y, &one);
  cblas_daxpy(n, 2.0, x, -1, y, 1);
  printf("axpy %.17g\n", digest(y, 8));
  printf("dot %.17g %.17g\n", ddot_(&n, x, &minus1, y, &two), cblas_ddot(3, x, 2, y, -2));
  printf("iamax %lld %zu\n", (long long)idamax_(&n, x, &one), cblas_idamax(n, y, 1));
  dscal_(&n, &three, y, &minus2 /* INCX < 0: a quick return */);
  cblas_dscal(4, 0.5, y, 2);
  printf("scal %.17g\n", digest(y, 8));

  enum { N = 96 };
  static double a[N * N], b[N * N], c[N * N], v[N], w[N];
  static float fa[N * N], fb[N * N], fc[N * N];
  for (int i = 0; i < N * N; ++i) {
    a[i] = fa[i] = (float)(i % 7) - 3;
    b[i] = fb[i] = (float)(i % 5) - 2;
    c[i] = fc[i] = 1;
  }
  for (int i = 0; i < N; ++i) v[i] = i % 3, w[i] = 1;
  const I m = N, ld = N;
  const double alpha = 1, beta = 0.5;
  const float falpha = 1, fbeta = 0.5f;
  for (int r = 0; r < 3; ++r) {
    dgemm_("N", "T", &m, &m, &m, &alpha, a, &ld, b, &ld, &beta, c, &ld, 1, 1);
    cblas_dgemm(ColMajor, Trans, NoTrans, N, N, N, 1.0, a, N, b, N, 0.5, c, N);
    cblas_dgemm(RowMajor, NoTrans, NoTrans, N - 1, N - 2, N, 1.0, a, N, b, N, 0.5, c, N);
    sgemm_("T", "N", &m, &m, &m, &falpha, fa, &ld, fb, &ld, &fbeta, fc, &ld, 1, 1);
  }
  double fsum = 0;
  for (int i = 0; i < N * N; ++i) fsum += fc[i] * (i % 11);
  printf("gemm %.17g %.17g\n", digest(c, N * N), fsum);
  dgemv_("T", &m, &m, &alpha, a, &ld, v, &one, &beta, w, &minus1, 1);
  cblas_dgemv(RowMajor, NoTrans, N, N, 1.0, a, N, v, -1, 0.5, w, 1);
  printf("gemv %.17g\n", digest(w, N));
  double zx[4] = {1, 2, 3, 4}, zy[4] = {5, -6, 7, 8}, zd[2];
  cblas_zdotc_sub(2, zx, -1, zy, 1, zd);
  printf("zdotc %.17g %.17g\n", zd[0], zd[1]);

  if (argc > 1 && strcmp(argv[1], "big") == 0) {
    // N beyond 32 bits, INCX 0: every BLAS returns at once; a backend with 32-bit integers must
    // not see N (its low half is 1).
    const I big = ((I)1 << 32) + 1, zero = 0;
    dscal_(&big, &three, x, &zero);
    cblas_dscal(big, 3.0, x, 0);
    printf("big %.17g\n", digest(x, 8));
  }
  return 0;
}
