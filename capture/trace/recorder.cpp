#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "capture/alloc/observers.hpp"
#include "capture/blas/blas.hpp"
#include "capture/dnn/operands.hpp"
#include "capture/trace/shape.hpp"
#include "capture/trace/state.hpp"
#include "capture/trace/text.hpp"
#include "capture/trace/trace.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "common/native.hpp"
#include "config/config.hpp"
#include "hal/one_time.hpp"
#include "hal/transfers.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::trace {
namespace {

// Created by start() and never destroyed: threads may still record while the process exits.
// A plain pointer, not a static object, so nothing depends on constructor order.
std::atomic<State*> g_state{nullptr};
constinit SOL_TLS ThreadState* t_thread = nullptr;
constinit SOL_TLS const ThreadOrigin* t_origin = nullptr;  // see adopt_thread_origin()
constinit SOL_TLS SpanRef t_last{};                        // see last_span()

uint64_t realtime_ns() noexcept {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

uint64_t mix(uint64_t h, uint64_t v) noexcept {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// Eight bytes at a time: shapes are tens of bytes and hashed on every call.
uint64_t hash_bytes(uint64_t h, const char* p, size_t n) noexcept {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = mix(h, w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  return mix(h, tail ^ (n << 56));
}

std::vector<std::string> read_argv() {
  std::vector<std::string> argv;
  const int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return argv;
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  for (size_t pos = 0; pos < all.size();) {
    const size_t end = all.find('\0', pos);
    argv.push_back(all.substr(pos, end - pos));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return argv;
}

// RANK (torchrun), OMPI_COMM_WORLD_RANK (Open MPI), PMI_RANK (MPICH, Intel MPI).
std::optional<long> env_rank() {
  for (const char* var : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(var);
    char* end = nullptr;
    if (!v || !*v) continue;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0) return r;
  }
  return std::nullopt;
}

std::string make_tag(pid_t pid, const std::optional<long>& rank) {
  return (rank ? "r" + std::to_string(*rank) + "-" : std::string()) + std::to_string(pid);
}

void set_identity(State& s) {
  s.pid = ::getpid();
  s.rank = env_rank();
  s.tag = make_tag(s.pid, s.rank);
  s.start_mono_ns = monotonic_ns();
  s.start_unix_ns = realtime_ns();
}

bool make_dirs(const std::string& dir, std::string& error) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      error = part + ": " + std::strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = dir + ": not a directory";
    return false;
  }
  return true;
}

// The run's directory inside the trace directory: created here, or already there and ours (another
// process of the run made it). Someone else's, or a symbolic link, is refused.
bool make_run_dir(const std::string& dir, std::string& error) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    error = dir + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    error = dir + ": not a directory of yours";
    return false;
  }
  return true;
}

// A run id as a directory name takes it: letters, digits, '.', '-', '_', not starting with '.'.
bool valid_run_id(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') return false;
  return true;
}

// A new run: its start (UTC) and the pid of its first traced process, "20261123-151620-4242",
// which sorts by time.
std::string new_run_id() {
  const time_t now = ::time(nullptr);
  struct tm utc{};
  gmtime_r(&now, &utc);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02d-%02d%02d%02d-%d", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(::getpid()));
  return buf;
}

std::vector<std::string> patterns(const std::string& list) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    std::string p = list.substr(at, comma - at);
    p.erase(0, p.find_first_not_of(" \t"));
    p.erase(p.find_last_not_of(" \t") + 1);
    if (!p.empty()) out.push_back(p);
    at = comma + 1;
  }
  return out;
}

bool matches(const std::vector<std::string>& patterns, const char* symbol, Op op) noexcept {
  for (const auto& p : patterns)
    if (::fnmatch(p.c_str(), symbol, 0) == 0 || ::fnmatch(p.c_str(), op_name(op), 0) == 0 ||
        ::fnmatch(p.c_str(), op_family(op), 0) == 0)
      return true;
  return false;
}

// Whether the trace window is open: trace.delay has passed and trace.toggle's signal left it on.
bool in_window(State& s) noexcept {
  if (SOL_UNLIKELY(!s.recording.load(std::memory_order_relaxed))) return false;
  if (SOL_LIKELY(s.waited.load(std::memory_order_relaxed))) return true;
  if (monotonic_ns() < s.record_from_ns) return false;
  s.waited.store(true, std::memory_order_relaxed);
  return true;
}

