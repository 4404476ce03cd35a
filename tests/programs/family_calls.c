// BLAS calls through a suffixed name family (family_names.h), with 64-bit integers, as Julia makes
// them through libblastrampoline: negative increments, an INTEGER result, GEMMs large enough for
// auto to measure, and with "big" a call whose N does not fit 32 bits (a quick return). Prints
// what the calls computed.
#include <stdio.h>
#include <string.h>

#include "family_names.h"

void F(daxpy)(const I* n, const double* a, const double* x, const I* ix, double* y, const I* iy);
double F(ddot)(const I* n, const double* x, const I* ix, const double* y, const I* iy);
I F(idamax)(const I* n, const double* x, const I* ix);
void F(dscal)(const I* n, const double* a, double* x, const I* ix);
void F(dgemm)(const char* ta, const char* tb, const I* m, const I* n, const I* k, const double* al,
              const double* a, const I* lda, const double* b, const I* ldb, const double* be, double* c,
              const I* ldc, size_t, size_t);
void C(cblas_daxpy)(I n, double a, const double* x, I ix, double* y, I iy);
double C(cblas_ddot)(I n, const double* x, I ix, const double* y, I iy);
size_t C(cblas_idamax)(I n, const double* x, I ix);
void C(cblas_dscal)(I n, double a, double* x, I ix);
void C(cblas_dgemm)(int lo, int ta, int tb, I m, I n, I k, double al, const double* a, I lda, const double* b,
                    I ldb, double be, double* c, I ldc);

static double digest(const double* v, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += v[i] * (i % 13 + 1);
  return s;
}

int main(int argc, char** argv) {
  double x[8], y[8];
  for (int i = 0; i < 8; ++i) x[i] = i + 1, y[i] = 10 * (i + 1);
  const I n = 5, minus1 = -1, one = 1;
  const double three = 3;
  F(daxpy)(&n, &three, x, &minus1, y, &one);
  C(cblas_daxpy)(n, 2.0, x, -1, y, 1);
  printf("axpy %.17g\n", digest(y, 8));
  printf("dot %.17g %.17g\n", F(ddot)(&n, x, &minus1, y, &one), C(cblas_ddot)(3, x, 2, y, -2));
  printf("iamax %lld %zu\n", (long long)F(idamax)(&n, x, &one), C(cblas_idamax)(n, y, 1));
  enum { N = 96 };
  static double a[N * N], b[N * N], c[N * N];
  for (int i = 0; i < N * N; ++i) a[i] = (i % 7) - 3, b[i] = (i % 5) - 2, c[i] = 1;
  const I m = N;
  const double alpha = 1, beta = 0.5;
  for (int r = 0; r < 3; ++r) {
    F(dgemm)("N", "T", &m, &m, &m, &alpha, a, &m, b, &m, &beta, c, &m, 1, 1);
    C(cblas_dgemm)(101, 111, 112, N - 1, N, N, 1.0, a, N, b, N, 0.5, c, N);
  }
  printf("gemm %.17g\n", digest(c, N * N));
  if (argc > 1 && strcmp(argv[1], "big") == 0) {
    const I big = ((I)1 << 32) + 1, zero = 0;
    F(dscal)(&big, &three, x, &zero);
    C(cblas_dscal)(big, 3.0, x, 0);
    printf("big %.17g\n", digest(x, 8));
  }
  return 0;
}
