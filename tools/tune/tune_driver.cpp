// sol-tune-driver: calls the program's BLAS (libblas.so.3, or --library) once for each shape of a
// standard set, under libsol with auto measuring (`sol tune` starts it so). Every first call of a
// shape class makes libsol measure the candidates and record the fastest in this machine's
// profile; this program only makes the calls, in the order of their cost, until a time limit.
// Each shape runs in a child process of its own (this program with --one INDEX), its class the
// process's first, measured alone. A class whose measurement libsol then tries in use (a
// candidate's calls between two turns of another's) gets the shape's calls again until the trial
// is over (libsol's sol_tune_pending()), up to kJudgingSeconds: the profile then holds what was
// judged in use, not only the race on copies.
//
//   sol-tune-driver [--library L] [--time-limit SECONDS] [--quick] [--shape SHAPE]... [--one INDEX]
//
// --shape, repeated: these shapes instead of the standard set (`sol tune --from` passes the classes
// a traced run met): "ROUTINE LAYOUT TRANS MxNxK", ROUTINE sgemm, dgemm, sgemv or dgemv, LAYOUT
// fortran (the Fortran routine), col or row (the CBLAS one in that layout), TRANS two letters for a
// GEMM and one for a GEMV, whose size is MxN.
//
// Calls go through the global symbol table (dlsym(RTLD_DEFAULT)), so they reach libsol's
// wrappers first, exactly as a program linked to the library does.
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// Seconds of calls per shape at most while its class is on trial: a trial of a small shape takes
// about 0.5 s (turns of at least three calls, OpenBLAS's workers' spin waited out); one of three
// calls a turn of a 4096^3 GEMM may take longer, and the race's choice then stands.
constexpr double kJudgingSeconds = 3;

using sgemm_t = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
using dgemm_t = void (*)(const char*, const char*, const int*, const int*, const int*, const double*,
                         const double*, const int*, const double*, const int*, const double*, double*, const int*,
                         size_t, size_t);
using sgemv_t = void (*)(const char*, const int*, const int*, const float*, const float*, const int*, const float*,
                         const int*, const float*, float*, const int*, size_t);
using dgemv_t = void (*)(const char*, const int*, const int*, const double*, const double*, const int*,
                         const double*, const int*, const double*, double*, const int*, size_t);

using cblas_sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                               float*, int);
using cblas_dgemm_t = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double,
                               double*, int);
