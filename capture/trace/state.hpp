// The trace recorder's process state, shared by recorder.cpp (per call) and outputs.cpp (at exit).
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/trace/dataflow.hpp"
#include "capture/trace/graph_writer.hpp"
#include "capture/trace/hash_slots.hpp"
#include "capture/trace/python_frames.hpp"
#include "capture/trace/span_clock.hpp"
#include "capture/trace/stacks.hpp"
#include "capture/trace/trace_file.hpp"
#include "common/clock.hpp"
#include "ir/node.hpp"

namespace sol::capture::dnn {
struct Tensor;
}

namespace sol::capture::trace {

// A call's memory operands, and for a DNN node the tensor each one is.
struct Operands {
  blas::Operand ops[Dataflow::kMaxOperands];
  const dnn::Tensor* tensors[Dataflow::kMaxOperands] = {};
  int count = 0;
};

// The Python frames ("qualname (file:line)", innermost first) of the thread that created a thread.
struct ThreadOrigin {
  std::vector<std::string> frames;
};

// An op signature: what summaries aggregate over.
struct Signature {
  Sym sym;
  std::string op, dtype, shape, backend;
  // The part of its trace events that never changes: "\n,{"name":...,"args":{"op":...,"backend":"native""
  std::string head;
  // Its memory operands' shapes, by position ("64x128 f32"): the labels of dataflow edges.
  std::vector<std::string> operands;
};

// A call site: the stack (innermost first) and the symbol it called.
struct Site {
  enum class Python : uint8_t {
    none,       // not a Python process, or Python frames not wanted
    frames,     // py: the calling thread's Python frames
    no_thread,  // a Python process, but the calling thread runs no Python (an OpenMP or a
                // library's own worker)
  };
  Sym sym;
  std::vector<uintptr_t> ips;  // native return addresses
  int depth = 0;               // the most frames its walk could keep (trace.depth or setup_depth)
  Python python = Python::none;
  std::vector<std::string> py;  // "qualname (file:line)", innermost first
  // py_entry[i]: frame i is the first of one C-level evaluation, i.e. its caller is the native
  // frame _PyEval_EvalFrameDefault: where the Python frames go among the native ones.
  std::vector<bool> py_entry;
  // Python::no_thread: the frames of the Python code that started the thread, if known.
  const ThreadOrigin* origin = nullptr;
};

// The calls that did one-time work (hal/one_time.hpp: a kernel compiled, a backend started, auto
// measuring): how many, their time and the kinds of work, which `sol diff` sets apart from the
// steady state. Kept apart from SigStats and SiteStats (ThreadState::one_time): such calls are
// rare, and a signature's counters stay one cache line.
struct OneTime {
  uint64_t calls = 0, ns = 0;  // ns: the calls' own time, as in SigStats
  uint64_t measuring_ns = 0;   // what auto's measuring took inside them, apart from `ns`
  uint8_t kinds = 0;
  void add(uint8_t call_kinds, uint64_t call_ns, uint64_t call_measuring_ns) noexcept {
    if (!call_kinds) return;
    ++calls;
    ns += call_ns;
    measuring_ns += call_measuring_ns;
    kinds |= call_kinds;
  }
  void add(const OneTime& o) noexcept {
    calls += o.calls;
    ns += o.ns;
    measuring_ns += o.measuring_ns;
    kinds |= o.kinds;
  }
};

struct SigStats {
  uint64_t calls = 0, total_ns = 0, min_ns = UINT64_MAX, max_ns = 0;
  double flops = 0, bytes = 0;
  uint64_t device_calls = 0, device_ns = 0;  // device time, where measured (add_device_time)
};

struct SiteStats {
  uint64_t calls = 0, total_ns = 0;
  // The signatures of its calls, so that a report names the op and shape of a site: the first
  // few, with their calls; `other_calls` counts the calls of any more.
  static constexpr int kSigs = 4;
  uint32_t sigs[kSigs] = {};
  uint64_t sig_calls[kSigs] = {};
  int nsigs = 0;
  uint64_t other_calls = 0;
  void add_sig(uint32_t sig, uint64_t calls_of_sig) noexcept {
    for (int i = 0; i < nsigs; ++i)
      if (sigs[i] == sig) {
        sig_calls[i] += calls_of_sig;
        return;
      }
    if (nsigs == kSigs) {
      other_calls += calls_of_sig;
      return;
    }
    sigs[nsigs] = sig;
    sig_calls[nsigs++] = calls_of_sig;
  }
};

// A lock for data one thread updates on every call and others read only at exit or fork: a
// test-and-set, a fraction of a pthread mutex's cost when uncontended, which is nearly always.
class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) sched_yield();
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

// Per thread, created at its first traced call and kept until the process ends, so that threads
// that finished early still count. The thread updates its own counters under `mu`, which is
// uncontended except at exit, when they are merged.
struct ThreadState {
  struct SigEntry {
    uint32_t id = 0;
    const Signature* sig = nullptr;  // stable: signatures live in a deque and are never removed
  };
  // A call's parameters (leading dimensions, increments, scalars) rendered as text, by a hash of
  // their values: they repeat as much as shapes do, and rendering a double is the costly part.
  struct ParamsEntry {
    uint64_t hash = 0;
    uint8_t len = 0;
    char text[183];  // room for a device call's strides and stream too
  };

