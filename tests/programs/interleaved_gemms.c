/* Fourteen SGEMM calls, interleaved, round after round: the same sizes in every transposition, sizes
 * that share a shape class and sizes that do not, through the Fortran BLAS and through CBLAS in
 * both layouts. Each call accumulates into its own C (beta 0.5), so the digest printed per call at
 * the end depends on where every one of its rounds ran. Runs compare line by line with and without
 * libsol, or against a backend named directly.
 *
 *   interleaved_gemms [rounds]      (default 50) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
/* CBLAS's, with its enums as the ints they are (101 row-major, 102 column-major; 111 no transpose,
 * 112 transpose), as libblas.so.3 exports it. */
void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                 int);

static uint64_t digest(const float* p, size_t n) {
  const unsigned char* c = (const unsigned char*)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n * sizeof *p; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

struct Shape {
  char api, ta, tb; /* api: 'F' Fortran, 'C' CBLAS column-major, 'R' CBLAS row-major */
  int m, n, k;
};

struct Call {
  char api, ta, tb;
  int m, n, k;
  float *a, *b, *c;
};

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 50;
  static const struct Shape shapes[] = {
      {'F', 'N', 'N', 64, 64, 64}, {'F', 'N', 'T', 64, 64, 64}, {'F', 'T', 'N', 64, 64, 64},
      {'F', 'T', 'T', 64, 64, 64}, {'F', 'N', 'N', 64, 64, 72}, {'F', 'N', 'T', 72, 64, 64},
      {'F', 'N', 'N', 80, 72, 64}, {'F', 'N', 'T', 80, 72, 64}, {'C', 'N', 'N', 64, 64, 64},
      {'C', 'N', 'T', 64, 64, 64}, {'R', 'N', 'N', 64, 64, 64}, {'R', 'N', 'T', 64, 64, 64},
      {'F', 'N', 'N', 96, 96, 96}, {'F', 'T', 'N', 96, 96, 96},
  };
  enum { ncalls = sizeof shapes / sizeof shapes[0] };
  struct Call calls[ncalls];
  for (int i = 0; i < ncalls; ++i) {
    struct Call* x = &calls[i];
    const struct Shape* s = &shapes[i];
    x->api = s->api, x->ta = s->ta, x->tb = s->tb, x->m = s->m, x->n = s->n, x->k = s->k;
    /* Every operand as large as any of its layouts needs, so that one set of strides fits all. */
    const int ld = 96;
    x->a = malloc(sizeof(float) * ld * ld), x->b = malloc(sizeof(float) * ld * ld),
    x->c = malloc(sizeof(float) * ld * ld);
    if (!x->a || !x->b || !x->c) return 1;
    for (int e = 0; e < ld * ld; ++e)
      x->a[e] = (float)((e * 7 + i) % 13) / 13 - 0.5f, x->b[e] = (float)((e * 5 + i) % 11) / 11, x->c[e] = 0;
  }
  const float alpha = 1.25f, beta = 0.5f;
  const int ld = 96;
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < ncalls; ++i) {
      const struct Call* x = &calls[i];
      if (x->api == 'F') {
        sgemm_(&x->ta, &x->tb, &x->m, &x->n, &x->k, &alpha, x->a, &ld, x->b, &ld, &beta, x->c, &ld, 1, 1);
      } else {
        cblas_sgemm(x->api == 'R' ? 101 : 102, x->ta == 'T' ? 112 : 111, x->tb == 'T' ? 112 : 111, x->m, x->n,
                    x->k, alpha, x->a, ld, x->b, ld, beta, x->c, ld);
      }
    }
  for (int i = 0; i < ncalls; ++i) {
    const struct Call* x = &calls[i];
    printf("%c %c%c %dx%dx%d digest %016llx\n", x->api, x->ta, x->tb, x->m, x->n, x->k,
           (unsigned long long)digest(x->c, (size_t)ld * ld));
  }
  return 0;
}
