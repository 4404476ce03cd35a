#include "backends/onednn/matmul.hpp"

#include <pthread.h>

#include <cstring>
#include <mutex>

#include "common/log.hpp"

namespace sol::backends::onednn {
namespace {

// Held across fork() so that the child inherits them unlocked and the cache consistent.
std::mutex g_cache_mu;
std::mutex g_streams_mu;

void lock_all() {
  g_cache_mu.lock();
  g_streams_mu.lock();
}
void unlock_all() {
  g_streams_mu.unlock();
  g_cache_mu.unlock();
}

}  // namespace

struct Matmul::Entry {
  const Api* api;
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t md[3];  // src (op(B)^T), weights (op(A)^T), dst (C^T)
  ~Entry() {
    if (primitive) api->primitive_destroy(primitive);
  }
};

bool Matmul::Key::operator==(const Key& o) const noexcept {
  return transa == o.transa && transb == o.transb && m == o.m && n == o.n && k == o.k && lda == o.lda &&
         ldb == o.ldb && ldc == o.ldc && beta_bits == o.beta_bits && threads == o.threads;
}

size_t Matmul::KeyHash::operator()(const Key& k) const noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  mix(static_cast<uint64_t>(k.transa) << 8 | static_cast<uint64_t>(k.transb));
  for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc}) mix(static_cast<uint64_t>(v));
  mix(k.beta_bits);
  mix(static_cast<uint64_t>(k.threads));
  return static_cast<size_t>(h);
}

bool Matmul::init(std::string& why) noexcept {
  if (const dnnl_status_t s = api_.engine_create(&engine_, dnnl_cpu, 0); s != dnnl_success) {
    why = "dnnl_engine_create failed (status " + std::to_string(static_cast<int>(s)) + ")";
    return false;
  }
  const dnnl_dims_t one = {1};
  if (api_.memory_desc_init_by_tag(&scale_md_, 1, one, dnnl_f32, dnnl_a) != dnnl_success) {
    why = "dnnl_memory_desc_init_by_tag failed for the output scale";
    return false;
  }
  static std::once_flag fork_handlers;
  std::call_once(fork_handlers, [] { pthread_atfork(lock_all, unlock_all, unlock_all); });
  return true;
}

// Column-major C(m x n) = op(A)(m x k) op(B)(k x n) is, read as row-major, C^T = op(B)^T op(A)^T:
// oneDNN's src is op(B)^T (n x k), its weights op(A)^T (k x m), its dst C^T (n x m). Strides say
// where each element lives, so the caller's matrices (and leading dimensions) are used in place.
dnnl_primitive_desc_t Matmul::describe(const Key& key, dnnl_memory_desc_t md[3]) noexcept {
  const dnnl_dims_t src_dims = {key.n, key.k}, wei_dims = {key.k, key.m}, dst_dims = {key.n, key.m};
  // src(j, l) = op(B)(l, j): B(l, j) at l + j*ldb, or B(j, l) at j + l*ldb when transposed.
  const dnnl_dims_t src_strides = {key.transb == 'T' ? 1 : key.ldb, key.transb == 'T' ? key.ldb : 1};
  // weights(l, i) = op(A)(i, l): A(i, l) at i + l*lda, or A(l, i) at l + i*lda when transposed.
  const dnnl_dims_t wei_strides = {key.transa == 'T' ? 1 : key.lda, key.transa == 'T' ? key.lda : 1};
  const dnnl_dims_t dst_strides = {key.ldc, 1};  // dst(j, i) = C(i, j) at i + j*ldc
  if (api_.memory_desc_init_by_strides(&md[0], 2, src_dims, dnnl_f32, src_strides) != dnnl_success ||
      api_.memory_desc_init_by_strides(&md[1], 2, wei_dims, dnnl_f32, wei_strides) != dnnl_success ||
      api_.memory_desc_init_by_strides(&md[2], 2, dst_dims, dnnl_f32, dst_strides) != dnnl_success)
    return nullptr;
  dnnl_matmul_desc_t desc;
  if (api_.matmul_desc_init(&desc, &md[0], &md[1], nullptr, &md[2]) != dnnl_success) return nullptr;

  // alpha: an output scale given at execution, so one primitive serves every alpha. beta: a sum
  // post-op (dst = alpha*src*weights + beta*dst), fixed in the primitive; none when beta == 0,
  // so that C is written without being read, as BLAS requires.
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t post_ops = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  const float runtime_scale = DNNL_RUNTIME_F32_VAL;
  float beta;
  std::memcpy(&beta, &key.beta_bits, sizeof beta);
  bool ok = api_.primitive_attr_create(&attr) == dnnl_success &&
            api_.primitive_attr_set_output_scales(attr, 1, 0, &runtime_scale) == dnnl_success;
  if (ok && key.beta_bits != 0) {
    ok = api_.post_ops_create(&post_ops) == dnnl_success && api_.post_ops_append_sum(post_ops, beta) == dnnl_success &&
         api_.primitive_attr_set_post_ops(attr, post_ops) == dnnl_success;
  }
  if (ok && api_.primitive_desc_create(&pd, &desc, attr, engine_, nullptr) != dnnl_success) pd = nullptr;
  if (post_ops) api_.post_ops_destroy(post_ops);
  if (attr) api_.primitive_attr_destroy(attr);
  return pd;
}

