// DNN nodes on the reference backend: the checks every kind shares (addressable tensors, element
// types, attributes), then the kind's own check and run.
#include "backends/reference/dnn/dnn.hpp"

#include <new>

#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

struct Kind {
  Reason (*check)(const Desc&) noexcept;
  void (*run)(const Call&);
};

// nullptr check: the kind is not implemented.
Kind kind_of(Op op) {
  switch (op) {
    case Op::convolution:
    case Op::deconvolution: return {conv_check, conv_run};
    case Op::inner_product: return {ip_check, ip_run};
    case Op::matmul: return {matmul_check, matmul_run};
    case Op::eltwise: return {eltwise_check, eltwise_run};
    case Op::pooling: return {pooling_check, pooling_run};
    case Op::batch_normalization:
    case Op::layer_normalization: return {norm_check, norm_run};
    case Op::softmax:
    case Op::logsoftmax: return {softmax_check, softmax_run};
    case Op::binary: return {binary_check, binary_run};
    case Op::sum: return {sum_check, sum_run};
    case Op::concat: return {concat_check, concat_run};
    case Op::reorder: return {reorder_check, reorder_run};
    case Op::shuffle: return {shuffle_check, shuffle_run};
    case Op::lrn: return {lrn_check, lrn_run};
    case Op::prelu: return {prelu_check, prelu_run};
    case Op::reduction: return {reduction_check, reduction_run};
    default: return {nullptr, nullptr};
  }
}

Reason check(const capture::Node& node) {
  if (Reason r = capture::dnn::check_node(node); r != Reason::ok) return r;
  const Call* call = node.dnn;
  const Desc& d = *call->desc;
  const Kind kind = kind_of(d.kind);
  if (!kind.check) return Reason::op_unsupported;
  for (int i = 0; i < d.ntensors; ++i) {
    const capture::dnn::Tensor& t = d.tensors[i];
    // The workspace is this backend's own format (dnn.hpp): each kind checks its type.
    if (t.arg != Arg::workspace && t.desc.dtype != DType::f32 && t.desc.dtype != DType::bf16)
      return Reason::dtype_unsupported;
    if (t.arg == Arg::workspace && capture::dtype_size(t.desc.dtype) == 0) return Reason::workspace_unsupported;
    if (!addressable(t.desc, call->data[i])) return Reason::layout_unsupported;
  }
  // Every kind oneDNN gives an output scale and post-ops is implemented here (the Epilogue).
  if (Reason r = capture::dnn::check_attributes(d); r != Reason::ok) return r;
  return kind.check(d);
}

}  // namespace

Reason dnn_supports(const capture::Node& node) noexcept {
  return check(node);
}

Reason dnn_run(capture::Node& node) noexcept {
  if (Reason r = check(node); r != Reason::ok) return r;
  // Every kind allocates all it needs before its first write, so running out of memory leaves
  // the outputs as they were.
  try {
    kind_of(node.op).run(*node.dnn);
  } catch (const std::bad_alloc&) {
    return Reason::out_of_memory;
  }
  return Reason::ok;
}

}  // namespace sol::backends::reference::dnn
