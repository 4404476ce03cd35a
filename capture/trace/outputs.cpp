// The files written when a traced process ends (docs/trace-format.md), and the table on stderr.
// Runs once per process, so clarity wins over speed here; stack frames get their names now.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/trace/state.hpp"
#include "capture/trace/symbolize.hpp"
#include "common/fs_safety.hpp"
#include "common/human.hpp"
#include "common/log.hpp"
#include "hal/one_time.hpp"
#include "hal/transfers.hpp"
#include "ir/setup.hpp"

namespace sol::capture::trace {
namespace {

void json_str(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

std::string u64s(uint64_t v) {
  return std::to_string(v);
}
std::string nums(double v) {
  char buf[40];
  if (v == static_cast<double>(static_cast<uint64_t>(v)) && v < 1.8e19)
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

bool write_file(const std::string& path, const std::string& content) {
  std::string error;  // the caller's one line covers every file
  const int fd = fs_safety::open_new_private(path, 0, error);
  if (fd < 0) return false;
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  return off == content.size();
}

struct Merged {
  std::vector<SigStats> sigs;
  std::vector<SiteStats> sites;
  std::vector<OneTime> sig_one_time, site_one_time;  // as long as sigs and sites
  uint64_t calls = 0, traced_ns = 0;
  OneTime measuring;  // auto's measuring, over all signatures: its calls and time
};

Merged merge(State& s) {
  Merged m;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    m.sigs.resize(s.sigs.size());
    m.sites.resize(s.sites.size());
    m.sig_one_time.resize(s.sigs.size());
    m.site_one_time.resize(s.sites.size());
    for (ThreadState* t : s.threads) {
      std::lock_guard<SpinLock> tl(t->mu);
      for (size_t i = 0; i < t->sigs.size() && i < m.sigs.size(); ++i) {
        const SigStats& a = t->sigs[i];
        SigStats& b = m.sigs[i];
        // Device time may be reported by a thread that made none of the signature's calls.
        b.device_calls += a.device_calls;
        b.device_ns += a.device_ns;
        if (!a.calls) continue;
        b.calls += a.calls;
        b.total_ns += a.total_ns;
        b.min_ns = std::min(b.min_ns, a.min_ns);
        b.max_ns = std::max(b.max_ns, a.max_ns);
        b.flops += a.flops;
        b.bytes += a.bytes;
      }
      for (size_t i = 0; i < t->sites.size() && i < m.sites.size(); ++i) {
        const SiteStats& a = t->sites[i];
        SiteStats& b = m.sites[i];
        b.calls += a.calls;
        b.total_ns += a.total_ns;
        for (int k = 0; k < a.nsigs; ++k) b.add_sig(a.sigs[k], a.sig_calls[k]);
        b.other_calls += a.other_calls;
      }
      for (size_t i = 0; i < t->sig_one_time.size() && i < m.sigs.size(); ++i)
        m.sig_one_time[i].add(t->sig_one_time[i]);
      for (size_t i = 0; i < t->site_one_time.size() && i < m.sites.size(); ++i)
        m.site_one_time[i].add(t->site_one_time[i]);
    }
  }
  for (const auto& st : m.sigs) {
    m.calls += st.calls;
    m.traced_ns += st.total_ns;
  }
  for (const auto& t : m.sig_one_time)
    if (t.measuring_ns) m.measuring.add(hal::one_time::measuring, t.ns, t.measuring_ns);
  return m;
}

// Signature or site ids with calls, longest total time first.
template <class Stats>
std::vector<uint32_t> by_time(const std::vector<Stats>& stats) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < stats.size(); ++i)
    if (stats[i].calls) ids.push_back(i);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](uint32_t a, uint32_t b) { return stats[a].total_ns > stats[b].total_ns; });
  return ids;
}

// The frames of each site, innermost first: native frames named once per return address (libdw
// is opened, and the process's mappings read, only when there is a stack to name), with the
// site's Python frames in place of the interpreter's evaluation frames that ran them (as py-spy
// --native shows them). The interpreter's other frames under a Python frame (its call machinery:
// _PyObject_MakeTpCall, _PyFunction_Vectorcall...) go too, so that Python frames read as Python,
// unless trace.interpreter_frames; extension frames (NumPy's, PyTorch's) stay. `sources`, beside
// the names: a native frame's "file:line" where DWARF line information has it, else "" (a Python
// frame's line is in its name).
class Frames {
 public:
  explicit Frames(const State& s) : s_(s) {}

