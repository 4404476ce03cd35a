#include "tools/sol/replay_run.hpp"

#include <fcntl.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "capture/alloc/observers.hpp"
#include "capture/dnn/operands.hpp"
#include "capture/exec/executor.hpp"
#include "capture/exec/verify.hpp"
#include "capture/graph/content.hpp"
#include "capture/lazy/coherence.hpp"
#include "capture/lazy/served.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "hal/registry.hpp"
#include "tools/sol/replay_native.hpp"

namespace sol::tools::replay {
namespace {

namespace dnn = capture::dnn;
using capture::DType;
using capture::Node;
using hal::transfers::Cause;
using nlohmann::json;

// ------------------------------------------------------------------------------------ buffers

// Generated contents (benchdnn's method): small multiples of 1/8, so that products and their sums
// stay exact in binary floating point for as long as they can, with both signs, or only positive
// ones where a negative value has no meaning (a variance).
void generate(unsigned char* p, size_t bytes, DType t, bool positive, uint32_t seed) noexcept {
  auto value = [&](size_t i) {
    const int k = static_cast<int>((i * 7 + seed * 3) % 9);
    return positive ? 0.125f * static_cast<float>(k + 1) : 0.125f * static_cast<float>(k - 4);
  };
  switch (t) {
    case DType::f32:
    case DType::c64:
      for (size_t i = 0; i < bytes / 4; ++i) reinterpret_cast<float*>(p)[i] = value(i);
      return;
    case DType::f64:
    case DType::c128:
      for (size_t i = 0; i < bytes / 8; ++i) reinterpret_cast<double*>(p)[i] = value(i);
      return;
    case DType::bf16:
      for (size_t i = 0; i < bytes / 2; ++i) {
        const float f = value(i);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(u >> 16);  // exact for these values
      }
      return;
    case DType::f16: {
      // k/8 for k in -9..9, as binary16 (exact), by table: 1/8 .. 9/8.
      static constexpr uint16_t kHalf[] = {0x3000, 0x3400, 0x3600, 0x3800, 0x3900,
                                           0x3a00, 0x3b00, 0x3c00, 0x3c80};
      for (size_t i = 0; i < bytes / 2; ++i) {
        const int k = static_cast<int>(std::lround(value(i) * 8));
        reinterpret_cast<uint16_t*>(p)[i] =
            k == 0 ? 0 : static_cast<uint16_t>(kHalf[std::abs(k) - 1] | (k < 0 ? 0x8000 : 0));
      }
      return;
    }
    case DType::s32:
      for (size_t i = 0; i < bytes / 4; ++i)
        reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(value(i) * 8);
      return;
    case DType::s8:
    case DType::u8:
      for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(std::abs(value(i) * 8));
      return;
    case DType::none: std::memset(p, 0, bytes); return;
  }
}

// A pass's buffers: each allocated at its record and given back after its last use, page-aligned,
// from SOL's own pages when the lazy executor serves them (so that a device backend may guard
// them, as in a program under libsol).
class Buffers {
 public:
  explicit Buffers(const Graph& g) : g_(g), base_(g.buffers.size(), nullptr), type_(g.buffers.size()) {
    plan();
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  ~Buffers() {
    for (uint32_t id = 1; id <= base_.size(); ++id) release(id);
  }

  unsigned char* at(uint32_t id) const noexcept { return base_[id - 1]; }
  // At buffer `index`'s record: made, its parts' contents moved in, the rest generated.
  bool make(uint32_t index) noexcept;
  // After event `e`: the buffers whose last use it was go.
  void after(size_t e) noexcept {
    for (uint32_t id : frees_[e]) release(id);
  }

 private:
  struct Fill {
    DType dtype = DType::none;
    bool positive = false;
    bool set = false;
  };
  void plan();
  void release(uint32_t id) noexcept;

  const Graph& g_;
  std::vector<unsigned char*> base_;
  std::vector<Fill> type_;
  std::vector<std::vector<uint32_t>> frees_;  // per event
};

// The element type each buffer is first used with, and the last event that uses it.
void Buffers::plan() {
  std::vector<size_t> last(g_.buffers.size(), 0);
  frees_.assign(g_.events.size(), {});
  for (size_t e = 0; e < g_.events.size(); ++e) {
    const Event& ev = g_.events[e];
    if (ev.kind == Event::buffer) {
      last[ev.index] = e;
      for (const auto& p : g_.buffers[ev.index].parts) last[p.buf - 1] = e;
    } else if (ev.kind == Event::input) {
      last[g_.inputs[ev.index].buf - 1] = e;
    } else {
      const NodeRecord& n = g_.nodes[ev.index];
      const Description& d = *g_.descs[n.desc - 1];
      for (size_t i = 0; i < n.ops.size(); ++i) {
        if (!n.ops[i].buf) continue;
        last[n.ops[i].buf - 1] = e;
        Fill& f = type_[n.ops[i].buf - 1];
        if (!f.set) f = {d.operands[i].dtype, d.dnn && d.operands[i].arg == dnn::Arg::variance, true};
      }
    }
  }
  for (size_t id = 1; id <= last.size(); ++id) frees_[last[id - 1]].push_back(static_cast<uint32_t>(id));
}

bool Buffers::make(uint32_t index) noexcept {
  const BufferRecord& b = g_.buffers[index];
  const size_t bytes = std::max<size_t>(b.bytes, 1);
  void* p = capture::lazy::serving() ? capture::lazy::allocate(bytes, false) : nullptr;
  if (!p) p = std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095});
  if (!p) return false;
  auto* base = static_cast<unsigned char*>(p);
  const Fill& f = type_[index];
  generate(base, b.bytes, f.dtype, f.positive, index);
  for (const auto& part : b.parts) {
    const unsigned char* from = at(part.buf);
    if (!from) continue;
    const size_t n = std::min(g_.buffers[part.buf - 1].bytes, b.bytes - part.off);
    capture::lazy::host_access(from, n, false, Cause::host_read);
    std::memcpy(base + part.off, from, n);
  }
  base_[index] = base;
  return true;
}

void Buffers::release(uint32_t id) noexcept {
  unsigned char*& p = base_[id - 1];
  if (!p) return;
  // Given back as a program gives memory back: a device holding a copy drops it, results unwritten.
  if (capture::alloc::observed())
    capture::alloc::notify(p, (g_.buffers[id - 1].bytes + 4095) & ~size_t{4095});
  uintptr_t b, e;
  if (capture::lazy::served_block(p, b, e))
    capture::lazy::release(b);
  else
    std::free(p);
  p = nullptr;
}

// ---------------------------------------------------------------------------- what each node did

// The backends that declined the node being run, and why (the executor's decline listener).
std::vector<std::pair<std::string, hal::Reason>> g_declines;
void note_decline(const char* backend, const Node&, hal::Reason why) noexcept {
  try {
    g_declines.emplace_back(backend, why);
  } catch (...) {
  }
}

// A function's result as the graph records it: one or two reals.
std::vector<double> result_of(const Node& node) {
  const bool dbl = node.dtype == DType::f64 || node.dtype == DType::c128;
  const bool complex = node.dtype == DType::c64 || node.dtype == DType::c128;
  auto real = [&](bool d, size_t i) {
    if (d) {
      double v;
      std::memcpy(&v, node.ret.bytes + i * 8, 8);
      return v;
    }
    float v;
    std::memcpy(&v, node.ret.bytes + i * 4, 4);
    return static_cast<double>(v);
  };
  switch (node.op) {
    case capture::Op::dot:
    case capture::Op::dotu:
    case capture::Op::dotc:
      return complex ? std::vector<double>{real(dbl, 0), real(dbl, 1)} : std::vector<double>{real(dbl, 0)};
    case capture::Op::sdsdot: return {real(false, 0)};
    case capture::Op::dsdot: return {real(true, 0)};
    case capture::Op::asum:
    case capture::Op::nrm2: return {real(dbl, 0)};
    default: return {};
  }
}

bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

// ------------------------------------------------------------------------------------ a replay

// One backend's replay of the graphs, in the process that runs it.
class Replayer {
 public:
  Replayer(Native& native, const std::string& backend, const Options& o)
      : native_(native),
        backend_(backend),
        baseline_(backend == "native"),
        automatic_(backend == "auto"),
        o_(o) {}

