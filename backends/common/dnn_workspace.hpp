// SOL's own DNN workspaces (oneDNN's are opaque), which the reference and opencl backends both
// write and read, so that either reads the other's:
// - pooling, max, forward_training: for each dst element, at the offset the workspace's layout
//   gives for that element's logical index, the position of the maximum within the kernel window,
//   (kd * KH + kh) * KW + kw, as u8 or s32 (the workspace's dtype). A u8 workspace serves windows
//   of at most 256 positions; larger ones are declined.
// - batch normalization with fuse_relu, forward_training: one bit per src element, in canonical
//   (logical row-major) order, bit i in byte i / 8 at position i % 8: whether the normalized value
//   was > 0 (kept by the ReLU). Needs ceil(elements / 8) bytes, which both oneDNN's byte-per-
//   element and bit-per-element workspaces provide.
// Here: whether a node's workspace can hold them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "capture/dnn/validate.hpp"
#include "hal/backend.hpp"
#include "ir/dnn.hpp"

namespace sol::backends {

// Max pooling's workspace, for a node whose window has `positions` positions: present where a
// backward pass reads it (else desc_invalid), able to hold the format where it is written or read
// (else workspace_unsupported).
inline hal::Reason check_pool_workspace(const capture::dnn::Desc& d, int64_t positions) noexcept {
  using capture::dnn::Alg;
  using capture::dnn::Arg;
  using capture::dnn::Prop;
  const capture::dnn::TensorDesc* ws = d.desc(Arg::workspace);
  if (d.alg == Alg::pool_max && d.prop == Prop::backward_data && !ws) return hal::Reason::desc_invalid;
  if (!ws || d.alg != Alg::pool_max || d.prop == Prop::forward_inference) return hal::Reason::ok;
  if (ws->dtype != capture::DType::u8 && ws->dtype != capture::DType::s32)
    return hal::Reason::workspace_unsupported;
  if (ws->dtype == capture::DType::u8 && positions > 256) return hal::Reason::workspace_unsupported;
  const capture::dnn::TensorDesc* y = d.desc(capture::dnn::forward(d) ? Arg::dst : Arg::diff_dst);
  return capture::dnn::same_dims(*ws, *y) ? hal::Reason::ok : hal::Reason::workspace_unsupported;
}

// Whether a batch normalization's fused ReLU mask travels in the workspace: from forward_training
// to the backward passes.
inline bool bnorm_mask(const capture::dnn::Desc& d) noexcept {
  return d.fuse_relu && (d.prop == capture::dnn::Prop::forward_training || !capture::dnn::forward(d));
}

// That mask's workspace, for `elements` src elements: present (else desc_invalid) and of at least
// ceil(elements / 8) bytes (else workspace_unsupported).
inline hal::Reason check_bnorm_mask(const capture::dnn::Desc& d, int64_t elements) noexcept {
  if (!bnorm_mask(d)) return hal::Reason::ok;
  const capture::dnn::TensorDesc* ws = d.desc(capture::dnn::Arg::workspace);
  if (!ws) return hal::Reason::desc_invalid;
  return ws->bytes * 8 < static_cast<size_t>(elements) ? hal::Reason::workspace_unsupported : hal::Reason::ok;
}

}  // namespace sol::backends
