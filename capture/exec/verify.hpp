// Verify mode (SOL_VERIFY=1): every node a backend other than native computes is computed again
// on the program's own library (or the reference backend when there is none), on copies, and the
// results compared with tolerances fit for the element type and the length of the sums.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capture/blas/blas.hpp"
#include "capture/blas/copies.hpp"
#include "ir/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture::verify {

void start(const config::Config& cfg) noexcept;
bool enabled() noexcept;

// The bytes a node may write, copied before it runs.
class Snapshot {
 public:
  // False when the copies could not be made (the node then runs unverified).
  bool take(const Node& node) noexcept;
  // Computes the node again on the copies, with `run` (column-major semantics through
  // with_column_major), and compares. `backend` ran the original; `against` names `run`.
  void check(const Node& node, const char* backend, const char* against,
             blas::FunctionRef<hal::Reason(Node&)> run) noexcept;

 private:
  blas::WrittenCopies copies_;  // the written operands as they were before the call
};

// The same for DNN nodes: copies of the tensors the node writes (a sum post-op's dst holds what
// it accumulates into), and the check runs the frontend's native primitive on them
// (dnn::Call::rerun_native). Nodes that read a backend's workspace are not checked: the native
// primitive cannot read another implementation's workspace.
class DnnSnapshot {
 public:
  bool take(const Node& node) noexcept;
  void check(const Node& node, const char* backend) noexcept;

 private:
  std::vector<std::vector<unsigned char>> copies_;
  std::vector<int> tensor_;  // the Desc tensor of each copy
};

// How long the sums behind a BLAS node's results are: verify's tolerance grows with it (a DNN
// tensor's: dnn::depth).
double depth(const Node& node) noexcept;
// verify's judgement of one result: `got` against `want`, `bytes` of elements of type `dtype`
// (real types, complex as their pairs of reals), each the end of a sum `depth` terms long.
bool close_enough(const void* got, const void* want, size_t bytes, DType dtype, double depth) noexcept;

// What verify has checked so far in this process, and how many of those differed.
struct Totals {
  uint64_t checked = 0, mismatches = 0;
};
Totals totals() noexcept;

// The process's closing line, "sol: verify: N checked, M mismatches" (once, if anything ran).
void finish() noexcept;

// In a forked child: its own counts and file.
void reset_after_fork() noexcept;

}  // namespace sol::capture::verify