std::string Matmul::probe_implementation() noexcept {
  const Key key{'N', 'N', 256, 256, 256, 256, 256, 256, 0, 0};
  dnnl_memory_desc_t md[3];
  dnnl_primitive_desc_t pd = describe(key, md);
  if (!pd) return {};
  const char* impl = nullptr;
  std::string out;
  if (api_.primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) out = impl;
  api_.primitive_desc_destroy(pd);
  return out;
}

Matmul::EntryPtr Matmul::create(const Key& key) noexcept {
  try {
    auto e = std::make_shared<Entry>();
    e->api = &api_;
    dnnl_primitive_desc_t pd = describe(key, e->md);
    if (!pd) return nullptr;
    const dnnl_status_t s = api_.primitive_create(&e->primitive, pd);
    api_.primitive_desc_destroy(pd);
    if (s != dnnl_success) {
      e->primitive = nullptr;
      return nullptr;
    }
    return e;
  } catch (...) {  // std::bad_alloc
    return nullptr;
  }
}

Matmul::EntryPtr Matmul::lookup(const Key& key) noexcept {
  {
    std::lock_guard lock(g_cache_mu);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Created outside the lock (it takes tens of microseconds); two threads may race to create the
  // same primitive, and the second simply uses the first one's.
  EntryPtr e = create(key);
  if (!e) return nullptr;
  try {
    std::lock_guard lock(g_cache_mu);
    if (auto it = index_.find(key); it != index_.end()) return it->second->second;
    lru_.emplace_front(key, e);
    index_.emplace(key, lru_.begin());
    ++created_;
    if (lru_.size() > kCapacity) {  // the primitive goes when its last running call is done
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  } catch (...) {
  }
  return e;
}

dnnl_stream_t Matmul::take_stream() noexcept {
  {
    std::lock_guard lock(g_streams_mu);
    if (!streams_.empty()) {
      dnnl_stream_t s = streams_.back();
      streams_.pop_back();
      return s;
    }
  }
  dnnl_stream_t s = nullptr;
  if (api_.stream_create(&s, engine_, dnnl_stream_default_flags) != dnnl_success) return nullptr;
  return s;
}

void Matmul::give_stream(dnnl_stream_t s) noexcept {
  std::lock_guard lock(g_streams_mu);
  try {
    streams_.push_back(s);
  } catch (...) {  // keeping it failed: it leaks, which is harmless
  }
}

bool Matmul::run(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) noexcept {
  // oneDNN sizes a primitive's thread team when creating it, from the creating thread's OpenMP
  // setting: a thread that asks for fewer threads (one, in a forked child) gets its own primitive.
  const int threads = api_.omp_get_max_threads ? api_.omp_get_max_threads() : 0;
  Key key{transa, transb, m, n, k, lda, ldb, ldc, 0, threads};
  if (beta != 0) std::memcpy(&key.beta_bits, &beta, sizeof beta);  // -0.0 is 0 too
  const EntryPtr e = lookup(key);
  if (!e) return false;
  dnnl_stream_t stream = take_stream();
  if (!stream) return false;

  dnnl_memory_t mem[4] = {nullptr, nullptr, nullptr, nullptr};
  bool ok = api_.memory_create(&mem[0], &e->md[0], engine_, const_cast<float*>(b)) == dnnl_success &&
            api_.memory_create(&mem[1], &e->md[1], engine_, const_cast<float*>(a)) == dnnl_success &&
            api_.memory_create(&mem[2], &e->md[2], engine_, c) == dnnl_success &&
            api_.memory_create(&mem[3], &scale_md_, engine_, &alpha) == dnnl_success;
  if (ok) {
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, mem[0]},
                                    {DNNL_ARG_WEIGHTS, mem[1]},
                                    {DNNL_ARG_DST, mem[2]},
                                    {DNNL_ARG_ATTR_OUTPUT_SCALES, mem[3]}};
    ok = api_.primitive_execute(e->primitive, stream, 4, args) == dnnl_success &&
         api_.stream_wait(stream) == dnnl_success;
  }
  for (dnnl_memory_t mm : mem)
    if (mm) api_.memory_destroy(mm);
  give_stream(stream);
  return ok;
}

}  // namespace sol::backends::onednn
