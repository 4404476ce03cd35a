// Reading sol-<tag>.summary.json, .trace.json and .folded files (docs/trace-format.md) and
// merging the processes of a trace directory into one Survey.
#include "tools/sol/survey.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/human.hpp"
#include "ir/setup.hpp"

namespace sol::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSummaryFormat = "sol-summary/1";
constexpr const char* kSummarySuffix = ".summary.json";
constexpr const char* kTraceSuffix = ".trace.json";
constexpr const char* kFoldedSuffix = ".folded";

// A file that cannot be used. Thrown only inside this file; load_* turn it into a message.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput(std::string("cannot read: ") + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw BadInput(std::string("cannot read: ") + std::strerror(errno));
  return ss.str();
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest is what matters.
std::string json_message(const std::exception& e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    const size_t close = m.find("] ");
    if (close != std::string::npos) m = m.substr(close + 2);
  }
  return m;
}

// The tag of "sol-<tag><suffix>", or "" when the name does not have that form.
std::string tag_of(const std::string& filename, const std::string& suffix) {
  if (filename.rfind("sol-", 0) != 0 || !ends_with(filename, suffix)) return {};
  if (filename.size() <= 4 + suffix.size()) return {};
  return filename.substr(4, filename.size() - 4 - suffix.size());
}

// ---------------------------------------------------------------------------- typed JSON access

const json& member(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw BadInput(where + ": missing \"" + key + "\"");
  return *it;
}

std::string get_string(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_string()) throw BadInput(where + ": \"" + key + "\" is not a string");
  return v.get<std::string>();
}

uint64_t as_count(const json& v, const char* key, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  throw BadInput(where + ": \"" + key + "\" is not a non-negative integer");
}

uint64_t get_count(const json& obj, const char* key, const std::string& where) {
  return as_count(member(obj, key, where), key, where);
}

// For fields a reader can do without: absent means 0, present must be well-formed.
uint64_t get_count_or_zero(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? 0 : as_count(*it, key, where);
}

// ---------------------------------------------------------------------------- one process

// What one process contributes before merging. Sites are aggregated here first, so a site that a
// process reaches under two ids (possible once frames are dropped) counts as one process.
struct ProcessData {
  Process info;
  std::map<OpKey, OpStats> ops;
  std::map<SiteKey, SiteStats> sites;
};

// "kernel compile, auto's measuring" as kinds.
std::set<std::string> one_time_kinds(const std::string& text) {
  std::set<std::string> kinds;
  for (size_t i = 0; i < text.size();) {
    const size_t comma = std::min(text.find(", ", i), text.size());
    if (comma > i) kinds.insert(text.substr(i, comma - i));
    i = comma + 2;
  }
  return kinds;
}

// The calls of an op or site that did one-time work, as a summary gives them (absent: none).
OneTime one_time_of(const json& obj, const std::string& where) {
  OneTime t;
  t.calls = get_count_or_zero(obj, "one_time_calls", where);
  t.ns = get_count_or_zero(obj, "one_time_ns", where);
  if (obj.contains("one_time")) t.kinds = one_time_kinds(get_string(obj, "one_time", where));
  t.measuring_ns = get_count_or_zero(obj, "measuring_ns", where);
  return t;
}

OpKey op_key(const json& o, const std::string& where) {
  return {get_string(o, "api", where),   get_string(o, "symbol", where), get_string(o, "op", where),
          get_string(o, "dtype", where), get_string(o, "shape", where),  get_string(o, "backend", where)};
}