  // Each graph `repeat` times: the fastest pass's times, the first pass's checks.
  void run(const std::vector<Graph*>& graphs, BackendResult& out) {
    for (const Graph* g : graphs) {
      std::map<OpKey, OpResult> first, best;
      uint64_t best_ns = UINT64_MAX;
      for (int p = 0; p < o_.repeat; ++p) {
        std::map<OpKey, OpResult> ops;
        const uint64_t ns = pass(*g, p == 0, ops, out);
        if (p == 0) first = ops;
        if (ns < best_ns) best_ns = ns, best = std::move(ops);
      }
      out.seconds += static_cast<double>(best_ns) * 1e-9;
      for (auto& [key, r] : best) {
        const OpResult& f = first[key];
        r.checked = f.checked, r.mismatches = f.mismatches;
        r.hashed = f.hashed, r.reproduced = f.reproduced, r.tolerated = f.tolerated;
        out.ops[key] += r;
        out.all += r;
      }
    }
  }

 private:
  uint64_t pass(const Graph& g, bool first, std::map<OpKey, OpResult>& ops, BackendResult& out);
  uint64_t input(const Graph& g, const Input& in, Buffers& mem) noexcept;
  uint64_t node(const Graph& g, const NodeRecord& n, Buffers& mem, OpResult& op, bool first,
                BackendResult& out);
  void account(const Description& d, const char* ran, bool native_ran, OpResult& op, BackendResult& out);
  enum class Outcome { same, tolerated, differ };
  Outcome compare(const Graph& g, const Description& d, const NodeRecord& n, const Node& node) const;

