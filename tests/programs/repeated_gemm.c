/* One GEMM class called over and over, as a program whose work is one shape is: long enough for
 * auto to try a candidate in use after measuring it. Prints the last result's digest and the
 * number of calls. Built twice: with the Fortran BLAS's sgemm_, and as repeated_dnnl_sgemm
 * (SOL_DNNL_SGEMM) with oneDNN's dnnl_sgemm, row-major, as a program calling oneDNN's GEMM does.
 *
 *   repeated_gemm n seconds */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef SOL_DNNL_SGEMM
#include <dnnl.h>
#else
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int n = atoi(argv[1]);
  const double seconds = atof(argv[2]);
  const size_t elems = (size_t)n * n;
  float *a = malloc(elems * 4), *b = malloc(elems * 4), *c = malloc(elems * 4);
  for (size_t i = 0; i < elems; ++i) a[i] = (float)(i % 7) / 7, b[i] = (float)(i % 5) / 5, c[i] = 0;
  const float one = 1, zero = 0;
  long calls = 0;
  const double until = now() + seconds;
  do {
#ifdef SOL_DNNL_SGEMM
    if (dnnl_sgemm('N', 'N', n, n, n, one, a, n, b, n, zero, c, n) != dnnl_success) return 1;
#else
    sgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
#endif
    ++calls;
  } while (now() < until);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < elems * 4; ++i) h = (h ^ ((const unsigned char*)c)[i]) * 1099511628211ull;
  printf("digest %016llx after %ld calls\n", (unsigned long long)h, calls);
  free(a), free(b), free(c);
  return 0;
}
