// What auto measured on this machine: per native library, routine, element type, shape class
// and transposes, each candidate's rate and the one chosen. Kept in memory in a lock-free table
// (one atomic probe sequence per routed call) and on disk in a per-machine profile file under the
// user's cache directory, so that a later process routes identically from its first call.
//
// The file is keyed by everything the figures depend on (the machine fingerprint: SOL's version,
// the CPU, the environment variables that change a library's kernels or threads, the libraries
// the backends open) and each row by the native library's identity (file, size, mtime): a
// change of CPU, library or SOL starts a new profile instead of trusting stale figures. Writers
// work under an exclusive lock: each appends its row's line in one write, and replaces the file
// atomically (temporary file + rename) when it has to be rewritten whole, so concurrent
// processes, threads and forked children never leave a torn or half-merged file.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "auto/classes.hpp"
#include "ir/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::autosel::profile {

// A process's figures are its own: some shapes run at one of two speeds by the address-space
// layout the process drew (auto/README.md, R4). A class whose best two candidates one process judged within kJudgeAgainRates of each other may
// have been judged in a slow draw: the next processes that call it try the two in use again, up to
// kJudges processes in all, and the class takes the candidate with the best rate any of them saw.
// So is a class whose choice is unconfirmed() (below).
inline constexpr double kJudgeAgainRates = 1.5;
inline constexpr int kJudges = 3;

// ---------------------------------------------------------------------------- measurements

struct Rate {
  std::string candidate;  // "native" or a backend's name
  double gflops;          // measured; 0 when it declined the node
};

// How a row's figures were obtained, from least to most trusted:
// - provisional: a race run while something else held the cores (the process starting, with its
//   library's thread pool spinning from its load; a candidate far below what it ran at, calm, on a
//   near class): the class routes by it, and is measured again once calm, in this process or the
//   next, until a calm figure confirms or replaces it;
// - calm: a race with nothing known to disturb it; trial: the figures of a trial in use
//   (auto/trial.hpp), which replaced the race's;
// - tuned: measured by `sol tune`, in a process of its own with the other pools quiet. A tuned row
//   is never replaced by a program's figures, nor judged again.
enum class How : uint8_t { provisional, calm, trial, tuned };
const char* how_name(How how) noexcept;
// Whether row `a` replaces row `b` of the same class: a more trusted one, or as trusted and later
// (Row::seq). A process never spoils another's calm or tuned figures with its provisional ones.
struct Row;
bool supersedes(const Row& a, const Row& b) noexcept;

struct Row {
  std::string native;  // identity of the native library (sol::library_identity), "none" if unknown
  uint64_t key = 0;    // class_of
  std::string size;    // the call measured, "300x300x300"
  std::vector<Rate> rates;
  std::string choice;
  // How many processes judged the class (kJudges): the rates are the best each candidate showed
  // in any of them.
  int judged = 1;
  How how = How::calm;
  // The order the file's rows were written in, across processes: each row appended takes the
  // file's highest plus one, under its lock. 0 for a row not written yet.
  uint64_t seq = 0;
  // In this process only, never in the file: a candidate to try in use before the choice is
  // final (auto/measure.hpp).
  std::string trial;
  // In this process only: candidates whose first run was taken for set-up and taken again, at
  // the rate that run showed (SOL_LOG=debug names them).
  std::vector<Rate> set_up;
};

// Everything the profile's figures depend on, one "name=value" per line. `libsol`: the path of
// libsol.so (a rebuilt SOL may compute differently); "" for the one this code is linked into
// when that is libsol.so itself.
std::string machine_fingerprint(const config::Config& cfg, const std::string& libsol = "");

// A row whose choice trails another candidate's rate by more than 3 %: a class that a race beside
// home's threads sent elsewhere, kept on home because its process ended before the trial in use
// against home did (auto/auto.cpp, rules::after_race()). The next processes judge it again
// however far apart its rates (up to kJudges in all), and the trial's figures replace the race's.
bool unconfirmed(const Row& row) noexcept;

