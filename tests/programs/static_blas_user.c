// A library that carries a BLAS of its own (OpenBLAS, linked statically) and calls it directly:
// linked with -Bsymbolic, its call to dgemm_ binds inside it, as pip's libtorch_cpu.so does with
// its MKL. No preload can see that call.
#include <stddef.h>

void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
            const int*, const double*, const int*, const double*, double*, const int*, size_t, size_t);

double own_blas_product(int n) {
  double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {0};
  const int two = 2;
  const double one = 1, zero = 0;
  dgemm_("N", "N", &two, &two, &two, &one, a, &two, b, &two, &zero, c, &two, 1, 1);
  return c[0] + c[3] * n;
}
