#include "capture/exec/measure.hpp"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/macros.hpp"

namespace sol::capture::measure {

uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void slow_down_if_asked(const char* backend, uint64_t started_ns) noexcept {
  static const char* const slow = [] {
    const char* v = secure_getenv("SOL_TEST_SLOW");
    return v && *v ? v : nullptr;
  }();
  if (SOL_LIKELY(!slow) || std::strcmp(slow, backend) != 0) return;
  const uint64_t took = now_ns() - started_ns;
  const uint64_t until = now_ns() + 9 * took;
  while (now_ns() < until) {
  }
}

namespace {

// Copies of the operands a node writes, and the node pointing at them.
class Scratch {
 public:
  bool take(const Node& node) noexcept {
    node_ = node;
    node_.ret = {};
    node_.result = nullptr;
    blas::Operand ops[blas::kMaxOperands];
    const int n = blas::operands(node, ops);
    size_t total = 0;
    for (int i = 0; i < n; ++i)
      if (ops[i].written && ops[i].bytes && blas::operand_field(ops[i].name)) total += (ops[i].bytes + 63) & ~size_t{63};
    // Larger than this, a measurement would cost more memory than users expect of a library call.
    if (total > (size_t{1} << 30)) return false;
    buffer_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, total ? total : 64)));
    if (!buffer_) return false;
    size_t at = 0;
    count_ = 0;
    for (int i = 0; i < n; ++i) {
      if (!ops[i].written || !ops[i].bytes || !blas::operand_field(ops[i].name)) continue;
      copies_[count_++] = {ops[i].ptr, buffer_.get() + at, ops[i].bytes};
      node_.blas.*blas::operand_field(ops[i].name) = buffer_.get() + at;
      at += (ops[i].bytes + 63) & ~size_t{63};
    }
    return true;
  }
  // The copies as the caller's memory is now (each candidate starts from the same outputs:
  // beta != 0 reads them, and values grown by earlier runs could take slower paths).
  Node& refresh() noexcept {
    for (int i = 0; i < count_; ++i) std::memcpy(copies_[i].copy, copies_[i].from, copies_[i].bytes);
    node_.ret = {};
    return node_;
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const noexcept { std::free(p); }
  };
  struct Copy {
    const void* from;
    void* copy;
    size_t bytes;
  };
  Node node_{Sym{}, Op{}, DType::none};
  std::unique_ptr<unsigned char, Free> buffer_;
  Copy copies_[blas::kMaxOperands];
  int count_ = 0;
};

// Candidates that ran a routine once already in this process: their first run pays for set-up
// (thread pools, JIT-compiled kernels, OpenCL programs) that later calls do not.
std::mutex g_warm_mu;
std::set<std::string>* g_warm = new std::set<std::string>;  // never freed: used until exit

bool warm(const char* candidate, const Node& node) {
  const std::string key = std::string(candidate) + ":" + op_name(node.op) + ":" + dtype_name(node.dtype);
  std::lock_guard<std::mutex> lock(g_warm_mu);
  return !g_warm->insert(key).second;
}

// One run of a candidate on the copies, in seconds; < 0 when it declined the node.
double time_once(Scratch& scratch, Candidate& c) noexcept {
  Node& n = scratch.refresh();
  const uint64_t t0 = now_ns();
  if (blas::with_column_major(n, c.run) != hal::Reason::ok) return -1;  // c.run applies SOL_TEST_SLOW
  return static_cast<double>(now_ns() - t0) * 1e-9;
}

}  // namespace

