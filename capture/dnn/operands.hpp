// The memory a DNN node touches, in the terms the trace's dataflow graph and verify mode use for
// BLAS operands: each bound tensor's buffer, read and/or written as its role says.
#pragma once

#include "capture/blas/blas.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::dnn {

// Fills `out` (at most `max`) with the operands of a bound call; returns how many. With `tensors`,
// also the tensor each operand is (for its dims).
int operands(const Call& call, blas::Operand* out, int max, const Tensor** tensors = nullptr) noexcept;

// How long the sums behind one element of tensor `t` are (for tolerances): the work of the
// call per element written, at least 1.
double depth(const Desc& desc, const Tensor& t) noexcept;

}  // namespace sol::capture::dnn
