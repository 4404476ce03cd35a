// The cuDNN frontend: cuDNN 9 as PyTorch 2.x calls it. The backend (graph) API's descriptors are
// kept as the program sets them; an operation graph is described when it is finalized, as the
// framework-neutral DNN nodes of ir/dnn.hpp (the vocabulary the oneDNN frontend uses);
// each cudnnBackendExecute of a plan built on it is traced as that node, and timed on the device
// with CUDA events. Legacy compute entry points are described from cuDNN's own getters.
//
// Only this folder includes cuDNN's headers. cuDNN and the CUDA runtime are never linked: their
// functions are taken from the program's own libraries at run time (RTLD_LOCAL included).
// Nothing here runs a DNN node anywhere but natively: the data lives on the GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capture/capture.hpp"
#include "ir/dnn.hpp"
#include "ir/node.hpp"

namespace sol::interpose::cudnn {

// What one finalized operation graph computes.
struct Graph {
  // The node a cudnnBackendExecute of it is traced as: the graph's one operation (pointwise
  // operations on a virtual output folded into it as post-ops, as oneDNN describes fusions), or,
  // for a graph of several nodes, a node of kind cudnn_execute whose shape lists them all.
  // Always `unsupported` (its data is device memory): it runs natively.
  std::shared_ptr<capture::dnn::Desc> node;
  std::vector<int64_t> uids;  // the tensor uid of each of node->tensors (variant-pack binding)
};

// The description of a finalized operation graph, or of the graph behind an engine, engine
// configuration or execution plan descriptor; nullptr when SOL did not see it built.
std::shared_ptr<const Graph> graph_of(const void* descriptor) noexcept;

// The frontend's part of every captured cuDNN call (the generated wrappers call it).
void submit(capture::Node& node, capture::NativeFn native) noexcept;

}  // namespace sol::interpose::cudnn
