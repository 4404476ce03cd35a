// A node's description as the graph file records it (docs/graph-format.md): one "desc" record per
// distinct description, which every node record of it names. Everything but the operands'
// addresses: the symbol, its API and name family, the op and element type, a BLAS call's
// arguments (and a device call's), a DNN primitive's kind, propagation, algorithm, geometry,
// layouts, post-ops and scales, and the trace's text of its shape.
#pragma once

#include <cstdint>

#include "capture/trace/text.hpp"
#include "ir/node.hpp"

namespace sol::capture::graph {

// The name family of a BLAS node's symbol: its integer width and naming convention. Every symbol
// SOL intercepts today is plain LP64 ("lp64"); the interposer's families (ILP64 plain names,
// *_64_, *_64, scipy_*) name theirs here once nodes carry them.
const char* name_family(const Node& node) noexcept;

// Whether a node computes (a BLAS call, a DNN execution, a CUDA library's computing call) rather
// than sets something up: only these are the graph's nodes.
bool computes(const Node& node) noexcept;

// Hashes everything describe() writes, so that equal descriptions share one record.
uint64_t description_key(const Node& node) noexcept;

// The "desc" record of `node`, numbered `id`, its native library being record `lib` (0: none),
// with the trace's `shape` text; a newline ends it.
void describe(const Node& node, uint32_t id, uint32_t lib, const char* shape, trace::Text& out) noexcept;

}  // namespace sol::capture::graph
