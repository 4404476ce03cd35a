/* One SGEMM call per size named on the command line (square, NN, alpha 1, beta 0), each its own
 * shape class, in order; prints each result's digest. Runs compare line by line with and without
 * libsol, or against a backend named directly.
 *
 *   gemm_classes n1 n2 ... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);

static uint64_t digest(const float* p, size_t n) {
  const unsigned char* c = (const unsigned char*)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n * sizeof *p; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  for (int arg = 1; arg < argc; ++arg) {
    const int n = atoi(argv[arg]);
    const size_t elems = (size_t)n * n;
    float *a = malloc(elems * 4), *b = malloc(elems * 4), *c = malloc(elems * 4);
    if (!a || !b || !c) return 1;
    for (size_t i = 0; i < elems; ++i) a[i] = (float)(i % 7) / 7, b[i] = (float)(i % 5) / 5, c[i] = 0;
    const float one = 1, zero = 0;
    sgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
    printf("n=%d digest %016llx\n", n, (unsigned long long)digest(c, elems));
    free(a), free(b), free(c);
  }
  return 0;
}
