// The test oracle: Debian's reference BLAS (netlib 3.11), opened with dlopen and called through
// its Fortran symbols with the arguments of a capture::Node.
#pragma once

#include <string>

#include "ir/node.hpp"

namespace sol::test {

// A node for a Fortran BLAS routine named as in interpose/spec/blas.toml ("cgemm", "csscal"),
// with op, dtype and real_alpha filled as the generated wrapper fills them; arguments zero.
capture::Node blas_node(const std::string& routine);

class ReferenceBlas {
 public:
  // false with `why` when the library cannot be opened.
  bool open(std::string& why);

  // Calls the routine of `node` (its Fortran symbol) with the node's arguments, through
  // capture::blas::call_fortran; function results go to node.ret as the backends store them.
  void run(capture::Node& node);

 private:
  void* symbol(const char* name);
  void* handle_ = nullptr;
};

}  // namespace sol::test
