// DNN nodes (ir/dnn.hpp) on the CUDA device, f32, with cuDNN's legacy API (one call per
// operation; libcudnn.so.9 opened with dlopen at the first DNN node, never linked) and cuBLAS:
//   convolution, deconvolution   forward, backward data, backward weights (and bias); groups,
//                                dilation, strides, 1 to 3 spatial dims; padding cuDNN can express
//                                (symmetric, or asymmetric where the windows are the same);
//                                only algorithms that sum directly (implicit GEMM, GEMM, direct),
//                                never FFT or Winograd, whose rounding exceeds BLAS tolerances;
//                                FMA math: no TF32
//   inner_product, matmul        cuBLAS SGEMM (batched, with broadcast batch dims)
//   eltwise                      relu (any slope forward), tanh, logistic, elu, bounded_relu,
//                                swish, clip, linear, square, sqrt; backward: the activations
//   pooling                      max (inference), average (forward and backward), no dilation
//   batch_normalization          forward (global or batch statistics, scale, shift, fused ReLU in
//                                inference), backward (batch statistics)
//   softmax, logsoftmax          forward and backward, any axis
//   binary (add, sub, mul, max, min), sum, concat, reorder
// with the output scale and sum, eltwise and binary post-ops wherever oneDNN allows them. Tensors
// of any layout the IR expresses, plain or blocked (dnn_plan.hpp). Declined, with the reason:
// other types, workspaces (max pooling training, a fused ReLU's mask: SOL's format, which cuDNN
// does not produce), the remaining kinds and algorithms.
//
// Data movement per node: each tensor the node reads goes up as its buffer's bytes (an output too
// where its layout leaves bytes of the buffer unwritten, so they come back as they were); outputs
// come back into pinned staging and reach the caller's memory only once every command succeeded.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "backends/cuda/device.hpp"
#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends::cuda {

class Dnn {
 public:
  explicit Dnn(Device& device);
  ~Dnn();
  Dnn(const Dnn&) = delete;
  Dnn& operator=(const Dnn&) = delete;

  // Reason::ok when run() computes the node; unavailable once cuDNN could not be opened.
  hal::Reason supports(const capture::Node& node) const noexcept;

  // Computes a node supports() accepted, under the backend's lock. Opens cuDNN the first time
  // (unavailable, logged once with the reason, when it cannot). Anything but Reason::ok means the
  // caller's memory was not written. May throw std::bad_alloc. Lazily, the node runs eagerly on
  // the host's memory: every pending result comes back and every device copy goes first, so that
  // it reads current data and its writes meet open pages; it is a flush of its own.
  hal::Reason run(capture::Node& node);

  // "cuDNN 9.19.0 (/usr/local/cuda/lib64/libcudnn.so.9)", why it could not be opened, or "" before
  // the first DNN node.
  std::string describe() const;

  struct Library;  // cuDNN's functions, handle and memory pool (dnn.cpp)

 private:
  bool open();
  hal::Reason run_eagerly(capture::Node& node);

  Device& device_;
  std::unique_ptr<Library> lib_;
  std::atomic<bool> failed_{false};  // set once, under the backend's lock; supports() reads it unlocked
  std::string why_;                  // written before failed_ is set
};

}  // namespace sol::backends::cuda
