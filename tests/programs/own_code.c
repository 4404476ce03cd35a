// A program that multiplies matrices with its own code, and one whose library does it with a BLAS
// of its own (static_blas_user.c) when built with OWN_BLAS_LIBRARY.
#include <stdio.h>

#ifdef OWN_BLAS_LIBRARY
double own_blas_product(int n);
#else
static double own_blas_product(int n) {
  const double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  double c[4] = {0};
  for (int j = 0; j < 2; ++j)
    for (int k = 0; k < 2; ++k)
      for (int i = 0; i < 2; ++i) c[i + 2 * j] += a[i + 2 * k] * b[k + 2 * j];
  return c[0] + c[3] * n;
}
#endif

int main(void) {
  printf("%g\n", own_blas_product(3));
  return 0;
}
