// Internal to interpose/cudnn: the table of live backend descriptors, the description of an
// operation graph, the legacy entry points.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "interpose/cudnn/cudnn.hpp"

namespace sol::interpose::cudnn::detail {

// One attribute as the program set it (cudnnBackendSetAttribute), or as cuDNN filled it in a
// descriptor the program received from cudnnBackendGetAttribute.
struct Attr {
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type;
  int64_t count = 0;
  std::vector<unsigned char> data;  // count elements of the type's size

  template <class T>
  T get(int64_t i = 0) const noexcept {
    T v{};
    if (i >= 0 && static_cast<size_t>(i + 1) * sizeof(T) <= data.size()) std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
    return v;
  }
};

// Bytes of one element of an attribute type; 0 for types SOL does not keep.
size_t attr_size(cudnnBackendAttributeType_t t) noexcept;

// One live backend descriptor.
struct Record {
  cudnnBackendDescriptorType_t type;
  bool finalized = false;
  std::vector<Attr> attrs;  // the last value of each attribute set
  // The operation graph this descriptor was derived from (engine, engine configuration, plan:
  // through attributes the program set or descriptors cuDNN handed back), and once known its
  // description (a graph's own, from its finalization; a derived descriptor's, from the one it
  // came from when that knew it, else a plan's from its graph at the plan's finalization). The
  // description is shared, not looked up through `graph`: the program may destroy the graph's
  // descriptor (and cuDNN reuse its address) while plans made from it live on.
  const void* graph = nullptr;
  std::shared_ptr<const Graph> described;

  const Attr* find(cudnnBackendAttributeName_t name) const noexcept {
    for (const Attr& a : attrs)
      if (a.name == name) return &a;
    return nullptr;
  }
  void set(Attr a);
};

// The descriptor table. One mutex: set-up calls are rare next to the GPU work they describe, and
// an execution takes it once to find its plan and variant pack.
class Table {
 public:
  static Table& instance() noexcept;
  std::mutex mu;
  std::unordered_map<const void*, Record> records;

  Record* find(const void* d) noexcept {
    auto it = records.find(d);
    return it == records.end() ? nullptr : &it->second;
  }
};

// Describes the finalized operation graph `graph` (its record and those it references, read from
// `table` with the table's lock held). Never nullptr: what cannot be described is said in the
// node's shape and `unsupported`. May throw std::bad_alloc.
std::shared_ptr<const Graph> describe_graph(const Table& table, const Record& graph);

// The shape text of a plain strided tensor's layout as oneDNN prints formats ("abcd", "acdb").
std::string format_name(const capture::dnn::Layout& l);
// "f32" and so on; "undef" for none.
const char* dtype_text(capture::DType t) noexcept;
capture::DType to_dtype(cudnnDataType_t t) noexcept;

// A legacy compute entry point as a DNN node: false when SOL does not describe it (the call is
// then traced under its own name, op cudnn_legacy). `data` receives the call's device pointers.
bool describe_legacy(const capture::Node& node, capture::dnn::Desc& desc, void** data) noexcept;

// The cuDNN functions SOL calls itself, from the program's own library.
struct Native {
  cudnnStatus_t (*getStream)(cudnnHandle_t, cudaStream_t*) = nullptr;
};
const Native& native() noexcept;

}  // namespace sol::interpose::cudnn::detail
