// The cuBLAS / cuBLASLt frontend: what a cuBLAS GEMM or GEMV computes, completed from the handle
// (stream, pointer mode, math mode) and, for cublasLtMatmul, from the descriptors the program
// created and set before; and its device time, measured with CUDA events around the call when
// tracing (interpose/cuda/device_time.hpp, shared with the cuDNN frontend).
//
// cuBLAS calls always run natively (their operands are device memory): the frontend only
// describes them. Its own calls into cuBLAS and the CUDA runtime go to the program's libraries,
// found at run time (common/native.hpp), never through libsol's wrappers; libsol neither links
// nor needs CUDA (abi.hpp declares what it uses).
#pragma once

#include <cstddef>
#include <cstdint>

#include "capture/capture.hpp"
#include "interpose/cublas/abi.hpp"
#include "ir/node.hpp"

namespace sol::interpose::cublas {

// A cublasOperation_t in BLAS's vocabulary: 'N', 'T', 'C'; 0 for an invalid value.
inline char trans(int op) noexcept {
  switch (op) {
    case abi::CUBLAS_OP_N: return 'N';
    case abi::CUBLAS_OP_T: return 'T';
    case abi::CUBLAS_OP_C: return 'C';
    default: return 0;
  }
}

// cuBLASLt's descriptors as the frontend knows them, from the calls that created and set them.
struct LtMatmulDesc {
  int32_t compute = -1;  // cublasComputeType_t
  int32_t scale = -1;    // cudaDataType of alpha and beta
  int32_t pointer_mode = abi::CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = abi::CUBLAS_OP_N, transb = abi::CUBLAS_OP_N;
  int32_t epilogue = abi::CUBLASLT_EPILOGUE_DEFAULT;
  int32_t bias_type = -1;
  bool fast_accum = false;
};
struct LtLayout {
  int32_t type = -1;  // cudaDataType
  int32_t order = abi::CUBLASLT_ORDER_COL;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;  // elements between batch members
};

// What a successful descriptor call does to the tables (submit() applies them; the unit tests
// call them directly). An attribute SOL does not read, or a buffer of the wrong size, is ignored.
void matmul_desc_created(const void* desc, int32_t compute, int32_t scale) noexcept;
void matmul_desc_set(const void* desc, int32_t attr, const void* buf, size_t size) noexcept;
void layout_created(const void* layout, int32_t type, uint64_t rows, uint64_t cols, int64_t ld) noexcept;
void layout_set(const void* layout, int32_t attr, const void* buf, size_t size) noexcept;
void forget(const void* desc_or_layout) noexcept;
bool find(const void* desc, LtMatmulDesc& out) noexcept;
bool find(const void* layout, LtLayout& out) noexcept;

// Completes a cublasLtMatmul node from the descriptors its wrapper put in dev.lt: sizes,
// transposes, leading dimensions, batch, element type, detail and work. False (the node keeps
// its pointers only) when a descriptor is unknown: created before SOL started, or already gone.
bool describe_lt(capture::Node& node, capture::DeviceBlas& dev) noexcept;

// Completes a cuBLAS GEMM or GEMV node (the wrapper filled its arguments): element type from
// the routine or the cudaDataType arguments, scalars where they are in host memory, math mode,
// detail and work. `pointer_mode` and `math_mode` are the handle's (-1: unknown).
void describe_blas(capture::Node& node, capture::DeviceBlas& dev, int pointer_mode, int math_mode) noexcept;

// The text of a cudaDataType ("f32", "bf16", "e4m3"...) and of a cublasComputeType_t ("32F",
// "32F_FAST_TF32"...): static strings, "?" when unknown.
const char* type_name(int32_t cuda_type) noexcept;
const char* compute_name(int32_t compute) noexcept;
const char* epilogue_name(int32_t epilogue) noexcept;

// The frontend's part of every captured cuBLAS / cuBLASLt call (the generated wrappers call it).
void submit(capture::Node& node, capture::NativeFn native) noexcept;

}  // namespace sol::interpose::cublas
