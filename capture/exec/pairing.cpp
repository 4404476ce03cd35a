#include "capture/exec/pairing.hpp"

#include <pthread.h>

#include <mutex>
#include <new>
#include <unordered_map>

namespace sol::capture::pairing {
namespace {

// Few entries (one per live pooling or normalization layer's buffer) and one lookup per such
// call: a map behind one mutex.
struct Table {
  std::mutex mu;
  std::unordered_map<const void*, hal::Backend*> owners;
  Table() {
    // A lock held by another thread at fork() would stay held in the child.
    pthread_atfork(nullptr, nullptr, [] { new (&instance().mu) std::mutex; });
  }
  static Table& instance() noexcept {
    static Table* t = new Table;  // never destroyed: calls may arrive during exit
    return *t;
  }
};

}  // namespace

const void* state_key(const dnn::Call& call) noexcept {
  const dnn::Desc& d = *call.desc;
  if (void* ws = call.ptr(dnn::Arg::workspace)) return ws;
  const bool norm = d.kind == Op::batch_normalization || d.kind == Op::layer_normalization;
  if (norm && !d.global_stats && d.prop != dnn::Prop::forward_inference) return call.ptr(dnn::Arg::mean);
  return nullptr;
}

bool writes_state(const dnn::Call& call) noexcept {
  return call.desc->prop == dnn::Prop::forward_training;
}

void record(const void* key, hal::Backend* backend) noexcept {
  if (!key) return;
  Table& t = Table::instance();
  std::lock_guard lock(t.mu);
  try {
    if (backend)
      t.owners[key] = backend;
    else
      t.owners.erase(key);
  } catch (...) {
  }
}

bool owner(const void* key, hal::Backend*& backend) noexcept {
  Table& t = Table::instance();
  std::lock_guard lock(t.mu);
  auto it = t.owners.find(key);
  if (it == t.owners.end()) return false;
  backend = it->second;
  return true;
}

}  // namespace sol::capture::pairing
