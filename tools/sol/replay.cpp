// sol replay RUN [--backend LIST] [--repeat N] [--check] [--lazy 0|1] [--format text|json]
//
// Re-runs a traced run's primitive graphs (docs/graph-format.md) through SOL's executor and
// backends, in a process that loads no framework: on native (the program's own libraries, opened
// here) and on each backend of LIST, and prints per op signature and backend the calls, their time,
// the ratio to native and the declines with their reasons; the whole graph's time per backend; a
// device backend's transfers. Manual: docs/replay.md.
//
// JSON (--format json), one object; keys are stable, new keys may be added:
//   {"format": "sol-replay/1", "run": path, "graphs": n, "nodes": n, "inputs": n, "repeat": n,
//    "check": bool, "lazy": bool, "warnings": [str],
//    "backends": {name: {"seconds", "ran", "declined", "ratio" (seconds / native's; null without
//                        native), "reasons": {why: n}, "ran_on": {backend: n}, "checked",
//                        "mismatches", "hashed", "reproduced", "transfers" ({"nodes", "flushes",
//                        "bytes_to_device", "bytes_to_host"}, device backends), "differ": [str],
//                        "libraries": [str], "notes": [str], "error": str|null}},
//    "mismatches": n (with --check; else null),
//    "ops": [{"api", "symbol", "op", "dtype", "shape", "calls",
//             "backends": {name: {"seconds", "ran", "declined", "ratio", "reasons", "checked",
//                                 "mismatches", "hashed", "reproduced"}}}]}
// Exit status: 0; 1 when a backend's replay failed or --check found mismatches; 2 for a bad option
// or a graph that cannot be used (foreign, corrupt, of another format version).
#include <algorithm>
#include <cstdio>
#include <set>

#include "config/config.hpp"
#include "tools/sol/commands.hpp"
#include "tools/sol/output.hpp"
#include "tools/sol/replay_graph.hpp"
#include "tools/sol/replay_run.hpp"