void toggle_recording(int) noexcept {
  if (State* s = g_state.load(std::memory_order_acquire))
    s->recording.store(!s->recording.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

// Whether trace.include / trace.exclude let this call be traced.
bool wanted(State& s, const Node& node) noexcept {
  if (SOL_LIKELY(s.include.empty() && s.exclude.empty())) return true;
  const char* symbol = symbol_name(node.sym);
  if (node.dnn) {  // one symbol, many kinds: judged per call
    const Op kind = node.dnn->desc->kind;
    return (s.include.empty() || matches(s.include, symbol, kind)) && !matches(s.exclude, symbol, kind);
  }
  std::atomic<uint8_t>& w = s.wanted[static_cast<size_t>(node.sym)];
  uint8_t v = w.load(std::memory_order_relaxed);
  if (v == 0) {
    v = (s.include.empty() || matches(s.include, symbol, node.op)) && !matches(s.exclude, symbol, node.op) ? 1 : 2;
    w.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

// Whether the process runs CPython, at its first traced call and then with each new stack (under
// s.mu, or s.open_mu before any stack): one line says what was found.
void look_for_python(State& s) noexcept {
  using Status = python::Interpreter::Status;
  if (s.python.status() != Status::not_found) return;
  const Status st = s.python.find();
  if (st == Status::found)
    log::write(log::Level::debug, "trace: Python %s found; stacks name its frames", s.python.version());
  else if (st == Status::unsupported)
    log::write(log::Level::info, "trace: Python %s: its frames are not read (3.11 to 3.13 are); stacks stop at "
               "the interpreter", s.python.version());
}

// Creates this process's trace.json at its first traced call, so that processes that never call
// a primitive (a shell between the user and the program) leave no files.
bool ensure_files(State& s) noexcept {
  const int f = s.files.load(std::memory_order_acquire);
  if (f != 0) return f > 0;
  std::lock_guard<std::mutex> lock(s.open_mu);
  if (s.files.load(std::memory_order_relaxed) != 0) return s.files.load(std::memory_order_relaxed) > 0;
  if (s.want_python) look_for_python(s);
  std::string command;
  for (const auto& a : s.argv) command += (command.empty() ? "" : " ") + a;
  char buf[4096];
  Text t(buf, sizeof buf);
  // "[" and room for the object form's opening, written over it at exit (trace_header_*).
  t.raw(kTraceHeaderArray, std::strlen(kTraceHeaderArray));
  t.lit("\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":")
      .i64(s.pid)
      .lit(",\"tid\":0,\"args\":{\"name\":");
  t.json(command.size() > 3000 ? command.substr(0, 3000).c_str() : command.c_str()).lit("}}");
  std::string error;
  const std::string path = s.path(".trace.json");
  if (!make_dirs(s.root, error) || !make_run_dir(s.dir, error) || !s.json.open(path, t.data(), t.size(), error)) {
    log::write(log::Level::warn, "cannot write trace files in %s (%s); tracing is off, the program runs on",
               s.dir.c_str(), error.c_str());
    s.files.store(-1, std::memory_order_release);
    return false;
  }
  s.files.store(1, std::memory_order_release);
  return true;
}

ThreadState* thread_state(State& s) noexcept {
  ThreadState* t = t_thread;
  const uint64_t gen = s.generation.load(std::memory_order_acquire);
  if (SOL_LIKELY(t && t->generation == gen)) return t;
  t = new (std::nothrow) ThreadState;
  if (!t) return nullptr;
  t->generation = gen;
  t->tid = static_cast<pid_t>(::syscall(SYS_gettid));
  Text ident(t->ident, sizeof t->ident);
  ident.lit("},\"pid\":").i64(s.pid).lit(",\"tid\":").i64(t->tid).lit(",\"ts\":");
  t->ident_len = static_cast<uint8_t>(ident.size());
  t->stack_hi = Unwinder::stack_top();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.threads.push_back(t);
  }
  t_thread = t;
  return t;
}

uint32_t site_id(State& s, ThreadState& t, Sym sym, const uintptr_t* ips, int n, int depth) {
  if (n == 0) return 0;
  uint64_t h = mix(1469598103934665603ull, static_cast<uint64_t>(sym));
  for (int i = 0; i < n; ++i) h = mix(h, ips[i]);
  h |= 1;  // never 0, the empty slot
  if (const uint32_t* known = t.site_ids.find(h)) return *known;
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, added] = s.site_index.try_emplace(h, static_cast<uint32_t>(s.sites.size()));
    if (added) {
      Site& site = s.sites.emplace_back();
      site.sym = sym;
      site.ips.assign(ips, ips + n);
      site.depth = depth;
      if (s.want_python) look_for_python(s);
    }
    id = it->second;
  }
  t.site_ids.put(h, id);
  return id;
}

// The site of a call from the native site `native` and the calling thread's Python frames. The
// same native stack is reached from many lines of a script (the interpreter's frames do not
// change with the line), so the Python frames are part of a site's identity: they are hashed on
// every call (a walk of a few dozen frames) and named only when their combination is new, while
// they are live.
uint32_t python_site(State& s, ThreadState& t, uint32_t native) {
  constexpr int kMaxFrames = 128;
  python::Frame f[kMaxFrames];
  const int n = s.python.capture(f, kMaxFrames);
  if (n == 0) return native;  // a thread known to Python, running none at the moment
  uint64_t h = mix(0x7079746830ull, native);
  h = mix(h, static_cast<uint64_t>(n));
  const ThreadOrigin* origin = n < 0 ? t_origin : nullptr;
  h = mix(h, reinterpret_cast<uintptr_t>(origin));
  for (int i = 0; i < n; ++i)
    h = mix(mix(h, f[i].code), static_cast<uint64_t>(static_cast<uint32_t>(f[i].lasti)) << 1 | f[i].entry);
  h |= 1;
  if (const uint32_t* known = t.site_ids.find(h)) return *known;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto it = s.site_index.find(h); it != s.site_index.end()) {
      t.site_ids.put(h, it->second);
      return it->second;
    }
  }
  Site site;
  site.python = n < 0 ? Site::Python::no_thread : Site::Python::frames;
  site.origin = origin;
  for (int i = 0; i < n; ++i) {
    site.py.push_back(s.python.describe(f[i]));
    site.py_entry.push_back(f[i].entry);
  }
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, added] = s.site_index.try_emplace(h, static_cast<uint32_t>(s.sites.size()));
    if (added) {
      site.sym = s.sites[native].sym;
      site.ips = s.sites[native].ips;
      site.depth = s.sites[native].depth;
      s.sites.push_back(std::move(site));
    }
    id = it->second;
  }
  t.site_ids.put(h, id);
  return id;
}

}  // namespace

