#include "auto/profile.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "common/cpu.hpp"
#include "common/fs_safety.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "config/config.hpp"

namespace sol::autosel::profile {

namespace {

constexpr const char* kMagic = "sol-profile 3";
constexpr const char* kHowNames[] = {"provisional", "calm", "trial", "tuned"};

// FNV-1a: the profile's file name from its fingerprint.
uint64_t fnv1a(const std::string& s) noexcept {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Where the dynamic loader would find a bare soname, without loading it: LD_LIBRARY_PATH, then
// the system's directories. Good enough to notice that a library was upgraded or swapped.
std::string resolve_library(const std::string& name) {
  if (name.find('/') != std::string::npos) return file_identity(name);
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("LD_LIBRARY_PATH")) {
    std::stringstream ss(p);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib",
                        "/usr/lib", "/usr/local/lib"})
    dirs.emplace_back(d);
  for (const auto& d : dirs) {
    std::string id = file_identity(d + "/" + name);
    if (!id.empty()) return id;
  }
  return "not found";
}

}  // namespace

namespace {

// A row's measured call, "300x300x300" (the dimensions its routine has, in the order m, n, k), as
// m, n, k; a dimension the routine lacks, or the text does not give, stays 0. false when the text
// lacks one the class has.
bool measured_dims(const Row& row, int64_t dims[3]) noexcept {
  dims[0] = dims[1] = dims[2] = 0;
  const char* d = row.size.c_str();
  for (int i = 0; i < 3; ++i) {
    if (!dim_class(row.key, i)) continue;
    char* end = nullptr;
    const long long v = std::strtoll(d, &end, 10);
    if (end == d) return false;
    dims[i] = v;
    d = *end == 'x' ? end + 1 : end;
  }
  return true;
}

// A row's two best rates.
void best_two(const Row& row, double& best, double& second) noexcept {
  best = second = 0;
  for (const Rate& r : row.rates) {
    second = std::max(second, std::min(best, r.gflops));
    best = std::max(best, r.gflops);
  }
}

// The halves of a row's measured call when its two fastest candidates were within kCloseRates, or
// when it left the program's library for a backend (a class, not a sub-class, which does not split
// again), else -1.
int split_of(const Row& row) noexcept {
  if (row.key & kSubClass) return -1;
  double best, second, native = 0;
  best_two(row, best, second);
  for (const Rate& r : row.rates)
    if (r.candidate == "native") native = r.gflops;
  int64_t dims[3];
  const bool close = second > 0 && best <= kCloseRates * second;
  // Sent away from the program's library: from native, or with native left out (its OpenBLAS
  // below par), from the openblas backend that runs that library with this CPU's kernels
  // (auto/README.md, R2).
  const bool left_native = row.choice != "native" && (native > 0 || row.choice != "openblas");
  if ((!close && !left_native) || !measured_dims(row, dims)) return -1;
  return halves(dims[0], dims[1], dims[2]);
}

}  // namespace

const char* how_name(How how) noexcept {
  return kHowNames[static_cast<int>(how)];
}

namespace {
// How a row's figures rank: a trial's are a calm race's equals (the latest of the two wins).
int trust(How how) noexcept {
  return how == How::provisional ? 0 : how == How::tuned ? 2 : 1;
}
}  // namespace

bool supersedes(const Row& a, const Row& b) noexcept {
  return trust(a.how) > trust(b.how) || (trust(a.how) == trust(b.how) && a.seq >= b.seq);
}

bool unconfirmed(const Row& row) noexcept {
  double best = 0, chosen = 0;
  for (const Rate& r : row.rates) {
    best = std::max(best, r.gflops);
    if (r.candidate == row.choice) chosen = r.gflops;
  }
  return 1.03 * chosen < best;
}

