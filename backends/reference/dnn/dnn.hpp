// The reference backend's DNN nodes (capture/ir/dnn.hpp): every kind computed with plain loops
// over logical indices, as oneDNN 2.6 defines it. It is the oracle the DNN conformance suite
// (tests/unit/dnn) checks against native oneDNN, and the oracle other backends are compared with.
//
// How every kind runs: each input is first gathered into a dense f32 array in canonical order
// (Layout::offset per element, bf16 widened), the kind computes on those arrays (reductions
// accumulate in double), and each output is scattered back through its layout with the output
// scale and post-ops applied, and zeros written to the padding of blocked dims. Reading everything
// before writing anything makes in-place execution (src == dst) safe, and all allocation happens
// before the first write, so a failure never leaves partial results.
//
// Workspaces (oneDNN's are opaque; this backend defines its own, read by its own backward passes):
// - pooling, max, forward_training: for each dst element, at the offset the workspace's layout
//   gives for that element's logical index, the position of the maximum within the kernel window,
//   (kd * KH + kh) * KW + kw, as u8 or s32 (the workspace's dtype). A u8 workspace serves windows
//   of at most 256 positions; larger ones are declined.
// - batch normalization with fuse_relu, forward_training: one bit per src element, in canonical
//   (logical row-major) order, bit i in byte i / 8 at position i % 8: whether the normalized value
//   was > 0 (kept by the ReLU). Needs ceil(elements / 8) bytes, which both oneDNN's byte-per-
//   element and bit-per-element workspaces provide.
#pragma once

#include "capture/ir/node.hpp"
#include "hal/backend.hpp"

namespace sol::backends::reference::dnn {

// Reason::ok when dnn_run() computes this node (an op of the "dnn" family with node.dnn set).
hal::Reason dnn_supports(const capture::Node& node) noexcept;
// Computes the node in place; any reason but ok leaves every output untouched.
hal::Reason dnn_run(capture::Node& node) noexcept;

}  // namespace sol::backends::reference::dnn