namespace sol::tools {
namespace {

using replay::BackendResult;
using replay::Graph;
using replay::OpKey;
using replay::OpResult;

struct Totals {
  size_t nodes = 0, inputs = 0;
  uint64_t data = 0;
};

Totals totals(const std::vector<std::unique_ptr<Graph>>& graphs) {
  Totals t;
  for (const auto& g : graphs) {
    t.nodes += g->nodes.size();
    t.inputs += g->inputs.size();
    for (const auto& in : g->inputs) t.data += in.bytes;
  }
  return t;
}

const BackendResult* native_of(const std::vector<BackendResult>& results) {
  for (const auto& r : results)
    if (r.name == "native" && r.error.empty()) return &r;
  return nullptr;
}

// seconds / native's, rounded; null when either is missing.
Row ratio_to(double seconds, double native, bool ran) {
  if (!ran || native <= 0 || seconds <= 0) return nullptr;
  return round3(seconds / native);
}

// The op signatures, longest on native first (else on the first backend that ran them).
std::vector<OpKey> op_order(const std::vector<BackendResult>& results) {
  std::map<OpKey, uint64_t> time;
  for (const auto& r : results)
    for (const auto& [k, o] : r.ops)
      if (!time.count(k) || (r.name == "native" && o.ns > 0)) time[k] = o.ns;
  std::vector<OpKey> keys;
  for (const auto& [k, t] : time) keys.push_back(k);
  std::stable_sort(keys.begin(), keys.end(),
                   [&](const OpKey& a, const OpKey& b) { return time[a] > time[b]; });
  return keys;
}

Row op_json(const OpResult& o, const OpResult* native) {
  return {{"seconds", static_cast<double>(o.ns) * 1e-9},
          {"ran", o.ran},
          {"declined", o.declined},
          {"ratio",
           native ? ratio_to(static_cast<double>(o.ns), static_cast<double>(native->ns), o.ran && native->ran)
                  : Row(nullptr)},
          {"reasons", o.reasons},
          {"checked", o.checked},
          {"mismatches", o.mismatches},
          {"hashed", o.hashed},
          {"reproduced", o.reproduced},
          {"tolerated", o.tolerated}};
}

void print_json(const ReplayOptions& opt, const std::vector<std::unique_ptr<Graph>>& graphs,
                const std::vector<BackendResult>& results, const std::vector<std::string>& warnings) {
  const Totals t = totals(graphs);
  const BackendResult* native = native_of(results);
  Row backends = Row::object();
  uint64_t mismatches = 0;
  for (const auto& r : results) {
    const OpResult& a = r.all;
    Row b = {{"seconds", r.seconds},
             {"ran", a.ran},
             {"declined", a.declined},
             {"ratio", native ? ratio_to(r.seconds, native->seconds, a.ran > 0) : Row(nullptr)},
             {"reasons", a.reasons},
             {"ran_on", r.ran_on},
             {"checked", a.checked},
             {"mismatches", a.mismatches},
             {"hashed", a.hashed},
             {"reproduced", a.reproduced},
             {"tolerated", a.tolerated},
             {"differ", r.differ},
             {"libraries", r.libraries},
             {"notes", r.notes},
             {"error", r.error.empty() ? Row(nullptr) : Row(r.error)}};
    if (r.device)
      b["transfers"] = {{"nodes", r.transfers.nodes},
                        {"flushes", r.transfers.flush_total()},
                        {"bytes_to_device", r.transfers.to_device},
                        {"bytes_to_host", r.transfers.to_host}};
    backends[r.name] = std::move(b);
    mismatches += a.mismatches;
  }
  Row ops = Row::array();
  for (const OpKey& k : op_order(results)) {
    Row per = Row::object();
    uint64_t calls = 0;
    const OpResult* n = nullptr;
    if (native)
      if (auto it = native->ops.find(k); it != native->ops.end()) n = &it->second;
    for (const auto& r : results)
      if (auto it = r.ops.find(k); it != r.ops.end()) {
        per[r.name] = op_json(it->second, n);
        calls = std::max(calls, it->second.calls);
      }
    ops.push_back({{"api", k.api},
                   {"symbol", k.symbol},
                   {"op", k.op},
                   {"dtype", k.dtype},
                   {"shape", k.shape},
                   {"calls", calls},
                   {"backends", std::move(per)}});
  }
  Row out = {{"format", "sol-replay/1"},
             {"run", opt.run},
             {"graphs", graphs.size()},
             {"nodes", t.nodes},
             {"inputs", t.inputs},
             {"repeat", opt.repeat},
             {"check", opt.check},
             {"lazy", opt.lazy},
             {"warnings", warnings},
             {"backends", std::move(backends)},
             {"mismatches", opt.check ? Row(mismatches) : Row(nullptr)},
             {"ops", std::move(ops)}};
  std::printf("%s\n", out.dump(2).c_str());
}

// "4.58x", "251x": a ratio for people.
std::string times(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, r < 100 ? "%.2fx" : "%.0fx", r);
  return buf;
}

std::string reasons_text(const std::map<std::string, uint64_t>& reasons) {
  std::string s;
  for (const auto& [why, n] : reasons) s += (s.empty() ? "" : ", ") + why + " " + std::to_string(n);
  return s;
}

// One op's cell for one backend: its time and ratio to native, and how many it declined.
std::string op_cell(const OpResult* o, const OpResult* native) {
  if (!o) return "";
  if (o->ran == 0) return "declined";
  std::string s = human_ns(o->ns);
  if (native && native->ran && native->ns > 0 && o != native)
    s += " (" + times(static_cast<double>(o->ns) / static_cast<double>(native->ns)) + ")";
  if (o->declined) s += ", " + std::to_string(o->declined) + " declined";
  return s;
}

void print_backends(const std::vector<BackendResult>& results, bool check) {
  const BackendResult* native = native_of(results);
  std::vector<std::string> head = {"backend", "graph time", "vs native", "ran", "declined"};
  if (check) head.insert(head.end(), {"checked", "mismatches"});
  TextTable t(head, {true, false, false, false, false, false, false});
  for (const auto& r : results) {
    if (!r.error.empty()) {
      t.add({r.name, "failed"});
      continue;
    }
    const OpResult& a = r.all;
    const std::string vs = native && a.ran && native->seconds > 0 ? times(r.seconds / native->seconds) : "-";
    std::vector<std::string> row = {r.name, human_ns(static_cast<uint64_t>(r.seconds * 1e9)), vs,
                                    std::to_string(a.ran), std::to_string(a.declined)};
    if (check) row.insert(row.end(), {std::to_string(a.checked), std::to_string(a.mismatches)});
    t.add(row);
  }
  t.print(stdout);
  for (const auto& r : results) {
    if (!r.error.empty()) std::printf("  %s: %s\n", r.name.c_str(), r.error.c_str());
    if (r.device && r.error.empty())
      std::printf("  %s: %s\n", r.name.c_str(), hal::transfers::line(r.transfers).c_str());
    const OpResult& a = r.all;
    if (a.hashed) {
      std::printf("  %s reproduced the program's results bit for bit at %llu of %llu nodes", r.name.c_str(),
                  static_cast<unsigned long long>(a.reproduced), static_cast<unsigned long long>(a.hashed));
      if (a.tolerated)
        std::printf("; %llu more, computed on several threads, within verify's tolerance",
                    static_cast<unsigned long long>(a.tolerated));
      std::printf("\n");
      for (const auto& d : r.differ) std::printf("    differs: %s\n", d.c_str());
    }
    for (const auto& n : r.notes) std::printf("  %s: %s\n", r.name.c_str(), n.c_str());
  }
}

void print_text(const ReplayOptions& opt, const std::vector<std::unique_ptr<Graph>>& graphs,
                const std::vector<BackendResult>& results) {
  const Totals t = totals(graphs);
  const Graph& g = *graphs.front();
  std::printf(
      "sol replay: %s: %zu graph%s, %zu nodes, %zu inputs (%s of the program's data); traced by SOL %s on %s "
      "(%s, %s, %lld CPUs): %s\n\n",
      opt.run.c_str(), graphs.size(), graphs.size() == 1 ? "" : "s", t.nodes, t.inputs,
      human_bytes(t.data).c_str(), g.sol.c_str(), g.host.c_str(), g.cpu.c_str(), g.isa.c_str(),
      static_cast<long long>(g.cpus), g.command.c_str());
  print_backends(results, opt.check);
  const BackendResult* native = native_of(results);
  std::vector<std::string> head = {"calls", "op", "dtype", "shape"};
  std::vector<bool> left = {false, true, true, true};
  for (const auto& r : results) head.push_back(r.name), left.push_back(false);
  TextTable ops(head, left);
  for (const OpKey& k : op_order(results)) {
    const OpResult* n = nullptr;
    if (native)
      if (auto it = native->ops.find(k); it != native->ops.end()) n = &it->second;
    std::vector<std::string> row = {"", k.op, k.dtype,
                                    k.shape.size() > 60 ? k.shape.substr(0, 57) + "..." : k.shape};
    uint64_t calls = 0;
    for (const auto& r : results) {
      auto it = r.ops.find(k);
      const OpResult* o = it == r.ops.end() ? nullptr : &it->second;
      if (o) calls = std::max(calls, o->calls);
      row.push_back(op_cell(o, n));
    }
    row[0] = std::to_string(calls);
    ops.add(row);
  }
  std::printf("\n");
  ops.print(stdout);
  for (const auto& r : results)
    if (!r.all.reasons.empty())
      std::printf("  declined by %s: %s\n", r.name.c_str(), reasons_text(r.all.reasons).c_str());
}

}  // namespace

