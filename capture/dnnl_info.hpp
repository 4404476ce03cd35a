// What each oneDNN primitive computes, learnt once when it is created and looked up at every
// dnnl_primitive_execute: its kind, its problem in benchdnn's notation, its work.
//
// oneDNN's own entry points are used to query descriptors. They are taken from the library that
// defines the program's native oneDNN symbols and called directly, never through libsol's
// wrappers, so these queries are neither traced nor re-entrant.
#pragma once

#include <memory>
#include <string>

#include "capture/blas.hpp"
#include "capture/node.hpp"

namespace sol::capture::dnnl {

struct PrimitiveInfo {
  std::string kind;  // oneDNN's name of the primitive kind: "convolution", "inner_product", "reorder"...
  std::string
      shape;  // the problem: "prop=forward_training mb32_ic3oc16_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1
              //  src=f32:abcd wei=f32:abcd dst=f32:abcd" (format: docs/trace-format.md)
  DType dtype = DType::none;  // element type of the main source (src, src_0), none when unknown
  double flops = 0;           // work of one execution (multiply-add = 2)
  double bytes = 0;           // bytes of all its memory arguments, read plus written, one execution
};

// Binds the oneDNN query entry points of the library that defines `native_symbol` (any resolved
// native dnnl_* function). Idempotent and thread-safe; false when they cannot be found.
bool bind(const void* native_symbol) noexcept;

// After dnnl_primitive_create(&primitive, primitive_desc) returned dnnl_success.
void on_create(const void* primitive, const void* primitive_desc) noexcept;
// Before dnnl_primitive_destroy(primitive) runs.
void on_destroy(const void* primitive) noexcept;

// The description of a live primitive, or nullptr for one created before tracing started.
std::shared_ptr<const PrimitiveInfo> find(const void* primitive) noexcept;

// The memory arguments of one execution as operands (data handle, size of the memory, read or
// written according to its DNNL_ARG_* kind), for the dataflow graph. Returns how many were
// written to `out` (at most `max`).
int operands(const DnnlExec& exec, blas::Operand* out, int max) noexcept;

}  // namespace sol::capture::dnnl
