#include "capture/dnn/operands.hpp"

#include <algorithm>

namespace sol::capture::dnn {

int operands(const Call& call, blas::Operand* out, int max, const Tensor** tensors) noexcept {
  if (!call.desc || call.unbound) return 0;
  const Desc& d = *call.desc;
  int n = 0;
  for (int i = 0; i < d.ntensors && n < max; ++i) {
    if (!call.data[i] || !d.tensors[i].desc.bytes) continue;
    if (tensors) tensors[n] = &d.tensors[i];
    blas::Operand& o = out[n++];
    o = blas::Operand{};
    o.name = arg_name(d.tensors[i].arg);
    o.ptr = call.data[i];
    o.bytes = d.tensors[i].desc.bytes;
    o.read = d.read(d.tensors[i]);
    o.written = d.written(d.tensors[i]);
  }
  return n;
}

double depth(const Desc& desc, const Tensor& t) noexcept {
  const double elements = static_cast<double>(t.desc.layout.elements());
  return elements > 0 ? std::max(1.0, desc.flops / elements) : 1.0;
}

}  // namespace sol::capture::dnn
