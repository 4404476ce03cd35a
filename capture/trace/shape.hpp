// A BLAS call's arguments as text: the shape (sizes and modes, which make its signature in
// summaries) and its parameters (leading dimensions, increments, scalars).
#pragma once

#include "capture/ir/node.hpp"
#include "capture/trace/text.hpp"

namespace sol::capture::trace {

// "m=128 n=32 k=512 transa=T transb=N", plus "layout=row" for row-major CBLAS calls.
void blas_shape(const Node& node, Text& out) noexcept;
// "lda=128 ldb=512 ldc=128 alpha=1 beta=0".
void blas_params(const Node& node, Text& out) noexcept;

}  // namespace sol::capture::trace
