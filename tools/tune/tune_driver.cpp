// sol-tune-driver: calls the program's BLAS (libblas.so.3, or --library) once for each shape of a
// standard set, under libsol with auto measuring (`sol tune` starts it so). Every first call of a
// shape class makes libsol measure the candidates and record the fastest in this machine's
// profile; this program only makes the calls, in the order of their cost, until a time limit.
//
//   sol-tune-driver [--library L] [--time-limit SECONDS] [--quick]
//
// Calls go through the global symbol table (dlsym(RTLD_DEFAULT)), so they reach libsol's
// wrappers first, exactly as a program linked to the library does.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using sgemm_t = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
using dgemm_t = void (*)(const char*, const char*, const int*, const int*, const int*, const double*,
                         const double*, const int*, const double*, const int*, const double*, double*, const int*,
                         size_t, size_t);
using sgemv_t = void (*)(const char*, const int*, const int*, const float*, const float*, const int*, const float*,
                         const int*, const float*, float*, const int*, size_t);
using dgemv_t = void (*)(const char*, const int*, const int*, const double*, const double*, const int*,
                         const double*, const int*, const double*, double*, const int*, size_t);

struct Shape {
  char routine;  // 'g' gemm, 'v' gemv
  bool dbl;
  char ta, tb;
  int m, n, k;
  double flops() const { return routine == 'g' ? 2.0 * m * n * k : 2.0 * m * n; }
  std::string text() const {
    char b[96];
    if (routine == 'g')
      std::snprintf(b, sizeof b, "%cgemm %c%c %dx%dx%d", dbl ? 'd' : 's', ta, tb, m, n, k);
    else
      std::snprintf(b, sizeof b, "%cgemv %c %dx%d", dbl ? 'd' : 's', ta, m, n);
    return b;
  }
};

// Square GEMMs of every size class (octaves and their 1.5x points), the rectangular ones of
// small-batch training (a batch of 32..128 rows against wide layers), and matrix-vector products,
// each in the transposes frameworks use.
std::vector<Shape> standard_set(bool quick) {
  std::vector<Shape> out;
  const std::vector<int> squares = quick ? std::vector<int>{64, 256} : std::vector<int>{32, 64, 128, 256, 512, 1024, 2048, 4096};
  const char trans[3][2] = {{'N', 'N'}, {'T', 'N'}, {'N', 'T'}};
  for (bool dbl : {false, true}) {
    for (int n : squares)
      for (int size : {n, n + n / 2})
        if (size <= 4096 && (!quick || size == n))
          for (const auto& t : trans) out.push_back({'g', dbl, t[0], t[1], size, size, size});
    if (!quick)
      for (int batch : {32, 128})
        for (int wide : {512, 2048})
          for (const auto& t : trans) {
            out.push_back({'g', dbl, t[0], t[1], wide, batch, wide});  // forward: features x batch
            out.push_back({'g', dbl, t[0], t[1], wide, wide, batch});  // weight gradient
          }
    for (int n : squares)
      for (char t : {'N', 'T'}) out.push_back({'v', dbl, t, 'N', n, n, 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const Shape& a, const Shape& b) { return a.flops() < b.flops(); });
  return out;
}

template <class T>
void run(const Shape& s, void* fn) {
  const int lda = std::max(s.routine == 'g' ? (s.ta == 'N' ? s.m : s.k) : s.m, 1);
  const int ldb = std::max(s.tb == 'N' ? s.k : s.n, 1);
  const int ldc = std::max(s.m, 1);
  const size_t acols = s.routine == 'g' ? (s.ta == 'N' ? s.k : s.m) : s.n;
  std::vector<T> a(static_cast<size_t>(lda) * acols, T(0.5)), b(static_cast<size_t>(ldb) * (s.tb == 'N' ? s.n : s.k), T(0.25)),
      c(static_cast<size_t>(ldc) * s.n, T(0));
  const T alpha = 1, beta = 0;
  const int one = 1;
  if (s.routine == 'g') {
    if constexpr (sizeof(T) == 4)
      reinterpret_cast<sgemm_t>(fn)(&s.ta, &s.tb, &s.m, &s.n, &s.k, &alpha, a.data(), &lda, b.data(), &ldb, &beta,
                                    c.data(), &ldc, 1, 1);
    else
      reinterpret_cast<dgemm_t>(fn)(&s.ta, &s.tb, &s.m, &s.n, &s.k, &alpha, a.data(), &lda, b.data(), &ldb, &beta,
                                    c.data(), &ldc, 1, 1);
  } else {
    std::vector<T> x(static_cast<size_t>(std::max(s.m, s.n)), T(1)), y(x.size(), T(0));
    if constexpr (sizeof(T) == 4)
      reinterpret_cast<sgemv_t>(fn)(&s.ta, &s.m, &s.n, &alpha, a.data(), &lda, x.data(), &one, &beta, y.data(), &one, 1);
    else
      reinterpret_cast<dgemv_t>(fn)(&s.ta, &s.m, &s.n, &alpha, a.data(), &lda, x.data(), &one, &beta, y.data(), &one, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string library = "libblas.so.3";
  double limit = 60;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--library" && i + 1 < argc) library = argv[++i];
    else if (a == "--time-limit" && i + 1 < argc) limit = std::atof(argv[++i]);
    else if (a == "--quick") quick = true;
    else {
      std::fprintf(stderr, "sol: tune driver: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (!dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    std::fprintf(stderr, "sol: tune: cannot open %s: %s\n", library.c_str(), dlerror());
    return 1;
  }
  void* fns[4] = {dlsym(RTLD_DEFAULT, "sgemm_"), dlsym(RTLD_DEFAULT, "dgemm_"), dlsym(RTLD_DEFAULT, "sgemv_"),
                  dlsym(RTLD_DEFAULT, "dgemv_")};
  for (void* f : fns)
    if (!f) {
      std::fprintf(stderr, "sol: tune: %s lacks sgemm_/dgemm_/sgemv_/dgemv_\n", library.c_str());
      return 1;
    }
  const std::vector<Shape> shapes = standard_set(quick);
  const bool tty = ::isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  size_t done = 0;
  for (const Shape& s : shapes) {
    if (elapsed() > limit) break;
    std::fprintf(stderr, tty ? "\rsol: tune: [%zu/%zu] %-28s %6.1f s" : "sol: tune: [%zu/%zu] %s (%.1f s)\n",
                 done + 1, shapes.size(), s.text().c_str(), elapsed());
    void* fn = fns[(s.routine == 'v' ? 2 : 0) + (s.dbl ? 1 : 0)];
    if (s.dbl) run<double>(s, fn);
    else run<float>(s, fn);
    ++done;
  }
  if (tty) std::fputc('\n', stderr);
  if (done < shapes.size())
    std::fprintf(stderr, "sol: tune: stopped at the time limit (%.0f s) after %zu of %zu shapes; run again to go on\n",
                 limit, done, shapes.size());
  else
    std::fprintf(stderr, "sol: tune: %zu shapes in %.1f s\n", done, elapsed());
  return 0;
}
