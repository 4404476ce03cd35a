/* Calls whose first use makes auto measure its candidates, with everything that measurement must
 * leave alone: NaN canaries around and inside C (ldc > m), beta != 0, C aliasing A, and an invalid
 * call (its error report must be the library's own). Prints each result's bytes as a digest and
 * whether the canaries survived, so that runs with and without libsol compare line by line.
 *
 *   measured_calls [n]      (n >= 32: large enough for auto to measure; default 96) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
            const int*, const double*, const int*, const double*, double*, const int*, size_t, size_t);

static uint64_t digest(const void* p, size_t bytes) {
  const unsigned char* c = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

static const uint32_t kCanary = 0x7fc0dead; /* a quiet NaN with a payload */

/* Page-aligned: where the heap puts a matrix depends on what else the process allocated (libsol's
 * log level, its profile), and a library's blocking, and so an aliased call's result, on where the
 * matrix starts (oneDNN's C := A * B with C aliasing A differs between 16-byte offsets). */
static void* page_alloc(size_t bytes) {
  return aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 96, pad = 3, ldc = n + pad, guard = 64;
  const size_t elems = (size_t)n * n;
  float* a = page_alloc(elems * sizeof *a);
  float* b = page_alloc(elems * sizeof *b);
  /* C with `guard` canaries before and after, and `pad` canaries ending each column */
  float* block = page_alloc(((size_t)ldc * n + 2 * guard) * sizeof *block);
  float* c = block + guard;
  for (size_t i = 0; i < elems; ++i) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f, b[i] = (float)((i * 5) % 11) / 11.0f;
  for (size_t i = 0; i < (size_t)ldc * n + 2 * guard; ++i) memcpy(&block[i], &kCanary, 4);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) c[(size_t)j * ldc + i] = (float)((i + 3 * j) % 17) / 17.0f;

  const float alpha = 1.25f, beta = 0.5f;
  sgemm_("N", "T", &n, &n, &n, &alpha, a, &n, b, &n, &beta, c, &ldc, 1, 1);
  int intact = 1;
  for (int i = 0; i < guard; ++i) intact &= memcmp(&block[i], &kCanary, 4) == 0 && memcmp(&c[(size_t)ldc * n + i], &kCanary, 4) == 0;
  for (int j = 0; j < n; ++j)
    for (int i = n; i < ldc; ++i) intact &= memcmp(&c[(size_t)j * ldc + i], &kCanary, 4) == 0;
  printf("beta: %016llx canaries %s\n", (unsigned long long)digest(block, ((size_t)ldc * n + 2 * guard) * 4),
         intact ? "intact" : "OVERWRITTEN");

  /* C aliasing A (the same n x n matrix): not allowed by BLAS, but what the program does, its
   * library does; measuring must not change it. */
  float* alias = page_alloc(elems * sizeof *alias);
  memcpy(alias, a, elems * sizeof *a);
  const float zero = 0;
  sgemm_("N", "N", &n, &n, &n, &alpha, alias, &n, b, &n, &zero, alias, &n, 1, 1);
  printf("alias: %016llx\n", (unsigned long long)digest(alias, elems * 4));

  /* An invalid call (ldc < m) in a class of its own: the library's xerbla reports it. */
  const int bad_ld = 1, m2 = 2 * n;
  double* d = calloc((size_t)m2 * m2, sizeof *d);
  const double one = 1;
  dgemm_("N", "N", &m2, &m2, &m2, &one, d, &m2, d, &m2, &one, d, &bad_ld, 1, 1);
  printf("invalid call returned\n");
  fflush(stdout);
  free(a), free(b), free(block), free(alias), free(d);
  return 0;
}
