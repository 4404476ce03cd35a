// The reference backend's DNN nodes (ir/dnn.hpp): every kind computed with plain loops
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
// Workspaces (oneDNN's are opaque): SOL's own formats, opencl's too
// (backends/common/dnn_workspace.hpp).
#pragma once

#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends::reference::dnn {

// Reason::ok when dnn_run() computes this node (an op of the "dnn" family with node.dnn set).
hal::Reason dnn_supports(const capture::Node& node) noexcept;
// Computes the node in place; any reason but ok leaves every output untouched.
hal::Reason dnn_run(capture::Node& node) noexcept;

}  // namespace sol::backends::reference::dnn
