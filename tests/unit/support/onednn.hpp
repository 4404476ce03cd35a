// oneDNN for the tests that run real primitives (tests/unit/dnn, dnnl, opencl): one CPU engine and
// stream per process, memory and primitive descriptors, buffers with NaN guard zones, random
// inputs, and a primitive run natively or as the node the oneDNN frontend describes on a SOL
// backend. Tests link libdnnl themselves (libsol never does); sol_test_onednn brings it.
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hal/backend.hpp"
#include "ir/dnn.hpp"

namespace sol::test {

using Dims = std::vector<dnnl_dim_t>;

dnnl_engine_t engine();
dnnl_stream_t stream();

// A memory descriptor (a test failure when oneDNN refuses it); the plain tag of `ndims` dims
// (a, ab, abc...).
dnnl_memory_desc_t md(const Dims& dims, dnnl_format_tag_t tag, dnnl_data_type_t dt = dnnl_f32);
dnnl_format_tag_t plain_tag(int ndims);

// A primitive descriptor from an operation descriptor; nullptr (and a test failure) if oneDNN
// refuses. bwd_pd: a backward one, with its forward one as the hint.
dnnl_primitive_desc_t pd_of(const void* op_desc, const_dnnl_primitive_desc_t hint = nullptr,
                            const_dnnl_primitive_attr_t attr = nullptr);
dnnl_primitive_desc_t bwd_pd(const void* fwd_desc, const void* bwd_desc);

// The oneDNN frontend bound to the libdnnl this test links, once (a fatal failure if it cannot be).
void bind_frontend();

// A tensor's bytes with kGuard bytes of a NaN pattern on both sides, and its oneDNN memory.
// Outputs start as NaN too, so that an element a backend does not write shows.
inline constexpr size_t kGuard = 64;
void fill_nan(unsigned char* p, size_t n);
struct Buffer {
  dnnl_memory_desc_t md{};
  std::vector<unsigned char> bytes;  // guard, tensor, guard
  dnnl_memory_t memory = nullptr;

  // `at_least`: a view into a larger tensor (a submemory) reaches past dnnl_memory_desc_get_size.
  explicit Buffer(const dnnl_memory_desc_t& m, size_t at_least = 0);
  Buffer(const Buffer& o);
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  size_t size() const { return bytes.size() - 2 * kGuard; }
  unsigned char* data() { return bytes.data() + kGuard; }
  const float* f32() { return reinterpret_cast<const float*>(data()); }
  // The other buffer's contents (same size: the memory keeps pointing at ours).
  void take_bytes(const Buffer& o);
  bool guards_intact() const;
};

// Random logical values in (-1, 1), or (0.1, 2) when `positive`, written through a native reorder
// from a plain tensor so that blocked padding holds zeros.
void fill_random(Buffer& b, unsigned seed, bool positive);

// Every argument `pd` takes: the data, weights and statistics it queries, each multi_src, and the
// second input of each binary post-op.
std::vector<int> exec_arg_kinds(const_dnnl_primitive_desc_t pd);

// The buffers of an execution, by DNNL_ARG_*.
using Args = std::map<int, std::unique_ptr<Buffer>>;
std::vector<dnnl_exec_arg_t> exec_args(Args& args);

// Runs the primitive natively: "" or what failed.
std::string run_native(dnnl_primitive_desc_t pd, Args& args);

// Runs the primitive's node on `backend` over `args` (supports(), then run()), with `edit` applied
// to its description first. internal_error when the frontend does not describe or bind it, with
// the reason in `why`, or as a test failure without one.
hal::Reason run_on(hal::Backend& backend, dnnl_primitive_desc_t pd, Args& args,
                   const std::function<void(capture::dnn::Desc&)>& edit = nullptr,
                   std::string* why = nullptr);

}  // namespace sol::test
