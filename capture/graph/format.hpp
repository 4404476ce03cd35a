// The primitive graph file of a traced process (docs/graph-format.md): what its writer (the trace
// recorder in libsol, capture/trace/graph_writer.cpp) and its reader (`sol replay`) share.
//
// `sol-<tag>.graph.jsonl` is JSON lines: a header padded to a fixed size (rewritten when the
// process ends), then records in the order they were made: native libraries, node descriptions,
// buffers, inputs and nodes. `sol-<tag>.graph.data` holds the inputs' bytes (SOL_TRACE_DATA=1).
// The names of the IR's fields are given here once, as X-macros, for both directions.
#pragma once

#include <cstddef>

namespace sol::capture::graph {

// The graph format's version: a reader refuses another one.
inline constexpr int kVersion = 1;
inline constexpr char kFormat[] = "sol-graph/1";
// The header line: a JSON object padded with spaces to this many bytes, the newline included.
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr char kSuffix[] = ".graph.jsonl";
inline constexpr char kDataSuffix[] = ".graph.data";
// The data file's first 16 bytes; inputs' offsets count from the file's start.
inline constexpr char kDataMagic[] = "sol-graph-data1\n";
inline constexpr size_t kDataMagicBytes = sizeof kDataMagic - 1;
static_assert(kDataMagicBytes == 16);

// BLAS node descriptions: BlasArgs members, each under its own name. Integers, the modes (one
// character each: 'N', 'T', 'U', 'L'..., the layout 'C' or 'R'; absent when 0), and the scalars
// (a number, [re, im] for complex data; absent when the caller passed none).
#define SOL_GRAPH_BLAS_INTS(X) X(m) X(n) X(k) X(kl) X(ku) X(lda) X(ldb) X(ldc) X(incx) X(incy)
#define SOL_GRAPH_BLAS_MODES(X) X(layout) X(transa) X(transb) X(uplo) X(side) X(diag)
#define SOL_GRAPH_BLAS_SCALARS(X) X(alpha) X(beta) X(cs) X(sn) X(ry1)
// A device BLAS call's DeviceBlas members (cuBLAS, cuBLASLt), under "device".
#define SOL_GRAPH_DEVICE_INTS(X) \
  X(batch) X(stridea) X(strideb) X(stridec) X(atype) X(btype) X(ctype) X(compute)

// DNN node descriptions (ir/dnn.hpp's Desc): scalar members, integer and floating-point,
// and the per-spatial-dimension arrays (nsp entries each).
#define SOL_GRAPH_DNN_INTS(X) X(nsp) X(groups) X(axis) X(group_size) X(local_size)
#define SOL_GRAPH_DNN_FLOATS(X) X(alpha) X(beta) X(k) X(epsilon) X(output_scale)
#define SOL_GRAPH_DNN_FLAGS(X) X(global_stats) X(use_scale) X(use_shift) X(fuse_relu)
#define SOL_GRAPH_DNN_SPATIAL(X) X(kernel) X(stride) X(dilation) X(pad_l) X(pad_r)

}  // namespace sol::capture::graph
