// Perfetto's trace format is protobuf: a Trace is a sequence of TracePacket messages (field 1).
// Only the few messages written here are encoded, by hand, with their field numbers from
// Perfetto's protos/perfetto/trace/ (trace.proto, trace_packet.proto, track_event/
// track_descriptor.proto, process_descriptor.proto, thread_descriptor.proto, track_event.proto,
// debug_annotation.proto). Everything is on one packet sequence and nothing is interned, so no
// packet needs incremental state; names are written out. Each process's stacks are encoded once
// per site and copied into the events that have them.
#include "tools/sol/perfetto.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/setup.hpp"

namespace sol::tools {
namespace {

using json = nlohmann::json;

// Field numbers.
namespace f {
constexpr uint32_t kTracePacket = 1;                                      // Trace
constexpr uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11;  // TracePacket
constexpr uint32_t kSequenceFlags = 13, kTrackDescriptor = 60;
constexpr uint32_t kUuid = 1, kTrackName = 2, kProcess = 3, kThread = 4, kParentUuid = 5;  // TrackDescriptor
constexpr uint32_t kPid = 1, kProcessName = 6;                                         // ProcessDescriptor
constexpr uint32_t kThreadPid = 1, kTid = 2, kThreadName = 5;                          // ThreadDescriptor
constexpr uint32_t kAnnotations = 4, kType = 9, kTrackUuid = 11, kCategories = 22, kName = 23;  // TrackEvent
constexpr uint32_t kCallstack = 55;
constexpr uint32_t kFrames = 1;                                      // TrackEvent.InlineCallstack
constexpr uint32_t kFunctionName = 1, kSourceFile = 2, kLine = 3;    // its Frame
constexpr uint32_t kBool = 2, kInt = 4, kDouble = 5, kString = 6, kAnnotationName = 10;  // DebugAnnotation
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3;     // TrackEvent.Type
constexpr uint64_t kIncrementalStateCleared = 1;                     // TracePacket.SequenceFlags
}  // namespace f

// A message being encoded.
class Message {
 public:
  Message& varint(uint32_t field, uint64_t v) {
    key(field, 0);
    raw_varint(v);
    return *this;
  }
  Message& sint(uint32_t field, int64_t v) { return varint(field, static_cast<uint64_t>(v)); }  // int64: two's complement
  Message& f64(uint32_t field, double v) {
    key(field, 1);
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(bits >> (8 * i)));
    return *this;
  }
  Message& bytes(uint32_t field, std::string_view b) {
    key(field, 2);
    raw_varint(b.size());
    out_.append(b);
    return *this;
  }
  Message& message(uint32_t field, const Message& m) { return bytes(field, m.out_); }
  const std::string& data() const { return out_; }

 private:
  void key(uint32_t field, uint32_t wire_type) { raw_varint((uint64_t{field} << 3) | wire_type); }
  void raw_varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

// A packet waiting to be written, with what orders it: time, then ends before begins at the same
// time (a slice that ends where the next begins), then the order read.
struct Packet {
  uint64_t ts;
  int rank;  // 0 end, 1 instant, 2 begin
  size_t seq;
  std::string bytes;  // the encoded TracePacket
};

// One stack frame of stackFrames as an InlineCallstack.Frame: a Python frame "function (file:line)"
// gets its file and line; a native one, "function (object+0xoffset)" or "object+0xoffset", is its
// whole name (the object and offset are where it is).
Message frame_message(const std::string& name, const std::string& category) {
  Message m;
  if (category == "python") {
    if (auto p = python_frame(name)) {
      m.bytes(f::kFunctionName, p->function).bytes(f::kSourceFile, p->file);
      try {
        m.varint(f::kLine, std::stoul(p->line));
      } catch (const std::exception&) {
      }
      return m;
    }
  }
  m.bytes(f::kFunctionName, name);
  return m;
}

// The encoded InlineCallstack of each site of a process, from its stackFrames dictionary (id ->
// {name, category, parent}); a site's stack is its node's chain of parents, reversed.
class Stacks {
 public:
  explicit Stacks(std::string_view text) {
    if (text.empty()) return;
    try {
      frames_ = json::parse(text);
    } catch (const std::exception&) {
      frames_ = json::object();
    }
  }
  // "" when the site is unknown.
  const std::string& encoded(const std::string& site) {
    auto [it, fresh] = cache_.try_emplace(site);
    if (!fresh || !frames_.is_object()) return it->second;
    std::vector<const json*> chain;
    for (std::string id = site; chain.size() < 4096;) {
      auto node = frames_.find(id);
      if (node == frames_.end() || !node->is_object()) break;
      chain.push_back(&*node);
      auto parent = node->find("parent");
      if (parent == node->end() || !parent->is_string()) break;
      id = parent->get<std::string>();
    }
    if (chain.empty()) return it->second;
    Message stack;
    for (auto f = chain.rbegin(); f != chain.rend(); ++f)
      stack.message(f::kFrames, frame_message((*f)->value("name", "?"), (*f)->value("category", "")));
    it->second = stack.data();
    return it->second;
  }

