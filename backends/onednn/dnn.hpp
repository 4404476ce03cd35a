// DNN nodes on oneDNN: each description (ir/dnn.hpp) made back into a oneDNN primitive,
// once, and executed on the node's buffers.
//
// The IR keeps what a primitive computes, not how a frontend asked for it, so the primitive is
// created from concrete descriptors: every tensor's layout as the node gives it (blocked formats
// included), the geometry with oneDNN's zero-based dilations, output scales and post-ops as
// attributes, scale and shift as separate tensors (dnnl_use_scale, dnnl_use_shift), and for a
// backward pass the forward primitive it needs as a hint, made from the same geometry. Given the
// layouts the program's own primitive chose, oneDNN picks the same implementation, so a node
// described from oneDNN computes what the program's primitive computed; one described from cuDNN
// runs on the CPU. This is how `sol replay` runs DNN nodes natively, and what the onednn backend
// offers a node from any frontend (in libsol the router sends a oneDNN program's DNN nodes to the
// program's own library instead: hal::Backend::dnn_is_native).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/onednn/api.hpp"
#include "hal/backend.hpp"
#include "ir/dnn.hpp"

namespace sol::backends::onednn {

// The functions the DNN path needs beyond the backend's own (api.hpp), bound from the same library.
#define SOL_ONEDNN_DNN_FUNCTIONS(X)                   \
  X(dilated_convolution_forward_desc_init)            \
  X(dilated_convolution_backward_data_desc_init)      \
  X(dilated_convolution_backward_weights_desc_init)   \
  X(dilated_deconvolution_forward_desc_init)          \
  X(dilated_deconvolution_backward_data_desc_init)    \
  X(dilated_deconvolution_backward_weights_desc_init) \
  X(inner_product_forward_desc_init)                  \
  X(inner_product_backward_data_desc_init)            \
  X(inner_product_backward_weights_desc_init)         \
  X(eltwise_forward_desc_init)                        \
  X(eltwise_backward_desc_init)                       \
  X(pooling_v2_forward_desc_init)                     \
  X(pooling_v2_backward_desc_init)                    \
  X(batch_normalization_forward_desc_init)            \
  X(batch_normalization_backward_desc_init)           \
  X(layer_normalization_forward_desc_init)            \
  X(layer_normalization_backward_desc_init)           \
  X(softmax_v2_forward_desc_init)                     \
  X(softmax_v2_backward_desc_init)                    \
  X(binary_desc_init)                                 \
  X(lrn_forward_desc_init)                            \
  X(lrn_backward_desc_init)                           \
  X(shuffle_forward_desc_init)                        \
  X(shuffle_backward_desc_init)                       \
  X(resampling_forward_desc_init)                     \
  X(resampling_backward_desc_init)                    \
  X(reduction_desc_init)                              \
  X(prelu_forward_desc_init)                          \
  X(prelu_backward_desc_init)                         \
  X(sum_primitive_desc_create)                        \
  X(concat_primitive_desc_create)                     \
  X(reorder_primitive_desc_create)                    \
  X(post_ops_append_sum_v2)                           \
  X(post_ops_append_eltwise)                          \
  X(post_ops_append_binary)                           \
  X(primitive_desc_query_md)                          \
  X(memory_set_data_handle)                           \
  X(memory_desc_get_size)

struct DnnApi {
#define SOL_ONEDNN_DNN_MEMBER(name) decltype(&::dnnl_##name) name = nullptr;
  SOL_ONEDNN_DNN_FUNCTIONS(SOL_ONEDNN_DNN_MEMBER)
#undef SOL_ONEDNN_DNN_MEMBER
  bool bind(void* lib, std::string& why) noexcept;
};

class DnnPrimitives {
 public:
  explicit DnnPrimitives(const Api& api) noexcept : api_(api) {}
  // Nothing is destroyed: at exit libdnnl may already be finalised (as Matmul).
  ~DnnPrimitives() = default;

  // Binds the functions from `lib` and creates the CPU engine and a stream.
  bool init(void* lib, std::string& why) noexcept;

  // Reason::ok when oneDNN creates a primitive for the description (made here, and kept).
  hal::Reason supports(const capture::dnn::Desc& desc) noexcept;
  // Runs the call's primitive on its buffers.
  hal::Reason run(const capture::dnn::Call& call) noexcept;

 private:
  struct Entry;
  std::shared_ptr<Entry> entry(const capture::dnn::Desc& desc) noexcept;
  std::shared_ptr<Entry> create(const capture::dnn::Desc& desc) noexcept;

  const Api& api_;
  DnnApi dnn_;
  dnnl_engine_t engine_ = nullptr;
  dnnl_stream_t stream_ = nullptr;
  std::mutex mu_;  // the cache; and one execution at a time (memory objects and stream are shared)
  std::unordered_map<uint64_t, std::shared_ptr<Entry>> cache_;
};

}  // namespace sol::backends::onednn