void parse_process_info(const json& p, Process& info) {
  const std::string where = "process";
  if (!p.is_object()) throw BadInput("\"process\" is not an object");
  if (p.contains("pid")) info.pid = static_cast<int64_t>(get_count(p, "pid", where));
  if (p.contains("rank") && !p["rank"].is_null()) {
    if (!p["rank"].is_number_integer()) throw BadInput("process: \"rank\" is neither an integer nor null");
    info.rank = p["rank"].get<int64_t>();
  }
  if (p.contains("argv")) {
    const json& argv = p["argv"];
    if (!argv.is_array()) throw BadInput("process: \"argv\" is not an array");
    for (const json& a : argv)
      if (a.is_string()) info.argv.push_back(a.get<std::string>());
  }
  if (p.contains("backend")) info.backend = get_string(p, "backend", where);
  if (p.contains("exit")) info.exit = get_string(p, "exit", where);
  if (info.tag.empty() && p.contains("tag")) info.tag = get_string(p, "tag", where);
  info.start_unix_ns = get_count_or_zero(p, "start_unix_ns", where);
  info.wall_ns = get_count_or_zero(p, "wall_ns", where);
  if (p.contains("transfers")) {
    const json& t = p["transfers"];
    const std::string at = where + ".transfers";
    if (!t.is_object()) throw BadInput(at + " is not an object");
    info.transfers.nodes = get_count_or_zero(t, "nodes", at);
    info.transfers.flushes = get_count_or_zero(t, "flushes", at);
    info.transfers.to_device = get_count_or_zero(t, "bytes_to_device", at);
    info.transfers.to_host = get_count_or_zero(t, "bytes_to_host", at);
    if (t.contains("flushes_by_cause")) {
      const json& c = t["flushes_by_cause"];
      if (!c.is_object()) throw BadInput(at + ".flushes_by_cause is not an object");
      for (const auto& [cause, n] : c.items()) info.transfers.flushes_by_cause[cause] = get_count(c, cause.c_str(), at);
    }
  }
}

// A summary's site: its calls and time, its calls that did one-time work, and what its calls computed.
SiteStats parse_site_stats(const json& s, const std::string& where) {
  SiteStats st;
  st.calls = get_count(s, "calls", where);
  st.total_ns = get_count(s, "total_ns", where);
  st.one_time = one_time_of(s, where);
  st.other_calls = get_count_or_zero(s, "other_calls", where);
  if (s.contains("ops")) {
    const json& ops = s["ops"];
    if (!ops.is_array()) throw BadInput(where + ": \"ops\" is not an array");
    for (const json& o : ops) {
      if (!o.is_object()) throw BadInput(where + ": an op is not an object");
      st.ops[{get_string(o, "op", where), get_string(o, "dtype", where), get_string(o, "shape", where)}] +=
          get_count(o, "calls", where);
    }
  }
  return st;
}

ProcessData parse_summary(const std::string& text, const std::string& tag) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw BadInput("not valid JSON (truncated or corrupt?): " + json_message(e));
  }
  if (!doc.is_object() || !doc.contains("format"))
    throw BadInput(std::string("not a SOL summary (no \"format\": \"") + kSummaryFormat + "\")");
  if (doc["format"] != kSummaryFormat)
    throw BadInput("not a SOL summary (format " + doc["format"].dump() + ", expected \"" + kSummaryFormat +
                   "\")");

  ProcessData p;
  p.info.tag = tag;
  p.info.source = "summary";
  if (doc.contains("process")) parse_process_info(doc["process"], p.info);

  const json& ops = member(doc, "ops", "summary");
  if (!ops.is_array()) throw BadInput("\"ops\" is not an array");
  for (size_t i = 0; i < ops.size(); ++i) {
    const json& o = ops[i];
    const std::string where = "ops[" + std::to_string(i) + "]";
    if (!o.is_object()) throw BadInput(where + " is not an object");
    OpStats s;
    s.calls = get_count(o, "calls", where);
    s.total_ns = get_count(o, "total_ns", where);
    s.min_ns = get_count_or_zero(o, "min_ns", where);
    s.max_ns = get_count_or_zero(o, "max_ns", where);
    s.flops = get_count_or_zero(o, "flops", where);
    s.bytes = get_count_or_zero(o, "bytes", where);
    s.one_time = one_time_of(o, where);
    p.ops[op_key(o, where)].add(s);
  }

  if (doc.contains("sites")) {
    const json& sites = doc["sites"];
    if (!sites.is_array()) throw BadInput("\"sites\" is not an array");
    for (size_t i = 0; i < sites.size(); ++i) {
      const json& s = sites[i];
      const std::string where = "sites[" + std::to_string(i) + "]";
      if (!s.is_object()) throw BadInput(where + " is not an object");
      SiteKey key{get_string(s, "symbol", where), {}};
      const json& frames = member(s, "frames", where);
      if (!frames.is_array()) throw BadInput(where + ": \"frames\" is not an array");
      for (const json& f : frames) {
        if (!f.is_string()) throw BadInput(where + ": a frame is not a string");
        key.frames.push_back(f.get<std::string>());
      }
      p.sites[std::move(key)].add(parse_site_stats(s, where));
    }
  }

  // The process totals are those of its ops, so that every table adds up to its header.
  for (const auto& [k, s] : p.ops) {
    p.info.calls += s.calls;
    p.info.traced_ns += s.total_ns;
    p.info.measuring_ns += s.one_time.measuring_ns;
  }
  return p;
}