 private:
  json frames_ = json::object();
  std::map<std::string, std::string> cache_;
};

Message annotation(const std::string& name, const json& v) {
  Message a;
  a.bytes(f::kAnnotationName, name);
  if (v.is_string()) a.bytes(f::kString, v.get<std::string>());
  else if (v.is_boolean()) a.varint(f::kBool, v.get<bool>());
  else if (v.is_number_integer()) a.sint(f::kInt, v.get<int64_t>());
  else if (v.is_number_unsigned()) a.sint(f::kInt, static_cast<int64_t>(v.get<uint64_t>()));
  else if (v.is_number()) a.f64(f::kDouble, v.get<double>());
  else a.bytes(f::kString, v.dump());
  return a;
}

uint64_t ns_of(const json& us) {
  if (!us.is_number()) return 0;
  const double v = us.get<double>();
  return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v * 1000.0));
}

// Track uuids: a process's, and a thread's within it (tids of device tracks are 2^30 + n).
uint64_t process_uuid(int64_t pid) { return (uint64_t{1} << 62) | static_cast<uint64_t>(pid); }
uint64_t thread_uuid(int64_t pid, int64_t tid) {
  return (uint64_t{1} << 63) | (static_cast<uint64_t>(pid) << 31) | (static_cast<uint64_t>(tid) & 0x7fffffff);
}

Message packet_header(uint64_t ts) {
  Message p;
  p.varint(f::kTimestamp, ts).varint(f::kSequenceId, 1);
  return p;
}

// The trace.json of a process read from its summary: the file beside it.
std::string trace_path(const Process& p) {
  const std::string summary = ".summary.json";
  if (p.source == "trace") return p.path;
  if (p.path.size() > summary.size() && p.path.compare(p.path.size() - summary.size(), summary.size(), summary) == 0)
    return p.path.substr(0, p.path.size() - summary.size()) + ".trace.json";
  return {};
}

