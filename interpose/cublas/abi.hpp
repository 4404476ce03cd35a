// SOL's own declarations of the cuBLAS / cuBLASLt types and constants it uses, so that libsol
// builds without the CUDA toolkit. Declared in a namespace of their own with the headers' names
// and values; build/generated/cublas_check.cpp, compiled against the real headers wherever they
// are found (tests/CMakeLists.txt), checks every value and size below (abi_check.hpp) and every
// spec prototype.
//
// A C enum and `int` pass alike on every ABI CUDA runs on; handles are opaque pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "interpose/cuda/cudart.hpp"

namespace sol::interpose::cublas::abi {

// X(name, value) lists, so that abi_check.hpp compares each one with the header.
#define SOL_CUBLAS_STATUS(X)            \
  X(CUBLAS_STATUS_SUCCESS, 0)           \
  X(CUBLAS_STATUS_NOT_INITIALIZED, 1)   \
  X(CUBLAS_STATUS_INVALID_VALUE, 7)
#define SOL_CUBLAS_OPERATION(X) X(CUBLAS_OP_N, 0) X(CUBLAS_OP_T, 1) X(CUBLAS_OP_C, 2) X(CUBLAS_OP_CONJG, 3)
#define SOL_CUBLAS_POINTER_MODE(X) X(CUBLAS_POINTER_MODE_HOST, 0) X(CUBLAS_POINTER_MODE_DEVICE, 1)
#define SOL_CUBLAS_MATH(X)                                      \
  X(CUBLAS_DEFAULT_MATH, 0)                                     \
  X(CUBLAS_TENSOR_OP_MATH, 1)                                   \
  X(CUBLAS_PEDANTIC_MATH, 2)                                    \
  X(CUBLAS_TF32_TENSOR_OP_MATH, 3)                              \
  X(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, 16)
#define SOL_CUBLAS_COMPUTE(X)                 \
  X(CUBLAS_COMPUTE_16F, 64)                   \
  X(CUBLAS_COMPUTE_16F_PEDANTIC, 65)          \
  X(CUBLAS_COMPUTE_32F, 68)                   \
  X(CUBLAS_COMPUTE_32F_PEDANTIC, 69)          \
  X(CUBLAS_COMPUTE_32F_FAST_16F, 74)          \
  X(CUBLAS_COMPUTE_32F_FAST_16BF, 75)         \
  X(CUBLAS_COMPUTE_32F_FAST_TF32, 77)         \
  X(CUBLAS_COMPUTE_64F, 70)                   \
  X(CUBLAS_COMPUTE_64F_PEDANTIC, 71)          \
  X(CUBLAS_COMPUTE_32I, 72)                   \
  X(CUBLAS_COMPUTE_32I_PEDANTIC, 73)
#define SOL_CUDA_DATA_TYPE(X)  \
  X(CUDA_R_16F, 2)             \
  X(CUDA_C_16F, 6)             \
  X(CUDA_R_16BF, 14)           \
  X(CUDA_C_16BF, 15)           \
  X(CUDA_R_32F, 0)             \
  X(CUDA_C_32F, 4)             \
  X(CUDA_R_64F, 1)             \
  X(CUDA_C_64F, 5)             \
  X(CUDA_R_8I, 3)              \
  X(CUDA_R_8U, 8)              \
  X(CUDA_R_32I, 10)            \
  X(CUDA_R_8F_E4M3, 28)        \
  X(CUDA_R_8F_E5M2, 29)
#define SOL_CUBLASLT_MATMUL_DESC(X)            \
  X(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, 0)      \
  X(CUBLASLT_MATMUL_DESC_SCALE_TYPE, 1)        \
  X(CUBLASLT_MATMUL_DESC_POINTER_MODE, 2)      \
  X(CUBLASLT_MATMUL_DESC_TRANSA, 3)            \
  X(CUBLASLT_MATMUL_DESC_TRANSB, 4)            \
  X(CUBLASLT_MATMUL_DESC_EPILOGUE, 7)          \
  X(CUBLASLT_MATMUL_DESC_BIAS_POINTER, 8)      \
  X(CUBLASLT_MATMUL_DESC_FAST_ACCUM, 25)       \
  X(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, 26)
#define SOL_CUBLASLT_MATRIX_LAYOUT(X)                \
  X(CUBLASLT_MATRIX_LAYOUT_TYPE, 0)                  \
  X(CUBLASLT_MATRIX_LAYOUT_ORDER, 1)                 \
  X(CUBLASLT_MATRIX_LAYOUT_ROWS, 2)                  \
  X(CUBLASLT_MATRIX_LAYOUT_COLS, 3)                  \
  X(CUBLASLT_MATRIX_LAYOUT_LD, 4)                    \
  X(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 5)           \
  X(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 6)
#define SOL_CUBLASLT_ORDER(X) X(CUBLASLT_ORDER_COL, 0) X(CUBLASLT_ORDER_ROW, 1)
#define SOL_CUBLASLT_POINTER_MODE(X) X(CUBLASLT_POINTER_MODE_HOST, 0) X(CUBLASLT_POINTER_MODE_DEVICE, 1)
#define SOL_CUBLASLT_EPILOGUE(X)              \
  X(CUBLASLT_EPILOGUE_DEFAULT, 1)             \
  X(CUBLASLT_EPILOGUE_RELU, 2)                \
  X(CUBLASLT_EPILOGUE_RELU_AUX, 130)          \
  X(CUBLASLT_EPILOGUE_BIAS, 4)                \
  X(CUBLASLT_EPILOGUE_RELU_BIAS, 6)           \
  X(CUBLASLT_EPILOGUE_RELU_AUX_BIAS, 134)     \
  X(CUBLASLT_EPILOGUE_DRELU, 136)             \
  X(CUBLASLT_EPILOGUE_DRELU_BGRAD, 152)       \
  X(CUBLASLT_EPILOGUE_GELU, 32)               \
  X(CUBLASLT_EPILOGUE_GELU_AUX, 160)          \
  X(CUBLASLT_EPILOGUE_GELU_BIAS, 36)          \
  X(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 164)     \
  X(CUBLASLT_EPILOGUE_DGELU, 192)             \
  X(CUBLASLT_EPILOGUE_DGELU_BGRAD, 208)       \
  X(CUBLASLT_EPILOGUE_BGRADA, 256)            \
  X(CUBLASLT_EPILOGUE_BGRADB, 512)

#define SOL_ABI_ENUMERATOR(name, value) name = value,
enum cublasStatus_t : int { SOL_CUBLAS_STATUS(SOL_ABI_ENUMERATOR) };
enum cublasOperation_t : int { SOL_CUBLAS_OPERATION(SOL_ABI_ENUMERATOR) };
enum cublasPointerMode_t : int { SOL_CUBLAS_POINTER_MODE(SOL_ABI_ENUMERATOR) };
enum cublasMath_t : int { SOL_CUBLAS_MATH(SOL_ABI_ENUMERATOR) };
enum cublasComputeType_t : int { SOL_CUBLAS_COMPUTE(SOL_ABI_ENUMERATOR) };
enum cudaDataType_t : int { SOL_CUDA_DATA_TYPE(SOL_ABI_ENUMERATOR) };
using cudaDataType = cudaDataType_t;
enum cublasGemmAlgo_t : int {};
enum cublasLtMatmulDescAttributes_t : int { SOL_CUBLASLT_MATMUL_DESC(SOL_ABI_ENUMERATOR) };
enum cublasLtMatrixLayoutAttribute_t : int { SOL_CUBLASLT_MATRIX_LAYOUT(SOL_ABI_ENUMERATOR) };
enum cublasLtOrder_t : int { SOL_CUBLASLT_ORDER(SOL_ABI_ENUMERATOR) };
enum cublasLtPointerMode_t : int { SOL_CUBLASLT_POINTER_MODE(SOL_ABI_ENUMERATOR) };
enum cublasLtEpilogue_t : int { SOL_CUBLASLT_EPILOGUE(SOL_ABI_ENUMERATOR) };
#undef SOL_ABI_ENUMERATOR

struct cublasContext;
using cublasHandle_t = cublasContext*;
struct cublasLtContext;
using cublasLtHandle_t = cublasLtContext*;
struct cublasLtMatmulDescOpaque_t;
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
struct cublasLtMatrixLayoutOpaque_t;
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
using cuda::abi::cudaStream_t;  // the CUDA runtime's (interpose/cuda/cudart.hpp)
struct alignas(8) cuComplex {
  float x, y;
};
struct alignas(16) cuDoubleComplex {
  double x, y;
};

}  // namespace sol::interpose::cublas::abi
