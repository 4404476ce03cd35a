// Verify mode (SOL_VERIFY=1): every node a backend other than native computes is computed again
// on the program's own library (or the reference backend when there is none), on copies, and the
// results compared with tolerances fit for the element type and the length of the sums.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capture/blas.hpp"
#include "capture/node.hpp"

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
  struct Copy {
    blas::Operand op;
    std::vector<unsigned char> bytes;
  };
  std::vector<Copy> copies_;
};

// The process's closing line, "sol: verify: N checked, M mismatches" (once, if anything ran).
void finish() noexcept;

// In a forked child: its own counts and file.
void reset_after_fork() noexcept;

}  // namespace sol::capture::verify
