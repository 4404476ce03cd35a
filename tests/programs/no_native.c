/* Linked against libsol.so alone: no BLAS library is loaded, so sgemm_ has no native definition.
 * Prints C = A*B for 2x2 matrices. */
#include <stdio.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);

int main(void) {
  const int n = 2;
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, one = 1, zero = 0;
  float c[4] = {0};
  sgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
  printf("%g %g %g %g\n", c[0], c[1], c[2], c[3]);
  return 0;
}
