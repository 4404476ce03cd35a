// Helper of cpu_test: loads an OpenBLAS (argv[1], default libopenblas.so.0), runs
// openblas_core::check on it and prints the result and this CPU as key=value lines.
// Exit status: 0 checked, 2 the library does not load, 3 it is not OpenBLAS.
#include <dlfcn.h>

#include <cstdio>

#include "common/cpu.hpp"
#include "common/openblas_core.hpp"

int main(int argc, char** argv) {
  using namespace sol;
  const char* name = argc > 1 ? argv[1] : "libopenblas.so.0";
  const cpu::Info& cpu = cpu::info();
  std::printf("model=%s\nisa=%s\n", cpu.model.c_str(), cpu::isa_name(cpu.isa));
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("error=%s\n", dlerror());
    return 2;
  }
  openblas_core::Check c;
  if (!openblas_core::check(lib, c)) {
    std::printf("error=%s is not OpenBLAS\n", name);
    return 3;
  }
  std::printf("library=%s\nconfig=%s\ncore=%s\ncore_isa=%s\nbest=%s\nbelow_par=%d\nfix=%s\n",
              c.library.c_str(), c.config.c_str(), c.core.c_str(), cpu::isa_name(c.core_isa), c.best.c_str(),
              c.below_par ? 1 : 0, c.fix.c_str());
  return 0;
}