bool is_padding(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\0';
}

// The end (one past the closing brace) of the JSON object starting at text[begin] == '{', or npos
// when the text ends inside it.
size_t object_end(std::string_view text, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

uint64_t us_to_ns(const json& v) {
  if (!v.is_number()) throw BadInput("not a number");
  const double us = v.get<double>();
  return us <= 0 ? 0 : static_cast<uint64_t>(std::llround(us * 1000.0));
}

// Adds one Chrome trace event to a process rebuilt from its trace: "X" events are calls, the
// "process_name" metadata event gives its command line. Throws on a malformed event.
void add_event(ProcessData& p, const json& ev, uint64_t& end_ns) {
  const std::string where = "event";
  const std::string ph = ev.value("ph", "");
  if (ph == "M" && ev.value("name", "") == "process_name") {
    std::istringstream words(get_string(member(ev, "args", where), "name", where));
    p.info.argv.clear();
    for (std::string w; words >> w;) p.info.argv.push_back(w);
    return;
  }
  if (ph != "X") return;
  // A device call's time on its stream (cuBLAS): the call itself is an event of its own.
  if (ev.value("cat", "") == "device") return;
  if (p.info.pid == 0 && ev.contains("pid") && ev["pid"].is_number_integer())
    p.info.pid = ev["pid"].get<int64_t>();
  const json& args = member(ev, "args", where);
  const OpKey key{get_string(ev, "cat", where),     get_string(ev, "name", where),
                  get_string(args, "op", where),    get_string(args, "dtype", where),
                  get_string(args, "shape", where), get_string(args, "backend", where)};
  const uint64_t dur = us_to_ns(member(ev, "dur", where));
  const uint64_t ts = us_to_ns(member(ev, "ts", where));
  // The event spans auto's measuring inside the call; the call's own time is the rest, as the
  // summary counts it.
  const uint64_t measuring = std::min(dur, get_count_or_zero(args, "measuring_ns", where));
  const uint64_t own = dur - measuring;
  OneTime one_time;
  if (args.contains("one_time"))
    one_time = {1, own, one_time_kinds(get_string(args, "one_time", where)), measuring};
  p.ops[key].add({1, own, own, own, get_count_or_zero(args, "flops", where),
                  get_count_or_zero(args, "bytes", where), one_time});
  SiteStats site{1, own, 0, one_time, {{SiteOp{key.op, key.dtype, key.shape}, 1}}, 0};
  p.sites[SiteKey{key.symbol, {}}].add(site);
  p.info.calls += 1;
  p.info.traced_ns += own;
  p.info.measuring_ns += measuring;
  end_ns = std::max(end_ns, ts + dur);
}

// Rebuilds a process's op aggregates from its Chrome trace events (a last, unfinished one is
// dropped: see split_trace). Sites keep their symbol but lose their frames, which only the summary
// has.
ProcessData parse_trace(const std::string& text, const std::string& tag, std::vector<std::string>& notes) {
  ProcessData p;
  p.info.tag = tag;
  p.info.source = "trace";
  size_t bad = 0;
  uint64_t end_ns = 0;
  for (const std::string_view event : split_trace(text).events) {
    try {
      add_event(p, json::parse(event), end_ns);
    } catch (const std::exception&) {  // json::exception or BadInput: a malformed event
      ++bad;
    }
  }
  p.info.wall_ns = end_ns;  // a lower bound: the trace has no event for the process's end
  if (bad > 0) notes.push_back(std::to_string(bad) + " malformed events skipped");
  return p;
}

std::map<std::vector<std::string>, uint64_t> parse_folded(const std::string& text, size_t& bad) {
  std::map<std::vector<std::string>, uint64_t> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const size_t space = line.rfind(' ');
    uint64_t ns = 0;
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find_first_not_of("0123456789", space + 1) != std::string::npos) {
      ++bad;
      continue;
    }
    try {
      ns = std::stoull(line.substr(space + 1));
    } catch (const std::exception&) {
      ++bad;
      continue;
    }
    std::vector<std::string> stack;
    std::string_view rest(line.data(), space);
    while (true) {
      const size_t semi = rest.find(';');
      stack.emplace_back(rest.substr(0, semi));
      if (semi == std::string_view::npos) break;
      rest.remove_prefix(semi + 1);
    }
    out[std::move(stack)] += ns;
  }
  return out;
}

