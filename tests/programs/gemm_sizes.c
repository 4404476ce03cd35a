/* One GEMM call per spec on the command line, in order, each printing its result's digest: API
 * (F Fortran, C CBLAS column-major, R CBLAS row-major), type (s d c z) and n, square, NN, alpha 1,
 * beta 0: "Fs22 Cz14 Rd21". Sizes about the smallest that auto routes (20 kFLOP: a 22^3 real GEMM,
 * 14^3 complex) tell where each call of a run went, against runs without libsol and on a backend
 * named directly.
 *
 *   gemm_sizes SPEC... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FORTRAN(t, T) \
  void t##gemm_(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*, \
                const T*, const int*, const T*, T*, const int*, size_t, size_t);
FORTRAN(s, float)
FORTRAN(d, double)
FORTRAN(c, float)
FORTRAN(z, double)
/* CBLAS's, with its enums as the ints they are (101 row-major, 102 column-major; 111 no transpose). */
void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
void cblas_dgemm(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*,
                 int);
void cblas_cgemm(int, int, int, int, int, int, const void*, const void*, int, const void*, int, const void*,
                 void*, int);
void cblas_zgemm(int, int, int, int, int, int, const void*, const void*, int, const void*, int, const void*,
                 void*, int);

static uint64_t digest(const void* p, size_t bytes) {
  const unsigned char* c = (const unsigned char*)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  for (int arg = 1; arg < argc; ++arg) {
    const char api = argv[arg][0], type = argv[arg][1];
    const int n = atoi(argv[arg] + 2);
    const int real = type == 's' || type == 'd', wide = type == 'd' || type == 'z';
    const size_t elems = (size_t)n * n * (real ? 1 : 2), bytes = elems * (wide ? 8 : 4);
    void *a = malloc(bytes), *b = malloc(bytes), *c = calloc(1, bytes);
    if (!a || !b || !c || n <= 0) return 1;
    for (size_t i = 0; i < elems; ++i) {
      const double x = (double)((i * 7 + 3) % 13) / 13 - 0.5, y = (double)((i * 5 + 1) % 11) / 11 - 0.25;
      if (wide) ((double*)a)[i] = x, ((double*)b)[i] = y;
      else ((float*)a)[i] = (float)x, ((float*)b)[i] = (float)y;
    }
    const float one_f[2] = {1, 0}, zero_f[2] = {0, 0};
    const double one_d[2] = {1, 0}, zero_d[2] = {0, 0};
    const void* one = wide ? (const void*)one_d : (const void*)one_f;
    const void* zero = wide ? (const void*)zero_d : (const void*)zero_f;
    if (api == 'F') {
      switch (type) {
        case 's': sgemm_("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n, 1, 1); break;
        case 'd': dgemm_("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n, 1, 1); break;
        case 'c': cgemm_("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n, 1, 1); break;
        case 'z': zgemm_("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n, 1, 1); break;
        default: return 1;
      }
    } else {
      const int layout = api == 'R' ? 101 : 102;
      switch (type) {
        case 's': cblas_sgemm(layout, 111, 111, n, n, n, 1, a, n, b, n, 0, c, n); break;
        case 'd': cblas_dgemm(layout, 111, 111, n, n, n, 1, a, n, b, n, 0, c, n); break;
        case 'c': cblas_cgemm(layout, 111, 111, n, n, n, one, a, n, b, n, zero, c, n); break;
        case 'z': cblas_zgemm(layout, 111, 111, n, n, n, one, a, n, b, n, zero, c, n); break;
        default: return 1;
      }
    }
    printf("%s digest %016llx\n", argv[arg], (unsigned long long)digest(c, bytes));
    free(a), free(b), free(c);
  }
  return 0;
}
