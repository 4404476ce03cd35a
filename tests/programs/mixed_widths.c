// Linked to an LP64 libblas.so.3 first and an ILP64 libblas64.so.3 second: both define the plain
// names, and its calls (32-bit integers) bind to the first. Under libsol they must pass through
// untouched.
#include <stdio.h>

void daxpy_(const int* n, const double* alpha, const double* x, const int* incx, double* y, const int* incy);
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc, size_t, size_t);

int main(void) {
  double x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
  const int n = 4, minus1 = -1, one = 1;
  const double two = 2;
  daxpy_(&n, &two, x, &minus1, y, &one);
  enum { N = 64 };
  static double a[N * N], b[N * N], c[N * N];
  for (int i = 0; i < N * N; ++i) a[i] = i % 5, b[i] = i % 3, c[i] = 0;
  const int m = N;
  const double alpha = 1, beta = 0;
  dgemm_("N", "N", &m, &m, &m, &alpha, a, &m, b, &m, &beta, c, &m, 1, 1);
  double s = 0;
  for (int i = 0; i < N * N; ++i) s += c[i] * (i % 7);
  printf("%g %g %g %g %.17g\n", y[0], y[1], y[2], y[3], s);
  return 0;
}