namespace {

// Whether a later process judges a row's class again (kJudgeAgainRates, unconfirmed()). Not a
// tuned row, nor a provisional one, which is measured again instead (Profile::claim_again()).
bool judged_close(const Row& row) noexcept {
  if (row.judged >= kJudges || row.how == How::tuned || row.how == How::provisional) return false;
  double best, second;
  best_two(row, best, second);
  return (second > 0 && best <= kJudgeAgainRates * second) || unconfirmed(row);
}

// This process's row for a class judged before: each candidate at its best rate in any process,
// and the choice the best of those unless this process's is within 3 % of it (its calls were
// timed in use beside this program's other classes: the tie goes to what it saw).
Row merged(const Row& before, Row now) {
  if (unconfirmed(before)) {  // a race beside home's threads, which this process's trial judged
    now.judged = before.judged + 1;
    return now;
  }
  for (const Rate& b : before.rates) {
    auto it = std::find_if(now.rates.begin(), now.rates.end(),
                           [&](const Rate& r) { return r.candidate == b.candidate; });
    if (it == now.rates.end())
      now.rates.push_back(b);
    else
      it->gflops = std::max(it->gflops, b.gflops);
  }
  double best = 0, chosen = 0;
  std::string choice;
  for (const Rate& r : now.rates) {
    if (r.gflops > best) best = r.gflops, choice = r.candidate;
    if (r.candidate == now.choice) chosen = r.gflops;
  }
  if (!choice.empty() && 1.03 * chosen < best) now.choice = choice;
  now.judged = before.judged + 1;
  return now;
}

}  // namespace

std::string machine_fingerprint(const config::Config& cfg, const std::string& libsol) {
  const cpu::Info& c = cpu::info();
  std::string f = "sol=" SOL_VERSION "\n";
  f += "libsol=" +
       (libsol.empty() ? library_identity(reinterpret_cast<const void*>(&class_of)) : file_identity(libsol)) +
       "\n";
  f += "cpu=" + c.model + "\n";
  f += std::string("isa=") + cpu::isa_name(c.isa) + "\n";
  f += "cpus=" + std::to_string(c.cpus) + "\n";
  // What changes the kernels or the threads of the libraries measured.
  for (const char* var :
       {"OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
        "MKL_ENABLE_INSTRUCTIONS", "BLIS_NUM_THREADS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
        "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "SOL_TEST_SLOW"})
    if (const char* v = std::getenv(var)) f += std::string("env.") + var + "=" + v + "\n";
  f += "openblas.library=" + resolve_library(cfg.openblas_library) + "\n";
  f += "openblas.threads=" + std::to_string(cfg.openblas_threads) + "\n";
  f += "onednn.library=" + resolve_library(cfg.onednn_library) + "\n";
  f += "onednn.gemm=" + cfg.onednn_gemm + "\n";
  f += "opencl=" + cfg.opencl_platform + "/" + cfg.opencl_device + "\n";
  return f;
}

// The file: "sol-profile 3", "fingerprint" lines, then one "row" line per measured class:
//   row <TAB> native <TAB> key (hex) <TAB> class text <TAB> size <TAB> choice <TAB> judged <TAB> how
//       <TAB> seq <TAB> name=gflops ...
// The class text is for people; the key is what is read back.
bool read_file(const std::string& path, const std::string& fingerprint, std::vector<Row>& rows,
               std::string& why, FileState* state) {
  std::string text;
  if (!fs_safety::read_file(path, size_t{64} << 20, false, text, why)) {
    if (errno == ENOENT) why = "missing";
    return false;
  }
  // Rows are appended a line at a time (Profile::record): a line cut short by a crash of the
  // system is the file's last, without its newline, and only it is dropped.
  bool torn = false;
  if (const size_t end = text.rfind('\n'); end != std::string::npos && end + 1 < text.size()) {
    text.resize(end + 1);
    torn = true;
  }
  std::istringstream in(text);
  std::string line, fp;
  if (!std::getline(in, line) || line != kMagic) {
    why = "not a SOL profile of this version";
    return false;
  }
  std::vector<Row> out;
  std::map<std::pair<std::string, uint64_t>, size_t> at;  // a row's place in `out`
  size_t lines = 0;
  uint64_t last_seq = 0;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("fingerprint\t", 0) == 0) {
      fp += line.substr(12) + "\n";
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, '\t');) f.push_back(cell);
    bool ok = f.size() >= 10 && f[0] == "row" && !f[1].empty() && !f[5].empty();
    Row r;
    if (ok) {
      r.native = f[1];
      char* end = nullptr;
      r.key = std::strtoull(f[2].c_str(), &end, 16);
      ok = *end == '\0' && field(r.key, 0, 8) < capture::kNumOps &&
           field(r.key, 8, 4) < capture::kNumDTypes && (r.key >> 45) == 0 && class_text(r.key) == f[3];
      r.size = f[4];
      r.choice = f[5];
      const long judged = std::strtol(f[6].c_str(), &end, 10);
      ok = ok && *end == '\0' && judged >= 1 && judged <= kJudges;
      r.judged = static_cast<int>(judged);
      const auto how = std::find(std::begin(kHowNames), std::end(kHowNames), f[7]);
      ok = ok && how != std::end(kHowNames);
      if (ok) r.how = static_cast<How>(how - std::begin(kHowNames));
      r.seq = std::strtoull(f[8].c_str(), &end, 10);
      ok = ok && !f[8].empty() && *end == '\0';
    }
    bool chosen_measured = false;
    for (size_t i = 9; ok && i < f.size(); ++i) {
      const size_t eq = f[i].find('=');
      char* end = nullptr;
      const double g = eq == std::string::npos ? -1 : std::strtod(f[i].c_str() + eq + 1, &end);
      ok = eq > 0 && eq != std::string::npos && end && *end == '\0' && g >= 0;
      if (ok) {
        r.rates.push_back({f[i].substr(0, eq), g});
        chosen_measured |= r.rates.back().candidate == r.choice;
      }
    }
    if (!ok || !chosen_measured) {
      why = "corrupt at line " + std::to_string(number);
      return false;
    }
    ++lines;
    last_seq = std::max(last_seq, r.seq);
    // A class measured again has a later row: it replaces the earlier one, unless less trusted.
    const auto [it, added] = at.emplace(std::make_pair(r.native, r.key), out.size());
    if (added)
      out.push_back(std::move(r));
    else if (supersedes(r, out[it->second]))
      out[it->second] = std::move(r);
  }
  if (fp != fingerprint) {
    why = "written for another machine, library build or SOL version";
    return false;
  }
  rows = std::move(out);
  if (state) *state = {lines, torn, last_seq};
  return true;
}

