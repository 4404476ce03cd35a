// A BLAS call's arguments as text: the shape (sizes and modes, which make its signature in
// summaries) and its parameters (leading dimensions, increments, scalars).
#pragma once

#include <string>

#include "capture/blas/blas.hpp"
#include "capture/trace/text.hpp"
#include "ir/dnn.hpp"
#include "ir/node.hpp"

namespace sol::capture::trace {

// "m=128 n=32 k=512 transa=T transb=N", plus "layout=row" for row-major CBLAS calls.
void blas_shape(const Node& node, Text& out) noexcept;
// "lda=128 ldb=512 ldc=128 alpha=1 beta=0".
void blas_params(const Node& node, Text& out) noexcept;

// An operand as the dataflow graph's edges name it: "64x128 f32" (a matrix, rows x columns in
// the caller's layout), "128 f32" (a vector); a DNN tensor by its logical dims, "16x8x24x24 f32".
std::string operand_shape(const Node& node, const blas::Operand& op);
std::string tensor_shape(const dnn::Tensor& t);

}  // namespace sol::capture::trace
