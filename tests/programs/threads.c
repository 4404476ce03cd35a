/* sgemm_ and dgemm_ from 8 threads at once, each result checked against a plain loop.
 * Linked to libblas.so.3; run with and without libsol. Exit status 0 when every product is right. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
            const int*, const double*, const int*, const double*, double*, const int*, size_t, size_t);

enum { kThreads = 8, kIters = 60 };

static unsigned next(unsigned* s) {
  return *s = *s * 1103515245u + 12345u;
}

static void* worker(void* arg) {
  unsigned seed = (unsigned)(size_t)arg * 7919u + 1;
  long bad = 0;
  for (int it = 0; it < kIters; ++it) {
    const int m = 1 + next(&seed) % 48, n = 1 + next(&seed) % 48, k = 1 + next(&seed) % 48;
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
          *c = malloc(sizeof(float) * m * n);
    double *da = malloc(sizeof(double) * m * k), *db = malloc(sizeof(double) * k * n),
           *dc = malloc(sizeof(double) * m * n);
    for (int i = 0; i < m * k; ++i) da[i] = a[i] = (float)(next(&seed) % 200) / 100.0f - 1.0f;
    for (int i = 0; i < k * n; ++i) db[i] = b[i] = (float)(next(&seed) % 200) / 100.0f - 1.0f;
    for (int i = 0; i < m * n; ++i) dc[i] = c[i] = 0.5f;
    const float alpha = 1.5f, beta = 2.0f;
    const double dalpha = 1.5, dbeta = 2.0;
    sgemm_("N", "N", &m, &n, &k, &alpha, a, &m, b, &k, &beta, c, &m, 1, 1);
    dgemm_("N", "N", &m, &n, &k, &dalpha, da, &m, db, &k, &dbeta, dc, &m, 1, 1);
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double want = 0;
        for (int l = 0; l < k; ++l) want += (double)a[i + l * m] * b[l + j * k];
        want = 1.5 * want + 2.0 * 0.5;
        if (fabs(c[i + j * m] - want) > 1e-3 * (1 + fabs(want))) ++bad;
        if (fabs(dc[i + j * m] - want) > 1e-9 * (1 + fabs(want))) ++bad;
      }
    }
    free(a), free(b), free(c), free(da), free(db), free(dc);
  }
  return (void*)bad;
}

int main(void) {
  pthread_t t[kThreads];
  for (size_t i = 0; i < kThreads; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  long bad = 0;
  for (int i = 0; i < kThreads; ++i) {
    void* r;
    pthread_join(t[i], &r);
    bad += (long)r;
  }
  printf("threads=%d products=%d wrong=%ld\n", kThreads, kThreads * kIters * 2, bad);
  return bad != 0;
}