// ---------------------------------------------------------------------------- Profile

Profile::Profile(const config::Config& cfg, const std::string& libsol) : measure_(cfg.tune) {
  dir_ = config::cache_dir(cfg);
  fingerprint_ = machine_fingerprint(cfg, libsol);
  if (!dir_.empty()) {
    char name[64];
    std::snprintf(name, sizeof name, "/profile-%016" PRIx64 ".tsv", fnv1a(fingerprint_));
    path_ = dir_ + name;
  }
}

uint64_t Profile::slot_key(int native, uint64_t key) noexcept {
  return key | static_cast<uint64_t>(native + 1) << 56;
}

Profile::Slot* Profile::find(uint64_t k, bool insert) noexcept {
  size_t i = static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 52) & (kSlots - 1);
  for (size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    Slot& s = slots_[i];
    uint64_t cur = s.key.load(std::memory_order_acquire);
    if (cur == k) return &s;
    if (cur == 0) {
      if (!insert) return nullptr;
      if (s.key.compare_exchange_strong(cur, k, std::memory_order_acq_rel)) return &s;
      if (cur == k) return &s;
    }
  }
  return nullptr;  // full: the class routes by the built-in order
}

int Profile::native_index(const std::string& identity) {
  std::lock_guard<std::mutex> lock(mu_);
  const int n = nnatives_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i)
    if (natives_[i] == identity) return i;
  if (n == kMaxNatives) return -1;
  natives_[n] = identity;
  nnatives_.store(n + 1, std::memory_order_release);
  return n;
}

int Profile::candidate_index(const std::string& name) {
  const int n = ncandidates_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i)
    if (candidates_[i] == name) return i;
  if (n == kMaxCandidates) return kUnrouted;
  candidates_[n] = name;
  ncandidates_.store(n + 1, std::memory_order_release);
  return n;
}

const char* Profile::candidate_name(int index) const noexcept {
  if (index < 0 || index >= ncandidates_.load(std::memory_order_acquire)) return nullptr;
  return candidates_[index].c_str();
}

int Profile::lookup(int native, uint64_t key) noexcept {
  const Slot* slot = nullptr;
  return lookup(native, key, slot);
}

int Profile::lookup(int native, uint64_t& key, const capture::Node& node, bool* again) noexcept {
  const Slot* slot = nullptr;
  int v = lookup(native, key, slot);
  if (v >= 0 && slot) {
    const int split = slot->split.load(std::memory_order_relaxed);
    const int h = split < 0 ? split : halves_of(node);
    if (split != h) {
      key = sub_class(key, h);  // the class and the halves this call already has
      slot = nullptr;
      v = lookup(native, key, slot);
    }
  }
  if (again) *again = v >= 0 && slot && slot->again.load(std::memory_order_relaxed);
  return v;
}

