/* Two GEMM classes called in turn, as a program whose calls mostly run on one library: a DGEMM of
 * n1 (the larger, which oneDNN does not take: it decides where most of the program's calls run)
 * and an SGEMM of n2, for `seconds`. Long enough for auto to try the SGEMM class in use once its
 * measurement sends it elsewhere. Prints each class's last result's digest and the rounds made.
 *
 *   home_and_away n1 n2 seconds */
#include <stdint.h>
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

static uint64_t digest(const void* p, size_t bytes) {
  const unsigned char* c = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: home_and_away n1 n2 seconds\n");
    return 2;
  }
  const int n1 = atoi(argv[1]), n2 = atoi(argv[2]);
  const double seconds = atof(argv[3]);
  const size_t e1 = (size_t)n1 * n1, e2 = (size_t)n2 * n2;
  double *a = malloc(e1 * sizeof *a), *b = malloc(e1 * sizeof *b), *c = malloc(e1 * sizeof *c);
  float *x = malloc(e2 * sizeof *x), *y = malloc(e2 * sizeof *y), *z = malloc(e2 * sizeof *z);
  if (!a || !b || !c || !x || !y || !z) return 1;
  for (size_t i = 0; i < e1; ++i) a[i] = (double)(i % 7) / 7, b[i] = (double)(i % 5) / 5;
  for (size_t i = 0; i < e2; ++i) x[i] = (float)(i % 3) / 3, y[i] = (float)(i % 11) / 11;
  const double one = 1, zero = 0;
  const float onef = 1, zerof = 0;
  long rounds = 0;
  const double until = now() + seconds;
  do {
    dgemm_("N", "N", &n1, &n1, &n1, &one, a, &n1, b, &n1, &zero, c, &n1, 1, 1);
    sgemm_("N", "N", &n2, &n2, &n2, &onef, x, &n2, y, &n2, &zerof, z, &n2, 1, 1);
    ++rounds;
  } while (now() < until);
  printf("dgemm digest %016llx\nsgemm digest %016llx\nrounds %ld\n",
         (unsigned long long)digest(c, e1 * sizeof *c), (unsigned long long)digest(z, e2 * sizeof *z),
         rounds);
  free(a), free(b), free(c), free(x), free(y), free(z);
  return 0;
}