const ThreadOrigin* thread_origin() noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (SOL_LIKELY(!s) || !s->stacks || !s->want_python || s->finished.load(std::memory_order_relaxed))
    return nullptr;
  if (!s->python.found()) {
    // Threads are often started before the first traced call (OpenMP's pool, at import time).
    std::lock_guard<std::mutex> lock(s->open_mu);
    look_for_python(*s);
    if (!s->python.found()) return nullptr;
  }
  constexpr int kMaxFrames = 64;
  python::Frame f[kMaxFrames];
  const int n = s->python.capture(f, kMaxFrames);
  if (n <= 0) return n < 0 ? t_origin : nullptr;  // started by a thread itself started from Python
  try {
    auto origin = std::make_unique<ThreadOrigin>();
    std::string key;
    for (int i = 0; i < n; ++i) {
      origin->frames.push_back(s->python.describe(f[i]));
      key += origin->frames.back() + '\n';
    }
    std::lock_guard<std::mutex> lock(s->mu);
    auto [it, added] = s->origins.try_emplace(std::move(key), nullptr);
    if (added) it->second = std::move(origin);
    return it->second.get();
  } catch (...) {
    return nullptr;
  }
}

void adopt_thread_origin(const ThreadOrigin* origin) noexcept {
  t_origin = origin;
}

namespace {

// What a call computes, as text: the op, its element type and its shape.
struct Problem {
  const char* op;
  const char* dtype;
  const char* shape;
  size_t shape_len;
};

// The signature of a call, through the thread's cache keyed by `h` (a hash of everything the
// signature depends on). Only a miss renders text and takes the global lock.
const Signature* signature(State& s, ThreadState& t, uint64_t h, const Node& node, const Problem& p,
                           const Operands& ops, const char* backend, uint32_t& id) {
  const Sym sym = node.sym;
  if (const ThreadState::SigEntry* known = t.sig_ids.find(h)) {
    id = known->id;
    return known->sig;
  }
  std::string shape(p.shape, p.shape_len);
  std::string key = std::to_string(static_cast<unsigned>(sym)) + '\x1f' + p.op + '\x1f' + p.dtype + '\x1f' +
                    backend + '\x1f' + shape;
  const Signature* sig;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, added] = s.sig_index.try_emplace(std::move(key), static_cast<uint32_t>(s.sigs.size()));
    if (added) {
      char buf[2048];
      Text head(buf, sizeof buf);
      head.lit("\n,{\"name\":\"").str(symbol_name(sym)).lit("\",\"cat\":\"").str(api_name(symbol_api(sym)));
      head.lit("\",\"ph\":\"X\",\"args\":{\"op\":").json(p.op).lit(",\"dtype\":\"").str(p.dtype);
      head.lit("\",\"shape\":").json(shape.c_str()).lit(",\"backend\":\"").str(backend).lit("\"");
      // Operand shapes by position, for the dataflow graph's edge labels: a signature fixes them.
      std::vector<std::string> shapes;
      for (int i = 0; i < ops.count; ++i)
        shapes.push_back(node.dnn ? tensor_shape(*ops.tensors[i]) : operand_shape(node, ops.ops[i]));
      s.sigs.push_back(Signature{sym, p.op, p.dtype, std::move(shape), backend,
                                 std::string(head.data(), head.size()), std::move(shapes)});
    }
    id = it->second;
    sig = &s.sigs[id];
  }
  t.sig_ids.put(h, {id, sig});
  return sig;
}

