// Internal to capture/dnnl_*.cpp: the oneDNN entry points SOL calls itself, the DNNL_ARG_* table
// and the description of a primitive descriptor.
//
// oneDNN's headers are included for types and constants only. Every call goes through the Api
// table that bind() fills from the program's own libdnnl: libsol exports wrappers named like
// oneDNN's functions, so a call by name would land in SOL itself.
#pragma once

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <cstdint>

#include "interpose/dnnl/dnnl.hpp"
#include "ir/dnn.hpp"

namespace sol::interpose::dnnl::detail {

// dnnl_<name> for each entry; the member is named <name> and has the header's exact type.
#define SOL_DNNL_FUNCTIONS(X)     \
  X(version)                      \
  X(primitive_desc_query)         \
  X(primitive_desc_query_md)      \
  X(primitive_desc_query_s32)     \
  X(primitive_desc_get_attr)      \
  X(primitive_get_primitive_desc) \
  X(primitive_attr_get_post_ops)  \
  X(post_ops_len)                 \
  X(post_ops_get_kind)            \
  X(post_ops_get_params_eltwise)  \
  X(post_ops_get_params_binary)   \
  X(post_ops_get_params_sum_v2)   \
  X(primitive_attr_get_output_scales) \
  X(memory_desc_equal)            \
  X(engine_get_kind)              \
  X(memory_create)                \
  X(memory_destroy)               \
  X(memory_get_engine)            \
  X(primitive_execute)            \
  X(stream_wait)                  \
  X(memory_get_memory_desc)       \
  X(memory_get_data_handle)       \
  X(memory_desc_get_size)         \
  X(prim_kind2str)                \
  X(prop_kind2str)                \
  X(alg_kind2str)                 \
  X(dt2str)                       \
  X(rnn_direction2str)

struct Api {
#define SOL_DNNL_MEMBER(name) decltype(&::dnnl_##name) name;
  SOL_DNNL_FUNCTIONS(SOL_DNNL_MEMBER)
#undef SOL_DNNL_MEMBER
};

// How a primitive uses the memory passed as one DNNL_ARG_* kind.
enum class Use : uint8_t {
  read,
  write,
  workspace,  // forward passes write it, backward passes read it
  stats,      // mean and variance: written when the primitive computes them, read otherwise
  skip,       // the scratchpad: SOL's business neither for the dataflow graph nor for bytes
};
struct ArgKind {
  const char* name;  // short and static: "src", "wei", "bia", "dst", "diff_dst", "src1", "po_src"...
  Use use;
};
ArgKind arg_kind(int arg) noexcept;

// Where each tensor of a DNN node comes from in a dnnl_primitive_execute: the DNNL_ARG_* whose
// memory holds it, and the byte offset inside that memory (batch normalization's scale and
// shift share one DNNL_ARG_WEIGHTS buffer in oneDNN 2.x).
struct Binding {
  int arg = 0;
  size_t offset = 0;
};

// A PrimitiveInfo plus what the frontend needs to bind an execution's arguments.
struct Description : PrimitiveInfo {
  bool stats_written = false;  // DNNL_ARG_MEAN / DNNL_ARG_VARIANCE are outputs
  bool dst_read = false;       // a sum post-op accumulates into DNNL_ARG_DST
  dnnl_primitive_kind_t prim_kind = dnnl_undefined_primitive;  // the op descriptor's own kind
  dnnl_prop_kind_t prop = dnnl_prop_kind_undef;
  const void* op_desc = nullptr;  // valid only while describe() runs
  Binding bindings[capture::dnn::kMaxTensors];
};

// Describes the primitive behind `pd` (see dnnl_describe.cpp for the notation). False when `pd`
// cannot be queried. May throw std::bad_alloc.
bool describe(const Api& api, const_dnnl_primitive_desc_t pd, Description& out);

// The DNN node of a primitive (translate.cpp): fills `node` (tensors, geometry, attributes) and
// one binding per tensor. Leaves node.unsupported set, with a reason, when the IR cannot express
// the primitive. `info` supplies what describe() already found (kind, flops, text).
void translate(const Api& api, const_dnnl_primitive_desc_t pd, const Description& info,
               capture::dnn::Desc& node, Binding* bindings);
// The sum scales recorded from dnnl_sum_primitive_desc_create (frontend.cpp), for translate().
bool sum_scales(const_dnnl_primitive_desc_t pd, float* scales, int n) noexcept;

}  // namespace sol::interpose::dnnl::detail
