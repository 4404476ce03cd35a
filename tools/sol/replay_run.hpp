// Running a traced run's graphs on one backend, for `sol replay` (docs/replay.md).
//
// Each backend gets a process of its own, forked from the command's (which has read the graphs and
// started nothing): SOL's executor is set up there as libsol sets it up for a program, with the
// backend as SOL_BACKEND, SOL_LAZY as asked, verify mode for --check, no tuning, and the program's
// own libraries opened as "native" (replay_native.hpp). The graphs' events then run in their order:
// a buffer is allocated at its record (and filled with generated values: benchdnn's method, small
// multiples of 1/8, exact in sums), an input's bytes written into it, a node bound to its buffers
// and handed to capture::execute() with native as its fallback; a buffer is given back after its
// last use. Each node is timed around execute(); a pass's graph time is its nodes' time plus the
// time the host waited for a device's results (before writing an input into memory a device holds,
// and at the end of the pass). The process reports what it measured through a pipe and exits.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hal/transfers.hpp"
#include "tools/sol/replay_graph.hpp"

namespace sol::tools::replay {

struct Options {
  std::vector<std::string> backends;  // native first, then what --backend lists
  int repeat = 1;                     // passes over the graph; the fastest is reported
  bool check = false;                 // verify mode: each node a backend ran, against native
  bool lazy = true;                   // SOL_LAZY for device backends
};

// One op signature's calls on one backend (in the fastest pass).
struct OpResult {
  uint64_t calls = 0, ran = 0, declined = 0, ns = 0;
  uint64_t checked = 0, mismatches = 0;     // --check
  uint64_t hashed = 0, reproduced = 0;      // native, with the program's data: results bit for bit
  uint64_t tolerated = 0;                   // ... or, computed on several threads, within verify's tolerance
  std::map<std::string, uint64_t> reasons;  // why it declined: count per reason

  OpResult& operator+=(const OpResult& o);
};

struct BackendResult {
  std::string name;
  std::string error;   // the replaying process failed: why ("" when it did not)
  double seconds = 0;  // the graphs' time, fastest pass of each
  OpResult all;        // every op's together (its `ns`: the nodes' alone, without waits for a device)
  std::map<std::string, uint64_t> ran_on;  // what ran the nodes (auto: which backend; when declined: where)
  bool device = false;
  hal::transfers::Totals transfers;
  std::vector<std::string> differ;     // native: nodes whose results were not the program's (the first few)
  std::vector<std::string> libraries;  // the objects the replaying process had loaded
  std::vector<std::string> notes;      // native libraries found elsewhere, or not at all
  std::map<OpKey, OpResult> ops;
};

// Replays `graphs` on `backend` in a process of its own (the caller's stays as it is).
BackendResult replay_on(const std::vector<Graph*>& graphs, const std::string& backend,
                        const Options& options);

}  // namespace sol::tools::replay