// ---------------------------------------------------------------------------- frames

struct FrameParts {
  std::string_view function, object;  // object: "path/lib.so+0x1a2b", or empty
};

FrameParts split_frame(std::string_view f) {
  // The location is the last parenthesised group, when it holds "+0x".
  if (f.size() > 2 && f.back() == ')') {
    const size_t open = f.rfind(" (");
    if (open != std::string_view::npos && f.find("+0x", open) != std::string_view::npos)
      return {f.substr(0, open), f.substr(open + 2, f.size() - open - 3)};
  }
  if (f.find("+0x") != std::string_view::npos && f.find(' ') == std::string_view::npos) return {{}, f};
  return {f, {}};
}

std::string_view basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// "ns::f<int>(int, float) const" -> "ns::f<int>"; names without a parameter list stay as they are.
std::string_view without_parameters(std::string_view fn) {
  const size_t close = fn.rfind(')');
  if (close == std::string_view::npos) return fn;
  if (fn.find_first_not_of("abcdefghijklmnopqrstuvwxyz &", close + 1) != std::string_view::npos) return fn;
  int depth = 0;
  for (size_t i = close + 1; i-- > 0;) {
    if (fn[i] == ')')
      ++depth;
    else if (fn[i] == '(' && --depth == 0)
      return i == 0 ? fn : fn.substr(0, i);
  }
  return fn;
}

// ---------------------------------------------------------------------------- merging

void merge(Survey& s, ProcessData&& p) {
  for (const auto& [k, o] : p.ops) s.ops[k].add(o);
  for (auto& [k, v] : p.sites) {
    SiteStats& m = s.sites[k];
    m.add(v);
    m.processes += 1;
  }
  s.processes.push_back(std::move(p.info));
}

// A process without a .folded file: its stacks come from its sites, outermost frame first.
void stacks_from_sites(Survey& s, const ProcessData& p) {
  for (const auto& [k, v] : p.sites) {
    std::vector<std::string> stack;
    for (auto f = k.frames.rbegin(); f != k.frames.rend(); ++f) stack.push_back(frame_name(*f));
    stack.push_back(k.symbol);
    s.stacks[stack] += v.total_ns;
  }
}

// The rank and pid in a tag "r<rank>-<pid>" or "<pid>", for processes known only by their trace.
void fill_from_tag(Process& info) {
  const std::string& t = info.tag;
  size_t pid_at = 0;
  if (t.size() > 1 && t[0] == 'r') {
    const size_t dash = t.find('-');
    if (dash == std::string::npos) return;
    try {
      if (!info.rank) info.rank = std::stoll(t.substr(1, dash - 1));
    } catch (const std::exception&) {
      return;
    }
    pid_at = dash + 1;
  }
  try {
    if (info.pid == 0) info.pid = std::stoll(t.substr(pid_at));
  } catch (const std::exception&) {
  }
}

// Reads one process from its summary or trace.json; throws BadInput.
ProcessData read_process(const std::string& path, bool is_trace, const std::string& tag,
                         std::vector<std::string>& notes) {
  const std::string text = read_file(path);
  ProcessData p = is_trace ? parse_trace(text, tag, notes) : parse_summary(text, tag);
  p.info.path = path;
  if (is_trace) fill_from_tag(p.info);
  return p;
}

// Merges a process into `s`, with its stacks from `folded` when that names a readable file.
void add_process(Survey& s, ProcessData&& p, const std::string& folded) {
  bool have_stacks = false;
  if (!folded.empty()) {
    try {
      size_t bad = 0;
      for (auto& [k, v] : parse_folded(read_file(folded), bad)) s.stacks[k] += v;
      if (bad > 0) s.warnings.push_back(folded + ": " + std::to_string(bad) + " malformed lines skipped");
      have_stacks = true;
    } catch (const BadInput& e) {
      s.warnings.push_back(folded + ": " + e.what() + "; using the summary's sites for the flame graph");
    }
  }
  if (!have_stacks) stacks_from_sites(s, p);
  merge(s, std::move(p));
}