// The parameters of a BLAS call as text, through the thread's cache.
const ThreadState::ParamsEntry& params_text(ThreadState& t, const Node& node) {
  const BlasArgs& b = node.blas;
  uint64_t h = mix(static_cast<uint64_t>(node.sym) + 1, static_cast<uint64_t>(b.lda));
  for (int64_t v : {b.ldb, b.ldc, b.incx, b.incy}) h = mix(h, static_cast<uint64_t>(v));
  if (const DeviceBlas* d = node.device) {
    for (int64_t v : {d->stridea, d->strideb, d->stridec}) h = mix(h, static_cast<uint64_t>(v));
    h = mix(h, reinterpret_cast<uintptr_t>(d->stream));
  }
  for (const Scalar* sc : {&b.alpha, &b.beta, &b.cs, &b.sn, &b.ry1}) {
    uint64_t re, im;
    std::memcpy(&re, &sc->re, 8);
    std::memcpy(&im, &sc->im, 8);
    h = mix(mix(h, re), im + sc->present);
  }
  h |= 1;
  auto& slot = t.params_cache[h % (sizeof t.params_cache / sizeof t.params_cache[0])];
  if (slot.hash != h) {
    Text text(slot.text, sizeof slot.text);
    blas_params(node, text);
    slot.len = static_cast<uint8_t>(text.size());
    slot.hash = h;
  }
  return slot;
}

// The free observer (capture/alloc): a block the program gives back forgets what calls wrote in it,
// so that the next owner of those addresses does not inherit their writers.
void forget_freed(void* p, size_t bytes) noexcept {
  if (State* s = g_state.load(std::memory_order_acquire)) {
    s->dataflow.forget(p, bytes);
    s->graph.forget(p, bytes);
  }
}

// pthread_atfork: the tables are locked across fork() so the child gets them consistent, then the
// child starts its own trace: new pid and tag, empty counters, files created at its first call.
void before_fork() {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s) return;
  s->open_mu.lock();
  s->mu.lock();
  for (ThreadState* t : s->threads) t->mu.lock();
  s->json.lock_for_fork();  // a thread handing a block over holds its own lock, then this one
  // Last: a thread holding one of the locks above may free, and the free observer takes this one.
  s->dataflow.lock_for_fork();
  s->graph.lock_for_fork();
}

void after_fork_parent() {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s) return;
  s->graph.unlock_in_parent();
  s->dataflow.unlock_in_parent();
  s->json.unlock_in_parent();
  for (ThreadState* t : s->threads) t->mu.unlock();
  s->mu.unlock();
  s->open_mu.unlock();
}

void after_fork_child() {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s) return;
  // First, before anything below frees: the observer of those frees takes the dataflow's lock.
  s->dataflow.reset_in_child();
  s->graph.reset_in_child();
  alloc::add(forget_freed);  // the parent may have finished (and stopped observing) before fork
  s->json.reset_in_child();
  for (ThreadState* t : s->threads) t->mu.unlock();
  // The parent's threads do not exist here; their states stay allocated but unlisted.
  s->threads.clear();
  s->generation.fetch_add(1, std::memory_order_acq_rel);
  s->mu.unlock();
  s->json.abandon();
  s->files.store(0, std::memory_order_release);
  s->open_mu.unlock();
  s->seq.store(0, std::memory_order_relaxed);
  s->finished.store(false, std::memory_order_release);
  set_identity(*s);
}

}  // namespace

State* state() noexcept {
  return g_state.load(std::memory_order_acquire);
}

std::string process_tag() {
  return make_tag(::getpid(), env_rank());
}

bool active() noexcept {
  State* s = g_state.load(std::memory_order_relaxed);
  return s && !s->finished.load(std::memory_order_relaxed) && s->files.load(std::memory_order_relaxed) >= 0;
}

void add_flush(hal::transfers::Cause cause, uint64_t start_ns, uint64_t end_ns, uint64_t nodes,
               uint64_t bytes_back) noexcept;
void add_node_done(uint64_t node, uint64_t done_ns) noexcept;