bool Profile::claim_again(int native, uint64_t key) noexcept {
  Slot* s = find(slot_key(native, key), false);
  if (!s || !s->again.exchange(false, std::memory_order_acq_rel)) return false;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    calm_tried_.insert({native, key});
  } catch (...) {
    return false;
  }
  int32_t v = s->value.load(std::memory_order_acquire);
  if (v < 0 || !s->value.compare_exchange_strong(v, kMeasuring, std::memory_order_acq_rel)) return false;
  changed();
  return true;
}

int Profile::lookup(int native, uint64_t key, const Slot*& slot) noexcept {
  if (native < 0) return kUnrouted;
  const uint64_t k = slot_key(native, key);
  if (Slot* s = find(k, false)) {
    slot = s;
    return s->value.load(std::memory_order_acquire);
  }
  // First sight of this class in this process: what the file says, if anything.
  try {
    std::lock_guard<std::mutex> lock(mu_);
    load_locked();
    auto it = rows_.find({natives_[native], key});
    const int v = it == rows_.end() ? kUnknown : candidate_index(it->second.choice);
    if (v == kUnknown) return kUnknown;
    Slot* s = find(k, true);
    if (!s) return kUnrouted;
    if (measure_ && judged_close(it->second)) {
      int32_t expected = kUnknown;
      if (!s->value.compare_exchange_strong(expected, kMeasuring, std::memory_order_acq_rel))
        return s->value.load(std::memory_order_acquire);
      earlier_[{native, key}] = it->second;
      return kJudgeAgain;
    }
    slot = s;
    s->split.store(split_of(it->second), std::memory_order_relaxed);
    s->again.store(measure_ && it->second.how == How::provisional, std::memory_order_relaxed);
    int32_t expected = kUnknown;
    s->value.compare_exchange_strong(expected, v, std::memory_order_acq_rel);
    changed();
    return s->value.load(std::memory_order_acquire);
  } catch (...) {
    return kUnrouted;
  }
}

bool Profile::claim(int native, uint64_t key) noexcept {
  if (native < 0) return false;
  Slot* s = find(slot_key(native, key), true);
  if (!s) return false;
  int32_t expected = kUnknown;
  return s->value.compare_exchange_strong(expected, kMeasuring, std::memory_order_acq_rel);
}

void Profile::begin_trial(int native, uint64_t key) noexcept {
  if (Slot* s = find(slot_key(native, key), false)) s->value.store(kTrial, std::memory_order_release);
  changed();
}

void Profile::release(int native, uint64_t key) noexcept {
  if (Slot* s = find(slot_key(native, key), false)) s->value.store(kUnrouted, std::memory_order_release);
  changed();
}

void Profile::unrouted(int native, uint64_t key) noexcept {
  if (native < 0) return;
  if (Slot* s = find(slot_key(native, key), true)) {
    int32_t expected = kUnknown;
    s->value.compare_exchange_strong(expected, kUnrouted, std::memory_order_acq_rel);
  }
}

void Profile::record(int native, Row row) {
  Slot* s = find(slot_key(native, row.key), true);
  std::lock_guard<std::mutex> lock(mu_);
  row.native = natives_[native];
  if (auto e = earlier_.find({native, row.key}); e != earlier_.end()) row = merged(e->second, std::move(row));
  const int v = candidate_index(row.choice);
  if (s) {
    s->split.store(split_of(row), std::memory_order_relaxed);
    s->again.store(row.how == How::provisional && !calm_tried_.count({native, row.key}),
                   std::memory_order_relaxed);
    s->value.store(v, std::memory_order_release);
  }
  load_locked();
  rows_[{row.native, row.key}] = row;
  double weight = 1;  // the measured call's size: the product of its dimensions
  int64_t dims[3];
  measured_dims(row, dims);
  for (const int64_t d : dims)
    if (d > 0) weight *= static_cast<double>(d);
  std::string before = home_locked(native);
  if (before.empty()) before = "native";  // the program's first calls were its library's
  recorded_[{native, row.key}] = {row.choice, weight};
  const std::string after = home_locked(native);
  // The program's calls now mostly run elsewhere: the classes measured beside the former home's
  // threads that went to neither are measured again, beside the new home's, once each (their
  // next call). A small class measured first, alone, may have gone to a library whose threads
  // then fight the larger classes' for the cores at every switch.
  if (after != before)
    for (auto it = recorded_.begin(); it != recorded_.end();) {
      const auto& [k, v] = *it;
      if (k.first != native || v.first == after || k.second == row.key || !remeasured_.insert(k).second) {
        ++it;
        continue;
      }
      Slot* slot = find(slot_key(native, k.second), false);
      if (!slot || slot->value.load(std::memory_order_acquire) < 0) {  // being measured or on trial
        ++it;
        continue;
      }
      SOL_LOG(debug, "measuring %s again: the program's calls now mostly run on %s, not %s",
              class_text(k.second).c_str(), after.c_str(), before.c_str());
      slot->value.store(kUnknown, std::memory_order_release);
      it = recorded_.erase(it);
    }
  changed();
  write_locked(row);
}