  struct Stack {
    std::vector<std::string> names, sources;
  };
  const Stack& of(uint32_t id) {
    auto it = sites_.find(id);
    if (it == sites_.end()) it = sites_.emplace(id, merge(s_.sites[id])).first;
    return it->second;
  }
  // Distinct return addresses named.
  size_t count() const noexcept { return frames_.size(); }

 private:
  struct Frame {
    std::string name, source;
    bool interpreter;  // in CPython's own object
  };
  const Frame& frame(uintptr_t ip) {
    auto it = frames_.find(ip);
    if (it == frames_.end()) {
      if (!symbolizer_) symbolizer_.emplace();
      it = frames_
               .emplace(ip, Frame{symbolizer_->describe(ip), symbolizer_->source(ip),
                                  s_.python.in_interpreter(ip)})
               .first;
    }
    return it->second;
  }

  Stack merge(const Site& site) {
    Stack out;
    const auto add = [&](const std::string& name, const std::string& source) {
      out.names.push_back(name);
      out.sources.push_back(source);
    };
    size_t py = 0;  // the next Python frame to place
    // Python frames up to and including the next evaluation's first one: what one
    // _PyEval_EvalFrameDefault ran.
    const auto place_evaluation = [&] {
      while (py < site.py.size()) {
        add(site.py[py], "");
        if (site.py_entry[py++]) break;
      }
    };
    for (uintptr_t ip : site.ips) {
      const Frame& f = frame(ip);
      if (py < site.py.size() && f.name.rfind("_PyEval_EvalFrameDefault", 0) == 0)
        place_evaluation();
      else if (py == site.py.size() || !f.interpreter || s_.interpreter_frames)
        add(f.name, f.source);
      // else: the interpreter's own frame under a Python frame, which stands in for it
    }
    if (py < site.py.size()) {
      // The native stack was cut at trace.depth before the interpreter's frames.
      if (site.ips.size() >= static_cast<size_t>(site.depth)) add("...", "");
      while (py < site.py.size()) place_evaluation();
    }
    if (site.python == Site::Python::no_thread) {
      // The thread's own frames end at its start routine; then where it was started from.
      if (!site.origin) {
        add("(thread without Python)", "");
      } else {
        add("(thread without Python, started from)", "");
        for (const auto& f : site.origin->frames) add(f, "");
      }
    }
    return out;
  }

  const State& s_;
  std::unordered_map<uintptr_t, Frame> frames_;
  std::optional<Symbolizer> symbolizer_;
  std::unordered_map<uint32_t, Stack> sites_;
};

// The calls that did one-time work, where there were any: their number, time and kinds.
void one_time_json(std::string& out, const OneTime& t) {
  if (!t.calls) return;
  out += ", \"one_time_calls\": " + u64s(t.calls) + ", \"one_time_ns\": " + u64s(t.ns) + ", \"one_time\": ";
  json_str(out, hal::one_time::names(t.kinds));
  if (t.measuring_ns) out += ", \"measuring_ns\": " + u64s(t.measuring_ns);
}

