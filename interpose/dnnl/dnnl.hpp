// The oneDNN frontend: what each primitive computes, learnt once when it is created and looked up
// at every dnnl_primitive_execute, as a framework-neutral DNN node (ir/dnn.hpp) plus the
// text the trace shows (kind, problem in benchdnn's notation, work).
//
// oneDNN's own entry points are used to query descriptors. They are taken from the library that
// defines the program's native oneDNN symbols and called directly, never through libsol's
// wrappers, so these queries are neither traced nor re-entrant. Only this folder includes
// oneDNN's headers; capture/, hal/ and backends/ see DNN nodes.
#pragma once

#include <memory>
#include <string>

#include "capture/capture.hpp"
#include "ir/dnn.hpp"
#include "ir/node.hpp"

namespace sol::interpose::dnnl {

using capture::DType;

// What SOL knows of one live primitive.
struct PrimitiveInfo {
  std::string kind;  // the kind's name: "convolution", "inner_product", "reorder"... (SOL's op names
                     // where the primitive is a DNN node, else oneDNN's name)
  std::string shape;  // the problem: "prop=forward_training mb32_ic3oc16_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1
                      //  src=f32:abcd wei=f32:abcd dst=f32:abcd" (format: docs/trace-format.md)
  DType dtype = DType::none;  // element type of the main source (src, src_0), none when unknown
  double flops = 0;           // work of one execution (multiply-add = 2)
  double bytes = 0;           // bytes of all its memory arguments, read plus written, one execution
  // The primitive as a DNN node, or nullptr with the reason SOL's backends cannot take it
  // ("runtime dimensions", "rnn is not a DNN node yet"...): then it always runs natively.
  std::shared_ptr<const capture::dnn::Desc> node;
  std::string why_not;
};

// Binds the oneDNN query entry points of the library that defines `native_symbol` (any resolved
// native dnnl_* function). Idempotent and thread-safe; false when they cannot be found.
bool bind(const void* native_symbol) noexcept;

// Describes a primitive descriptor (const_dnnl_primitive_desc_t). nullptr when it cannot be
// queried (not bound, or no memory).
std::shared_ptr<const PrimitiveInfo> describe(const void* primitive_desc) noexcept;

// After dnnl_primitive_create(&primitive, primitive_desc) returned dnnl_success.
void on_create(const void* primitive, const void* primitive_desc) noexcept;
// Before dnnl_primitive_destroy(primitive) runs.
void on_destroy(const void* primitive) noexcept;

// The description of a live primitive, or nullptr for one created before SOL started.
std::shared_ptr<const PrimitiveInfo> find(const void* primitive) noexcept;

// Binds one execution's memory arguments (const dnnl_exec_arg_t[nargs]) to the node's tensors
// (prim.node). False, with `why`, when the primitive is not a DNN node, an argument is missing or
// its memory does not match the description (another shape or layout than the primitive was
// created for): the call then runs natively.
bool bind_call(const PrimitiveInfo& prim, int nargs, const void* args, capture::dnn::Call& call,
               const char** why) noexcept;

// One dnnl_primitive_execute, as the frontend keeps it while the node runs.
struct Execution {
  const void* primitive = nullptr;
  void* stream = nullptr;
  int nargs = 0;
  const void* args = nullptr;  // const dnnl_exec_arg_t*
  std::shared_ptr<const PrimitiveInfo> info;
};
// The same for a whole execution, which must outlive `call`; the call can then also be run
// natively on other buffers (Call::rerun_native: verify mode).
bool bind_call(const Execution& exec, capture::dnn::Call& call, const char** why) noexcept;

// Records the scales a sum primitive descriptor was created with (oneDNN 2.x cannot be asked for
// them). submit() does it for every dnnl_sum_primitive_desc_create it sees; a program that
// creates descriptors without libsol (a test) calls it itself. Forgotten when `primitive_desc`
// is destroyed through SOL.
void record_sum_scales(const void* primitive_desc, const float* scales, int n) noexcept;

// The frontend's part of every captured oneDNN call (the generated wrappers call it): primitive
// bookkeeping around create and destroy, and dnnl_primitive_execute as a DNN node.
void submit(capture::Node& node, capture::NativeFn native) noexcept;

}  // namespace sol::interpose::dnnl
