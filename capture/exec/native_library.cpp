#include <dlfcn.h>

#include "capture/exec/state.hpp"
#include "common/log.hpp"
#include "common/openblas_core.hpp"

namespace sol::capture::exec {

namespace {

// One line per process when the program's own library runs below this CPU's ability: an
// OpenBLAS whose kernels are older than the CPU (the measured figures say the same later).
// Whether it does.
bool warn_if_below_par(void* lib) noexcept {
  try {
    openblas_core::Check c;
    if (!openblas_core::check(lib, c) || !c.below_par) return false;
    log::once(log::Level::warn, "native-below-par",
              "the program's OpenBLAS (%s) runs its %s kernels, below this CPU's ability: %s; "
              "auto measures and routes around it meanwhile",
              c.library.c_str(), c.core.c_str(), c.fix.c_str());
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

route::NativeKind classify(const void* native, Family family, bool& below_par) noexcept {
  below_par = false;
  if (!native) return route::NativeKind::missing;
  Dl_info info{};
  if (!dladdr(native, &info) || !info.dli_fname) return route::NativeKind::other;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) lib = dlopen(nullptr, RTLD_LAZY);  // the main program
  if (!lib) return route::NativeKind::other;
  // dlsym on a handle also searches the object's dependencies: Debian's OpenBLAS libblas.so.3 is
  // a thin library over libopenblas.so.0.
  route::NativeKind kind = route::NativeKind::other;
  if (dlsym(lib, "openblas_get_config")) {
    kind = route::NativeKind::openblas;
    below_par = warn_if_below_par(lib);
  } else if (family != Family::none && dlsym(lib, family_c_name(family, "openblas_get_config").c_str())) {
    kind = route::NativeKind::openblas;
  }
  else if (dlsym(lib, "mkl_get_version") || dlsym(lib, "MKL_Get_Version"))
    kind = route::NativeKind::mkl;
  else if (dlsym(lib, "bli_info_get_version_str"))
    kind = route::NativeKind::blis;
  else if (dlsym(lib, "dnnl_version"))  // its dnnl_sgemm: an optimized GEMM
    kind = route::NativeKind::onednn;
  dlclose(lib);
  return kind;
}

}  // namespace sol::capture::exec
