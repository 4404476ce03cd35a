/* A C program that calls BLAS from its first instruction: SGEMM, then DGEMM, at n = 64, 256 and 1024,
 * NN, TN and NT, `seconds` per cell (default 0.2), one cell after another. auto measures each class
 * at its first call, while the process's thread pools are still starting (bench/auto_at_once.py).
 * Prints a line per cell: "<type> <trans> <n> <GFLOP/s over the cell's calls after its first> <calls>",
 * then "total <seconds>".
 *
 *   bench_at_once [seconds] [types: s, d or sd] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
            const int*, const double*, const int*, const double*, double*, const int*, size_t, size_t);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 0.2;
  const char* types = argc > 2 ? argv[2] : "sd";
  static const int sizes[] = {64, 256, 1024};
  static const char* trans[] = {"NN", "TN", "NT"};
  const int largest = 1024;
  const size_t bytes = (size_t)largest * largest * sizeof(double);
  char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes), *c = aligned_alloc(64, bytes);
  if (!a || !b || !c) return 1;
  for (size_t i = 0; i < bytes / sizeof(double); ++i)
    ((double*)a)[i] = (double)(i % 7) / 7, ((double*)b)[i] = (double)(i % 5) / 5, ((double*)c)[i] = 0;
  const float one = 1, zero = 0;
  const double done = 1, dzero = 0;
  const double start = now();
  for (const char* t = types; *t; ++t) {
    const int dbl = *t == 'd';
    for (int s = 0; s < 3; ++s)
      for (int r = 0; r < 3; ++r) {
        const int n = sizes[s];
        const char* tr = trans[r];
        const double until = now() + seconds;
        double from = 0;
        long calls = 0;
        do {
          if (dbl) dgemm_(&tr[0], &tr[1], &n, &n, &n, &done, (double*)a, &n, (double*)b, &n, &dzero, (double*)c, &n, 1, 1);
          else sgemm_(&tr[0], &tr[1], &n, &n, &n, &one, (float*)a, &n, (float*)b, &n, &zero, (float*)c, &n, 1, 1);
          if (++calls == 1) from = now();
        } while (now() < until);
        const double spent = now() - from;
        const double gflops = calls > 1 && spent > 0 ? 2.0 * n * n * n * (calls - 1) / spent * 1e-9 : 0;
        printf("%c %s %d %.2f %ld\n", *t, tr, n, gflops, calls);
      }
  }
  printf("total %.3f\n", now() - start);
  free(a), free(b), free(c);
  return 0;
}
