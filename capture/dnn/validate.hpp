// Checks of a DNN node that every backend makes the same way: algorithm families, broadcasting,
// and the post-ops of a node whose kind takes them. Which kinds take attributes is each
// backend's own capability and stays there.
#pragma once

#include "capture/ir/dnn.hpp"
#include "hal/backend.hpp"

namespace sol::capture::dnn {

// An eltwise algorithm (the *_dst ones included), and those whose backward pass reads dst.
bool is_eltwise(Alg a) noexcept;
bool uses_dst(Alg a) noexcept;
bool is_binary(Alg a) noexcept;

// Whether `b` broadcasts to `a` numpy-style: same rank, each dim equal or 1.
bool broadcasts_to(const TensorDesc& b, const TensorDesc& a) noexcept;

// The output scale and post-ops of a node whose kind takes them: a dst to apply them to, sum
// post-ops reading dst's own type, known eltwise and binary algorithms, binary sources that
// broadcast to dst. attr_unsupported or desc_invalid, else ok.
hal::Reason check_post_ops(const Desc& d) noexcept;

// Whether the layout is one Layout::offset() addresses inside the tensor's buffer at `data`
// (sane dims, blocks and strides; a buffer and offset where there are elements).
bool addressable(const TensorDesc& t, const void* data) noexcept;

// A forward propagation (training or inference); two tensors of the same dims; how many multi_src
// tensors a node has (sum, concat).
bool forward(const Desc& d) noexcept;
bool same_dims(const TensorDesc& a, const TensorDesc& b) noexcept;
int count_sources(const Desc& d) noexcept;

// What a node's tensors must be, whatever runs it: the ones its kind and propagation read and
// write are there, with dims that agree. prop_unsupported (a propagation the kind has not) or
// desc_invalid, else ok. Each backend adds what it can run.
hal::Reason check_softmax_tensors(const Desc& d) noexcept;
hal::Reason check_sum_tensors(const Desc& d) noexcept;
hal::Reason check_concat_tensors(const Desc& d) noexcept;
hal::Reason check_reorder_tensors(const Desc& d) noexcept;
// Batch normalization: src and dst (diff_dst), per-channel statistics present where read (global
// statistics, or backward) and of the channel count, scale/shift likewise, diff_src backward.
hal::Reason check_bnorm_tensors(const Desc& d) noexcept;

}  // namespace sol::capture::dnn