std::vector<Profile::Gemm> Profile::gemms_for(const std::string& candidate, size_t max) {
  std::vector<Gemm> out;
  std::lock_guard<std::mutex> lock(mu_);
  load_locked();
  for (const auto& [id, row] : rows_) {
    if (out.size() >= max) break;
    if (row.choice != candidate || static_cast<capture::Op>(field(row.key, 0, 8)) != capture::Op::gemm)
      continue;
    Gemm g{static_cast<capture::DType>(field(row.key, 8, 4)), 'N', 'N', 0, 0, 0};
    if (const uint64_t t = field(row.key, 14, 2)) g.transa = kTrans[t - 1];
    if (const uint64_t t = field(row.key, 16, 2)) g.transb = kTrans[t - 1];
    int64_t dims[3];
    if (!measured_dims(row, dims) || dims[0] <= 0 || dims[1] <= 0 || dims[2] <= 0) continue;
    g.m = dims[0], g.n = dims[1], g.k = dims[2];
    out.push_back(g);
  }
  return out;
}

std::vector<Row> Profile::near_calm(int native, uint64_t key) {
  std::vector<Row> out;
  std::lock_guard<std::mutex> lock(mu_);
  if (native < 0 || native >= nnatives_.load(std::memory_order_relaxed)) return out;
  load_locked();
  constexpr uint64_t kArguments = (uint64_t{1} << 26) - 1;
  for (const auto& [id, row] : rows_) {
    if (id.first != natives_[native] || row.how == How::provisional ||
        (row.key & kArguments) != (key & kArguments) || row.key == key)
      continue;
    bool near = true;
    for (int i = 0; i < 3 && near; ++i) near = std::abs(dim_class(row.key, i) - dim_class(key, i)) <= 2;
    if (near) out.push_back(row);
  }
  return out;
}

bool Profile::settled() {
  std::lock_guard<std::mutex> lock(mu_);
  load_locked();
  return !rows_.empty() && std::none_of(rows_.begin(), rows_.end(), [](const auto& r) {
    return judged_close(r.second) || r.second.how == How::provisional;
  });
}

bool Profile::earlier(int native, uint64_t key, Row& out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = earlier_.find({native, key});
  if (it == earlier_.end()) return false;
  out = it->second;
  return true;
}

int Profile::keep_earlier(int native, uint64_t key) noexcept {
  Slot* slot = find(slot_key(native, key), false);
  if (!slot) return kUnrouted;
  int v = kUnrouted;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = earlier_.find({native, key}); it != earlier_.end()) {
      v = candidate_index(it->second.choice);
      slot->split.store(split_of(it->second), std::memory_order_relaxed);
    }
  } catch (...) {
  }
  slot->value.store(v, std::memory_order_release);
  changed();
  return v;
}

void Profile::judging(int native, uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = earlier_.find({native, key});
  if (it == earlier_.end()) return;
  Row row = it->second;
  ++row.judged;
  rows_[{row.native, row.key}] = row;
  write_locked(row);
}

bool Profile::measure_again(int native, uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!remeasured_.insert({native, key}).second) return false;
  Slot* slot = find(slot_key(native, key), false);
  if (!slot) return false;
  recorded_.erase({native, key});
  slot->value.store(kUnknown, std::memory_order_release);
  changed();
  return true;
}

std::string Profile::home(int native, uint64_t except_key) {
  std::lock_guard<std::mutex> lock(mu_);
  return home_locked(native, except_key);
}

std::string Profile::home_locked(int native, uint64_t except_key) const {
  std::map<std::string, double> by_choice;
  for (const auto& [k, v] : recorded_)
    if (k.first == native && (except_key == 0 || k.second != except_key)) by_choice[v.first] += v.second;
  std::string best;
  double most = -1;
  for (const auto& [choice, w] : by_choice)
    if (w > most) {
      best = choice;
      most = w;
    }
  return best;
}

