// SOL's own work, told apart from the program's: a primitive call a thread makes while it does
// SOL's work (a backend setting itself up, auto's measurements, the warm-up) is SOL's, never the
// program's, whichever thread makes it and whatever library makes it on SOL's behalf (libdnnl's
// own dnnl_primitive_desc_create calls dnnl_primitive_desc_iterator_create through its PLT, which
// the preloaded libsol's wrapper answers). Such a call goes to native, neither captured nor traced.
#pragma once

#include "common/macros.hpp"

namespace sol {

// How deep this thread is in SOL's own work: the interposer's re-entry guard (a call SOL is
// handling) and every OwnWork scope. > 0: calls go straight to native.
inline constinit SOL_TLS int t_own_depth = 0;

class OwnWork {
 public:
  OwnWork() noexcept { ++t_own_depth; }
  ~OwnWork() { --t_own_depth; }
  OwnWork(const OwnWork&) = delete;
  OwnWork& operator=(const OwnWork&) = delete;
};

}  // namespace sol
