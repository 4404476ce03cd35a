// The DNN kinds the device backends (opencl, cuda) run, by family, and a backend's entry for each
// family: a table (DnnKinds) of its check of a description and its run of a node. One list for
// both, so that they take the same kinds and dispatch them the same way; the semantics every
// backend checks alike (geometry, post-ops) are capture/dnn/validate.hpp's.
#pragma once

#include <cstdint>

#include "capture/dnn/validate.hpp"
#include "hal/backend.hpp"
#include "ir/dnn.hpp"

namespace sol::backends {

enum class DnnFamily : uint8_t {
  conv,  // convolution, deconvolution
  ip,    // inner_product
  matmul,
  eltwise,
  pooling,
  bnorm,    // batch_normalization
  softmax,  // softmax, logsoftmax
  binary,
  sum,
  concat,
  reorder,
  none,  // a kind the device backends do not run: layer_normalization, lrn, shuffle, prelu, ...
};

inline DnnFamily dnn_family(capture::Op op) noexcept {
  using capture::Op;
  switch (op) {
    case Op::convolution:
    case Op::deconvolution: return DnnFamily::conv;
    case Op::inner_product: return DnnFamily::ip;
    case Op::matmul: return DnnFamily::matmul;
    case Op::eltwise: return DnnFamily::eltwise;
    case Op::pooling: return DnnFamily::pooling;
    case Op::batch_normalization: return DnnFamily::bnorm;
    case Op::softmax:
    case Op::logsoftmax: return DnnFamily::softmax;
    case Op::binary: return DnnFamily::binary;
    case Op::sum: return DnnFamily::sum;
    case Op::concat: return DnnFamily::concat;
    case Op::reorder: return DnnFamily::reorder;
    default: return DnnFamily::none;
  }
}

// A check of a description that passed the node-level checks: Reason::ok or why not.
using DnnCheck = hal::Reason (*)(const capture::dnn::Desc&) noexcept;

// A backend's Entry (a DnnCheck, a run...) for each family, built with designated initializers.
template <class Entry>
struct DnnKinds {
  Entry conv, ip, matmul, eltwise, pooling, bnorm, softmax, binary, sum, concat, reorder;

  // The entry of a kind's family; nullptr for a kind the device backends do not run.
  const Entry* of(capture::Op op) const noexcept {
    switch (dnn_family(op)) {
      case DnnFamily::conv: return &conv;
      case DnnFamily::ip: return &ip;
      case DnnFamily::matmul: return &matmul;
      case DnnFamily::eltwise: return &eltwise;
      case DnnFamily::pooling: return &pooling;
      case DnnFamily::bnorm: return &bnorm;
      case DnnFamily::softmax: return &softmax;
      case DnnFamily::binary: return &binary;
      case DnnFamily::sum: return &sum;
      case DnnFamily::concat: return &concat;
      case DnnFamily::reorder: return &reorder;
      case DnnFamily::none: break;
    }
    return nullptr;
  }
};

// The kind's own check from a table of DnnChecks: op_unsupported for a kind not run here.
inline hal::Reason check_dnn_kind(const DnnKinds<DnnCheck>& checks, const capture::dnn::Desc& d) noexcept {
  const DnnCheck* check = checks.of(d.kind);
  return check ? (*check)(d) : hal::Reason::op_unsupported;
}

// The output scale and post-ops (capture/dnn/validate.hpp), where oneDNN gives them to a kind run
// here: attr_unsupported on any other.
inline hal::Reason check_dnn_attributes(const capture::dnn::Desc& d) noexcept {
  if (capture::dnn::has_attributes(d) && dnn_family(d.kind) == DnnFamily::none)
    return hal::Reason::attr_unsupported;
  return capture::dnn::check_attributes(d);
}

}  // namespace sol::backends
