#include "reference_blas.hpp"

#include <dlfcn.h>

#include <stdexcept>

#include "capture/blas/call.hpp"

namespace sol::test {
namespace {

using capture::Node;
using capture::Sym;

constexpr const char* kRealAlpha[] = {"csscal", "zdscal", "cher", "zher", "chpr", "zhpr", "cherk", "zherk"};

}  // namespace

Node blas_node(const std::string& routine) {
  const std::string want = routine + "_";
  for (size_t i = 0; i < capture::kNumSymbols; ++i) {
    const Sym s = static_cast<Sym>(i);
    if (capture::symbol_api(s) != capture::Api::blas || want != capture::symbol_name(s)) continue;
    Node node(s, capture::symbol_op(s), capture::symbol_dtype(s));
    node.blas.layout = 'C';
    for (const char* r : kRealAlpha)
      if (routine == r) node.blas.real_alpha = true;
    return node;
  }
  throw std::invalid_argument("no BLAS routine " + routine);
}

bool ReferenceBlas::open(std::string& why) {
  handle_ = dlopen("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) why = dlerror();
  return handle_ != nullptr;
}

void* ReferenceBlas::symbol(const char* name) {
  void* f = dlsym(handle_, name);
  if (!f) throw std::runtime_error(std::string("reference BLAS lacks ") + name);
  return f;
}

void ReferenceBlas::run(Node& node) {
  capture::blas::call_fortran(node.sym, symbol(capture::symbol_name(node.sym)), node);
}

}  // namespace sol::test
