// Single-precision GEMM as oneDNN matmul primitives: one primitive per problem (transposes, sizes,
// leading dimensions, beta), created on first use and kept in a bounded cache, so a training loop
// that repeats its shapes creates each primitive once.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/onednn/api.hpp"

namespace sol::backends::onednn {

class Matmul {
 public:
  // Primitives kept; the least recently used goes first. oneDNN's own primitive cache (1024 by
  // default) still makes re-creating an evicted one cheap.
  static constexpr size_t kCapacity = 256;

  explicit Matmul(const Api& api) noexcept : api_(api) {}
  // Nothing is destroyed: a backend lives until the process ends, and at exit libdnnl may be gone.
  ~Matmul() = default;

  // Creates the CPU engine. false with the reason.
  bool init(std::string& why) noexcept;

  // The implementation oneDNN picks for a mid-sized f32 problem ("brg:avx512_core", "gemm:jit"):
  // whether matmul has kernels of its own here or wraps the same GEMM as dnnl_sgemm.
  std::string probe_implementation() noexcept;

  // Column-major C = alpha op(A) op(B) + beta C (transa/transb exactly 'N' or 'T'), for m, n, k > 0 and
  // alpha != 0. false when oneDNN cannot create or run the primitive; C is untouched when the
  // failure comes before execution (creation: an unsupported problem).
  bool run(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) noexcept;

  // Primitives created and cached so far (cache misses).
  uint64_t created() const noexcept { return created_.load(std::memory_order_relaxed); }

 private:
  struct Key {
    char transa, transb;
    int64_t m, n, k, lda, ldb, ldc;
    uint32_t beta_bits;  // beta == 0: no accumulation into C (C is not read)
    int threads;         // the caller's OpenMP thread count, which a primitive keeps (0: not OpenMP)
    bool operator==(const Key& o) const noexcept;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept;
  };
  struct Entry;  // a primitive and the memory descriptors of its operands
  using EntryPtr = std::shared_ptr<const Entry>;

  EntryPtr lookup(const Key& key) noexcept;
  EntryPtr create(const Key& key) noexcept;
  dnnl_primitive_desc_t describe(const Key& key, dnnl_memory_desc_t md[3]) noexcept;
  dnnl_stream_t take_stream() noexcept;
  void give_stream(dnnl_stream_t s) noexcept;

  const Api& api_;
  dnnl_engine_t engine_ = nullptr;
  dnnl_memory_desc_t scale_md_;  // alpha: one f32, given at execution
  // Guarded by the mutexes in matmul.cpp (globals, so that fork handlers can hold them).
  std::list<std::pair<Key, EntryPtr>> lru_;  // most recent first
  std::unordered_map<Key, std::list<std::pair<Key, EntryPtr>>::iterator, KeyHash> index_;
  std::vector<dnnl_stream_t> streams_;  // idle streams: one per thread running at once
  std::atomic<uint64_t> created_{0};
};

}  // namespace sol::backends::onednn