std::string summary_json(State& s, const Merged& m, const std::vector<uint32_t>& sig_order,
                         const std::vector<uint32_t>& site_order, Frames& frames, const char* how,
                         uint64_t wall) {
  std::string out = "{\n  \"format\": \"sol-summary/1\",\n  \"process\": {";
  out += "\"pid\": " + std::to_string(s.pid) + ", \"ppid\": " + std::to_string(::getppid());
  out += ", \"rank\": " + (s.rank ? std::to_string(*s.rank) : std::string("null"));
  out += ", \"tag\": ";
  json_str(out, s.tag);
  out += ", \"argv\": [";
  for (size_t i = 0; i < s.argv.size(); ++i) {
    if (i) out += ", ";
    json_str(out, s.argv[i]);
  }
  out += "], \"backend\": ";
  json_str(out, s.backend);
  out += ", \"start_unix_ns\": " + u64s(s.start_unix_ns) + ", \"wall_ns\": " + u64s(wall);
  out += ", \"calls\": " + u64s(m.calls) + ", \"traced_ns\": " + u64s(m.traced_ns);
  out += ", \"measuring_ns\": " + u64s(m.measuring.measuring_ns);
  out += std::string(", \"stacks\": ") + (s.stacks ? "true" : "false") +
         ", \"depth\": " + std::to_string(s.depth);
  out += ", \"exit\": ";
  json_str(out, how);
  out += ", \"transfers\": " + hal::transfers::json(hal::transfers::totals());
  out += "},\n  \"ops\": [";
  bool first = true;
  for (uint32_t id : sig_order) {
    const Signature& g = s.sigs[id];
    const SigStats& st = m.sigs[id];
    out += first ? "\n    {" : ",\n    {";
    first = false;
    out += "\"api\": ";
    json_str(out, api_name(symbol_api(g.sym)));
    out += ", \"symbol\": ";
    json_str(out, symbol_name(g.sym));
    out += ", \"op\": ";
    json_str(out, g.op);
    out += ", \"dtype\": ";
    json_str(out, g.dtype);
    out += ", \"shape\": ";
    json_str(out, g.shape);
    out += ", \"backend\": ";
    json_str(out, g.backend);
    out += ", \"calls\": " + u64s(st.calls) + ", \"total_ns\": " + u64s(st.total_ns) +
           ", \"min_ns\": " + u64s(st.min_ns) + ", \"max_ns\": " + u64s(st.max_ns) +
           ", \"flops\": " + nums(st.flops) + ", \"bytes\": " + nums(st.bytes);
    one_time_json(out, m.sig_one_time[id]);
    // Work timed on a device (CUDA libraries' calls): the calls timed and their device time.
    if (st.device_calls)
      out += ", \"device_calls\": " + u64s(st.device_calls) + ", \"device_ns\": " + u64s(st.device_ns);
    out += "}";
  }
  out += "\n  ],\n  \"sites\": [";
  first = true;
  for (uint32_t id : site_order) {
    const Site& site = s.sites[id];
    out += first ? "\n    {" : ",\n    {";
    first = false;
    out += "\"id\": " + std::to_string(id) + ", \"symbol\": ";
    json_str(out, id ? symbol_name(site.sym) : "");
    const SiteStats& st = m.sites[id];
    out += ", \"calls\": " + u64s(st.calls) + ", \"total_ns\": " + u64s(st.total_ns);
    one_time_json(out, m.site_one_time[id]);
    out += ", \"ops\": [";
    // What the site's calls computed, by signature.
    for (int k = 0; k < st.nsigs; ++k) {
      const Signature& g = s.sigs[st.sigs[k]];
      out += k ? ", {\"op\": " : "{\"op\": ";
      json_str(out, g.op);
      out += ", \"dtype\": ";
      json_str(out, g.dtype);
      out += ", \"shape\": ";
      json_str(out, g.shape);
      out += ", \"calls\": " + u64s(st.sig_calls[k]) + "}";
    }
    out += "], \"other_calls\": " + u64s(st.other_calls) + ", \"frames\": [";
    const Frames::Stack& stack = frames.of(id);
    for (size_t i = 0; i < stack.names.size(); ++i) {
      if (i) out += ", ";
      json_str(out, stack.names[i]);
    }
    out += "], \"sources\": [";
    for (size_t i = 0; i < stack.sources.size(); ++i) {
      if (i) out += ", ";
      const std::string& source = stack.sources[i];
      if (source.empty())
        out += "null";
      else
        json_str(out, source);
    }
    out += "]}";
  }
  out += "\n  ]\n}\n";
  return out;
}

