/* Cost per call of a tiny BLAS call through libsol's entry point in each BLAS name family it
 * intercepts, against the same library's symbol called directly, in one process and one run: a
 * 2x2 DGEMM and an n=1 DAXPY, under SOL_BACKEND=native (every entry point a passthrough) unless
 * SOL_BACKEND says otherwise.
 *
 *   bench_family_passthrough /path/to/libsol.so [LIBRARY...] [calls per round]
 *
 * The plain names come from libblas.so.3; each LIBRARY given (a wheel's libscipy_openblas64_*.so,
 * a library exporting Julia's dgemm_64_...) adds the family it defines. INTEGERs are passed as
 * 64-bit values of 1 or 2, which an LP64 library reads as 32-bit ones (the low half comes first).
 * Alternating rounds, the minimum per round kept: the statistic least disturbed by a shared, noisy
 * machine. The program re-executes itself with LD_PRELOAD=libsol.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*dgemm_fn)(const char*, const char*, const int64_t*, const int64_t*, const int64_t*,
                         const double*, const double*, const int64_t*, const double*, const int64_t*,
                         const double*, double*, const int64_t*, size_t, size_t);
typedef void (*daxpy_fn)(const int64_t*, const double*, const double*, const int64_t*, double*,
                         const int64_t*);

// How each family spells a Fortran name (interpose/spec/blas.toml): prefix, suffix.
static const struct {
  const char *family, *prefix, *suffix;
} kFamilies[] = {{"plain", "", "_"},
                 {"openblas64", "", "_64_"},
                 {"mkl64", "", "_64"},
                 {"scipy", "scipy_", "_"},
                 {"scipy64", "scipy_", "_64_"}};
enum { kNumFamilies = sizeof kFamilies / sizeof kFamilies[0], kMaxRows = 16 };

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_RAW, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static double a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4], x[1] = {1}, y[1] = {0};
static const int64_t two = 2, one = 1;
static const double alpha = 1, beta = 0, tiny = 1e-300;

static double time_dgemm(dgemm_fn f, long calls) {
  const double t0 = now_ns();
  for (long i = 0; i < calls; ++i)
    f("N", "N", &two, &two, &two, &alpha, a, &two, b, &two, &beta, c, &two, 1, 1);
  return (now_ns() - t0) / calls;
}

static double time_daxpy(daxpy_fn f, long calls) {
  const double t0 = now_ns();
  for (long i = 0; i < calls; ++i) f(&one, &tiny, x, &one, y, &one);
  return (now_ns() - t0) / calls;
}

struct Row {
  const char* family;
  char lib[200];
  dgemm_fn nat_gemm, sol_gemm;
  daxpy_fn nat_axpy, sol_axpy;
  double best[4];
};

static const char* object_of(void* p) {
  Dl_info info;
  return dladdr(p, &info) && info.dli_fname ? info.dli_fname : "?";
}

// The family `lib` defines, with its symbols and libsol's entry points for them; 0 if none.
static int add_row(struct Row* r, void* lib, const char* path) {
  for (int f = 0; f < kNumFamilies; ++f) {
    char gemm[64], axpy[64];
    snprintf(gemm, sizeof gemm, "%sdgemm%s", kFamilies[f].prefix, kFamilies[f].suffix);
    snprintf(axpy, sizeof axpy, "%sdaxpy%s", kFamilies[f].prefix, kFamilies[f].suffix);
    void* g = dlsym(lib, gemm);
    void* x = dlsym(lib, axpy);
    if (!g || !x || strstr(object_of(g), "libsol")) continue;
    r->family = kFamilies[f].family;
    snprintf(r->lib, sizeof r->lib, "%s", path);
    r->nat_gemm = (dgemm_fn)g;
    r->nat_axpy = (daxpy_fn)x;
    r->sol_gemm = (dgemm_fn)dlsym(RTLD_DEFAULT, gemm);
    r->sol_axpy = (daxpy_fn)dlsym(RTLD_DEFAULT, axpy);
    if (!r->sol_gemm || !strstr(object_of((void*)r->sol_gemm), "libsol")) return 0;
    for (int i = 0; i < 4; ++i) r->best[i] = 1e30;
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s /path/to/libsol.so [LIBRARY...] [calls per round]\n", argv[0]);
    return 2;
  }
  if (!getenv("BENCH_PRELOADED")) {
    setenv("LD_PRELOAD", argv[1], 1);
    setenv("BENCH_PRELOADED", "1", 1);
    if (!getenv("SOL_BACKEND")) setenv("SOL_BACKEND", "native", 1);
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  long calls = 200000;
  struct Row rows[kMaxRows];
  int n = 0;
  void* blas = dlopen("libblas.so.3", RTLD_NOW | RTLD_LOCAL);
  if (blas && add_row(&rows[n], blas, "libblas.so.3")) ++n;
  for (int i = 2; i < argc && n < kMaxRows; ++i) {
    if (strspn(argv[i], "0123456789") == strlen(argv[i])) {
      calls = atol(argv[i]);
      continue;
    }
    void* lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "bench: %s\n", dlerror());
      return 1;
    }
    if (add_row(&rows[n], lib, argv[i]))
      ++n;
    else
      fprintf(stderr, "bench: %s defines no BLAS name family libsol intercepts\n", argv[i]);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);  // one core: no migrations inside a round

  for (int r = 0; r < n; ++r) {  // resolve, warm up
    rows[r].sol_gemm("N", "N", &two, &two, &two, &alpha, a, &two, b, &two, &beta, c, &two, 1, 1);
    rows[r].sol_axpy(&one, &tiny, x, &one, y, &one);
  }
  const int rounds = 25;
  for (int round = 0; round < rounds; ++round)
    for (int r = 0; r < n; ++r) {
      double t, *best = rows[r].best;
      if ((t = time_dgemm(rows[r].nat_gemm, calls)) < best[0]) best[0] = t;
      if ((t = time_dgemm(rows[r].sol_gemm, calls)) < best[1]) best[1] = t;
      if ((t = time_daxpy(rows[r].nat_axpy, calls)) < best[2]) best[2] = t;
      if ((t = time_daxpy(rows[r].sol_axpy, calls)) < best[3]) best[3] = t;
    }
  printf("family passthrough: SOL_BACKEND=%s, %d rounds x %ld calls, min per round\n", getenv("SOL_BACKEND"),
         rounds, calls);
  printf("%-11s %-14s %10s %10s %9s %12s  %s\n", "family", "call", "native ns", "libsol ns", "added ns",
         "vs plain ns", "library");
  for (int r = 0; r < n; ++r) {
    const double *best = rows[r].best, *plain = rows[0].best;
    printf("%-11s %-14s %10.2f %10.2f %9.2f %12.2f  %s\n", rows[r].family, "dgemm 2x2", best[0], best[1],
           best[1] - best[0], (best[1] - best[0]) - (plain[1] - plain[0]), rows[r].lib);
    printf("%-11s %-14s %10.2f %10.2f %9.2f %12.2f\n", "", "daxpy n=1", best[2], best[3], best[3] - best[2],
           (best[3] - best[2]) - (plain[3] - plain[2]));
  }
  return 0;
}