  uint64_t generation = 0;  // the fork generation it belongs to
  pid_t tid = 0;
  // What every event of this thread carries between its args and its time, rendered once:
  // `},"pid":<pid>,"tid":<tid>,"ts":`.
  char ident[64];
  uint8_t ident_len = 0;
  SpinLock mu;
  std::vector<SigStats> sigs;    // by signature id
  std::vector<SiteStats> sites;  // by site id
  // Of the calls that did one-time work, by signature id and by site id; grown only by such a call.
  std::vector<OneTime> sig_one_time, site_one_time;
  // The ids of the signatures and sites this thread has seen, by their hashes, so that a repeated
  // one takes neither the global lock nor a walk of the global tables.
  HashSlots<SigEntry> sig_ids;
  HashSlots<uint32_t> site_ids;
  ParamsEntry params_cache[64];
  // The operands of the call being recorded, filled anew by each call that has some
  // (blas::operands and dnn::operands set each operand whole): constructing 16 of them on the
  // stack for every call cost more than the rest of recording a oneDNN set-up call, which has none.
  Operands ops;
  StackCache stacks;       // only this thread touches it
  uintptr_t stack_hi = 0;  // the upper end of this thread's stack
  ClockAnchor clock;       // this thread's anchor of State::clock
  // trace.json events not yet written (see TraceFile), under `mu`: in `out`, its own block at
  // first, then whichever spare the writer hands back for a full one.
  static constexpr size_t kOut = TraceFile::kBlock;
  size_t out_used = 0;
  char* out = first_block;
  char first_block[kOut];
};

struct State {
  // Settings, fixed at start.
  std::string root;  // SOL_TRACE_DIR
  std::string run;   // this run's id: files go to root/run-<run> (dir)
  std::string dir;
  bool stacks = true;
  int depth = 32;
  int setup_depth = 1;  // frames per stack of oneDNN's set-up calls (trace.setup_depth)
  bool want_python = true;  // trace.python
  bool interpreter_frames = false;  // trace.interpreter_frames: keep CPython's own frames among Python's
  python::Interpreter python;
  std::string backend;  // the configured preference, for process info
  Unwinder unwinder;
  // trace.include / trace.exclude patterns (fnmatch), and per symbol whether its calls pass them
  // (0 unknown, 1 traced, 2 not), for calls that are no DNN node (those are judged by their kind).
  std::vector<std::string> include, exclude;
  std::atomic<uint8_t> wanted[kNumSymbols] = {};
  // The window: calls are recorded while `recording` (flipped by trace.toggle's signal) and once
  // trace.delay has passed (`waited`, set at the first call from record_from_ns on).
  std::atomic<bool> recording{true};
  std::atomic<bool> waited{true};
  uint64_t record_from_ns = 0;

  // Identity of this process (reset in a forked child).
  pid_t pid = 0;
  std::string tag;  // "<pid>" or "r<rank>-<pid>"
  std::optional<long> rank;
  uint64_t start_mono_ns = 0, start_unix_ns = 0;
  SpanClock clock;  // the calls' times
  std::vector<std::string> argv;
  std::atomic<uint64_t> generation{1};

  // Files. 0: not yet opened (they are created at the first call), 1: open, -1: cannot be written.
  std::atomic<int> files{0};
  std::mutex open_mu;
  TraceFile json;
  std::atomic<uint64_t> seq{0};
  std::atomic<bool> finished{false};

  // Signatures and sites (ids index them) and the thread list.
  std::mutex mu;
  std::deque<Signature> sigs;  // a deque: pointers to its elements stay valid as it grows
  std::unordered_map<std::string, uint32_t> sig_index;
  std::vector<Site> sites;  // sites[0]: no stack
  std::unordered_map<uint64_t, uint32_t> site_index;
  std::vector<ThreadState*> threads;
  std::unordered_map<std::string, std::unique_ptr<ThreadOrigin>> origins;  // by their frames, joined

  Dataflow dataflow;
  GraphWriter graph;  // the primitive graph, for sol replay

  // Device time (add_device_time): the device tracks of trace.json named already, and the
  // frontends' flushes of measurements still in flight (on_finish).
  std::mutex device_mu;
  std::vector<bool> device_tracks;
  std::atomic<void (*)() noexcept> flushes[4] = {};

  std::string path(const char* suffix) const { return dir + "/sol-" + tag + suffix; }
};

// trace.json starts in the array form, so that a process that dies leaves a loadable prefix:
// "[" and spaces. At exit the first bytes become the object form's opening and the file ends
// with the stackFrames dictionary the events' "sf" refer to. Both have the same length.
inline constexpr char kTraceHeaderArray[] = "[               ";
inline constexpr char kTraceHeaderObject[] = "{\"traceEvents\":[";
static_assert(sizeof kTraceHeaderArray == sizeof kTraceHeaderObject);

// The recorder's state, nullptr when tracing is off.
State* state() noexcept;

// Closes trace.json (with its stack frames), writes summary.json, summary.txt, folded and
// graph.dot, and the table on stderr (outputs.cpp).
void write_outputs(State& s, const char* how) noexcept;

}  // namespace sol::capture::trace