using cblas_sgemv_t = void (*)(int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using cblas_dgemv_t = void (*)(int, int, int, int, double, const double*, int, const double*, int, double, double*,
                               int);

struct Shape {
  char routine;  // 'g' gemm, 'v' gemv
  bool dbl;
  char ta, tb;
  int m, n, k;
  char layout = 0;  // 0: the Fortran routine; 'C' or 'R': the CBLAS one in that layout
  double flops() const { return routine == 'g' ? 2.0 * m * n * k : 2.0 * m * n; }
  std::string text() const {
    char b[128];
    const char* in = layout == 'R' ? " row-major" : layout == 'C' ? " col-major" : "";
    if (routine == 'g')
      std::snprintf(b, sizeof b, "%s%cgemm%s %c%c %dx%dx%d", layout ? "cblas_" : "", dbl ? 'd' : 's', in, ta, tb, m,
                    n, k);
    else
      std::snprintf(b, sizeof b, "%s%cgemv%s %c %dx%d", layout ? "cblas_" : "", dbl ? 'd' : 's', in, ta, m, n);
    return b;
  }
};

// A --shape argument: "sgemm col NT 256x256x64", "dgemv fortran T 100x100"; false when malformed.
bool parse_shape(const std::string& text, Shape& s) {
  char routine[8] = "", layout[8] = "", trans[3] = "";
  int m = 0, n = 0, k = 0;
  const int got = std::sscanf(text.c_str(), "%7s %7s %2s %dx%dx%d", routine, layout, trans, &m, &n, &k);
  const std::string r = routine, l = layout, t = trans;
  if (r != "sgemm" && r != "dgemm" && r != "sgemv" && r != "dgemv") return false;
  const bool gemm = r.compare(1, 4, "gemm") == 0;
  if (got != (gemm ? 6 : 5) || t.size() != (gemm ? 2u : 1u) || m <= 0 || n <= 0 || (gemm && k <= 0)) return false;
  for (char c : t)
    if (c != 'N' && c != 'T' && c != 'C') return false;
  if (l != "fortran" && l != "col" && l != "row") return false;
  s = Shape{gemm ? 'g' : 'v', r[0] == 'd', t[0], gemm ? t[1] : 'N', m, n, gemm ? k : 0,
            l == "col" ? 'C' : l == "row" ? 'R' : '\0'};
  return true;
}

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

// The CBLAS routine on a row- or column-major problem of the shape.
template <class T>
void run_cblas(const Shape& s, void* fn) {
  const bool row = s.layout == 'R';
  const auto code = [](char t) { return t == 'N' ? 111 : t == 'T' ? 112 : 113; };
  // An op(A) of m x k: A is stored m x k, or k x m transposed; its leading dimension is its row
  // length row-major, its column length column-major.
  const auto ld = [&](int rows, int cols) { return std::max(row ? cols : rows, 1); };
  const T alpha = 1, beta = 0;
  if (s.routine == 'g') {
    const int ar = s.ta == 'N' ? s.m : s.k, ac = s.ta == 'N' ? s.k : s.m;
    const int br = s.tb == 'N' ? s.k : s.n, bc = s.tb == 'N' ? s.n : s.k;
    std::vector<T> a(static_cast<size_t>(ar) * ac, T(0.5)), b(static_cast<size_t>(br) * bc, T(0.25)),
        c(static_cast<size_t>(s.m) * s.n, T(0));
    const int order = row ? 101 : 102;
    if constexpr (sizeof(T) == 4)
      reinterpret_cast<cblas_sgemm_t>(fn)(order, code(s.ta), code(s.tb), s.m, s.n, s.k, alpha, a.data(), ld(ar, ac),
                                          b.data(), ld(br, bc), beta, c.data(), ld(s.m, s.n));
    else
      reinterpret_cast<cblas_dgemm_t>(fn)(order, code(s.ta), code(s.tb), s.m, s.n, s.k, alpha, a.data(), ld(ar, ac),
                                          b.data(), ld(br, bc), beta, c.data(), ld(s.m, s.n));
  } else {
    std::vector<T> a(static_cast<size_t>(s.m) * s.n, T(0.5)), x(static_cast<size_t>(std::max(s.m, s.n)), T(1)),
        y(x.size(), T(0));
    const int order = row ? 101 : 102;
    if constexpr (sizeof(T) == 4)
      reinterpret_cast<cblas_sgemv_t>(fn)(order, code(s.ta), s.m, s.n, alpha, a.data(), ld(s.m, s.n), x.data(), 1, beta,
                                          y.data(), 1);
    else
      reinterpret_cast<cblas_dgemv_t>(fn)(order, code(s.ta), s.m, s.n, alpha, a.data(), ld(s.m, s.n), x.data(), 1, beta,
                                          y.data(), 1);
  }
}

template <class T>
void run(const Shape& s, void* fn) {
  if (s.layout) return run_cblas<T>(s, fn);
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

// One shape's calls, in this process: again while libsol tries its class in use, up to
// kJudgingSeconds. Returns how many calls it made.
int call_shape(const Shape& s, void* const fns[8], int (*pending)()) {
  void* fn = fns[(s.layout ? 4 : 0) + (s.routine == 'v' ? 2 : 0) + (s.dbl ? 1 : 0)];
  const auto from = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
  };
  int calls = 0;
  do {
    if (s.dbl)
      run<double>(s, fn);
    else
      run<float>(s, fn);
    ++calls;
  } while (pending && pending() && seconds() < kJudgingSeconds);
  return calls;
}

// Runs this program again for shape `index` alone (--one): its class is then the process's first,
// measured alone and tried in use alone, as in a program whose work is that shape, instead of beside
// the threads of the shapes before it, whose pools on few cores still spin (oneDNN's 64^3 SGEMM
// charged to 0.0-0.2 GFLOP/s there, where it runs at 57-60). false when it could not start one.
bool in_own_process(size_t index, const std::string& library, bool quick, const std::vector<std::string>& given,
                    int& status) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  self[n] = '\0';
  std::string one = std::to_string(index);
  std::vector<char*> args = {self, const_cast<char*>("--library"), const_cast<char*>(library.c_str()),
                             const_cast<char*>("--one"), one.data()};
  if (quick) args.push_back(const_cast<char*>("--quick"));
  for (const std::string& g : given) {
    args.push_back(const_cast<char*>("--shape"));
    args.push_back(const_cast<char*>(g.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid;
  if (::posix_spawn(&pid, self, nullptr, nullptr, args.data(), environ) != 0) return false;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string library = "libblas.so.3";
  double limit = 60;
  bool quick = false;
  long one = -1;  // --one INDEX: that shape alone (a child of the run below)
  std::vector<std::string> given;  // --shape: these instead of the standard set
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--library" && i + 1 < argc) library = argv[++i];
    else if (a == "--shape" && i + 1 < argc) {
      Shape s{};
      given.push_back(argv[++i]);
      if (!parse_shape(given.back(), s)) {
        std::fprintf(stderr, "sol: tune driver: malformed shape '%s'\n", given.back().c_str());
        return 2;
      }
      shapes.push_back(s);
    }
    else if (a == "--time-limit" && i + 1 < argc) limit = std::atof(argv[++i]);
    else if (a == "--quick") quick = true;
    else if (a == "--one" && i + 1 < argc)
      one = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "sol: tune driver: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (given.empty()) shapes = standard_set(quick);
  const bool tty = ::isatty(2);
  void* fns[8] = {};
  int (*pending)() = nullptr;
  // The library's routines, for the shapes called here: all of them, or --one's (and every shape
  // whose process could not be started).
  auto bind = [&] {
    if (fns[0]) return true;
    if (!dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      std::fprintf(stderr, "sol: tune: cannot open %s: %s\n", library.c_str(), dlerror());
      return false;
    }
    const char* names[8] = {"sgemm_",      "dgemm_",      "sgemv_",      "dgemv_",
                            "cblas_sgemm", "cblas_dgemm", "cblas_sgemv", "cblas_dgemv"};
    for (int i = 0; i < 8; ++i) fns[i] = dlsym(RTLD_DEFAULT, names[i]);
    for (const Shape& s : shapes)
      if (!fns[(s.layout ? 4 : 0) + (s.routine == 'v' ? 2 : 0) + (s.dbl ? 1 : 0)]) {
        std::fprintf(stderr, "sol: tune: %s lacks the routine of %s\n", library.c_str(), s.text().c_str());
        fns[0] = nullptr;
        return false;
      }
    // libsol's, when it is preloaded (`sol tune` does): whether the last call's class is on trial,
    // and the mark that makes this process's figures tuned ones, measured calmly.
    pending = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "sol_tune_pending"));
    if (auto begin = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "sol_tune_begin"))) begin();
    return true;
  };
  if (one >= 0) {
    if (static_cast<size_t>(one) >= shapes.size() || !bind()) return 2;
    const Shape& s = shapes[static_cast<size_t>(one)];
    const auto t0 = std::chrono::steady_clock::now();
    const int calls = call_shape(s, fns, pending);
    if (calls > 1 && !tty)
      std::fprintf(stderr, "sol: tune: %s judged in use over %d calls (%.1f s)\n", s.text().c_str(), calls,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  // The library must open here too: a failure is said once, before any shape.
  if (!bind()) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  size_t done = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (elapsed() > limit) break;
    const Shape& s = shapes[i];
    std::fprintf(stderr, tty ? "\rsol: tune: [%zu/%zu] %-28s %6.1f s" : "sol: tune: [%zu/%zu] %s (%.1f s)\n",
                 done + 1, shapes.size(), s.text().c_str(), elapsed());
    int status = 0;
    if (!in_own_process(i, library, quick, given, status))
      call_shape(s, fns, pending);
    else if (WIFSIGNALED(status))
      std::fprintf(stderr, "%ssol: tune: %s: killed by signal %d; going on\n", tty ? "\n" : "",
                   s.text().c_str(), WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      std::fprintf(stderr, "%ssol: tune: %s: exit status %d; going on\n", tty ? "\n" : "", s.text().c_str(),
                   WEXITSTATUS(status));
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