void Profile::load_locked() {
  if (loaded_) return;
  loaded_ = true;
  if (path_.empty()) return;
  std::vector<Row> rows;
  std::string why;
  if (!read_file(path_, fingerprint_, rows, why)) {
    if (why != "missing")
      log::once(log::Level::warn, "profile:" + path_, "profile %s ignored (%s); it will be rebuilt",
                path_.c_str(), why.c_str());
    return;
  }
  for (auto& r : rows) rows_[{r.native, r.key}] = std::move(r);
}

namespace {

std::string row_line(const Row& r) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%" PRIx64, r.key);
  std::string line = "row\t" + r.native + "\t" + hex + "\t" + class_text(r.key) + "\t" + r.size + "\t" +
                     r.choice + "\t" + std::to_string(r.judged) + "\t" + how_name(r.how) + "\t" +
                     std::to_string(r.seq);
  for (const auto& rate : r.rates) {
    char g[32];
    std::snprintf(g, sizeof g, "%.3f", rate.gflops);
    line += "\t" + rate.candidate + "=" + g;
  }
  return line + "\n";
}

// Appends `line` to the file at `path`, a regular file of this user, in one write. false when it
// could not, or wrote only part of it (a full disk): the caller then rewrites the file whole.
bool append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid())
    while ((n = ::write(fd, line.data(), line.size())) < 0 && errno == EINTR) {
    }
  ::close(fd);
  return n == static_cast<ssize_t>(line.size());
}

}  // namespace

// Under an exclusive lock on a companion file: read what other processes wrote since, merge it,
// then append this row's line to the file. Appending costs a write into the page cache; replacing
// the file, as every row did before, cost 200-400 us here (ext4 starts writing a file renamed over
// another at once). The file is replaced whole (a temporary file renamed over it: readers see the
// old or the new file, never a mix; a crash leaves at most a temporary file behind) when it is
// missing, not this machine's, corrupt, ends in a torn line, or is mostly rows that later ones
// replaced.
void Profile::write_locked(const Row& row) {
  if (path_.empty()) return;
  if (const std::string why = fs_safety::make_private_dir(dir_); !why.empty()) {
    log::once(log::Level::warn, "profile-dir:" + dir_,
              "profile directory %s not used (%s): measurements are kept for this process only", dir_.c_str(),
              why.c_str());
    path_.clear();
    return;
  }
  const std::string lock_path = path_.substr(0, path_.size() - 4) + ".lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock < 0) return;
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  std::vector<Row> theirs;
  std::string why;
  FileState file;
  const bool valid = read_file(path_, fingerprint_, theirs, why, &file);
  // This row is the file's latest. What other processes wrote since replaces what this one holds
  // where it supersedes it; this row is not written where theirs supersedes it (a calm or tuned
  // figure of the class, against a provisional one of this process's).
  Row mine = row;
  mine.seq = file.last_seq + 1;
  bool theirs_better = false;
  if (valid)
    for (auto& r : theirs) {
      const auto k = std::make_pair(r.native, r.key);
      if (k == std::make_pair(row.native, row.key)) {
        theirs_better = !supersedes(mine, r);
        if (theirs_better) rows_[k] = std::move(r);
        continue;
      }
      auto [it, added] = rows_.emplace(k, r);
      if (!added && supersedes(r, it->second)) it->second = std::move(r);
    }
  if (!theirs_better) rows_[{row.native, row.key}] = mine;

  if (!valid || file.torn || file.row_lines >= 2 * rows_.size() + 16 ||
      (!theirs_better && !append_line(path_, row_line(mine)))) {
    std::string text = std::string(kMagic) + "\n";
    std::istringstream fp(fingerprint_);
    for (std::string l; std::getline(fp, l);) text += "fingerprint\t" + l + "\n";
    for (const auto& [k, r] : rows_) text += row_line(r);
    std::string error;
    if (!fs_safety::replace_file(path_, text, error))
      log::once(log::Level::warn, "profile-write:" + path_, "could not write profile %s (%s)", path_.c_str(),
                error.c_str());
  }
  ::close(lock);  // releases the flock
}

void Profile::after_fork_child() noexcept {
  new (&mu_) std::mutex;
}

}  // namespace sol::autosel::profile