struct TagFiles {
  std::string summary, trace, folded;
};

// Loads one process of a directory: its summary, else its trace.json. A file that cannot be used
// becomes a warning, not an error. Returns false when nothing of the process could be used.
bool load_process(Survey& s, const std::string& tag, const TagFiles& f) {
  std::vector<std::string> notes;
  if (!f.summary.empty()) {
    try {
      add_process(s, read_process(f.summary, false, tag, notes), f.folded);
      return true;
    } catch (const BadInput& e) {
      s.warnings.push_back(f.summary + ": " + e.what() +
                           (f.trace.empty() ? "; skipped" : "; using " + f.trace + " instead"));
    }
  }
  if (f.trace.empty()) return false;
  try {
    add_process(s, read_process(f.trace, true, tag, notes), f.folded);
  } catch (const BadInput& e) {
    s.warnings.push_back(f.trace + ": " + e.what() + "; skipped");
    return false;
  }
  for (const auto& n : notes) s.warnings.push_back(f.trace + ": " + n);
  return true;
}

std::optional<Survey> load_dir(const std::string& path, std::string& error) {
  std::map<std::string, TagFiles> tags;
  size_t sol_files = 0;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("sol-", 0) != 0) continue;
    ++sol_files;
    const std::string full = it->path().string();
    if (auto t = tag_of(name, kSummarySuffix); !t.empty())
      tags[t].summary = full;
    else if (auto t2 = tag_of(name, kTraceSuffix); !t2.empty())
      tags[t2].trace = full;
    else if (auto t3 = tag_of(name, kFoldedSuffix); !t3.empty())
      tags[t3].folded = full;
  }
  if (ec) {
    error = path + ": cannot read directory: " + ec.message();
    return std::nullopt;
  }
  if (sol_files == 0) {
    error = path + ": no sol-* trace files in this directory";
    return std::nullopt;
  }

  Survey s;
  s.path = path;
  size_t candidates = 0;
  for (const auto& [tag, f] : tags) {
    if (f.summary.empty() && f.trace.empty()) continue;  // a .folded alone is not a process
    ++candidates;
    load_process(s, tag, f);
  }
  if (candidates == 0) {
    error = path + ": no sol-*.summary.json or sol-*.trace.json in this directory";
    return std::nullopt;
  }
  if (s.processes.empty()) {
    print_warnings(s);
    error = path + ": none of its " + std::to_string(candidates) + " processes could be read";
    return std::nullopt;
  }
  std::sort(s.processes.begin(), s.processes.end(), [](const Process& a, const Process& b) {
    return std::tie(a.rank, a.pid, a.tag) < std::tie(b.rank, b.pid, b.tag);
  });
  return s;
}

// One file named on the command line: unlike in a directory, a bad file is an error.
std::optional<Survey> load_file(const std::string& path, std::string& error) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  const bool is_trace = ends_with(name, kTraceSuffix);
  const std::string tag = tag_of(name, is_trace ? kTraceSuffix : kSummarySuffix);
  Survey s;
  s.path = path;
  std::vector<std::string> notes;
  try {
    ProcessData data = read_process(path, is_trace, tag, notes);
    // The flame graph wants the .folded written beside the summary.
    const fs::path folded = p.parent_path() / ("sol-" + tag + kFoldedSuffix);
    add_process(s, std::move(data), !tag.empty() && fs::is_regular_file(folded) ? folded.string() : "");
  } catch (const BadInput& e) {
    error = path + ": " + e.what();
    return std::nullopt;
  }
  for (const auto& n : notes) s.warnings.push_back(path + ": " + n);
  return s;
}

}  // namespace

