// Checks abi.hpp against the real CUDA headers, which the including file has included first
// (build/generated/cublas_check.cpp). Never part of libsol.
#pragma once

#include <cuda_runtime_api.h>

#include <type_traits>

#include "interpose/cublas/abi.hpp"

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
SOL_ABI_SAME_VALUE(cudaSuccess, 0)
SOL_ABI_SAME_VALUE(cudaErrorNotReady, 600)
SOL_ABI_SAME_VALUE(cudaStreamCaptureStatusNone, 0)
#undef SOL_ABI_SAME_VALUE
static_assert(cudaEventDefault == abi::kCudaEventDefault);  // a macro

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
SOL_ABI_SAME_TYPE(cudaError_t)
SOL_ABI_SAME_TYPE(cudaStreamCaptureStatus)
SOL_ABI_SAME_TYPE(cudaEvent_t)
#undef SOL_ABI_SAME_TYPE

// The CUDA runtime functions timing.cpp calls, with the parameter types it gives them (each of
// which is checked above).
[[maybe_unused]] inline cudaError_t (*const event_create)(cudaEvent_t*, unsigned) = &::cudaEventCreateWithFlags;
[[maybe_unused]] inline cudaError_t (*const event_record)(cudaEvent_t, cudaStream_t) = &::cudaEventRecord;
[[maybe_unused]] inline cudaError_t (*const event_query)(cudaEvent_t) = &::cudaEventQuery;
[[maybe_unused]] inline cudaError_t (*const event_elapsed)(float*, cudaEvent_t, cudaEvent_t) = &::cudaEventElapsedTime;
[[maybe_unused]] inline cudaError_t (*const event_synchronize)(cudaEvent_t) = &::cudaEventSynchronize;
[[maybe_unused]] inline cudaError_t (*const event_destroy)(cudaEvent_t) = &::cudaEventDestroy;
[[maybe_unused]] inline cudaError_t (*const stream_is_capturing)(cudaStream_t, cudaStreamCaptureStatus*) =
    &::cudaStreamIsCapturing;
[[maybe_unused]] inline cudaError_t (*const get_device)(int*) = &::cudaGetDevice;
// And cuBLAS's getters the frontend calls (frontend.cpp's handle_state).
[[maybe_unused]] inline cublasStatus_t (*const get_stream)(cublasHandle_t, cudaStream_t*) = &::cublasGetStream_v2;
[[maybe_unused]] inline cublasStatus_t (*const get_pointer_mode)(cublasHandle_t, cublasPointerMode_t*) =
    &::cublasGetPointerMode_v2;
[[maybe_unused]] inline cublasStatus_t (*const get_math_mode)(cublasHandle_t, cublasMath_t*) = &::cublasGetMathMode;

}  // namespace sol::interpose::cublas::abi_check
