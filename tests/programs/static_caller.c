/* A BLAS call from functions no dynamic symbol names: a static one and a hidden one. Only the
 * program's .symtab (or a debug file, or .gnu_debugdata) has their names, so the trace's frames
 * show them only when libsol reads more than dladdr does (capture/trace/symbolize.cpp). */
#include <stdio.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*);

/* noinline and noclone: the call must stay in a function of this very name (no .constprop copy). */
__attribute__((noinline, noclone)) static float sol_static_gemm(int n) {
  float a[16], b[16], c[16] = {0};
  for (int i = 0; i < n * n; ++i) {
    a[i] = (float)(i + 1);
    b[i] = (float)(i % 3);
  }
  const float one = 1, zero = 0;
  sgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
  return c[0] + c[n * n - 1];
}

__attribute__((noinline, noclone, visibility("hidden"))) float sol_hidden_caller(int n) {
  return sol_static_gemm(n) + 1;
}

int main(int argc, char** argv) {
  (void)argv;
  const int n = 3 + (argc > 1); /* not a constant the compiler could fold into the callee */
  printf("%g\n", sol_hidden_caller(n));
  return 0;
}
