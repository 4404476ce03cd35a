/* The GEMMs of bench/auto_mlp.py's PyTorch training step, from C: mlp_gemms STEPS.
 * PyTorch 1.13's nn.Linear layers 512 -> 1024 -> 1024 -> 10 on a batch of 256 call sgemm_ with
 * these shapes and transposes, in this order, each step (as `sol report` of a traced run lists
 * them): three forward products, then the backward ones (input gradients NN, weight gradients NT;
 * the first layer's input needs none). Prints "<first step's ms> <ms per later step> <checksum>",
 * the checksum of every output after the last step. The first step is apart: it holds what a
 * process pays once (OpenBLAS's threads, first touches; under auto, measuring, and in a program
 * that calls BLAS at once, setting backends up, which a Python program's imports hide).
 *
 * It carries the loop's GEMM work where Debian's PyTorch is not installed (a GPU machine's host
 * CPU): the loop's other work (activations, the optimiser, Python) is not in it. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);

struct Gemm {
  char ta, tb;
  int m, n, k;
};

/* Column-major, as PyTorch passes its row-major tensors. */
static const struct Gemm kStep[] = {
    {'T', 'N', 1024, 256, 512},  {'T', 'N', 1024, 256, 1024}, {'T', 'N', 10, 256, 1024},
    {'N', 'N', 1024, 256, 10},   {'N', 'T', 1024, 10, 256},   {'N', 'N', 1024, 256, 1024},
    {'N', 'T', 1024, 1024, 256}, {'N', 'T', 512, 1024, 256},
};
enum { kGemms = sizeof kStep / sizeof kStep[0] };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static float* filled(size_t n, unsigned seed) {
  float* p = malloc(n * sizeof *p);
  if (!p) {
    fprintf(stderr, "mlp_gemms: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  return p;
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 20;
  if (steps < 2) {
    fprintf(stderr, "usage: mlp_gemms STEPS (2 or more)\n");
    return 2;
  }
  float *a[kGemms], *b[kGemms], *c[kGemms];
  for (int g = 0; g < kGemms; ++g) {
    const struct Gemm* s = &kStep[g];
    a[g] = filled((size_t)s->m * s->k, 2 * g + 1);
    b[g] = filled((size_t)s->k * s->n, 2 * g + 2);
    c[g] = filled((size_t)s->m * s->n, 0);
  }
  const float one = 1, zero = 0;
  const double t0 = now();
  double t1 = t0;
  for (int i = 0; i < steps; ++i) {
    if (i == 1) t1 = now();
    for (int g = 0; g < kGemms; ++g) {
      const struct Gemm* s = &kStep[g];
      const int lda = s->ta == 'N' ? s->m : s->k, ldb = s->tb == 'N' ? s->k : s->n;
      sgemm_(&s->ta, &s->tb, &s->m, &s->n, &s->k, &one, a[g], &lda, b[g], &ldb, &zero, c[g], &s->m, 1, 1);
    }
  }
  const double t2 = now();
  double sum = 0;
  for (int g = 0; g < kGemms; ++g)
    for (size_t i = 0; i < (size_t)kStep[g].m * kStep[g].n; ++i) sum += c[g][i];
  printf("%.3f %.3f %.6e\n", (t1 - t0) * 1e3, (t2 - t1) / (steps - 1) * 1e3, sum);
  return 0;
}