int cmd_replay(const ReplayOptions& opt) {
  std::vector<std::string> paths;
  std::string note, error;
  if (!replay::find_graphs(opt.run, paths, note, error)) return fail(2, error);
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<Graph*> view;
  std::vector<std::string> warnings;
  if (!note.empty()) warnings.push_back(note);
  for (const auto& p : paths) {
    auto g = std::make_unique<Graph>();
    if (!replay::read_graph(p, *g, error)) return fail(2, error);
    warnings.insert(warnings.end(), g->warnings.begin(), g->warnings.end());
    view.push_back(g.get());
    graphs.push_back(std::move(g));
  }
  for (const auto& w : warnings) std::fprintf(stderr, "sol: warning: %s\n", w.c_str());
  replay::Options o;
  o.repeat = static_cast<int>(opt.repeat);
  o.check = opt.check;
  o.lazy = opt.lazy;
  o.backends = {"native"};
  if (!opt.backend.empty()) {
    config::Config list;  // the list as SOL_BACKEND takes it: checked by the command line already
    config::set_from_text(list, config::Key::backend, opt.backend);
    for (const auto& b : list.backend)
      if (std::find(o.backends.begin(), o.backends.end(), b) == o.backends.end()) o.backends.push_back(b);
  }
  std::vector<BackendResult> results;
  int status = 0;
  for (const auto& b : o.backends) {
    results.push_back(replay::replay_on(view, b, o));
    if (!results.back().error.empty()) status = 1;
    if (opt.check && results.back().all.mismatches) status = 1;
  }
  if (opt.format == Format::json)
    print_json(opt, graphs, results, warnings);
  else
    print_text(opt, graphs, results);
  return status;
}

}  // namespace sol::tools
