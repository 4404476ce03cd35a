// The table of live backend descriptors, and the cuDNN functions SOL calls itself.
#include <pthread.h>

#include <new>

#include "common/native.hpp"
#include "interpose/cudnn/detail.hpp"

namespace sol::interpose::cudnn::detail {

size_t attr_size(cudnnBackendAttributeType_t t) noexcept {
  switch (t) {
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(void*);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT: return sizeof(float);
    case CUDNN_TYPE_DOUBLE: return sizeof(double);
    case CUDNN_TYPE_CHAR: return 1;
    case CUDNN_TYPE_FRACTION: return sizeof(cudnnFraction_t);
    case CUDNN_TYPE_INT32: return sizeof(int32_t);
    // Every other type is an enum.
    default: return sizeof(int32_t);
  }
}

void Record::set(Attr a) {
  for (Attr& old : attrs)
    if (old.name == a.name) {
      old = std::move(a);
      return;
    }
  attrs.push_back(std::move(a));
}

Table& Table::instance() noexcept {
  // Never destroyed: calls may come while the process runs its exit handlers.
  static Table* t = [] {
    auto* table = new Table;
    // A fork while another thread holds the lock would leave it held forever in the child.
    pthread_atfork([] { Table::instance().mu.lock(); }, [] { Table::instance().mu.unlock(); },
                   [] { new (&Table::instance().mu) std::mutex; });
    return table;
  }();
  return *t;
}

const Native& native() noexcept {
  static const Native n = [] {
    Native r;
    // The program's own definition, never libsol's wrapper (which would trace SOL's own query).
    r.getStream = reinterpret_cast<decltype(r.getStream)>(find_native("cudnnGetStream"));
    return r;
  }();
  return n;
}

}  // namespace sol::interpose::cudnn::detail

namespace sol::interpose::cudnn {

std::shared_ptr<const Graph> graph_of(const void* descriptor) noexcept {
  detail::Table& t = detail::Table::instance();
  std::lock_guard lock(t.mu);
  const detail::Record* r = t.find(descriptor);
  if (!r) return nullptr;
  if (r->described) return r->described;
  const detail::Record* g = r->graph ? t.find(r->graph) : nullptr;
  if (g && g->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) return g->described;
  return nullptr;
}

}  // namespace sol::interpose::cudnn
