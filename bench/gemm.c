/* Times one GEMM size: bench_gemm s|d N [seconds] [NN|TN|NT] [wait]. Prints "<best seconds per call>
 * <GFLOP/s> <seconds of the process's first call>". `wait`: seconds of work (a busy loop, as a Python
 * program importing its modules) before the first call.
 * Linked to libblas.so.3; the benchmark driver runs it natively and under libsol's backends. */
#include <stdio.h>
#include <stdlib.h>
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
  if (argc < 3) return 2;
  const int dbl = argv[1][0] == 'd', n = atoi(argv[2]);
  const double budget = argc > 3 ? atof(argv[3]) : 0.3;
  const char* trans = argc > 4 ? argv[4] : "NN"; /* square matrices: the same leading dimensions */
  const double wait = argc > 5 ? atof(argv[5]) : 0;
  for (const double until = now() + wait; now() < until;) {
  }
  const size_t elems = (size_t)n * n, size = dbl ? 8 : 4;
  /* Cache-line aligned, so that the operands sit alike with and without libsol preloaded (which
   * moves malloc's heap): small GEMMs run up to 20 % apart on alignment alone. */
  const size_t bytes = (elems * size + 63) / 64 * 64;
  char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes), *c = aligned_alloc(64, bytes);
  for (size_t i = 0; i < elems; ++i) {
    if (dbl) ((double*)a)[i] = ((double*)b)[i] = (double)(i % 7) / 7, ((double*)c)[i] = 0;
    else ((float*)a)[i] = ((float*)b)[i] = (float)(i % 7) / 7, ((float*)c)[i] = 0;
  }
  const float one = 1, zero = 0;
  const double done = 1, dzero = 0;
  double best = 1e30, spent = 0;
  int calls = 0;
  /* Warm-up: at least one call, and calls for 0.25 s. A process's first tenth of a second is no
   * steady state: OpenBLAS's worker threads spin after they start (and after each call) before
   * they sleep, and a library with threads of its own (oneDNN's OpenMP) then crawls beside them on
   * a machine with few cores. Programs live longer than that; the rates here are steady ones. */
  const double first_at = now();
  double first = -1;
  const double warm_until = first_at + 0.25;
  do {
    if (dbl) dgemm_(&trans[0], &trans[1], &n, &n, &n, &done, (double*)a, &n, (double*)b, &n, &dzero, (double*)c, &n, 1, 1);
    else sgemm_(&trans[0], &trans[1], &n, &n, &n, &one, (float*)a, &n, (float*)b, &n, &zero, (float*)c, &n, 1, 1);
    if (first < 0) first = now() - first_at;
  } while (now() < warm_until);
  /* Samples of `reps` calls each, so that a sample lasts at least 20 us: the clock's resolution
   * (10 ns on some VMs) is no small part of an 8x8 GEMM's 150 ns. At least 3 samples, more until the
   * budget is spent; the best sample's mean counts. */
  int reps = 1;
  {
    const double t0 = now();
    if (dbl) dgemm_(&trans[0], &trans[1], &n, &n, &n, &done, (double*)a, &n, (double*)b, &n, &dzero, (double*)c, &n, 1, 1);
    else sgemm_(&trans[0], &trans[1], &n, &n, &n, &one, (float*)a, &n, (float*)b, &n, &zero, (float*)c, &n, 1, 1);
    const double t = now() - t0;
    if (t < 20e-6) reps = (int)(20e-6 / (t > 1e-8 ? t : 1e-8)) + 1;
  }
  for (; calls < 1000000 && (calls < 3 || spent < budget); ++calls) {
    const double t0 = now();
    for (int r = 0; r < reps; ++r) {
      if (dbl) dgemm_(&trans[0], &trans[1], &n, &n, &n, &done, (double*)a, &n, (double*)b, &n, &dzero, (double*)c, &n, 1, 1);
      else sgemm_(&trans[0], &trans[1], &n, &n, &n, &one, (float*)a, &n, (float*)b, &n, &zero, (float*)c, &n, 1, 1);
    }
    const double t = (now() - t0) / reps;
    if (t < best) best = t;
    spent += t * reps;
  }
  printf("%.12f %.3f %.9f\n", best, 2.0 * n * n * n / best * 1e-9, first);
  return 0;
}