  static void declined(OpResult& op, const std::string& why) {
    ++op.declined;
    ++op.reasons[why];
  }

  Native& native_;
  std::string backend_;
  bool baseline_, automatic_;
  const Options& o_;
};

uint64_t Replayer::pass(const Graph& g, bool first, std::map<OpKey, OpResult>& ops, BackendResult& out) {
  Buffers mem(g);
  uint64_t ns = 0;
  for (size_t e = 0; e < g.events.size(); ++e) {
    const Event& ev = g.events[e];
    if (ev.kind == Event::buffer) {
      if (!mem.make(ev.index))
        throw std::runtime_error("out of memory for buffer " + std::to_string(ev.index + 1));
    } else if (ev.kind == Event::input) {
      ns += input(g, g.inputs[ev.index], mem);
    } else {
      const NodeRecord& n = g.nodes[ev.index];
      OpResult& op = ops[g.descs[n.desc - 1]->key];
      const uint64_t t = node(g, n, mem, op, first, out);
      op.ns += t;
      ns += t;
    }
    mem.after(e);
  }
  // The work a device still has pending is part of the graph's time.
  const uint64_t t0 = monotonic_ns();
  capture::lazy::sync(Cause::sync);
  return ns + (monotonic_ns() - t0);
}

// An input's bytes into its buffer: what the program's own code had put there. The time the host
// waits for a device that holds that memory (it flushes first) is the graph's; the copy is not.
uint64_t Replayer::input(const Graph& g, const Input& in, Buffers& mem) noexcept {
  if (!g.bytes) return 0;  // no data: generated contents stand in
  unsigned char* p = mem.at(in.buf) + in.off;
  const uint64_t t0 = monotonic_ns();
  capture::lazy::host_access(p, in.bytes, true, Cause::host_write);
  const uint64_t waited = monotonic_ns() - t0;
  std::memcpy(p, g.bytes + in.data, in.bytes);
  return waited;
}

void bind(const Description& d, const NodeRecord& n, const Buffers& mem, Node& node,
          dnn::Call& call) noexcept {
  alignas(64) static unsigned char nothing[64];  // an empty operand's address: never read
  auto at = [&](const Ref& r) -> void* { return r.buf ? mem.at(r.buf) + r.off : nullptr; };
  if (d.dnn) {
    call.desc = d.dnn.get();
    call.rerun_native = &Native::rerun;
    for (size_t i = 0; i < n.ops.size(); ++i) call.data[i] = at(n.ops[i]);
    node.dnn = &call;
    return;
  }
  for (size_t i = 0; i < n.ops.size(); ++i) {
    void* p = at(n.ops[i]);
    node.blas.*(d.operands[i].field) = p ? p : nothing;
  }
}

uint64_t Replayer::node(const Graph& g, const NodeRecord& n, Buffers& mem, OpResult& op, bool first,
                        BackendResult& out) {
  const Description& d = *g.descs[n.desc - 1];
  ++op.calls;
  if (!d.why_not.empty()) return declined(op, d.why_not), 0;
  if (!n.unbound.empty()) return declined(op, "its call was not bound: " + n.unbound), 0;
  for (size_t i = 0; i < n.ops.size(); ++i)
    if (!n.ops[i].buf && d.operands[i].bytes > 0)
      return declined(op, "the program passed no memory for an operand"), 0;
  Node node = d.node;
  dnn::Call call;
  bind(d, n, mem, node, call);
  node.native = native_.symbol(g, d);
  if (baseline_ && !node.native) return declined(op, "the program's library is not here"), 0;
  native_.threads = n.threads;
  native_.prepare(node, n.threads);  // a oneDNN primitive made ahead, as the program made it in a set-up call
  bool native_ran = false;
  auto fallback = [&]() noexcept { native_ran = native_.run(node, d, n.threads); };
  const capture::NativeFn native(fallback);
  g_declines.clear();
  const capture::verify::Totals before = capture::verify::totals();
  const uint64_t t0 = monotonic_ns();
  const char* ran = capture::execute(node, native);
  const uint64_t ns = monotonic_ns() - t0;
  const capture::verify::Totals after = capture::verify::totals();
  account(d, ran, native_ran, op, out);
  if (!first) return ns;
  op.checked += after.checked - before.checked;
  op.mismatches += after.mismatches - before.mismatches;
  // With the program's data, native's results are the program's, bit for bit (see docs/replay.md).
  if (baseline_ && n.hashed && g.bytes && (!g.data_cut_at || n.number < g.data_cut_at) && native_ran) {
    ++op.hashed;
    const Outcome c = compare(g, d, n, node);
    if (c == Outcome::same)
      ++op.reproduced;
    else if (c == Outcome::tolerated)
      ++op.tolerated;
    else if (out.differ.size() < 8)
      out.differ.push_back("node " + std::to_string(n.number) + " of " + g.tag + " (" + d.key.op + " " +
                           d.key.shape + ")");
  }
  return ns;
}

void Replayer::account(const Description& d, const char* ran, bool native_ran, OpResult& op,
                       BackendResult& out) {
  const bool on_native = std::strcmp(ran, "native") == 0;
  bool took;
  if (automatic_)
    took = true;
  else if (baseline_)
    took = on_native && native_ran;
  // oneDNN is DNN nodes' native library: asked for one, the router runs it there (dnn_is_native).
  else
    took = backend_ == ran || (on_native && native_ran && d.dnn && backend_ == "onednn");
  if (!on_native || native_ran) ++out.ran_on[ran];
  if (took) {
    ++op.ran;
    return;
  }
  // Why not: the backend's own decline, else where the executor sent the node instead.
  for (const auto& [b, r] : g_declines)
    if (b == backend_) return declined(op, hal::reason_name(r));
  declined(op, on_native ? (native_ran ? "routed to native" : "nothing here could run it")
                         : std::string("ran on ") + ran);
}

// A node's results against the program's: bit for bit by their hashes; where they differ and
// the program computed them on several threads (it saved their bytes then), within verify's
// tolerance over the elements written.
Replayer::Outcome Replayer::compare(const Graph& g, const Description& d, const NodeRecord& n,
                                    const Node& node) const {
  bool same = true, close = !n.res.empty();
  size_t k = 0;
  for (size_t i = 0; i < d.operands.size(); ++i) {
    if (!n.ops[i].buf || !d.operands[i].written) continue;
    const auto* got =
        static_cast<const unsigned char*>(d.dnn ? node.dnn->data[i] : node.blas.*(d.operands[i].field));
    capture::blas::Operand geometry;
    uint64_t h;
    if (d.dnn) {
      h = capture::graph::content(d.dnn->tensors[i].desc, got);
    } else {
      geometry = d.geometry[i];
      geometry.ptr = const_cast<unsigned char*>(got);
      h = capture::graph::content(geometry, node.dtype);
    }
    if (k < n.out.size() && n.out[k] == h) {
      ++k;
      continue;
    }
    same = false;
    if (!close || k >= n.res.size()) return Outcome::differ;
    const unsigned char* want = g.bytes + n.res[k++];
    const DType dt = d.operands[i].dtype;
    const double depth = d.dnn ? dnn::depth(*d.dnn, d.dnn->tensors[i]) : capture::verify::depth(node);
    auto check = [&](size_t off, size_t bytes) {
      close &= capture::verify::close_enough(got + off, want + off, bytes, dt, depth);
    };
    if (d.dnn)
      capture::graph::each_run(d.dnn->tensors[i].desc, check);
    else
      capture::graph::each_run(geometry, node.dtype, check);
  }
  const std::vector<double> r = result_of(node);
  if (k != n.out.size() || r.size() != n.ret.size()) return Outcome::differ;
  for (size_t i = 0; i < r.size(); ++i)
    if (!same_bits(r[i], n.ret[i])) {
      same = false;
      close &= !n.res.empty() && capture::verify::close_enough(&r[i], &n.ret[i], sizeof(double), DType::f64,
                                                               capture::verify::depth(node));
    }
  return same ? Outcome::same : close ? Outcome::tolerated : Outcome::differ;
}

// ------------------------------------------------------------------------------ the process

std::vector<std::string> loaded_objects() {
  std::vector<std::string> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
        return 0;
      },
      &out);
  return out;
}

