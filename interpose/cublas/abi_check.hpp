// Checks abi.hpp against the real CUDA headers, which the including file has included first
// (build/generated/cublas_check.cpp). Never part of libsol.
#pragma once

#include <cuda_runtime_api.h>

#include <type_traits>

#include "interpose/cublas/abi.hpp"
#include "interpose/cuda/cudart_check.hpp"

namespace sol::interpose::cublas::abi_check {

#define SOL_ABI_SAME_VALUE(name, value)                                              \
  static_assert(static_cast<long long>(::name) == static_cast<long long>(abi::name), \
                "interpose/cublas/abi.hpp: " #name " differs from the CUDA header");
SOL_CUBLAS_STATUS(SOL_ABI_SAME_VALUE)
SOL_CUBLAS_OPERATION(SOL_ABI_SAME_VALUE)
SOL_CUBLAS_POINTER_MODE(SOL_ABI_SAME_VALUE)
SOL_CUBLAS_MATH(SOL_ABI_SAME_VALUE)
SOL_CUBLAS_COMPUTE(SOL_ABI_SAME_VALUE)
SOL_CUDA_DATA_TYPE(SOL_ABI_SAME_VALUE)
SOL_CUBLASLT_MATMUL_DESC(SOL_ABI_SAME_VALUE)
SOL_CUBLASLT_MATRIX_LAYOUT(SOL_ABI_SAME_VALUE)
SOL_CUBLASLT_ORDER(SOL_ABI_SAME_VALUE)
SOL_CUBLASLT_POINTER_MODE(SOL_ABI_SAME_VALUE)
SOL_CUBLASLT_EPILOGUE(SOL_ABI_SAME_VALUE)
#undef SOL_ABI_SAME_VALUE

// Same size and alignment, and an enum for an enum: passed and returned alike.
template <class Ours, class Theirs>
constexpr bool same_abi() {
  return sizeof(Ours) == sizeof(Theirs) && alignof(Ours) == alignof(Theirs) &&
         std::is_enum_v<Ours> == std::is_enum_v<Theirs> && std::is_pointer_v<Ours> == std::is_pointer_v<Theirs>;
}
#define SOL_ABI_SAME_TYPE(name) \
  static_assert(same_abi<abi::name, ::name>(), "interpose/cublas/abi.hpp: " #name " differs from the CUDA header");
SOL_ABI_SAME_TYPE(cublasStatus_t)
SOL_ABI_SAME_TYPE(cublasOperation_t)
SOL_ABI_SAME_TYPE(cublasPointerMode_t)
SOL_ABI_SAME_TYPE(cublasMath_t)
SOL_ABI_SAME_TYPE(cublasComputeType_t)
SOL_ABI_SAME_TYPE(cudaDataType_t)
SOL_ABI_SAME_TYPE(cudaDataType)
SOL_ABI_SAME_TYPE(cublasGemmAlgo_t)
SOL_ABI_SAME_TYPE(cublasLtMatmulDescAttributes_t)
SOL_ABI_SAME_TYPE(cublasLtMatrixLayoutAttribute_t)
SOL_ABI_SAME_TYPE(cublasLtOrder_t)
SOL_ABI_SAME_TYPE(cublasLtPointerMode_t)
SOL_ABI_SAME_TYPE(cublasLtEpilogue_t)
SOL_ABI_SAME_TYPE(cublasHandle_t)
SOL_ABI_SAME_TYPE(cublasLtHandle_t)
SOL_ABI_SAME_TYPE(cublasLtMatmulDesc_t)
SOL_ABI_SAME_TYPE(cublasLtMatrixLayout_t)
SOL_ABI_SAME_TYPE(cublasLtMatmulAlgo_t)
SOL_ABI_SAME_TYPE(cudaStream_t)
SOL_ABI_SAME_TYPE(cuComplex)
SOL_ABI_SAME_TYPE(cuDoubleComplex)
#undef SOL_ABI_SAME_TYPE

// cuBLAS's getters the frontend calls (frontend.cpp's handle_state). The CUDA runtime's types and
// functions SOL uses are checked by interpose/cuda/cudart_check.hpp.
[[maybe_unused]] inline cublasStatus_t (*const get_stream)(cublasHandle_t, cudaStream_t*) = &::cublasGetStream_v2;
[[maybe_unused]] inline cublasStatus_t (*const get_pointer_mode)(cublasHandle_t, cublasPointerMode_t*) =
    &::cublasGetPointerMode_v2;
[[maybe_unused]] inline cublasStatus_t (*const get_math_mode)(cublasHandle_t, cublasMath_t*) = &::cublasGetMathMode;

}  // namespace sol::interpose::cublas::abi_check