std::string summary_text(State& s, const Merged& m, const std::vector<uint32_t>& sig_order,
                         const std::vector<uint32_t>& site_order, Frames& frames, uint64_t wall) {
  std::string cmd;
  for (const auto& a : s.argv) cmd += (cmd.empty() ? "" : " ") + a;
  char line[512];
  std::string out = "SOL trace of: " + cmd + "\n";
  std::snprintf(line, sizeof line, "pid %d%s%s, %llu calls, %s traced, %s wall, backend %s\n\n", s.pid,
                s.rank ? ", rank " : "", s.rank ? std::to_string(*s.rank).c_str() : "",
                static_cast<unsigned long long>(m.calls), human_ns(m.traced_ns).c_str(),
                human_ns(wall).c_str(), s.backend.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%9s %11s %6s %11s  %-8s %-24s %-20s %-6s %-9s %s\n", "calls", "total",
                "%", "mean", "api", "symbol", "op", "dtype", "backend", "shape");
  out += line;
  for (uint32_t id : sig_order) {
    const Signature& g = s.sigs[id];
    const SigStats& st = m.sigs[id];
    std::snprintf(line, sizeof line, "%9llu %11s %5.1f%% %11s  %-8s %-24s %-20s %-6s %-9s ",
                  static_cast<unsigned long long>(st.calls), human_ns(st.total_ns).c_str(),
                  m.traced_ns ? 100.0 * st.total_ns / m.traced_ns : 0.0,
                  human_ns(st.total_ns / st.calls).c_str(), api_name(symbol_api(g.sym)),
                  symbol_name(g.sym), g.op.c_str(), g.dtype.c_str(), g.backend.c_str());
    out += line + g.shape + "\n";
  }
  if (m.measuring.calls) {
    std::snprintf(line, sizeof line, "\nauto's measuring: %s in %llu calls, apart from their times above\n",
                  human_ns(m.measuring.measuring_ns).c_str(),
                  static_cast<unsigned long long>(m.measuring.calls));
    out += line;
  }
  // The calls that queued work on a GPU, by the time the device spent on it (which the host
  // times above do not show: a launch returns before the work runs).
  std::vector<uint32_t> device_order;
  uint64_t device_calls = 0, device_ns = 0;
  for (uint32_t id : sig_order)
    if (m.sigs[id].device_calls) {
      device_order.push_back(id);
      device_calls += m.sigs[id].device_calls;
      device_ns += m.sigs[id].device_ns;
    }
  if (!device_order.empty()) {
    std::stable_sort(device_order.begin(), device_order.end(),
                     [&](uint32_t a, uint32_t b) { return m.sigs[a].device_ns > m.sigs[b].device_ns; });
    std::snprintf(line, sizeof line, "\nDevice time: %llu calls timed on the device, %s there\n",
                  static_cast<unsigned long long>(device_calls), human_ns(device_ns).c_str());
    out += line;
    std::snprintf(line, sizeof line, "%9s %11s %6s %11s  %-8s %-24s %-20s %s\n", "calls", "device", "%",
                  "mean", "api", "symbol", "op", "shape");
    out += line;
    for (uint32_t id : device_order) {
      const Signature& g = s.sigs[id];
      const SigStats& st = m.sigs[id];
      std::snprintf(line, sizeof line, "%9llu %11s %5.1f%% %11s  %-8s %-24s %-20s ",
                    static_cast<unsigned long long>(st.device_calls), human_ns(st.device_ns).c_str(),
                    device_ns ? 100.0 * st.device_ns / device_ns : 0.0,
                    human_ns(st.device_ns / st.device_calls).c_str(), api_name(symbol_api(g.sym)),
                    symbol_name(g.sym), g.op.c_str());
      out += line + g.shape + "\n";
    }
  }
  if (!site_order.empty() && (site_order.size() > 1 || site_order[0] != 0)) {
    out += "\nCall sites by time (innermost frames first)\n";
    size_t shown = 0;
    for (uint32_t id : site_order) {
      if (id == 0 || shown++ == 20) continue;
      std::snprintf(line, sizeof line, "\n  site %u: %llu calls to %s, %s\n", id,
                    static_cast<unsigned long long>(m.sites[id].calls), symbol_name(s.sites[id].sym),
                    human_ns(m.sites[id].total_ns).c_str());
      out += line;
      // The innermost frames, then the Python ones (the lines of the program that led here) with
      // the native frames between them counted.
      const auto& names = frames.of(id).names;
      size_t skipped = 0;
      for (size_t i = 0; i < names.size(); ++i) {
        if (i >= 6 && !is_python_frame(names[i])) {
          ++skipped;
          continue;
        }
        if (skipped) out += "      ... " + std::to_string(skipped) + " more\n";
        skipped = 0;
        out += "      " + names[i] + "\n";
      }
      if (skipped) out += "      ... " + std::to_string(skipped) + " more\n";
    }
  }
  return out;
}