// What read_file saw of a file besides its rows.
struct FileState {
  size_t row_lines = 0;   // rows in the file, those later rows replace included
  bool torn = false;      // it ended in a part of a line (a crash of the system while appending)
  uint64_t last_seq = 0;  // the highest Row::seq in it
};

// Reads a profile file. false with `why` when it is missing, unreadable, of another version, of
// another machine (its fingerprint differs from `fingerprint`), or corrupt. A class with several
// rows (appended as it was measured again) has the one that supersedes the others; a torn last line
// is left out.
bool read_file(const std::string& path, const std::string& fingerprint, std::vector<Row>& rows,
               std::string& why, FileState* state = nullptr);

class Profile {
 public:
  // Values of lookup().
  static constexpr int kUnknown = -1;    // never measured
  static constexpr int kMeasuring = -2;  // being measured by another thread right now
  static constexpr int kUnrouted = -3;   // nothing known and nothing will be: route by the built-in order
  static constexpr int kTrial = -4;      // measured; a candidate is being tried in use (the caller's table)
  // Judged close by earlier processes: the caller tries it in use again (earlier(), then record()),
  // and meanwhile lookup() says kMeasuring to the others.
  static constexpr int kJudgeAgain = -5;

  explicit Profile(const config::Config& cfg, const std::string& libsol = "");

  // Whether the profile may measure (tune.measure and a usable directory or none needed).
  bool measuring() const noexcept { return measure_; }
  // The path of this machine's profile file ("" when no directory can be used).
  const std::string& path() const noexcept { return path_; }

  // A small number for a native library identity, stable within the process (0..14); -1 when
  // the table of identities is full.
  int native_index(const std::string& identity);

  // The candidate chosen for (native, key): an index for candidate_name(), or a k* value. Lock-free.
  int lookup(int native, uint64_t key) noexcept;
  // Marks (native, key) as being measured by the caller. false when someone else got there first
  // or it is known.
  bool claim(int native, uint64_t key) noexcept;
  // Turns the caller's claim into a trial: lookup() says kTrial until record().
  void begin_trial(int native, uint64_t key) noexcept;
  // Gives up a claim (measurement failed): the class routes by the built-in order from now on.
  void release(int native, uint64_t key) noexcept;
  // Stores a measurement (the caller's claim) and writes it to the file. A class judged again
  // (kJudgeAgain) is stored with the earlier processes' figures: each candidate's best rate, the
  // choice the best of them unless this process's is within 3 % of it; one whose earlier row was
  // unconfirmed() with this process's figures alone.
  void record(int native, Row row);
  // The row that earlier processes left for a class this process judges again (kJudgeAgain).
  bool earlier(int native, uint64_t key, Row& out);
  // Routes a class this process was to judge again by the earlier processes' row, as it stands:
  // lookup()'s value for it from now on.
  int keep_earlier(int native, uint64_t key) noexcept;
  // Counts this process among those that judged the class, in the file, before its trial is over:
  // a process that ends first (a short program: the trial's turns take about half a second) still
  // counts, so that short runs of a program do not try the class again and again.
  void judging(int native, uint64_t key);
  // Where this process's measured classes of `native` went, by weight (each class's measured call
  // m x n x k): the candidate with the most, "" before any. The program's library threads are
  // mostly that candidate's: a class measured now is judged beside them (auto/measure.hpp).
  // When a record moves the home, the classes that went elsewhere are measured again (once).
  // `except_key`: a class left out of the count (the one being judged).
  std::string home(int native, uint64_t except_key = 0);
  // Sends (native, key) back to measurement (its next call measures it), once per process: false
  // when it was sent back already. For a class whose trial in use ended away from the home.
  bool measure_again(int native, uint64_t key);
  // The GEMM classes the profile file sends to `candidate` (of any native library), at most `max`,
  // each with the size of its measured call: what a backend that compiles kernels per problem
  // (oneDNN) may prepare before the program's first call (auto/warm_up.hpp).
  struct Gemm {
    capture::DType dtype;
    char transa, transb;
    int64_t m, n, k;
  };
  std::vector<Gemm> gemms_for(const std::string& candidate, size_t max);
  // The calm, trial or tuned rows of `native` for classes near `key`: the same routine, element
  // type, layout, transposes and other arguments, each dimension within twice the size either way
  // (two size classes); not the class itself (auto/rules.hpp, disturbed()).
  std::vector<Row> near_calm(int native, uint64_t key);
  // Whether the file holds rows and none that a later process judges again: a program that calls
  // only those classes measures nothing (auto/warm_up.cpp prepares no backend for it).
  bool settled();
  // lookup() for a call: `node`, of class `key`, goes by its sub-class (sub_class_of; `key` becomes
  // that) where the class was measured, its two fastest within kCloseRates, at a call in other
  // halves (halves_of). One probe of the table for a class that does not split. `again`, given: set
  // when the class routes by a provisional row (Row::How), to be measured again once calm.
  int lookup(int native, uint64_t& key, const capture::Node& node, bool* again = nullptr) noexcept;
  // Claims a class that routes by a provisional row for a measurement now (the caller found the
  // process calm): lookup() says kMeasuring to the others until record(). Once per class and
  // process: false when it was claimed before, or someone else got there first.
  bool claim_again(int native, uint64_t key) noexcept;
  // Marks (native, key) as routed by the built-in order for this process (measurement off).
  void unrouted(int native, uint64_t key) noexcept;