bool start(const config::Config& cfg) noexcept {
  if (!cfg.trace) return false;
  auto* s = new (std::nothrow) State;
  if (!s) return false;
  try {
    // One run per launch: the first traced process names it and passes it on to every process it
    // starts (the environment), so that forks, exec'd children and the ranks an MPI launcher
    // starts write into the same run directory, and the next launch into another.
    s->root = cfg.trace_dir;
    s->run = cfg.trace_run;
    if (!s->run.empty() && !valid_run_id(s->run)) {
      log::write(log::Level::warn, "SOL_TRACE_RUN='%s' cannot name a directory (letters, digits, '.', '-', '_'); "
                 "starting a new run", s->run.c_str());
      s->run.clear();
    }
    if (s->run.empty()) {
      s->run = new_run_id();
      ::setenv("SOL_TRACE_RUN", s->run.c_str(), 1);
    }
    s->dir = s->root + "/run-" + s->run;
    s->stacks = cfg.trace_stacks;
    s->include = patterns(cfg.trace_include);
    s->exclude = patterns(cfg.trace_exclude);
    s->depth = static_cast<int>(cfg.trace_depth);
    s->setup_depth = static_cast<int>(cfg.trace_setup_depth);
    s->graph.configure(cfg);
    s->want_python = cfg.trace_python;
    s->interpreter_frames = cfg.trace_interpreter_frames;
    for (const auto& b : cfg.backend) s->backend += (s->backend.empty() ? "" : ",") + b;
    s->argv = read_argv();
    s->sites.push_back(Site{});  // id 0: no stack
    s->clock.start();  // once: a forked child goes on with its parent's (the counter is the same)
    set_identity(*s);
  } catch (...) {
    delete s;
    return false;
  }
  if (s->stacks) {
    std::string why;
    if (!s->unwinder.load(why)) {
      log::write(log::Level::warn, "cannot capture call stacks (%s); tracing without them", why.c_str());
      s->stacks = false;
    } else if (!why.empty()) {
      log::write(log::Level::info, "call stacks: %s", why.c_str());
    }
  }
  if (cfg.trace_delay > 0) {
    s->record_from_ns = s->start_mono_ns + static_cast<uint64_t>(cfg.trace_delay) * 1000000000u;
    s->waited.store(false, std::memory_order_relaxed);
  }
  g_state.store(s, std::memory_order_release);
  hal::transfers::set_flush_listener(add_flush);
  hal::transfers::set_node_listener(add_node_done);
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  if (!alloc::add(forget_freed))
    log::write(log::Level::warn, "cannot observe freed memory; the dataflow graph may link calls through reused memory");
  if (cfg.trace_toggle != "none") {
    struct sigaction act{};
    act.sa_handler = toggle_recording;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (::sigaction(cfg.trace_toggle == "sigusr1" ? SIGUSR1 : SIGUSR2, &act, nullptr) != 0)
      log::write(log::Level::warn, "cannot install the %s handler for trace.toggle; tracing stays on",
                 cfg.trace_toggle.c_str());
  }
  return true;
}

Span::Span(const Node& node) noexcept {
  t_last.valid = false;
  State* s = g_state.load(std::memory_order_acquire);
  if (s) hal::one_time::take();  // what calls before this one noted is not its own work
  if (!s || s->finished.load(std::memory_order_relaxed) || !in_window(*s) || !wanted(*s, node) || !ensure_files(*s))
    return;
  ThreadState* t = thread_state(*s);
  if (!t) return;
  if (s->stacks) {
    // oneDNN's set-up calls (descriptors, memory objects, engines: most of a small CNN's calls)
    // are recorded with `setup_depth` frames; at the default, 1, the caller's return address,
    // which the interposer already holds: no walk and no lookup of a deep stack. Their stacks
    // only repeat the computing call's that follows, and the reports hide them anyway.
    const bool setup = node.op == Op::dnnl_api && !node.dnn;
    const int depth = setup ? s->setup_depth : s->depth;
    if (depth == 1 && node.ret_slot) {
      const uintptr_t ip = *reinterpret_cast<const uintptr_t*>(node.ret_slot);
      try {
        site_ = site_id(*s, *t, node.sym, &ip, 1, 1);
      } catch (...) {
        site_ = 0;
      }
    } else {
      const auto sym = static_cast<uint32_t>(node.sym);
      site_ = t->stacks.find(sym, node.ret_slot);
      if (!site_) {
        // A stack not seen from here before: walk it, and remember where its return addresses
        // are, so that the next time it is recognised without a walk.
        uintptr_t ips[256], slots[256];
        try {
          const int n = s->unwinder.capture(ips, depth);
          site_ = site_id(*s, *t, node.sym, ips, n, depth);
          if (Unwinder::find_slots(node.ret_slot, ips, n, t->stack_hi, slots) == n)
            t->stacks.add(sym, node.ret_slot, ips, slots, n, site_);
        } catch (...) {
          site_ = 0;
        }
      }
    }
    // And the Python frames of the thread (not for a set-up call's one frame: what Python line
    // it serves is its computing call's).
    if (site_ && (!setup || depth > 1) && s->python.found()) {
      try {
        site_ = python_site(*s, *t, site_);
      } catch (...) {
      }
    }
  }
  thread_ = t;
  on_ = true;
  if (SOL_UNLIKELY(s->graph.saving())) s->graph.before(*s, node);  // the inputs, before it changes them
  t0_ = s->clock.now(t->clock);
}

// One event into the thread's buffer, which goes to trace.json whole when the next would not fit.
// The caller holds t.mu. A truncated (oversized) or empty event is dropped.
void append_locked(State& s, ThreadState& t, const Text& e) noexcept {
  if (e.truncated() || e.size() == 0) return;
  if (t.out_used + e.size() > ThreadState::kOut) {
    t.out = s.json.hand_over(t.out, t.out_used);
    t.out_used = 0;
  }
  std::memcpy(t.out + t.out_used, e.data(), e.size());
  t.out_used += e.size();
}

