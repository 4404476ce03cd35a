#include "tools/sol/native_blas.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/cpu.hpp"
#include "common/human.hpp"
#include "common/openblas_core.hpp"

namespace sol::tools {
namespace {

// The file behind a dlopen handle, symbolic links (Debian's alternatives) resolved.
std::string file_of(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name) return "";
  char* real = realpath(map->l_name, nullptr);
  std::string path = real ? real : map->l_name;
  std::free(real);
  return path;
}

}  // namespace

void print_native_blas(std::FILE* out) {
  const cpu::Info& cpu = cpu::info();
  std::fprintf(out, "CPU: %s, %s, %d CPUs for this process\n",
               cpu.model.empty() ? cpu.vendor.c_str() : cpu.model.c_str(), cpu::isa_name(cpu.isa), cpu.cpus);

  // What a program linked to the BLAS gets: the loader's search, as for the program itself.
  void* lib = dlopen("libblas.so.3", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    std::fprintf(out, "native BLAS: libblas.so.3 cannot be loaded: %s\n", e ? e : "no reason given");
    return;
  }
  const std::string file = file_of(lib);
  openblas_core::Check check;
  if (!openblas_core::check(lib, check)) {
    std::fprintf(out, "native BLAS: libblas.so.3 -> %s (not OpenBLAS)\n", file.empty() ? "?" : file.c_str());
  } else {
    // Debian's OpenBLAS libblas.so.3 is a small library that forwards to libopenblas.so.0.
    if (check.library.empty() || check.library == file)
      std::fprintf(out, "native BLAS: libblas.so.3 -> %s\n", file.c_str());
    else
      std::fprintf(out, "native BLAS: libblas.so.3 -> %s, OpenBLAS in %s\n", file.c_str(),
                   check.library.c_str());
    // Long texts wrap at a terminal, as the rest of `sol backends` does.
    const size_t columns = out == stdout ? terminal_columns(STDOUT_FILENO) : 0;
    const auto print = [out, columns](const std::string& text) {
      const std::vector<std::string> lines = wrap(text, columns > 40 ? columns - 4 : columns ? 36 : SIZE_MAX);
      for (size_t i = 0; i < lines.size(); ++i)
        std::fprintf(out, "%s%s\n", i ? "    " : "  ", lines[i].c_str());
    };
    print(check.config + ": " + check.core + " kernels (" + cpu::isa_name(check.core_isa) + ")");
    if (check.below_par) print("below par: " + check.fix);
  }
  dlclose(lib);
}

}  // namespace sol::tools