std::string folded(State& s, const Merged& m, const std::vector<uint32_t>& site_order, Frames& frames) {
  std::string out;
  for (uint32_t id : site_order) {
    const Site& site = s.sites[id];
    const auto& names = frames.of(id).names;
    for (size_t i = names.size(); i-- > 0;) {
      std::string f = short_frame(names[i]);
      std::replace(f.begin(), f.end(), ';', ':');  // ';' separates frames
      out += f + ";";
    }
    out += std::string(id ? symbol_name(site.sym) : "(no stack)") + " " + u64s(m.sites[id].total_ns) + "\n";
  }
  return out;
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// "x3: 64x128 f32, 32.0 KiB": how many calls read along the edge (when more than one), the shapes
// of the operands that read, and the bytes each call read.
std::string edge_label(const Signature& to, const Dataflow::Edge& e) {
  std::string label = e.calls > 1 ? "x" + u64s(e.calls) + ": " : "";
  std::string shapes;
  for (size_t i = 0; i < to.operands.size() && i < Dataflow::kMaxOperands; ++i)
    if (e.operands >> i & 1) shapes += (shapes.empty() ? "" : " + ") + to.operands[i];
  if (!shapes.empty()) label += shapes + ", ";
  return label + human_bytes(e.bytes / (e.calls ? e.calls : 1));
}

// Nodes are the signatures that compute. Set-up calls (ir/setup.hpp: descriptors, memory
// objects, engines) have no operands and so no edges; as in `sol report` they are left out, and
// the graph's label says how many (`sol report --setup` lists them).
std::string graph(State& s, const Merged& m, const std::vector<uint32_t>& sig_order) {
  std::vector<bool> shown(m.sigs.size());
  uint64_t setup_sigs = 0, setup_calls = 0;
  for (uint32_t id : sig_order) {
    if (is_setup(std::string_view(s.sigs[id].op))) {
      ++setup_sigs;
      setup_calls += m.sigs[id].calls;
    } else {
      shown[id] = true;
    }
  }
  std::string out =
      "digraph sol_dataflow {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  out += "  label=\"" + dot_escape(s.tag) + ": an edge A -> B when calls of B read bytes whose latest write was by A";
  if (setup_sigs)
    out += "\\n" + u64s(setup_sigs) + " set-up signatures (" + u64s(setup_calls) +
           " calls) not shown (sol report --setup lists them)";
  out += "\";\n";
  for (uint32_t id : sig_order) {
    if (!shown[id]) continue;
    const Signature& g = s.sigs[id];
    out += "  s" + std::to_string(id) + " [label=\"" + dot_escape(symbol_name(g.sym)) + "\\n" +
           dot_escape(g.op) + " " + dot_escape(g.dtype) + "\\n" + dot_escape(g.shape) + "\\n" +
           u64s(m.sigs[id].calls) + " calls\"];\n";
  }
  std::vector<Dataflow::Edge> edges = s.dataflow.edges();
  std::sort(edges.begin(), edges.end(),
            [](const auto& a, const auto& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  for (const auto& e : edges) {
    if (e.from >= shown.size() || e.to >= shown.size() || !shown[e.from] || !shown[e.to]) continue;
    out += "  s" + std::to_string(e.from) + " -> s" + std::to_string(e.to) + " [label=\"" +
           dot_escape(edge_label(s.sigs[e.to], e)) + "\"];\n";
  }
  return out + "}\n";
}

// The end of trace.json in the object form: the stackFrames dictionary, a tree whose nodes are
// frames (root: the outermost), with one leaf per call site named by the site's id, which is the
// "sf" of its events; inner nodes are "f<n>", shared by the sites that share the outer frames.
std::string stack_frames(const Merged& m, Frames& frames) {
  std::string out = "\n],\n\"stackFrames\": {";
  std::map<std::pair<std::string, std::string>, std::string> inner;  // (parent, name) -> id
  bool first = true;
  const auto node = [&](const std::string& id, const std::string& name, const std::string& parent) {
    out += first ? "\n  " : ",\n  ";
    first = false;
    json_str(out, id);
    out += ": {\"name\": ";
    json_str(out, name);
    out += std::string(", \"category\": \"") + (is_python_frame(name) ? "python" : "native") + "\"";
    if (!parent.empty()) {
      out += ", \"parent\": ";
      json_str(out, parent);
    }
    out += "}";
  };
  for (uint32_t id = 1; id < m.sites.size(); ++id) {
    if (!m.sites[id].calls) continue;
    const auto& names = frames.of(id).names;
    std::string parent;
    for (size_t i = names.size(); i-- > 1;) {
      auto [it, added] = inner.try_emplace({parent, names[i]}, "f" + std::to_string(inner.size()));
      if (added) node(it->second, names[i], parent);
      parent = it->second;
    }
    node(std::to_string(id), names.empty() ? "(no frames)" : names[0], parent);
  }
  return out + "\n}\n}\n";
}

// The longest computing signatures, as `sol report` shows them first: set-up calls (ir/
// setup.hpp) are counted in a line of their own. Columns are as wide as what they hold; a long
// shape wraps under its column.
void stderr_table(State& s, const Merged& m, const std::vector<uint32_t>& sig_order) {
  if (!log::enabled(log::Level::warn)) return;
  constexpr size_t kRows = 5, kShapeWidth = 40;  // the shapes' least width at a terminal
  std::vector<uint32_t> rows;
  uint64_t setup_calls = 0, setup_sigs = 0;
  for (uint32_t id : sig_order) {
    if (is_setup(std::string_view(s.sigs[id].op))) {
      setup_calls += m.sigs[id].calls;
      ++setup_sigs;
    } else if (rows.size() < kRows) {
      rows.push_back(id);
    }
  }
  char real[PATH_MAX];
  const std::string dir = ::realpath(s.dir.c_str(), real) ? std::string(real) : s.dir;
  log::write(log::Level::warn, "trace: %llu calls, %s traced; files: %s/sol-%s.* (sol report %s)",
             static_cast<unsigned long long>(m.calls), human_ns(m.traced_ns).c_str(), dir.c_str(),
             s.tag.c_str(), dir.c_str());
  int symbol_w = 6, op_w = 2;
  for (uint32_t id : rows) {
    symbol_w = std::max(symbol_w, static_cast<int>(std::strlen(symbol_name(s.sigs[id].sym))));
    op_w = std::max(op_w, static_cast<int>(s.sigs[id].op.size()));
  }
  log::write(log::Level::warn, "%9s %11s %6s  %-*s  %-*s  %s", "calls", "total", "%", symbol_w, "symbol",
             op_w, "op", "shape");
  const size_t shape_at = 9 + 1 + 11 + 1 + 6 + 2 + symbol_w + 2 + op_w + 2;
  // At a terminal a long shape wraps under its column; into a file or pipe it stays one line.
  const size_t columns = terminal_columns(STDERR_FILENO), prefix = 5;  // "sol: "
  const size_t shape_width =
      !columns ? SIZE_MAX : std::max(kShapeWidth, columns - std::min(columns, prefix + shape_at));
  for (uint32_t id : rows) {
    const Signature& g = s.sigs[id];
    const SigStats& st = m.sigs[id];
    const std::vector<std::string> shape = wrap(g.shape, shape_width);
    log::write(log::Level::warn, "%9llu %11s %5.1f%%  %-*s  %-*s  %s",
               static_cast<unsigned long long>(st.calls), human_ns(st.total_ns).c_str(),
               m.traced_ns ? 100.0 * st.total_ns / m.traced_ns : 0.0, symbol_w, symbol_name(g.sym), op_w,
               g.op.c_str(), shape.empty() ? "" : shape[0].c_str());
    for (size_t i = 1; i < shape.size(); ++i)
      log::write(log::Level::warn, "%*s%s", static_cast<int>(shape_at), "", shape[i].c_str());
  }
  if (m.measuring.calls)
    log::write(log::Level::warn, "and %s of auto's measuring in %llu calls, apart from their times above",
               human_ns(m.measuring.measuring_ns).c_str(),
               static_cast<unsigned long long>(m.measuring.calls));
  if (setup_calls)
    log::write(log::Level::warn,
               "and %llu set-up calls (%llu signatures) not shown: sol report --setup lists them",
               static_cast<unsigned long long>(setup_calls), static_cast<unsigned long long>(setup_sigs));
}

}  // namespace

void write_outputs(State& s, const char* how) noexcept {
  try {
    const uint64_t begin = monotonic_ns();
    const uint64_t wall = begin - s.start_mono_ns;
    const Merged m = merge(s);
    const std::vector<uint32_t> sig_order = by_time(m.sigs);
    const std::vector<uint32_t> site_order = by_time(m.sites);
    Frames frames(s);
    const std::string tail = stack_frames(m, frames);
    s.json.close(tail.data(), tail.size(), kTraceHeaderObject);
    bool ok =
        write_file(s.path(".summary.json"), summary_json(s, m, sig_order, site_order, frames, how, wall));
    ok &= write_file(s.path(".summary.txt"), summary_text(s, m, sig_order, site_order, frames, wall));
    ok &= write_file(s.path(".folded"), folded(s, m, site_order, frames));
    ok &= write_file(s.path(".graph.dot"), graph(s, m, sig_order));
    if (!ok) log::write(log::Level::warn, "could not write every trace file in %s", s.dir.c_str());
    SOL_LOG(debug, "trace: %s's summaries written in %s, %zu frames named", s.tag.c_str(),
            human_ns(monotonic_ns() - begin).c_str(), frames.count());
    stderr_table(s, m, sig_order);
  } catch (...) {
    s.json.close("\n]\n", 3);  // the array form, without stacks (a no-op when already closed)
    log::write(log::Level::warn, "out of memory while writing the trace summaries of %s", s.tag.c_str());
  }
}

}  // namespace sol::capture::trace
