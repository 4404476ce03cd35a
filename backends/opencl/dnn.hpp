// DNN nodes (ir/dnn.hpp) on an OpenCL device, f32, with SOL's own kernels
// (dnn_kernels.cl). Kinds: convolution and deconvolution (every propagation, groups, dilation,
// strides, asymmetric padding, 1 to 3 spatial dims), inner product, matmul, eltwise, pooling,
// batch normalization, softmax and logsoftmax, binary, sum, concat, reorder; output scale and
// post-ops wherever oneDNN allows them on these kinds.
//
// Data movement, per node:
//   up    each tensor the node reads, as its raw bytes (TensorDesc::bytes from its pointer); an
//         output whose layout leaves bytes of its buffer unwritten (gaps, an offset, a workspace)
//         too, so that those bytes come back as they were.
//   on the device  inputs whose layout is not dense canonical (row-major over the logical dims)
//         are gathered into dense arrays by one generic kernel; the kind's kernels compute dense
//         outputs, the output scale and post-ops run on those, and the same generic kernel
//         scatters them into their layouts, blocked padding written as zeros.
//   down  every written tensor into host staging; only after every device command succeeded is
//         it copied into the caller's memory (its `bytes`, nothing outside), so a failure leaves
//         every output untouched.
//
// Workspaces: SOL's own formats, the reference backend's too (backends/common/dnn_workspace.hpp).
#pragma once

#include "backends/opencl/device.hpp"
#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends::opencl {

class Dnn {
 public:
  // Reads SOL_TEST_WRONG_KERNEL (see dnn.cpp).
  explicit Dnn(Device& device);

  // Reason::ok when run() computes this node (a "dnn"-family op with node.dnn bound), else why not.
  hal::Reason supports(const capture::Node& node) const noexcept;

  // Computes a node supports() accepted. Anything but Reason::ok means the caller's memory was not
  // written. May throw std::bad_alloc (host staging).
  hal::Reason run(capture::Node& node);

 private:
  Device& device_;
  float conv_bump_ = 0;  // SOL_TEST_WRONG_KERNEL=convolution: added to a convolution's first output
};

}  // namespace sol::backends::opencl
