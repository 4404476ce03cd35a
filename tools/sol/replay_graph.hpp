// Reading a traced process's primitive graph (docs/graph-format.md) for `sol replay`: its
// descriptions rebuilt as capture::Node templates (a BLAS call's arguments, a DNN primitive's
// description), its buffers, inputs and nodes in file order, and its inputs' bytes mapped from the
// data file. Everything is checked as it is read: a foreign, corrupt or incompatible file is one
// error line, and a graph cut short (a process killed mid-run, a file truncated) is read up to its
// last complete node, with a warning saying so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "capture/blas/blas.hpp"
#include "ir/dnn.hpp"
#include "ir/node.hpp"

namespace sol::tools::replay {

// An op signature, as the trace's summaries name it: the replay's rows.
struct OpKey {
  std::string api, symbol, op, dtype, shape;
  auto operator<=>(const OpKey&) const = default;
};

// The graph's libraries, by record id (index id - 1): where the program's native symbols were.
struct Library {
  std::string path, identity;
};

// A node description, rebuilt.
struct Description {
  OpKey key;
  std::string family;
  uint32_t lib = 0;  // its native library's record; 0: none
  // A Node with every argument but its operands' addresses (BLAS), or with `dnn` as its
  // description; node.dnn stays null here (each execution binds its own Call).
  capture::Node node{capture::Sym{}, capture::Op::gemm, capture::DType::none};
  std::unique_ptr<capture::dnn::Desc> dnn;
  std::unique_ptr<capture::DeviceBlas> device;
  // Its operands, by position, as the graph lists them: for BLAS the BlasArgs field each one's
  // address goes to, its bytes and directions; for DNN the tensor.
  struct Operand {
    void* capture::BlasArgs::*field = nullptr;
    size_t bytes = 0;
    bool read = false, written = false;
    capture::DType dtype = capture::DType::none;
    capture::dnn::Arg arg = capture::dnn::Arg::src;
  };
  std::vector<Operand> operands;
  std::vector<capture::blas::Operand> geometry;  // BLAS: blas::operands of the template
  std::string why_not;                           // why no replay can run it ("" when one can)
  std::string unsupported;                       // the storage dnn->unsupported points to
};

struct Ref {
  uint32_t buf = 0;  // 0: no operand there (an empty one, or an unbound call's)
  uint64_t off = 0;
  uint32_t ver = 0;
};

struct NodeRecord {
  uint64_t number = 0, seq = 0;
  int64_t tid = 0;
  uint32_t desc = 0;
  std::vector<Ref> ops;
  std::string unbound;
  int threads = 0;            // what its library computed it with natively (0: not said)
  bool hashed = false;        // `out` (and `ret`) were recorded: the program's results, hashed
  std::vector<uint64_t> out;  // per operand written, in order
  std::vector<double> ret;    // a function's result (two values for complex)
  std::vector<uint64_t> res;  // computed on several threads: where each operand written is in the data
};

struct BufferRecord {
  uint64_t bytes = 0;
  struct Part {
    uint32_t buf;
    uint64_t off;
  };
  std::vector<Part> parts;
};

struct Input {
  uint32_t buf = 0;
  uint64_t off = 0, bytes = 0, data = 0;
};

struct Event {
  enum Kind : uint8_t { buffer, input, node } kind;
  uint32_t index;  // into buffers (buffer id - 1), inputs or nodes
};

struct Graph {
  std::string path, data_path;
  // The header.
  std::string sol, tag, host, cpu, isa, command, exit;
  int64_t pid = 0, cpus = 0;
  bool data = false, complete = false;
  uint64_t data_cut_at = 0;  // the first node without data, 0: none
  std::vector<Library> libs;
  std::vector<std::unique_ptr<Description>> descs;  // by id - 1
  std::vector<BufferRecord> buffers;                // by id - 1
  std::vector<Input> inputs;
  std::vector<NodeRecord> nodes;
  std::vector<Event> events;
  // The data file, mapped (nullptr without one).
  const unsigned char* bytes = nullptr;
  size_t size = 0;
  std::vector<std::string> warnings;  // read, but not all of it: why

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
};

// Reads the graph at `path`. false with `error`, one line naming the file, when it cannot be used.
bool read_graph(const std::string& path, Graph& g, std::string& error);

// The graph files of RUN: a graph file itself, a run directory (each process's), or a trace
// directory (its latest run; `note` says so when it holds several). false with `error` when none.
bool find_graphs(const std::string& run, std::vector<std::string>& paths, std::string& note,
                 std::string& error);

}  // namespace sol::tools::replay
