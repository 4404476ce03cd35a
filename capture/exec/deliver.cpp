#include <cstring>

#include "capture/exec/state.hpp"

namespace sol::capture::exec {

namespace {

// The size in bytes of a BLAS function's result, for the shims and CBLAS _sub routines that
// return it through a pointer.
size_t result_size(const Node& node) noexcept {
  const bool dbl = node.dtype == DType::f64 || node.dtype == DType::c128;
  switch (node.op) {
    case Op::iamax: return node.ilp64 ? sizeof(int64_t) : sizeof(int);  // an INTEGER
    case Op::sdsdot: return sizeof(float);
    case Op::dsdot: return sizeof(double);
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
      return dtype_size(node.dtype);
    default: return dbl ? sizeof(double) : sizeof(float);  // asum, nrm2, cabs1: real
  }
}

}  // namespace

void deliver_result(Node& node) noexcept {
  if (node.api == Api::dnnl) {
    node.ret.set(0);  // dnnl_success
    return;
  }
  if (node.result) {
    std::memcpy(node.result, node.ret.bytes, result_size(node));
    return;
  }
  if (node.api == Api::cblas && node.op == Op::iamax) {
    const int64_t fortran = node.ret.get<int64_t>();  // 1-based, 0 for an empty vector
    node.ret.set<size_t>(fortran > 0 ? static_cast<size_t>(fortran - 1) : 0);
  }
}

}  // namespace sol::capture::exec
