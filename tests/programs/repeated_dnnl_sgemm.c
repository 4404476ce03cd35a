/* repeated_gemm through oneDNN's own GEMM: dnnl_sgemm (row-major), one class called over and over,
 * as a program that calls oneDNN's BLAS-like API does. Prints the last result's digest and the
 * number of calls.
 *
 *   repeated_dnnl_sgemm n seconds */
#include <dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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
  long calls = 0;
  const double until = now() + seconds;
  do {
    if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) != dnnl_success) return 1;
    ++calls;
  } while (now() < until);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < elems * 4; ++i) h = (h ^ ((const unsigned char*)c)[i]) * 1099511628211ull;
  printf("digest %016llx after %ld calls\n", (unsigned long long)h, calls);
  free(a), free(b), free(c);
  return 0;
}