// Adds one process's packets; false when its trace cannot be used.
bool add_process(const Process& proc, bool setup, std::vector<Packet>& packets, std::vector<std::string>& warnings) {
  const std::string path = trace_path(proc);
  if (path.empty()) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const bool missing = errno == ENOENT;
    warnings.push_back(path + (missing ? ": no such file" : ": cannot read: " + std::string(std::strerror(errno))) +
                       "; its process is left out of the Perfetto trace");
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  TraceText parts;
  try {
    parts = split_trace(text);
  } catch (const std::exception& e) {
    warnings.push_back(path + ": " + e.what() + "; its process is left out of the Perfetto trace");
    return false;
  }
  Stacks stacks(parts.stack_frames);
  int64_t pid = proc.pid;
  std::string process_name;
  std::map<int64_t, std::string> thread_names;
  size_t bad = 0, seq = packets.size();
  for (const std::string_view text_of_event : parts.events) {
    json ev;
    try {
      ev = json::parse(text_of_event);
    } catch (const std::exception&) {
      ++bad;
      continue;
    }
    const std::string ph = ev.value("ph", "");
    if (ev.contains("pid") && ev["pid"].is_number_integer()) pid = ev["pid"].get<int64_t>();
    const int64_t tid = ev.contains("tid") && ev["tid"].is_number_integer() ? ev["tid"].get<int64_t>() : pid;
    if (ph == "M") {
      const json& args = ev.contains("args") && ev["args"].is_object() ? ev["args"] : json::object();
      const std::string name = args.value("name", "");
      if (ev.value("name", "") == "process_name") process_name = name;
      if (ev.value("name", "") == "thread_name") thread_names[tid] = name;
      continue;
    }
    if (ph != "X" && ph != "i") continue;
    if (!setup && ev.contains("args") && ev["args"].is_object() &&
        capture::is_setup(ev["args"].value("op", "")))
      continue;
    thread_names.try_emplace(tid, "");
    const uint64_t ts = ns_of(ev.value("ts", json()));
    Message event;
    event.varint(f::kType, ph == "X" ? f::kSliceBegin : f::kInstant)
        .varint(f::kTrackUuid, thread_uuid(pid, tid))
        .bytes(f::kName, ev.value("name", "?"));
    if (ev.contains("cat") && ev["cat"].is_string()) event.bytes(f::kCategories, ev["cat"].get<std::string>());
    if (ev.contains("args") && ev["args"].is_object())
      for (const auto& [k, v] : ev["args"].items()) event.message(f::kAnnotations, annotation(k, v));
    if (ev.contains("sf")) {
      const json& sf = ev["sf"];
      const std::string site = sf.is_string() ? sf.get<std::string>() : sf.is_number() ? sf.dump() : "";
      if (const std::string& stack = stacks.encoded(site); !stack.empty()) event.bytes(f::kCallstack, stack);
    }
    packets.push_back({ts, ph == "X" ? 2 : 1, seq++, packet_header(ts).message(f::kTrackEvent, event).data()});
    if (ph == "X") {
      const uint64_t end = ts + ns_of(ev.value("dur", json()));
      Message close;
      close.varint(f::kType, f::kSliceEnd).varint(f::kTrackUuid, thread_uuid(pid, tid));
      packets.push_back({end, 0, seq++, packet_header(end).message(f::kTrackEvent, close).data()});
    }
  }
  if (bad > 0) warnings.push_back(path + ": " + std::to_string(bad) + " malformed events skipped");
  if (pid == 0) return false;

  // The tracks, before every event (timestamp 0).
  Message process;
  process.sint(f::kPid, pid);
  if (!process_name.empty()) process.bytes(f::kProcessName, process_name);
  Message track;
  track.varint(f::kUuid, process_uuid(pid)).message(f::kProcess, process);
  packets.push_back({0, -1, seq++, packet_header(0).message(f::kTrackDescriptor, track).data()});
  for (const auto& [tid, name] : thread_names) {
    Message thread;
    thread.sint(f::kThreadPid, pid).sint(f::kTid, tid);
    if (!name.empty()) thread.bytes(f::kThreadName, name);
    Message t;
    t.varint(f::kUuid, thread_uuid(pid, tid)).varint(f::kParentUuid, process_uuid(pid)).message(f::kThread, thread);
    if (!name.empty()) t.bytes(f::kTrackName, name);
    packets.push_back({0, -1, seq++, packet_header(0).message(f::kTrackDescriptor, t).data()});
  }
  return true;
}

}  // namespace

bool write_perfetto(const Survey& s, const std::string& path, bool setup, std::vector<std::string>& warnings,
                    std::string& error) {
  std::vector<Packet> packets;
  size_t processes = 0;
  for (const Process& p : s.processes) processes += add_process(p, setup, packets, warnings);
  if (processes == 0) {
    error = s.path + ": no process with a trace.json to write to " + path;
    return false;
  }
  std::stable_sort(packets.begin(), packets.end(), [](const Packet& a, const Packet& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.seq < b.seq;
  });
  Message first = packet_header(0);  // clears the sequence's (empty) incremental state
  first.varint(f::kSequenceFlags, f::kIncrementalStateCleared);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  Message wrapper;
  wrapper.message(f::kTracePacket, first);
  out << wrapper.data();
  for (const Packet& p : packets) {
    Message m;
    m.bytes(f::kTracePacket, p.bytes);
    out << m.data();
  }
  out.flush();
  if (!out) {
    error = path + ": cannot write the Perfetto trace";
    return false;
  }
  return true;
}

}  // namespace sol::tools