// What a replaying process reports to the command, through a pipe.
#define SOL_REPLAY_COUNTS(X) \
  X(calls) X(ran) X(declined) X(ns) X(checked) X(mismatches) X(hashed) X(reproduced) X(tolerated)

json to_json(const OpResult& o) {
  json j = {{"reasons", o.reasons}};
#define SOL_REPLAY_PUT(f) j[#f] = o.f;
  SOL_REPLAY_COUNTS(SOL_REPLAY_PUT)
#undef SOL_REPLAY_PUT
  return j;
}

OpResult op_from_json(const json& j) {
  OpResult o;
#define SOL_REPLAY_GET(f) o.f = j.at(#f).get<uint64_t>();
  SOL_REPLAY_COUNTS(SOL_REPLAY_GET)
#undef SOL_REPLAY_GET
  o.reasons = j.at("reasons").get<std::map<std::string, uint64_t>>();
  return o;
}

json to_json(const BackendResult& r) {
  json ops = json::array();
  for (const auto& [k, o] : r.ops) {
    json op = to_json(o);
    op["key"] = {k.api, k.symbol, k.op, k.dtype, k.shape};
    ops.push_back(std::move(op));
  }
  const auto& t = r.transfers;
  return {{"error", r.error},
          {"seconds", r.seconds},
          {"all", to_json(r.all)},
          {"ran_on", r.ran_on},
          {"device", r.device},
          {"differ", r.differ},
          {"libraries", r.libraries},
          {"notes", r.notes},
          {"ops", ops},
          {"transfers", {t.nodes, t.flush_total(), t.to_device, t.to_host}}};
}

