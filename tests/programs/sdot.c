/* A small BLAS client for configuration tests: prints one dot product. */
#include <stdio.h>

float sdot_(const int*, const float*, const int*, const float*, const int*);

int main(void) {
  const int n = 3, inc = 1;
  const float x[3] = {1, 2, 3}, y[3] = {4, 5, 6};
  printf("sdot=%g\n", sdot_(&n, x, &inc, y, &inc));
  return 0;
}
