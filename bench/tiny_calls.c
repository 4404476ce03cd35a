/* A stream of tiny BLAS calls, for the cost of tracing one call:
 *   bench_tiny_calls N     makes N calls of saxpy_ with n=1 and prints the time per call */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void saxpy_(const int*, const float*, const float*, const int*, float*, const int*);

int main(int argc, char** argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 1000000;
  const int one = 1;
  const float alpha = 1e-30f, x = 1;
  float y = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < calls; ++i) saxpy_(&one, &alpha, &x, &one, &y, &one);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%.3f ns/call\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / calls);
  return 0;
}
