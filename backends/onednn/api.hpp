// The oneDNN functions the onednn backend calls, bound by dlsym from one libdnnl handle.
//
// oneDNN's header is included for types and constants only: libsol exports wrappers with the
// same names as oneDNN's functions, so a call by name would land in SOL itself (and be traced).
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <string>

namespace sol::backends::onednn {

#define SOL_ONEDNN_FUNCTIONS(X)         \
  X(version)                            \
  X(sgemm)                              \
  X(engine_create)                      \
  X(stream_create)                      \
  X(memory_desc_init_by_strides)        \
  X(memory_desc_init_by_tag)            \
  X(matmul_desc_init)                   \
  X(primitive_attr_create)              \
  X(primitive_attr_destroy)             \
  X(primitive_attr_set_output_scales)   \
  X(primitive_attr_set_post_ops)        \
  X(post_ops_create)                    \
  X(post_ops_destroy)                   \
  X(post_ops_append_sum)                \
  X(primitive_desc_create)              \
  X(primitive_desc_destroy)             \
  X(primitive_desc_query)               \
  X(primitive_create)                   \
  X(primitive_destroy)                  \
  X(primitive_execute)                  \
  X(memory_create)                      \
  X(memory_destroy)                     \
  X(stream_wait)

struct Api {
#define SOL_ONEDNN_MEMBER(name) decltype(&::dnnl_##name) name = nullptr;
  SOL_ONEDNN_FUNCTIONS(SOL_ONEDNN_MEMBER)
#undef SOL_ONEDNN_MEMBER

  // GNU OpenMP's, found through libdnnl's dependencies; null when oneDNN does not thread with
  // OpenMP. oneDNN sizes a primitive's thread team by the calling thread's omp_get_max_threads().
  int (*omp_get_max_threads)() = nullptr;
  void (*omp_set_num_threads)(int) = nullptr;

  // Fills every member from `lib` (a dlopen handle). false with the first missing name in `why`.
  bool bind(void* lib, std::string& why) noexcept;
};

}  // namespace sol::backends::onednn
