/* CBLAS calls with invalid enums and dimensions: `cblas_errors N` makes call N (0 to 10) after a
 * valid one. The reference CBLAS reports an error through cblas_xerbla, which prints the routine,
 * the parameter number and the invalid value to stderr and exits with status 255. Run with and
 * without libsol, the output and the status must be the same. */
#include <stdio.h>
#include <stdlib.h>

/* cblas.h's enums as plain ints: the calls pass values no enum names. */
void cblas_sgemm(int layout, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void cblas_dtrsm(int layout, int side, int uplo, int ta, int diag, int m, int n, double alpha, const double* a,
                 int lda, double* b, int ldb);
void cblas_stbmv(int layout, int uplo, int ta, int diag, int n, int k, const float* a, int lda, float* x,
                 int incx);
void cblas_zherk(int layout, int uplo, int trans, int n, int k, double alpha, const void* a, int lda,
                 double beta, void* c, int ldc);
void cblas_dgemv(int layout, int ta, int m, int n, double alpha, const double* a, int lda, const double* x,
                 int incx, double beta, double* y, int incy);

enum { Row = 101, Col = 102, NoTrans = 111, Trans = 112, Upper = 121, Lower = 122, NonUnit = 131, Left = 141 };

int main(int argc, char** argv) {
  const int which = argc > 1 ? atoi(argv[1]) : -1;
  float a[16] = {1, 2, 3, 4}, b[16] = {1, 1, 1, 1}, c[16] = {0};
  double da[16] = {1, 0, 0, 1}, db[16] = {1, 2, 3, 4}, dx[4] = {1, 1}, dy[4] = {0};
  double za[32] = {1}, zc[32] = {0};
  float x[4] = {1, 2};

  /* A valid call first: its result is printed before the error. */
  cblas_sgemm(Col, NoTrans, NoTrans, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2);
  printf("c = %g %g %g %g\n", c[0], c[1], c[2], c[3]);
  fflush(stdout);
  switch (which) {
    case 0: /* bad TransA */
      cblas_sgemm(Col, 77, NoTrans, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2);
      break;
    case 1: /* bad TransB, row-major */
      cblas_sgemm(Row, NoTrans, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2);
      break;
    case 2: /* bad layout */
      cblas_sgemm(99, NoTrans, NoTrans, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2);
      break;
    case 3: /* lda < m */
      cblas_sgemm(Col, NoTrans, NoTrans, 2, 2, 2, 1, a, 1, b, 2, 0, c, 2);
      break;
    case 4: /* bad Side */
      cblas_dtrsm(Col, 140, Upper, NoTrans, NonUnit, 2, 2, 1, da, 2, db, 2);
      break;
    case 5: /* bad Diag, row-major */
      cblas_dtrsm(Row, Left, Upper, NoTrans, 1234, 2, 2, 1, da, 2, db, 2);
      break;
    case 6: /* reported as Uplo */
      cblas_stbmv(Row, Lower, NoTrans, -5, 2, 1, a, 2, x, 1);
      break;
    case 7: /* bad Uplo */
      cblas_stbmv(Col, 0, NoTrans, NonUnit, 2, 1, a, 2, x, 1);
      break;
    case 8: /* Trans for herk */
      cblas_zherk(Col, Upper, Trans, 2, 2, 1, za, 2, 0, zc, 2);
      break;
    case 9: /* bad Trans */
      cblas_dgemv(Row, -1, 2, 2, 1, da, 2, dx, 1, 0, dy, 1);
      break;
    case 10: /* incx = 0 */
      cblas_dgemv(Col, NoTrans, 2, 2, 1, da, 2, dx, 0, 0, dy, 1);
      break;
    default: return 2;
  }
  return 0;  /* not reached for an invalid call: cblas_xerbla exits */
}