  const char* candidate_name(int index) const noexcept;

  // Counts the changes to where a known class routes (a trial begun, a record, a class sent back
  // to measurement, a class first read from the file): a thread's memo of the calls that stay
  // native (capture/exec/executor.cpp, stays_native()) holds while this is what it was when the call was routed.
  // Read before the lookup that routes a call; bumped after the change it counts. Never 0.
  uint32_t changes() const noexcept { return changes_.load(std::memory_order_acquire); }
  const std::atomic<uint32_t>& change_count() const noexcept { return changes_; }

  // In a forked child: locks taken by other threads at fork time are not held by anyone.
  void after_fork_child() noexcept;

 private:
  struct Slot {
    std::atomic<uint64_t> key{0};
    std::atomic<int32_t> value{kUnknown};
    std::atomic<int32_t> split{-1};  // the measured call's halves when its rates were close, else -1
    std::atomic<bool> again{false};  // routed by a provisional row not yet measured again here
  };
  static constexpr size_t kSlots = 4096;
  static constexpr int kMaxNatives = 15;
  static constexpr int kMaxCandidates = 16;

  static uint64_t slot_key(int native, uint64_t key) noexcept;
  int lookup(int native, uint64_t key, const Slot*& slot) noexcept;  // and the class's slot, if any
  Slot* find(uint64_t k, bool insert) noexcept;
  int candidate_index(const std::string& name);
  void changed() noexcept {
    if (changes_.fetch_add(1, std::memory_order_acq_rel) == UINT32_MAX)
      changes_.fetch_add(1, std::memory_order_acq_rel);
  }
  void load_locked();  // reads the file into rows_ (once)
  void write_locked(const Row& row);

  bool measure_;
  std::string dir_, path_, fingerprint_;

  Slot slots_[kSlots];
  std::atomic<uint32_t> changes_{1};
  std::mutex mu_;  // everything below; never taken on the routed path once a class is known
  bool loaded_ = false;
  std::string natives_[kMaxNatives];
  std::atomic<int> nnatives_{0};
  std::string candidates_[kMaxCandidates];
  std::atomic<int> ncandidates_{0};
  std::map<std::pair<std::string, uint64_t>, Row> rows_;  // from the file, by (native, key)
  // Recorded by this process: (native, key) -> (choice, weight), for home().
  std::map<std::pair<int, uint64_t>, std::pair<std::string, double>> recorded_;
  std::set<std::pair<int, uint64_t>> remeasured_;  // measured again once already (record())
  std::set<std::pair<int, uint64_t>> calm_tried_;  // provisional classes measured again here (claim_again())
  std::map<std::pair<int, uint64_t>, Row> earlier_;  // classes judged again: the file's row
  std::string home_locked(int native, uint64_t except_key = 0) const;
};

}  // namespace sol::autosel::profile
