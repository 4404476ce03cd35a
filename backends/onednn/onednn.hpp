#pragma once

#include <memory>

#include "hal/backend.hpp"

namespace sol::backends::onednn {

// oneDNN for single-precision GEMM nodes: dnnl_sgemm, or matmul primitives created once per
// problem and cached (backends.onednn.gemm). oneDNN 2.x has no double-precision or complex GEMM;
// other BLAS nodes are declined with a reason and go elsewhere. DNN nodes, from any frontend, as
// oneDNN primitives made from their descriptions (dnn.hpp).
std::unique_ptr<hal::Backend> create();

}  // namespace sol::backends::onednn