// Tracks of the device's side of things: thread ids past any real one (2^30 + track), each named
// by a thread_name metadata event the first time an event goes there (into `e`, before it).
// Device streams count up from 0; the lazy executor's flushes and node completions share one.
constexpr uint32_t kLazyTrack = 0xffff;
int64_t device_track(State& s, uint32_t track, const char* name, Text& e) noexcept {
  bool named = true;
  try {
    std::lock_guard<std::mutex> lock(s.device_mu);
    if (s.device_tracks.size() <= track) s.device_tracks.resize(track + 1);
    named = s.device_tracks[track];
    s.device_tracks[track] = true;
  } catch (...) {
  }
  const int64_t tid = 0x40000000 + static_cast<int64_t>(track);
  if (!named)
    e.lit("\n,{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":")
        .i64(s.pid)
        .lit(",\"tid\":")
        .i64(tid)
        .lit(",\"args\":{\"name\":")
        .json(name)
        .lit("}}");
  return tid;
}

namespace {

// What a call computed (its problem, flops, bytes and operands) and the hash of its signature,
// which covers everything the signature depends on, so that a cache hit needs no text at all.
uint64_t describe(const Node& node, const char* backend, bool is_blas, Operands& ops, Problem& p,
                  double& flops, double& bytes) noexcept {
  uint64_t h =
      mix(mix(1469598103934665603ull, static_cast<uint64_t>(node.sym)), reinterpret_cast<uintptr_t>(backend));
  ops.count = 0;
  if (node.dnn) {
    const dnn::Desc& d = *node.dnn->desc;
    p = {op_name(d.kind), dtype_name(d.dtype), d.shape.c_str(), d.shape.size()};
    h = hash_bytes(hash_bytes(h, p.op, std::strlen(p.op)), p.shape, p.shape_len);
    h = mix(h, static_cast<uint64_t>(d.dtype));
    flops = d.flops;
    bytes = d.bytes;
    ops.count = dnn::operands(*node.dnn, ops.ops, Dataflow::kMaxOperands, ops.tensors);
  } else if (is_blas && node.device) {
    // Device memory: no dataflow (device frees are not observed) and the frontend's work.
    const BlasArgs& b = node.blas;
    const DeviceBlas& d = *node.device;
    for (int64_t v : {b.m, b.n, b.k, d.batch}) h = mix(h, static_cast<uint64_t>(v));
    h = mix(h, static_cast<uint64_t>(static_cast<unsigned char>(b.transa)) |
                   static_cast<unsigned char>(b.transb) << 8);
    h = mix(mix(h, reinterpret_cast<uintptr_t>(d.detail)), static_cast<uint64_t>(node.dtype));
    flops = d.flops;
    bytes = d.bytes;
  } else if (is_blas) {
    const BlasArgs& b = node.blas;
    for (int64_t v : {b.m, b.n, b.k, b.kl, b.ku}) h = mix(h, static_cast<uint64_t>(v));
    h = mix(h, static_cast<uint64_t>(static_cast<unsigned char>(b.transa)) |
                   static_cast<unsigned char>(b.transb) << 8 | static_cast<unsigned char>(b.uplo) << 16 |
                   static_cast<uint64_t>(static_cast<unsigned char>(b.side)) << 24 |
                   static_cast<uint64_t>(static_cast<unsigned char>(b.diag)) << 32 |
                   static_cast<uint64_t>(static_cast<unsigned char>(b.layout)) << 40);
    ops.count = blas::operands(node, ops.ops);
    const blas::Cost cost = blas::cost(node, ops.ops, ops.count);
    flops = cost.flops;
    bytes = cost.bytes;
  }
  return h | 1;
}

}  // namespace

void Span::finish(const Node& node, const char* backend) noexcept {
  // Cleared here too: a call nested in this one (a CUDA library calling another through its
  // exported symbols) may have recorded itself since.
  t_last.valid = false;
  if (!on_) return;
  State* s = g_state.load(std::memory_order_acquire);
  ThreadState* t = thread_;  // a fork in between would have run after_fork_child: not here
  if (!s) return;
  const uint64_t t1 = s->clock.now(t->clock);
  if (s->finished.load(std::memory_order_relaxed)) return;
  const uint64_t dur = t1 > t0_ ? t1 - t0_ : 0;  // across a new anchor: a few ns either way

  // What the call computed, and the signature it belongs to.
  Problem p{op_name(node.op), dtype_name(node.dtype), "", 0};
  double flops = 0, bytes = 0;
  Operands& ops = t->ops;
  const bool is_blas = op_family(node.op)[0] == 'b';
  const uint64_t h = describe(node, backend, is_blas, ops, p, flops, bytes);

  uint32_t sig_id;
  const Signature* sig;
  try {
    char shape_buf[512];
    if (is_blas && !t->sig_ids.find(h)) {
      Text shape(shape_buf, sizeof shape_buf);
      blas_shape(node, shape);
      p.shape = shape.data();
      p.shape_len = shape.size();
    }
    sig = signature(*s, *t, h, node, p, ops, backend, sig_id);
  } catch (...) {
    return;
  }
  const uint64_t seq = s->seq.fetch_add(1, std::memory_order_relaxed) + 1;

  // The Chrome trace event: the signature's fixed head, then what is particular to this call.
  char buf[4096];
  Text e(buf, sizeof buf);
  e.raw(sig->head.data(), sig->head.size());
  if (is_blas) {
    const auto& params = params_text(*t, node);
    if (params.len) e.lit(",\"params\":\"").raw(params.text, params.len).lit("\"");
  }
  if (flops == 0 && bytes == 0) e.lit(",\"flops\":0,\"bytes\":0");  // a set-up call: most calls of a CNN
  else e.lit(",\"flops\":").num(flops).lit(",\"bytes\":").num(bytes);
  // A node a lazy device backend ran at once, and why (hal/transfers.hpp).
  if (const char* why = hal::transfers::take_eager_note()) e.lit(",\"lazy\":\"eager: ").str(why).lit("\"");
  // Work this call did once for the calls after it (hal/one_time.hpp).
  const hal::one_time::Work work = hal::one_time::take();
  const uint8_t one_time = work.kinds;
  if (one_time) e.lit(",\"one_time\":\"").str(hal::one_time::names(one_time).c_str()).lit("\"");
  // Auto's measuring inside the call: the event spans it ("dur"); the aggregates count the call's
  // own time, the measuring apart (OneTime::measuring_ns).
  const uint64_t measuring = work.measuring_ns < dur ? work.measuring_ns : dur;
  if (measuring) e.lit(",\"measuring_ns\":").u64(measuring);
  const uint64_t own = dur - measuring;
  // A deferred node: its number, which the "node ran" event on the lazy track carries too.
  if (const uint64_t lazy_node = hal::transfers::take_lazy_node()) e.lit(",\"lazy_node\":").u64(lazy_node);
  char site_buf[24];
  Text site(site_buf, sizeof site_buf);
  site.u64(site_);
  e.lit(",\"site\":").raw(site.data(), site.size()).lit(",\"seq\":").u64(seq);
  e.raw(t->ident, t->ident_len).usec(t0_ - s->start_mono_ns).lit(",\"dur\":").usec(dur);
  // Its stack: the node of stackFrames named by the site.
  if (site_) e.lit(",\"sf\":").raw(site.data(), site.size());
  e.ch('}');
  // Into the thread's buffer, with the aggregates, under the thread's own (uncontended) lock.
  try {
    std::lock_guard<SpinLock> lock(t->mu);
    append_locked(*s, *t, e);
    if (t->sigs.size() <= sig_id) t->sigs.resize(sig_id + 1);
    SigStats& st = t->sigs[sig_id];
    ++st.calls;
    st.total_ns += own;
    st.min_ns = own < st.min_ns ? own : st.min_ns;
    st.max_ns = own > st.max_ns ? own : st.max_ns;
    st.flops += flops;
    st.bytes += bytes;
    if (t->sites.size() <= site_) t->sites.resize(site_ + 1);
    SiteStats& at = t->sites[site_];
    ++at.calls;
    at.total_ns += own;
    at.add_sig(sig_id, 1);
    if (SOL_UNLIKELY(one_time)) {
      if (t->sig_one_time.size() <= sig_id) t->sig_one_time.resize(sig_id + 1);
      if (t->site_one_time.size() <= site_) t->site_one_time.resize(site_ + 1);
      t->sig_one_time[sig_id].add(one_time, own, measuring);
      t->site_one_time[site_].add(one_time, own, measuring);
    }
  } catch (...) {
  }
  if (ops.count) s->dataflow.record(sig_id, ops.ops, ops.count);
  s->graph.after(*s, node, backend, seq, t->tid, ops.count && !node.dnn ? ops.ops : nullptr, ops.count);
  s->json.start_writer();  // when a full block found none (no lock held here)
  t_last = SpanRef{sig_id, seq, node.sym, sig->op.c_str(), true};
}

SpanRef last_span() noexcept {
  return t_last;
}

void add_device_time(const SpanRef& span, uint64_t device_ns, uint64_t start_ns, uint32_t track,
                     const char* track_name) noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (!span.valid || !s || s->finished.load(std::memory_order_relaxed) || s->pid != ::getpid()) return;
  ThreadState* t = thread_state(*s);
  if (!t) return;
  // The device's side of the call on a track of its own, linked to the call by its seq.
  // "cat":"device" tells readers that it is no call of its own (sol report counts "X" events of
  // the other categories).
  char buf[768];
  Text e(buf, sizeof buf);
  const int64_t tid = device_track(*s, track, track_name, e);
  if (start_ns >= s->start_mono_ns) {  // else: not placed on the timeline (no estimate)
    e.lit("\n,{\"name\":\"").str(symbol_name(span.sym)).lit("\",\"cat\":\"device\",\"ph\":\"X\",\"pid\":");
    e.i64(s->pid).lit(",\"tid\":").i64(tid).lit(",\"ts\":").usec(start_ns - s->start_mono_ns);
    e.lit(",\"dur\":").usec(device_ns).lit(",\"args\":{\"op\":").json(span.op);
    e.lit(",\"seq\":").u64(span.seq).lit("}}");
  }
  // Into this thread's buffer, as a call's own event, and its signature's device time with the
  // thread's other aggregates (summed over threads in the summaries): the thread that reads the
  // events back need not be the one that made the call.
  try {
    std::lock_guard<SpinLock> lock(t->mu);
    append_locked(*s, *t, e);
    if (t->sigs.size() <= span.sig) t->sigs.resize(span.sig + 1);
    SigStats& st = t->sigs[span.sig];
    ++st.device_calls;
    st.device_ns += device_ns;
  } catch (...) {
  }
}