TraceText split_trace(std::string_view t) {
  TraceText out;
  size_t i = 0;
  while (i < t.size() && is_padding(t[i])) ++i;
  if (i < t.size() && t[i] == '{') {
    // The object form, as a process that ended normally leaves it: its events are the array of
    // "traceEvents", which the recorder writes first; "stackFrames" follows.
    const size_t key = t.find("\"traceEvents\"", i);
    i = key == std::string_view::npos ? t.size() : t.find('[', key);
    if (i == std::string_view::npos) i = t.size();
  }
  if (i == t.size() || t[i] != '[')
    throw BadInput("not a Chrome trace (neither an array of events nor an object with traceEvents)");
  ++i;
  while (true) {
    while (i < t.size() && (is_padding(t[i]) || t[i] == ',')) ++i;
    if (i == t.size() || t[i] == ']') break;
    if (t[i] != '{') throw BadInput("unexpected data at byte " + std::to_string(i));
    const size_t end = object_end(t, i);
    if (end == std::string_view::npos) return out;  // the call being written when the process died
    out.events.push_back(t.substr(i, end - i));
    i = end;
  }
  if (i == t.size()) return out;
  // After the array: the stackFrames dictionary, whole or not at all.
  const size_t key = t.find("\"stackFrames\"", i);
  const size_t open = key == std::string_view::npos ? key : t.find('{', key);
  if (open == std::string_view::npos) return out;
  const size_t end = object_end(t, open);
  if (end != std::string_view::npos) out.stack_frames = t.substr(open, end - open);
  return out;
}

