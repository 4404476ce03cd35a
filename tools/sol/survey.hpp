// Reading trace directories and summary files (docs/trace-format.md) into one merged survey,
// for `sol report`, `sol diff` and the flame graph.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sol::tools {

// An op signature. Equal across processes when all six fields are equal.
struct OpKey {
  std::string api, symbol, op, dtype, shape, backend;
  auto operator<=>(const OpKey&) const = default;
};

// The calls that did one-time work (hal/one_time.hpp: a kernel compiled or loaded from the cache,
// a backend started, auto measuring the candidates), as the trace noted them: how many, their
// time, the kinds of work.
struct OneTime {
  uint64_t calls = 0, ns = 0;
  std::set<std::string> kinds;
  // What auto's measuring took inside those calls: apart from `ns` and from the op and site
  // times, as the trace records it (docs/trace-format.md), unless count_measuring_in.
  uint64_t measuring_ns = 0;
  void add(const OneTime& o);
};

// Time in steady state: `calls` calls at the mean of those that did no one-time work; nullopt when
// every call did some.
std::optional<uint64_t> steady_ns(uint64_t calls, uint64_t total_ns, const OneTime& one_time);

struct OpStats {
  uint64_t calls = 0, total_ns = 0, min_ns = 0, max_ns = 0, flops = 0, bytes = 0;
  OneTime one_time;
  void add(const OpStats& o);
};

// A call site. Ids are per process, so sites merge by their frames (innermost first) and the
// intercepted symbol; an empty frame list means "stack unknown" (stacks off, or a process rebuilt
// from its trace.json).
struct SiteKey {
  std::string symbol;
  std::vector<std::string> frames;
  auto operator<=>(const SiteKey&) const = default;
};

// What a call site's calls computed: an op signature without the symbol (the site's) and backend.
struct SiteOp {
  std::string op, dtype, shape;
  auto operator<=>(const SiteOp&) const = default;
};

struct SiteStats {
  uint64_t calls = 0, total_ns = 0;
  uint32_t processes = 0;  // how many processes reached this site
  OneTime one_time;
  std::map<SiteOp, uint64_t> ops;  // calls by what they computed, where the summary says
  uint64_t other_calls = 0;        // calls of ops the summary does not name (beyond its first few)
  void add(const SiteStats& o);
};

struct Process {
  std::string tag;     // from the file name, e.g. "r1-4243"; "" if the file is not named sol-<tag>.*
  std::string source;  // "summary", or "trace" when rebuilt from trace.json (no summary: killed)
  std::string path;    // the file it was read from
  int64_t pid = 0;
  std::optional<int64_t> rank;
  std::vector<std::string> argv;
  std::string backend, exit;
  uint64_t start_unix_ns = 0;  // 0: unknown (trace.json has no absolute time)
  uint64_t wall_ns = 0, calls = 0, traced_ns = 0;
  uint64_t measuring_ns = 0;  // auto's measuring inside its calls, apart from traced_ns
  // What device backends moved (summary.json's process.transfers; zeros when absent).
  struct Transfers {
    uint64_t nodes = 0, flushes = 0, to_device = 0, to_host = 0;
    std::map<std::string, uint64_t> flushes_by_cause;
  } transfers;
};

struct Survey {
  std::string path;  // what the user named
  std::vector<Process> processes;
  std::map<OpKey, OpStats> ops;
  std::map<SiteKey, SiteStats> sites;
  // Folded stacks (outermost frame first, the intercepted symbol last) -> total ns, merged over
  // processes: from each process's .folded file, else from its summary sites.
  std::map<std::vector<std::string>, uint64_t> stacks;
  // Problems that skipped a file (or part of one) but not the whole input.
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // what the reader should know: which run of several was read

  uint64_t calls() const;
  uint64_t traced_ns() const;
  // Auto's measuring over all ops: the calls that measured and the time it took.
  OneTime measuring() const;
  uint64_t wall_ns() const;  // first process start to last process end
  size_t ranks() const;      // distinct ranks
};

// Reads PATH: a trace directory (every sol-<tag>.summary.json in it, trace.json for the processes
// without one) or one summary (or trace.json) file. On failure returns nullopt and sets `error`
// to a one-line message naming the path.
std::optional<Survey> load_survey(const std::string& path, std::string& error);

// A trace.json's parts (docs/trace-format.md): the text of each whole event object, in the order
// written, and the text of the stackFrames dictionary ("" when absent). The array may be
// unterminated and padded, as a process that died leaves it: events are read one object at a time
// and a last, unfinished one is dropped. Throws std::runtime_error when the text is no Chrome
// trace. The views point into `text`.
struct TraceText {
  std::vector<std::string_view> events;
  std::string_view stack_frames;
};
TraceText split_trace(std::string_view text);

// A summary frame, "function(args) (object+0xoffset)" or "object+0xoffset", as a flame graph names
// it: the function without its parameter list, or the object's file name and the offset.
std::string frame_name(const std::string& frame);

// A Python frame of a stack, "qualname (file:line)" as the recorder writes it.
struct PythonFrame {
  std::string function, file, line;
};
std::optional<PythonFrame> python_frame(const std::string& frame);
// Whether it is library code (site-packages, dist-packages, the standard library) rather than the
// program's own.
bool library_python_frame(const PythonFrame& p);

// Where a frame is: its object's file name and the offset ("libtorch_cpu.so.1.13+0x1a2b3c"), or ""
// when the frame does not say.
std::string frame_location(const std::string& frame);

// Leaves out the set-up calls (ir/setup.hpp: bookkeeping that computes nothing): their op
// signatures, and the call sites and stacks of the symbols that make nothing else. The process
// totals still count them. Returns how many calls went.
uint64_t drop_setup(Survey& s);

// Counts auto's measuring in the op and site times (and their one-time work), as a wall clock saw
// the calls.
void count_measuring_in(Survey& s);

// "auto's measuring: 61.5 ms in 3 calls, left out of the op times": "" when there was none.
std::string measuring_note(const Survey& s, bool counted_in);

// Prints each warning as "sol: warning: ..." on stderr.
void print_warnings(const Survey& s);

}  // namespace sol::tools