// A lazy device backend's flush (hal/transfers.hpp's listener, set while tracing): an event on a
// track of its own ("lazy flushes"), with its cause, the nodes it ran and the bytes it wrote back.
// "cat":"device", as device time: no call of its own for the readers that count calls.
void add_flush(hal::transfers::Cause cause, uint64_t start_ns, uint64_t end_ns, uint64_t nodes,
               uint64_t bytes_back) noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s || s->finished.load(std::memory_order_relaxed) || s->pid != ::getpid()) return;
  if (start_ns < s->start_mono_ns || end_ns < start_ns) return;
  ThreadState* t = thread_state(*s);
  if (!t) return;
  char buf[512];
  Text e(buf, sizeof buf);
  const int64_t tid = device_track(*s, kLazyTrack, "lazy flushes", e);
  e.lit("\n,{\"name\":\"flush (").str(hal::transfers::cause_name(cause)).lit(")\",\"cat\":\"device\",\"ph\":\"X\",\"pid\":");
  e.i64(s->pid).lit(",\"tid\":").i64(tid).lit(",\"ts\":").usec(start_ns - s->start_mono_ns);
  e.lit(",\"dur\":").usec(end_ns - start_ns).lit(",\"args\":{\"cause\":\"").str(hal::transfers::cause_name(cause));
  e.lit("\",\"nodes\":").u64(nodes).lit(",\"bytes_back\":").u64(bytes_back).lit(",\"thread\":").i64(t->tid).lit("}}");
  std::lock_guard<SpinLock> lock(t->mu);
  append_locked(*s, *t, e);
}