std::optional<PythonFrame> python_frame(const std::string& frame) {
  // "qualname (file:line)", as the recorder writes a Python frame; native ones hold "+0x".
  const size_t open = frame.rfind(" (");
  if (open == std::string::npos || frame.size() < open + 5 || frame.back() != ')') return std::nullopt;
  const size_t colon = frame.rfind(':');
  if (colon == std::string::npos || colon < open || colon + 2 >= frame.size()) return std::nullopt;
  const std::string_view line(frame.data() + colon + 1, frame.size() - colon - 2);
  if (line.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  if (frame.find("+0x", open) != std::string::npos) return std::nullopt;
  return PythonFrame{frame.substr(0, open), frame.substr(open + 2, colon - open - 2), std::string(line)};
}

bool library_python_frame(const PythonFrame& p) {
  for (const char* dir : {"/site-packages/", "/dist-packages/", "/lib/python3", "<frozen "})
    if (p.file.find(dir) != std::string::npos) return true;
  return false;
}

std::string frame_name(const std::string& frame) {
  if (auto p = python_frame(frame)) return p->function + " (" + std::string(basename(p->file)) + ":" + p->line + ")";
  const FrameParts parts = split_frame(frame);
  if (!parts.function.empty()) return std::string(without_parameters(parts.function));
  return std::string(basename(parts.object));
}

std::string frame_location(const std::string& frame) {
  if (auto p = python_frame(frame)) return std::string(basename(p->file)) + ":" + p->line;
  return std::string(basename(split_frame(frame).object));
}

void OpStats::add(const OpStats& o) {
  if (o.calls == 0) return;
  min_ns = calls == 0 ? o.min_ns : std::min(min_ns, o.min_ns);
  max_ns = std::max(max_ns, o.max_ns);
  calls += o.calls;
  total_ns += o.total_ns;
  flops += o.flops;
  bytes += o.bytes;
  one_time.add(o.one_time);
}

void SiteStats::add(const SiteStats& o) {
  calls += o.calls;
  total_ns += o.total_ns;
  one_time.add(o.one_time);
  for (const auto& [op, n] : o.ops) ops[op] += n;
  other_calls += o.other_calls;
}

void OneTime::add(const OneTime& o) {
  calls += o.calls;
  ns += o.ns;
  kinds.insert(o.kinds.begin(), o.kinds.end());
  measuring_ns += o.measuring_ns;
}

std::optional<uint64_t> steady_ns(uint64_t calls, uint64_t total_ns, const OneTime& one_time) {
  if (one_time.calls == 0) return total_ns;
  if (calls <= one_time.calls || one_time.ns > total_ns) return std::nullopt;
  const double mean =
      static_cast<double>(total_ns - one_time.ns) / static_cast<double>(calls - one_time.calls);
  return static_cast<uint64_t>(std::llround(mean * static_cast<double>(calls)));
}

uint64_t Survey::calls() const {
  uint64_t n = 0;
  for (const auto& p : processes) n += p.calls;
  return n;
}

uint64_t Survey::traced_ns() const {
  uint64_t n = 0;
  for (const auto& p : processes) n += p.traced_ns;
  return n;
}

OneTime Survey::measuring() const {
  OneTime m;
  for (const auto& [k, st] : ops)
    if (st.one_time.measuring_ns) {
      m.calls += st.one_time.calls;
      m.measuring_ns += st.one_time.measuring_ns;
    }
  return m;
}

void count_measuring_in(Survey& s) {
  const auto in = [](uint64_t& total, OneTime& t) {
    total += t.measuring_ns;
    t.ns += t.measuring_ns;
    t.measuring_ns = 0;
  };
  for (auto& [k, st] : s.ops) {
    in(st.total_ns, st.one_time);
    if (st.calls == 1) st.min_ns = st.max_ns = st.total_ns;  // else: which call measured is unknown
  }
  for (auto& [k, st] : s.sites) in(st.total_ns, st.one_time);
  for (auto& p : s.processes) {
    p.traced_ns += p.measuring_ns;
    p.measuring_ns = 0;
  }
}

std::string measuring_note(const Survey& s, bool counted_in) {
  const OneTime m = s.measuring();
  if (!m.calls) return "";
  return "auto's measuring: " + human_ns(m.measuring_ns) + " in " + std::to_string(m.calls) +
         (m.calls == 1 ? " call, " : " calls, ") +
         (counted_in ? "counted in the op times"
                     : "left out of the op times (--with-measuring counts it in)");
}

uint64_t Survey::wall_ns() const {
  uint64_t first = UINT64_MAX, last = 0, unplaced = 0;
  for (const auto& p : processes) {
    if (p.start_unix_ns == 0) {
      unplaced = std::max(unplaced, p.wall_ns);
      continue;
    }
    first = std::min(first, p.start_unix_ns);
    last = std::max(last, p.start_unix_ns + p.wall_ns);
  }
  return std::max(first == UINT64_MAX ? 0 : last - first, unplaced);
}

size_t Survey::ranks() const {
  std::set<int64_t> r;
  for (const auto& p : processes)
    if (p.rank) r.insert(*p.rank);
  return r.size();
}

std::optional<Survey> load_survey(const std::string& path, std::string& error) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    error = path + ": no such file or directory";
    return std::nullopt;
  }
  if (!fs::is_directory(st)) return load_file(path, error);
  // A trace directory holds one subdirectory per run (run-<id>, each the processes of one
  // launch); older traces, or a run's own directory, hold the files themselves.
  bool files = false;
  std::vector<std::pair<fs::file_time_type, std::string>> runs;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("sol-", 0) == 0) files = true;
    std::error_code e2;
    if (name.rfind("run-", 0) == 0 && it->is_directory(e2)) runs.push_back({fs::last_write_time(it->path(), e2), name});
  }
  if (files || runs.empty()) return load_dir(path, error);
  std::sort(runs.begin(), runs.end());  // the latest last (by time, then name)
  const std::string latest = runs.back().second;
  auto s = load_dir((fs::path(path) / latest).string(), error);
  if (s && runs.size() > 1)
    s->notes.push_back(path + " holds " + std::to_string(runs.size()) + " runs; this is the latest, " + latest +
                       " (name a run's directory for another)");
  return s;
}

uint64_t drop_setup(Survey& s) {
  std::set<std::string> setup, computing;  // symbols
  uint64_t dropped = 0;
  for (auto it = s.ops.begin(); it != s.ops.end();) {
    if (capture::is_setup(it->first.op)) {
      setup.insert(it->first.symbol);
      dropped += it->second.calls;
      it = s.ops.erase(it);
    } else {
      computing.insert(it->first.symbol);
      ++it;
    }
  }
  for (const auto& sym : computing) setup.erase(sym);
  std::erase_if(s.sites, [&](const auto& e) { return setup.count(e.first.symbol) > 0; });
  std::erase_if(s.stacks, [&](const auto& e) { return !e.first.empty() && setup.count(e.first.back()) > 0; });
  return dropped;
}

void print_warnings(const Survey& s) {
  for (const auto& n : s.notes) std::fprintf(stderr, "sol: note: %s\n", n.c_str());
  for (const auto& w : s.warnings) std::fprintf(stderr, "sol: warning: %s\n", w.c_str());
}

}  // namespace sol::tools