void from_json(const json& j, BackendResult& r) {
  r.error = j.at("error").get<std::string>();
  r.seconds = j.at("seconds").get<double>();
  r.all = op_from_json(j.at("all"));
  r.ran_on = j.at("ran_on").get<std::map<std::string, uint64_t>>();
  r.device = j.at("device").get<bool>();
  r.differ = j.at("differ").get<std::vector<std::string>>();
  r.libraries = j.at("libraries").get<std::vector<std::string>>();
  r.notes = j.at("notes").get<std::vector<std::string>>();
  const json& t = j.at("transfers");
  r.transfers.nodes = t[0].get<uint64_t>();
  r.transfers.flushes[0] = t[1].get<uint64_t>();  // their total; the causes are not reported
  r.transfers.to_device = t[2].get<uint64_t>();
  r.transfers.to_host = t[3].get<uint64_t>();
  for (const json& o : j.at("ops")) {
    const json& k = o.at("key");
    r.ops[OpKey{k[0], k[1], k[2], k[3], k[4]}] = op_from_json(o);
  }
}

// The replaying process: SOL's executor as libsol would set it up for this backend, the graphs run.
BackendResult replay_here(const std::vector<Graph*>& graphs, const std::string& backend, const Options& o,
                          const std::string& scratch) {
  BackendResult out;
  config::Config cfg = config::load();
  cfg.backend = {backend};
  cfg.routes.clear();
  cfg.lazy = o.lazy;
  cfg.verify = o.check && backend != "native";
  cfg.tune = false;  // auto routes by this machine's profile as it is; a replay measures nothing
  cfg.trace = false;
  cfg.trace_log.clear();
  cfg.strict = false;
  cfg.trace_dir = scratch;  // verify's mismatch lines
  log::set_level(cfg.log);
  Native native(graphs, cfg);  // the program's libraries before any backend loads its own
  out.notes = native.notes;
  capture::set_decline_listener(note_decline);
  capture::start_executor(cfg);
  std::string why;
  if (backend != "native" && backend != "auto" && !capture::executor_backend_ready(backend, why)) {
    out.error = backend + " is unavailable: " + (why.empty() ? "it could not be initialised" : why);
    return out;
  }
  out.device = hal::Registry(cfg).device_backend(backend);
  Replayer(native, backend, o).run(graphs, out);
  out.notes = native.notes;
  out.transfers = hal::transfers::totals();
  out.libraries = loaded_objects();
  return out;
}

}  // namespace