// Candidates are timed in rounds, each round running every candidate still in the race, and each
// keeps its best time: a spell of load on a shared machine then slows all of them rather than the
// one that happened to run during it.
// - The program's own library starts with the call itself (native_seconds): the caller's call
//   ran natively and was timed, so native costs nothing more unless it is close to the best.
// - A candidate more than 1.5x slower than the best so far leaves the race: it cannot win, and
//   timing it again is the most expensive thing a measurement could do.
// - Calls above 2 ms get one sample, two when another candidate is within 20 % (noise is small
//   against them, and each sample costs a whole call); shorter ones at least three rounds, each
//   running the candidate back to back for 100 us (its threads stay awake, as in a program that
//   calls it in a loop), until it has been timed for 500 us.
// - The first time a candidate runs a routine in this process it runs once untimed (thread
//   pools, JIT-compiled kernels); a first native call gets a second sample before it is judged.
// The program's own library keeps the class unless another is clearly faster (3 %): within the
// noise, staying native is what costs nothing.
bool run(const Node& node, double flops, std::vector<Candidate>& candidates, double native_seconds,
         hal::profile::Row& row) noexcept {
  Scratch scratch;
  if (!scratch.take(node)) return false;
  const BlasArgs& b = node.blas;
  char size[96] = "";
  for (const int64_t d : {b.m, b.n, b.k})  // the dimensions the routine has
    if (d > 0)
      std::snprintf(size + std::strlen(size), sizeof size - std::strlen(size), "%s%lld", size[0] ? "x" : "",
                    static_cast<long long>(d));
  const size_t n = candidates.size();
  std::vector<double> best(n, -1), spent(n, 0);
  std::vector<int> samples(n, 0);
  std::vector<bool> out(n, false);
  size_t native = n;
  bool native_was_warm = true;
  try {
    row.size = size;
    for (size_t i = 0; i < n; ++i) {
      if (std::strcmp(candidates[i].name, "native") == 0 && native_seconds > 0) {
        native = i;
        native_was_warm = warm(candidates[i].name, node);
        best[i] = spent[i] = native_seconds;
        samples[i] = 1;
      } else if (!warm(candidates[i].name, node) && time_once(scratch, candidates[i]) < 0) {
        out[i] = true;
      }
    }
  } catch (...) {
    return false;
  }
  auto fastest = [&]() {
    double f = -1;
    for (size_t i = 0; i < n; ++i)
      if (!out[i] && best[i] > 0 && (f < 0 || best[i] < f)) f = best[i];
    return f;
  };
  // Whether another candidate still in the race is within 20 % of this one: only then is a long
  // call's second sample worth its cost.
  auto contested = [&](size_t i) {
    for (size_t j = 0; j < n; ++j)
      if (j != i && !out[j] && best[j] > 0 && best[j] < 1.2 * best[i] && best[i] < 1.2 * best[j]) return true;
    return false;
  };
  double best_cpu = -1;
  for (size_t i = 0; i < n; ++i)
    if (best[i] > 0 && candidates[i].predicted_seconds < 0) best_cpu = best[i];
  for (int round = 0; round < 64; ++round) {
    bool more = false;
    for (size_t i = 0; i < n; ++i) {
      Candidate& c = candidates[i];
      if (out[i]) continue;
      // An accelerator predicted to lose clearly to the CPU is not worth its transfers.
      if (c.predicted_seconds >= 0 && best_cpu > 0 && c.predicted_seconds > 2 * best_cpu) {
        out[i] = true;
        continue;
      }
      if (i == native && round == 0) continue;  // its sample is the call itself; the others first
      // A first native call carries the process's first-use costs, as every other candidate's
      // untimed first run does: it gets a second sample before it is judged.
      const double f = fastest();
      const bool second_chance = i == native && !native_was_warm && samples[i] == 1;
      if (samples[i] > 0 && f > 0 && best[i] > 1.5 * f && !second_chance) {
        out[i] = true;
        continue;
      }
      const bool long_call = best[i] > 2e-3;
      if (long_call ? samples[i] >= 2 || (samples[i] >= 1 && !contested(i)) : samples[i] >= 3 && spent[i] >= 500e-6)
        continue;
      double batch = 0;
      do {
        const double t = time_once(scratch, c);
        if (t < 0) {
          out[i] = true;
          break;
        }
        batch += t;
        if (best[i] < 0 || t < best[i]) best[i] = t;
      } while (best[i] <= 2e-3 && batch < 100e-6);
      if (out[i]) continue;
      spent[i] += batch;
      ++samples[i];
      if (c.predicted_seconds < 0 && (best_cpu < 0 || best[i] < best_cpu)) best_cpu = best[i];
      more = true;
    }
    if (!more && round > 0) break;
  }
  try {
    row.rates.clear();
    row.choice.clear();
    double chosen = -1;
    for (size_t i = 0; i < n; ++i) {
      if (best[i] <= 0) continue;  // declined the node
      row.rates.push_back({candidates[i].name, flops / best[i] * 1e-9});
      if (chosen < 0 || best[i] < chosen) {
        chosen = best[i];
        row.choice = candidates[i].name;
      }
    }
    if (native < n && chosen > best[native] / 1.03) row.choice = "native";
    return chosen > 0;
  } catch (...) {
    return false;
  }
}

}  // namespace sol::capture::measure
