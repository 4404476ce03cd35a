/* Linked against libsol.so alone: no BLAS library is loaded, so nothing natively defines sgemm_ or
 * cblas_dgemm; SOL's backends must serve them.
 *   no_native          prints C = A*B for 2x2 matrices through the Fortran and the CBLAS interface
 *   no_native invalid  calls sgemm_ with m = -1: the reference XERBLA behaviour is expected */
#include <stdio.h>
#include <string.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
void cblas_dgemm(int layout, int ta, int tb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double beta, double* c, int ldc);

int main(int argc, char** argv) {
  const int n = 2, bad = -1;
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, one = 1, zero = 0;
  float c[4] = {0};
  if (argc > 1 && strcmp(argv[1], "invalid") == 0) {
    sgemm_("N", "N", &bad, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
    printf("returned\n");
    return 0;
  }
  sgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
  printf("sgemm %g %g %g %g\n", c[0], c[1], c[2], c[3]);
  const double da[4] = {1, 2, 3, 4}, db[4] = {5, 6, 7, 8};
  double dc[4] = {0};
  cblas_dgemm(101 /* CblasRowMajor */, 111, 111, 2, 2, 2, 1.0, da, 2, db, 2, 0.0, dc, 2);
  printf("cblas_dgemm %g %g %g %g\n", dc[0], dc[1], dc[2], dc[3]);
  return 0;
}
