// DNN nodes on the reference backend: the checks every kind shares (addressable tensors, element
// types, attributes), then the kind's own check and run.
#include "backends/reference/dnn/dnn.hpp"

#include <new>
#include <string_view>

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

// The kinds whose primary output (dst) goes through the Epilogue, in the propagations oneDNN
// allows attributes on.
bool takes_attributes(const Desc& d) {
  const bool fwd = d.prop == Prop::none || d.prop == Prop::forward_training || d.prop == Prop::forward_inference;
  switch (d.kind) {
    case Op::convolution:
    case Op::deconvolution:
    case Op::inner_product:
    case Op::matmul:
    case Op::eltwise:
    case Op::pooling:
    case Op::binary:
    case Op::reorder:
    case Op::prelu:
    case Op::reduction: return fwd;
    default: return false;
  }
}

Reason check_attributes(const Desc& d) {
  if (d.output_scale == 1 && d.npost_ops == 0) return Reason::ok;
  if (!takes_attributes(d)) return Reason::attr_unsupported;
  return capture::dnn::check_post_ops(d);
}

Reason check(const capture::Node& node) {
  if (std::string_view(capture::op_family(node.op)) != "dnn") return Reason::op_unsupported;
  const Call* call = node.dnn;
  // An unbound call (its memory did not match the description) has no data pointers to run on.
  if (!call || !call->desc || call->unbound || call->desc->kind != node.op) return Reason::desc_invalid;
  const Desc& d = *call->desc;
  if (d.unsupported) return Reason::desc_invalid;  // the frontend could not describe it fully
  const Kind kind = kind_of(d.kind);
  if (!kind.check) return Reason::op_unsupported;
  if (d.ntensors < 0 || d.ntensors > capture::dnn::kMaxTensors) return Reason::desc_invalid;
  for (int i = 0; i < d.ntensors; ++i) {
    const capture::dnn::Tensor& t = d.tensors[i];
    // The workspace is this backend's own format (dnn.hpp): each kind checks its type.
    if (t.arg != Arg::workspace && t.desc.dtype != DType::f32 && t.desc.dtype != DType::bf16)
      return Reason::dtype_unsupported;
    if (t.arg == Arg::workspace && capture::dtype_size(t.desc.dtype) == 0) return Reason::workspace_unsupported;
    if (!addressable(t.desc, call->data[i])) return Reason::layout_unsupported;
  }
  if (Reason r = check_attributes(d); r != Reason::ok) return r;
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
