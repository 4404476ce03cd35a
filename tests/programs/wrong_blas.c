/* A deliberately wrong BLAS for verify-mode tests: sgemm_ computes the product and then adds 1
 * to the first element of C. Loaded as SOL's openblas backend library
 * (backends.openblas.library), it plants a wrong result in a real backend. It defines nothing
 * else, so every other routine falls through to the next backend. */
#include <stddef.h>

void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc, size_t l1, size_t l2) {
  (void)l1, (void)l2;
  const int at = *ta == 'T' || *ta == 't' || *ta == 'C' || *ta == 'c';
  const int bt = *tb == 'T' || *tb == 't' || *tb == 'C' || *tb == 'c';
  for (int j = 0; j < *n; ++j)
    for (int i = 0; i < *m; ++i) {
      float s = 0;
      for (int l = 0; l < *k; ++l)
        s += (at ? a[l + i * *lda] : a[i + l * *lda]) * (bt ? b[j + l * *ldb] : b[l + j * *ldb]);
      c[i + j * *ldc] = *alpha * s + (*beta == 0 ? 0 : *beta * c[i + j * *ldc]);
    }
  if (*m > 0 && *n > 0) c[0] += 1.0f; /* the planted error */
}
