// The primitive graph of a traced process, beside its trace: `sol-<tag>.graph.jsonl` and, with
// SOL_TRACE_DATA=1, `sol-<tag>.graph.data` (docs/graph-format.md), for `sol replay`.
//
// Every traced call that computes (a BLAS call, a DNN execution; not oneDNN's or the CUDA
// libraries' set-up calls) becomes a node record, in the order the calls ended, with its thread:
// its description (once per distinct one), and each operand as buffer, offset and version
// (graph_memory.hpp). With input data on, before a call runs, each operand it reads whose contents
// the graph does not know (written by no traced call, or changed since by code SOL does not see)
// is saved as an input: a new version of its buffer, with its bytes, until trace.data_max bytes;
// after a call, each operand it wrote is hashed, so that `sol replay` can tell whether it
// reproduced the program's result bit for bit.
//
// Records are appended to one block under the writer's lock, which goes to the file whole
// (TraceFile's writer thread): a process killed by a signal leaves a prefix of whole records, and
// the data file holds the bytes of every input those records name. The header, first, is rewritten
// when the process ends (complete, node and input counts, where the data cap cut).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/blas/blas.hpp"
#include "capture/trace/graph_memory.hpp"
#include "capture/trace/trace_file.hpp"
#include "ir/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture::trace {

struct State;
class Text;

class GraphWriter {
 public:
  GraphWriter() = default;
  GraphWriter(const GraphWriter&) = delete;
  GraphWriter& operator=(const GraphWriter&) = delete;

  void configure(const config::Config& cfg) noexcept;
  // Whether inputs' bytes are being saved (SOL_TRACE_DATA=1, the cap not reached).
  bool saving() const noexcept { return saving_.load(std::memory_order_relaxed); }

  // Before a traced call runs, while saving(): the inputs it reads that the graph does not know.
  void before(const State& s, const Node& node) noexcept;
  // After a traced call ran on `backend` ("invalid": rejected, no node): its node record. `ops`
  // (when not null): the node's BLAS operands, as blas::operands gives them.
  void after(const State& s, const Node& node, const char* backend, uint64_t seq, pid_t tid,
             const blas::Operand* ops, int nops) noexcept;
  // [p, p + bytes) was given back.
  void forget(const void* p, size_t bytes) noexcept;
  // The process ends: the data flushed, the header rewritten, the files closed. Idempotent.
  void finish(const State& s, const char* how) noexcept;

  void lock_for_fork() noexcept;
  void unlock_in_parent() noexcept;
  void reset_in_child() noexcept;

 private:
  struct Operand;
  struct Operands;
  struct Hashed;

  bool open(const State& s) noexcept;
  std::string header(const State& s, const char* how) const;
  void append(const char* data, size_t len) noexcept;
  uint32_t lib(const Node& node);
  int threads(const Node& node, uint32_t lib) noexcept;
  uint32_t desc(const Node& node);
  uint32_t describe(const Node& node);
  bool locate(uintptr_t lo, uintptr_t hi, GraphMemory::Ref& ref);
  void locate_all(const Operands& ops, GraphMemory::Ref* refs);
  void born(const GraphMemory::Born& b) noexcept;
  bool room(uint64_t bytes) noexcept;
  bool save(const Operand& op, const GraphMemory::Ref& ref, uint64_t key, uint64_t content);
  void results(const Operands& ops, Text& t) noexcept;
  void write_data(const void* p, size_t n) noexcept;
  void flush_data() noexcept;

  std::mutex mu_;
  bool data_ = false;
  std::atomic<bool> saving_{false};
  uint64_t data_max_ = 0;
  // The files: opened at the first node; closed when the process ends. Unwritable: the trace goes
  // on without a graph.
  enum class Files : uint8_t { not_open, open, closed, unwritable };
  std::atomic<Files> files_{Files::not_open};
  TraceFile file_;
  int data_fd_ = -1;
  uint64_t data_end_ = 0;  // the data file's size, what is still in data_buf_ included
  char* data_buf_ = nullptr;
  size_t data_used_ = 0;
  uint64_t nodes_ = 0, inputs_ = 0, data_bytes_ = 0, cut_at_ = 0;
  GraphMemory memory_;
  GraphMemory::Born born_;  // locate()'s scratch
  uint64_t owner_ = 0;      // this graph's number: threads' caches of another (a parent's) are stale
  std::unordered_map<uint64_t, uint32_t> descs_;
  std::unordered_map<std::string, uint32_t> libs_;
  std::vector<uint32_t> lib_of_;        // per symbol: its library's record + 1 (0: not looked up)
  std::vector<int (*)()> lib_threads_;  // per library record: how many threads it computes with
  std::vector<char> scratch_;           // a desc record being written
  size_t used_ = 0;
  char* block_ = first_block_;
  char first_block_[TraceFile::kBlock];
};

}  // namespace sol::capture::trace
