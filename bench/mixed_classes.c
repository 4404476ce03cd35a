/* A C program whose first BLAS class is small and whose second is large, alternating:
 * mixed_classes STEPS. Prints "<microseconds per step>". Auto measures the small class first,
 * alone, and may send it to a library whose threads then fight the large class's for the cores at
 * every switch, unless the large class's choice sends it back (bench/auto_mlp.py). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 300;
  const size_t elems = (size_t)1 << 20;
  float *a = calloc(elems, 4), *b = calloc(elems, 4), *c = calloc(elems, 4);
  float *A = calloc(elems, 4), *B = calloc(elems, 4), *C = calloc(elems, 4);
  const float one = 1, zero = 0;
  const int m = 1024, n = 10, k = 256, M = 1024, N = 256, K = 1024;
  const double t0 = now();
  for (int i = 0; i < steps; ++i) {
    sgemm_("N", "T", &m, &n, &k, &one, a, &m, b, &n, &zero, c, &m, 1, 1);
    sgemm_("N", "N", &M, &N, &K, &one, A, &M, B, &K, &zero, C, &M, 1, 1);
  }
  printf("%.1f\n", (now() - t0) / steps * 1e6);
  return 0;
}