OpResult& OpResult::operator+=(const OpResult& o) {
#define SOL_REPLAY_ADD(f) f += o.f;
  SOL_REPLAY_COUNTS(SOL_REPLAY_ADD)
#undef SOL_REPLAY_ADD
  for (const auto& [why, n] : o.reasons) reasons[why] += n;
  return *this;
}

BackendResult replay_on(const std::vector<Graph*>& graphs, const std::string& backend,
                        const Options& options) {
  BackendResult r;
  r.name = backend;
  const char* tmp = std::getenv("TMPDIR");
  std::string scratch = std::string(tmp && *tmp ? tmp : "/tmp") + "/sol-replay-XXXXXX";
  if (!::mkdtemp(scratch.data())) {
    r.error = std::string("cannot make a scratch directory: ") + std::strerror(errno);
    return r;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("cannot make a pipe: ") + std::strerror(errno);
    return r;
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    try {
      text = to_json(replay_here(graphs, backend, options, scratch)).dump();
    } catch (const std::exception& e) {
      BackendResult failed;
      failed.error = e.what();
      text = to_json(failed).dump();
    }
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::write(fds[1], text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    std::fflush(nullptr);
    ::_exit(0);  // no exit handlers: backends and libraries are left as they are
  }
  ::close(fds[1]);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  std::error_code e;
  std::filesystem::remove_all(scratch, e);
  if (pid < 0)
    r.error = std::string("cannot fork: ") + std::strerror(errno);
  else if (WIFSIGNALED(status))
    r.error = "the replaying process died (" + std::string(strsignal(WTERMSIG(status))) + ")";
  else if (text.empty())
    r.error =
        "the replaying process reported nothing (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
  if (!r.error.empty()) return r;
  try {
    from_json(json::parse(text), r);
  } catch (const std::exception& ex) {
    r.error = std::string("cannot read what the replaying process reported: ") + ex.what();
  }
  return r;
}

}  // namespace sol::tools::replay