// A deferred node's work done on the device (hal/transfers.hpp's node listener): an instant on the
// "lazy flushes" track, whose "node" matches its call's "lazy_node". From the device runtime's
// thread: the event goes through the recorder's own buffer for that thread.
void add_node_done(uint64_t node, uint64_t done_ns) noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s || s->finished.load(std::memory_order_relaxed) || s->pid != ::getpid()) return;
  if (done_ns < s->start_mono_ns) return;
  ThreadState* t = thread_state(*s);
  if (!t) return;
  char buf[512];
  Text e(buf, sizeof buf);
  const int64_t tid = device_track(*s, kLazyTrack, "lazy flushes", e);
  e.lit("\n,{\"name\":\"node ran\",\"cat\":\"device\",\"ph\":\"i\",\"s\":\"t\",\"pid\":").i64(s->pid);
  e.lit(",\"tid\":").i64(tid).lit(",\"ts\":").usec(done_ns - s->start_mono_ns);
  e.lit(",\"args\":{\"node\":").u64(node).lit("}}");
  std::lock_guard<SpinLock> lock(t->mu);
  append_locked(*s, *t, e);
}

void on_finish(void (*flush)() noexcept) noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s) return;
  for (auto& slot : s->flushes) {
    void (*expected)() noexcept = nullptr;
    if (slot.compare_exchange_strong(expected, flush) || expected == flush) return;
  }
}

void finish_process(const char* how) noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s || s->pid != ::getpid()) return;  // a vfork child shares our memory: leave it alone
  if (s->finished.load(std::memory_order_acquire)) return;
  // Measurements still in flight (device time) land before the summaries are written.
  for (auto& slot : s->flushes)
    if (auto flush = slot.load(std::memory_order_acquire)) flush();
  if (s->finished.exchange(true, std::memory_order_acq_rel)) return;
  alloc::remove(forget_freed);  // nothing records any more: frees need not cost anything
  if (s->files.load(std::memory_order_acquire) <= 0) return;
  {
    // Every thread's last events, then the end of the array.
    std::lock_guard<std::mutex> lock(s->mu);
    for (ThreadState* t : s->threads) {
      std::lock_guard<SpinLock> tl(t->mu);
      s->json.write(t->out, t->out_used);
      t->out_used = 0;
    }
  }
  s->graph.finish(*s, how);
  write_outputs(*s, how);  // closes trace.json too, with the stacks of its events
}

}  // namespace sol::capture::trace
