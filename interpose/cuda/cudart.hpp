// SOL's own declarations of the few CUDA runtime types and constants it uses itself (device time:
// device_time.cpp), so that libsol builds without the CUDA toolkit. Their names and values are
// cuda_runtime_api.h's; build/generated/cublas_check.cpp, compiled against the real headers
// wherever they are found, checks them (cudart_check.hpp), and the functions device_time.cpp
// calls with them.
#pragma once

namespace sol::interpose::cuda::abi {

enum cudaError_t : int { cudaSuccess = 0, cudaErrorNotReady = 600 };
enum cudaStreamCaptureStatus : int { cudaStreamCaptureStatusNone = 0 };
struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
inline constexpr unsigned kCudaEventDefault = 0;  // cudaEventDefault: timing enabled

}  // namespace sol::interpose::cuda::abi
