// Checks cudart.hpp against the real CUDA runtime header, which the including file has included
// first (build/generated/cublas_check.cpp, through interpose/cublas/abi_check.hpp). Never part of
// libsol.
#pragma once

#include <cuda_runtime_api.h>

#include <type_traits>

#include "interpose/cuda/cudart.hpp"

namespace sol::interpose::cuda::cudart_check {

static_assert(static_cast<int>(::cudaSuccess) == abi::cudaSuccess, "interpose/cuda/cudart.hpp: cudaSuccess");
static_assert(static_cast<int>(::cudaErrorNotReady) == abi::cudaErrorNotReady,
              "interpose/cuda/cudart.hpp: cudaErrorNotReady");
static_assert(static_cast<int>(::cudaStreamCaptureStatusNone) == abi::cudaStreamCaptureStatusNone,
              "interpose/cuda/cudart.hpp: cudaStreamCaptureStatusNone");
static_assert(cudaEventDefault == abi::kCudaEventDefault, "interpose/cuda/cudart.hpp: cudaEventDefault");  // a macro

// Same size and alignment, and an enum for an enum: passed and returned alike.
template <class Ours, class Theirs>
constexpr bool same_abi() {
  return sizeof(Ours) == sizeof(Theirs) && alignof(Ours) == alignof(Theirs) &&
         std::is_enum_v<Ours> == std::is_enum_v<Theirs> && std::is_pointer_v<Ours> == std::is_pointer_v<Theirs>;
}
static_assert(same_abi<abi::cudaError_t, ::cudaError_t>(), "interpose/cuda/cudart.hpp: cudaError_t");
static_assert(same_abi<abi::cudaStreamCaptureStatus, ::cudaStreamCaptureStatus>(),
              "interpose/cuda/cudart.hpp: cudaStreamCaptureStatus");
static_assert(same_abi<abi::cudaStream_t, ::cudaStream_t>(), "interpose/cuda/cudart.hpp: cudaStream_t");
static_assert(same_abi<abi::cudaEvent_t, ::cudaEvent_t>(), "interpose/cuda/cudart.hpp: cudaEvent_t");

// The CUDA runtime functions device_time.cpp calls, with the parameter types it gives them (each
// of which is checked above).
[[maybe_unused]] inline cudaError_t (*const event_create)(cudaEvent_t*, unsigned) = &::cudaEventCreateWithFlags;
[[maybe_unused]] inline cudaError_t (*const event_record)(cudaEvent_t, cudaStream_t) = &::cudaEventRecord;
[[maybe_unused]] inline cudaError_t (*const event_query)(cudaEvent_t) = &::cudaEventQuery;
[[maybe_unused]] inline cudaError_t (*const event_elapsed)(float*, cudaEvent_t, cudaEvent_t) = &::cudaEventElapsedTime;
[[maybe_unused]] inline cudaError_t (*const event_synchronize)(cudaEvent_t) = &::cudaEventSynchronize;
[[maybe_unused]] inline cudaError_t (*const event_destroy)(cudaEvent_t) = &::cudaEventDestroy;
[[maybe_unused]] inline cudaError_t (*const stream_is_capturing)(cudaStream_t, cudaStreamCaptureStatus*) =
    &::cudaStreamIsCapturing;
[[maybe_unused]] inline cudaError_t (*const get_device)(int*) = &::cudaGetDevice;

}  // namespace sol::interpose::cuda::cudart_check
