#include "capture/trace/graph_writer.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "capture/alloc/observers.hpp"
#include "capture/graph/content.hpp"
#include "capture/graph/encode.hpp"
#include "capture/graph/format.hpp"
#include "capture/lazy/coherence.hpp"
#include "capture/trace/shape.hpp"
#include "capture/trace/state.hpp"
#include "capture/trace/text.hpp"
#include "common/cpu.hpp"
#include "common/fs_safety.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "config/config.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::trace {
namespace {

using Locked = alloc::QuietLock;  // the free observer (forget) takes the same lock

// Host memory: the operands of a BLAS call on the CPU or of a oneDNN execution, which SOL may read.
// A cuBLAS or cuDNN call's are device addresses: located, never read.
bool host_memory(const Node& node) noexcept {
  return !node.device && (node.api == Api::blas || node.api == Api::cblas || node.api == Api::dnnl);
}

// A BLAS call that the reference would reject computes nothing: no node.
bool valid_blas(const Node& node) noexcept {
  return op_family(node.op)[0] != 'b' || node.device || blas::check(node).level == blas::ArgError::none;
}

constexpr size_t kDataBuffer = size_t{1} << 20;  // inputs smaller than this are gathered first

void hex64(Text& t, uint64_t v) noexcept {
  char d[16];
  for (int i = 15; i >= 0; --i, v >>= 4) d[i] = "0123456789abcdef"[v & 15];
  t.ch('"').raw(d, 16).ch('"');
}

// A function's result as the program got it, exactly: a float or a double (two for complex).
// Nothing for routines without one (iamax's index is no float: its node is compared by its
// operands alone).
void result(const Node& node, Text& t) noexcept {
  const void* at = node.result ? node.result : node.ret.bytes;
  const bool dbl = node.dtype == DType::f64 || node.dtype == DType::c128;
  auto real = [&](bool d, size_t i) {
    if (d) {
      double v;
      std::memcpy(&v, static_cast<const char*>(at) + i * 8, 8);
      t.num(v);
    } else {
      float v;
      std::memcpy(&v, static_cast<const char*>(at) + i * 4, 4);
      t.num(v);
    }
  };
  switch (node.op) {
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
      t.lit(",\"ret\":");
      if (node.dtype == DType::c64 || node.dtype == DType::c128) {
        t.ch('[');
        real(dbl, 0);
        t.ch(',');
        real(dbl, 1);
        t.ch(']');
      } else {
        real(dbl, 0);
      }
      return;
    case Op::sdsdot: t.lit(",\"ret\":"), real(false, 0); return;
    case Op::dsdot: t.lit(",\"ret\":"), real(true, 0); return;
    case Op::asum:
    case Op::nrm2: t.lit(",\"ret\":"), real(dbl, 0); return;
    default: return;
  }
}

// What a thread remembers of its last calls (see desc(), locate()), for the graph of `owner`.
struct ThreadCache {
  uint64_t owner = 0;
  Sym sym{};
  uint32_t desc = 0;
  unsigned char args[offsetof(BlasArgs, a)] = {};
  static constexpr int kPlaces = 4;
  struct Place {
    uintptr_t lo = 0, hi = 0;
    uint64_t gen = 0;
    GraphMemory::Ref ref{};
  } places[kPlaces] = {};
  unsigned next = 0;
};
constinit SOL_TLS ThreadCache t_cache{};
constinit SOL_TLS blas::Operand t_own[blas::kMaxOperands]{};  // a node's BLAS operands, when computed here
std::atomic<uint64_t> g_owners{1};

}  // namespace

// An operand as the graph locates it. Trivial: the per-call path fills only the entries it uses.
struct GraphWriter::Operand {
  void* ptr;
  size_t bytes;
  bool read, written;
  const blas::Operand* blas;      // a BLAS operand's geometry
  const dnn::TensorDesc* tensor;  // a DNN operand's layout
  uint64_t key, content;          // when hashed
  uintptr_t lo() const noexcept { return reinterpret_cast<uintptr_t>(ptr); }
  void set(void* p, size_t n, bool r, bool w, const blas::Operand* b, const dnn::TensorDesc* t) noexcept {
    ptr = n ? p : nullptr;
    bytes = n;
    read = r, written = w, blas = b, tensor = t;
  }
};

struct GraphWriter::Operands {
  Operand at[dnn::kMaxTensors];
  int n = 0;
  DType dtype = DType::none;

  Operands() noexcept {}  // `at` left as it is: collect() fills what it uses

  // The operands of a node in the order its description gives them: a BLAS routine's as
  // blas::operands lists them, a DNN primitive's by tensor (unbound ones empty).
  void collect(const Node& node, const blas::Operand* given, int ngiven) noexcept {
    n = 0;
    dtype = node.dtype;
    if (node.dnn) {
      const dnn::Call& call = *node.dnn;
      const dnn::Desc& d = *call.desc;
      for (int i = 0; i < d.ntensors; ++i) {
        const dnn::Tensor& t = d.tensors[i];
        const bool bound = !call.unbound && call.data[i];
        at[n++].set(call.data[i], bound ? t.desc.bytes : 0, d.read(t), d.written(t), nullptr, &t.desc);
      }
      return;
    }
    if (op_family(node.op)[0] != 'b') return;
    // A BLAS node's operands: the caller's (the recorder has them), or computed here.
    const blas::Operand* ops = given;
    int count = ngiven;
    if (!given) count = blas::operands(node, t_own), ops = t_own;
    for (int i = 0; i < count; ++i)
      at[n++].set(ops[i].ptr, ops[i].bytes, ops[i].read, ops[i].written, &ops[i], nullptr);
  }

  // Hashes the operands read (`reads`) or written, after making host memory valid (a lazy device
  // backend may hold their latest bytes). Outside the writer's lock: this may flush the device.
  void hash(bool reads) noexcept {
    for (int i = 0; i < n; ++i) {
      Operand& o = at[i];
      if (!o.ptr || !(reads ? o.read : o.written)) continue;
      lazy::host_access(o.ptr, o.bytes, false, hal::transfers::Cause::host_read);
      if (o.tensor) {
        o.key = graph::key(*o.tensor, o.ptr);
        o.content = graph::content(*o.tensor, o.ptr);
      } else {
        o.key = graph::key(*o.blas, dtype);
        o.content = graph::content(*o.blas, dtype);
      }
    }
  }
};

void GraphWriter::configure(const config::Config& cfg) noexcept {
  owner_ = g_owners.fetch_add(1, std::memory_order_relaxed) + 1;
  data_ = cfg.trace_data;
  saving_.store(data_, std::memory_order_relaxed);
  data_max_ = static_cast<uint64_t>(cfg.trace_data_max);
  try {
    lib_of_.assign(kNumSymbols, 0);
    scratch_.resize(64 << 10);
  } catch (...) {
    files_.store(Files::unwritable);  // no memory for it: the trace goes on without a graph
  }
}

std::string GraphWriter::header(const State& s, const char* how) const {
  char buf[graph::kHeaderBytes];
  Text t(buf, sizeof buf - 1);
  utsname u{};
  ::uname(&u);
  const cpu::Info& cpu = cpu::info();
  t.lit("{\"format\":\"")
      .str(graph::kFormat)
      .lit("\",\"sol\":\"")
      .str(SOL_VERSION)
      .lit("\",\"pid\":")
      .i64(s.pid);
  t.lit(",\"tag\":").json(s.tag.c_str()).lit(",\"rank\":");
  if (s.rank)
    t.i64(*s.rank);
  else
    t.lit("null");
  t.lit(",\"start_unix_ns\":").u64(s.start_unix_ns).lit(",\"machine\":{\"host\":").json(u.nodename);
  t.lit(",\"os\":").json((std::string(u.sysname) + " " + u.release + " " + u.machine).c_str());
  t.lit(",\"cpu\":").json((cpu.model.empty() ? cpu.vendor : cpu.model).c_str());
  t.lit(",\"isa\":\"").str(cpu::isa_name(cpu.isa)).lit("\",\"cpus\":").i64(cpu.cpus).lit("},\"backend\":");
  t.json(s.backend.c_str()).lit(",\"data\":").boolean(data_).lit(",\"data_max\":").u64(data_max_);
  t.lit(",\"complete\":").boolean(how != nullptr).lit(",\"exit\":");
  if (how)
    t.json(how);
  else
    t.lit("null");
  t.lit(",\"nodes\":").u64(nodes_).lit(",\"inputs\":").u64(inputs_).lit(",\"data_bytes\":").u64(data_bytes_);
  t.lit(",\"data_cut_at\":");
  if (cut_at_)
    t.u64(cut_at_);
  else
    t.lit("null");
  // The command last, as much of it as fits.
  t.lit(",\"argv\":[");
  const size_t room = sizeof buf - 64;
  for (size_t i = 0; i < s.argv.size(); ++i) {
    if (t.size() + s.argv[i].size() * 6 + 8 > room) break;
    (i ? t.ch(',') : t).json(s.argv[i].c_str());
  }
  t.lit("]}");
  std::string line(t.data(), t.size());
  line.resize(graph::kHeaderBytes - 1, ' ');
  return line + '\n';
}

bool GraphWriter::open(const State& s) noexcept {
  if (files_.load() != Files::not_open) return files_.load() == Files::open;
  files_.store(Files::unwritable);
  try {
    std::string error;
    const std::string head = header(s, nullptr);
    if (!file_.open(s.path(graph::kSuffix), head.data(), head.size(), error)) {
      log::write(log::Level::warn, "cannot write the primitive graph (%s); the trace goes on without it",
                 error.c_str());
      return false;
    }
    if (data_) {
      data_fd_ = fs_safety::open_new_private(s.path(graph::kDataSuffix), O_APPEND, error);
      void* m = data_fd_ >= 0
                    ? ::mmap(nullptr, kDataBuffer, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                    : MAP_FAILED;
      if (m == MAP_FAILED) {
        log::write(log::Level::warn, "cannot write the graph's input data (%s); the graph goes on without it",
                   data_fd_ < 0 ? error.c_str() : std::strerror(errno));
        if (data_fd_ >= 0) ::close(data_fd_);
        data_fd_ = -1;
        saving_.store(false, std::memory_order_relaxed);
      } else {
        data_buf_ = static_cast<char*>(m);
        write_data(graph::kDataMagic, graph::kDataMagicBytes);
      }
    }
  } catch (...) {
    return false;
  }
  files_.store(Files::open);
  return true;
}

void GraphWriter::append(const char* data, size_t len) noexcept {
  if (used_ + len > TraceFile::kBlock) {
    flush_data();  // every input a record names is in the data file before the record
    block_ = file_.hand_over(block_, used_);
    used_ = 0;
  }
  if (len > TraceFile::kBlock) return;
  std::memcpy(block_ + used_, data, len);
  used_ += len;
}

void GraphWriter::write_data(const void* p, size_t n) noexcept {
  if (data_used_ + n > kDataBuffer) flush_data();
  if (n >= kDataBuffer) {
    const auto* c = static_cast<const char*>(p);
    for (size_t left = n; left > 0;) {
      const ssize_t w = ::write(data_fd_, c, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // disk full: the replay finds the input missing and stops before it
      c += w;
      left -= static_cast<size_t>(w);
    }
  } else {
    std::memcpy(data_buf_ + data_used_, p, n);
    data_used_ += n;
  }
  data_end_ += n;
}

void GraphWriter::flush_data() noexcept {
  for (size_t done = 0; done < data_used_;) {
    const ssize_t w = ::write(data_fd_, data_buf_ + done, data_used_ - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  data_used_ = 0;
}

uint32_t GraphWriter::lib(const Node& node) {
  uint32_t& slot = lib_of_[static_cast<size_t>(node.sym)];
  if (slot) return slot - 1;
  slot = 1;
  Dl_info info{};
  if (!node.native || !dladdr(node.native, &info) || !info.dli_fname || !*info.dli_fname) return 0;
  const std::string path = info.dli_fname;
  auto [it, added] = libs_.try_emplace(path, static_cast<uint32_t>(libs_.size() + 1));
  if (added) {
    // Its own count of threads, where it has one: results that reduce across threads depend on it.
    int (*count)() = nullptr;
    if (void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
      for (const char* name :
           {"openblas_get_num_threads", "mkl_get_max_threads", "bli_thread_get_num_threads"})
        if (!count) count = reinterpret_cast<int (*)()>(dlsym(h, name));
      dlclose(h);
    }
    lib_threads_.resize(it->second + 1, nullptr);
    lib_threads_[it->second] = count;
    char buf[4096];
    Text t(buf, sizeof buf);
    t.lit("{\"lib\":").u64(it->second).lit(",\"path\":").json(path.c_str());
    t.lit(",\"identity\":").json(file_identity(path).c_str()).lit("}\n");
    if (!t.truncated()) append(t.data(), t.size());
  }
  slot = it->second + 1;
  return it->second;
}

uint32_t GraphWriter::desc(const Node& node) {
  // A host BLAS call with the arguments of this thread's last one: its description, unhashed.
  ThreadCache& c = t_cache;
  constexpr size_t kArgs = offsetof(BlasArgs, a);  // every argument but the operands' addresses
  const bool plain = op_family(node.op)[0] == 'b' && !node.device;
  if (plain && c.owner == owner_ && c.sym == node.sym && std::memcmp(c.args, &node.blas, kArgs) == 0)
    return c.desc;
  const uint32_t id = describe(node);
  if (plain) {
    if (c.owner != owner_) c = ThreadCache{owner_};
    c.sym = node.sym;
    std::memcpy(c.args, &node.blas, kArgs);
    c.desc = id;
  }
  return id;
}

uint32_t GraphWriter::describe(const Node& node) {
  const uint64_t k = graph::description_key(node);
  auto [it, added] = descs_.try_emplace(k, static_cast<uint32_t>(descs_.size() + 1));
  if (!added) return it->second;
  const uint32_t library = lib(node);
  char shape_buf[512];
  Text shape(shape_buf, sizeof shape_buf - 1);
  if (!node.dnn) blas_shape(node, shape);
  shape.ch('\0');
  Text t(scratch_.data(), scratch_.size());
  graph::describe(node, it->second, library, node.dnn ? node.dnn->desc->shape.c_str() : shape.data(), t);
  if (!t.truncated()) append(t.data(), t.size());
  return it->second;
}

// The threads a node is computed with natively, 0 when its library does not say: a oneDNN
// primitive uses the calling thread's OpenMP team (frameworks size it: PyTorch to its own thread
// count), a BLAS library its own count.
int GraphWriter::threads(const Node& node, uint32_t library) noexcept {
  if (node.dnn && node.api == Api::dnnl) {
    static const auto omp = reinterpret_cast<int (*)()>(find_native("omp_get_max_threads"));
    return omp ? omp() : 0;
  }
  if (op_family(node.op)[0] != 'b' || node.device || library >= lib_threads_.size() || !lib_threads_[library])
    return 0;
  return lib_threads_[library]();
}

void GraphWriter::born(const GraphMemory::Born& b) noexcept {
  if (!b.buf) return;
  if (b.parts.empty()) {
    char buf[64];
    Text t(buf, sizeof buf);
    t.lit("{\"buf\":").u64(b.buf).lit(",\"bytes\":").u64(b.bytes).lit("}\n");
    append(t.data(), t.size());
    return;
  }
  // A join, which may name any number of parts: rare enough to be written through a string, in
  // pieces that fit a block.
  try {
    std::string line =
        "{\"buf\":" + std::to_string(b.buf) + ",\"bytes\":" + std::to_string(b.bytes) + ",\"parts\":[";
    for (size_t i = 0; i < b.parts.size(); ++i)
      line += (i ? ",[" : "[") + std::to_string(b.parts[i].buf) + "," + std::to_string(b.parts[i].off) + "," +
              std::to_string(b.parts[i].ver) + "]";
    line += "]}\n";
    for (size_t at = 0; at < line.size(); at += TraceFile::kBlock / 2)
      append(line.data() + at, std::min(line.size() - at, TraceFile::kBlock / 2));
  } catch (...) {  // out of memory: the graph is corrupt from here, which its reader will say
  }
}

// Every operand located; a join made by a later operand moves the earlier ones, so the pass runs
// again until none is made.
void GraphWriter::locate_all(const Operands& ops, GraphMemory::Ref* refs) {
  for (bool joined = true; joined;) {
    joined = false;
    for (int i = 0; i < ops.n; ++i) {
      const Operand& o = ops.at[i];
      if (o.ptr) joined |= locate(o.lo(), o.lo() + o.bytes, refs[i]);
    }
  }
}

// One operand's buffer, through the thread's memory of where its last few operands were (a loop
// passes the same ones call after call), valid while no buffer was made or ended since. true when
// it joined buffers.
bool GraphWriter::locate(uintptr_t lo, uintptr_t hi, GraphMemory::Ref& ref) {
  ThreadCache& c = t_cache;
  const uint64_t gen = memory_.generation();
  for (const auto& p : c.places)
    if (p.lo == lo && p.hi == hi && p.gen == gen && c.owner == owner_) {
      ref = p.ref;
      ref.ver = ref.at->version;
      return false;
    }
  born_.parts.clear();
  ref = memory_.locate(lo, hi, born_);
  born(born_);
  if (c.owner != owner_) c = ThreadCache{owner_};
  c.places[c.next++ % ThreadCache::kPlaces] = {lo, hi, memory_.generation(), ref};
  return !born_.parts.empty();
}

// Whether `bytes` more data fit under trace.data_max; the first time they do not, saving stops and
// the header will say at which node.
bool GraphWriter::room(uint64_t bytes) noexcept {
  if (data_bytes_ + bytes <= data_max_) return true;
  saving_.store(false, std::memory_order_relaxed);
  cut_at_ = nodes_ + 1;
  log::write(log::Level::warn,
             "trace: the graph's data reached trace.data_max (%llu bytes) at node %llu; later nodes "
             "have none",
             static_cast<unsigned long long>(data_max_), static_cast<unsigned long long>(cut_at_));
  return false;
}

bool GraphWriter::save(const Operand& op, const GraphMemory::Ref& ref, uint64_t key, uint64_t content) {
  if (!room(op.bytes)) return false;
  const uint64_t at = data_end_;
  write_data(op.ptr, op.bytes);
  data_bytes_ += op.bytes;
  const uint32_t ver = GraphMemory::bump(ref.at) + 1;
  GraphMemory::learn(ref.at, op.lo(), op.lo() + op.bytes, key, content);
  char buf[256];
  Text t(buf, sizeof buf);
  t.lit("{\"in\":").u64(++inputs_).lit(",\"buf\":").u64(ref.buf).lit(",\"off\":").u64(ref.off);
  t.lit(",\"bytes\":").u64(op.bytes).lit(",\"ver\":").u64(ver).lit(",\"data\":").u64(at).lit("}\n");
  append(t.data(), t.size());
  return true;
}

void GraphWriter::results(const Operands& ops, Text& t) noexcept {
  uint64_t bytes = 0;
  for (int i = 0; i < ops.n; ++i)
    if (ops.at[i].ptr && ops.at[i].written) bytes += ops.at[i].bytes;
  if (!bytes || !room(bytes)) return;
  t.lit(",\"res\":[");
  bool first = true;
  for (int i = 0; i < ops.n; ++i) {
    const Operand& o = ops.at[i];
    if (!o.ptr || !o.written) continue;
    (first ? t : t.ch(',')).u64(data_end_);
    first = false;
    write_data(o.ptr, o.bytes);
  }
  data_bytes_ += bytes;
  t.ch(']');
}

void GraphWriter::before(const State& s, const Node& node) noexcept {
  if (!saving() || !graph::computes(node) || !host_memory(node) || !valid_blas(node)) return;
  Operands ops;
  ops.collect(node, nullptr, 0);
  ops.hash(true);
  try {
    Locked lock(mu_);
    if (!saving() || !open(s)) return;
    GraphMemory::Ref refs[dnn::kMaxTensors];
    locate_all(ops, refs);
    for (int i = 0; i < ops.n && saving(); ++i) {
      const Operand& o = ops.at[i];
      if (!o.ptr || !o.read || GraphMemory::known(refs[i].at, o.key, o.content)) continue;
      save(o, refs[i], o.key, o.content);
    }
  } catch (...) {
    // Out of memory: the input is not saved; the replay runs this node on what it has.
  }
}

void GraphWriter::after(const State& s, const Node& node, const char* backend, uint64_t seq, pid_t tid,
                        const blas::Operand* given, int ngiven) noexcept {
  const Files f = files_.load(std::memory_order_relaxed);
  if (f == Files::closed || f == Files::unwritable ||
      (backend[0] == 'i' && std::strcmp(backend, "invalid") == 0) || !graph::computes(node))
    return;
  // Hashing reads what a call's geometry names: only that of a call the reference would accept.
  // (Without data, such a call is located and left to the replay, which declines it.)
  const bool hashing = saving() && host_memory(node) && valid_blas(node);
  Operands ops;
  ops.collect(node, node.device ? nullptr : given, ngiven);
  if (hashing) ops.hash(false);
  try {
    Locked lock(mu_);
    if (!open(s)) return;
    const uint32_t d = desc(node);
    const int nthreads = threads(node, lib(node));
    GraphMemory::Ref refs[dnn::kMaxTensors];
    locate_all(ops, refs);
    char buf[2048];
    Text t(buf, sizeof buf);
    t.lit("{\"node\":").u64(++nodes_).lit(",\"t\":").i64(tid).lit(",\"seq\":").u64(seq);
    t.lit(",\"desc\":").u64(d).lit(",\"ops\":[");
    for (int i = 0; i < ops.n; ++i) {
      if (i) t.ch(',');
      if (ops.at[i].ptr)
        t.ch('[').u64(refs[i].buf).ch(',').u64(refs[i].off).ch(',').u64(refs[i].ver).ch(']');
      else
        t.lit("null");
    }
    t.ch(']');
    if (nthreads > 0) t.lit(",\"threads\":").i64(nthreads);
    if (node.dnn && node.dnn->unbound) t.lit(",\"unbound\":").json(node.dnn->unbound);
    if (hashing && saving()) {
      t.lit(",\"out\":[");
      bool first = true;
      for (int i = 0; i < ops.n; ++i)
        if (ops.at[i].ptr && ops.at[i].written) {
          if (!first) t.ch(',');
          first = false;
          hex64(t, ops.at[i].content);
        }
      t.ch(']');
      result(node, t);
      // Computed on several threads, a result may depend on how the library split the work: its
      // bytes too, so that a replay can judge one that differs by verify's tolerance.
      if (nthreads > 1) results(ops, t);
    }
    t.lit("}\n");
    // The new versions: one per buffer the node wrote, however many of its operands lie there.
    GraphMemory::Buffer* bumped[dnn::kMaxTensors];
    int nbumped = 0;
    for (int i = 0; i < ops.n; ++i) {
      const Operand& o = ops.at[i];
      if (!o.ptr || !o.written) continue;
      if (std::find(bumped, bumped + nbumped, refs[i].at) == bumped + nbumped) {
        bumped[nbumped++] = refs[i].at;
        GraphMemory::bump(refs[i].at);
      }
      if (hashing)
        GraphMemory::learn(refs[i].at, o.lo(), o.lo() + o.bytes, o.key, o.content);
      else
        GraphMemory::unknown(refs[i].at, o.lo(), o.lo() + o.bytes);
    }
    if (!t.truncated()) append(t.data(), t.size());
  } catch (...) {
    // Out of memory: the node is missing from the graph.
  }
  file_.start_writer();
}

void GraphWriter::forget(const void* p, size_t bytes) noexcept {
  if (!memory_.maybe(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes)) return;
  try {
    Locked lock(mu_);
    memory_.forget(p, bytes);
  } catch (...) {
  }
}

void GraphWriter::finish(const State& s, const char* how) noexcept {
  try {
    Locked lock(mu_);
    if (files_.load() != Files::open) return;
    files_.store(Files::closed);
    if (data_fd_ >= 0) {
      flush_data();
      ::close(data_fd_);
      data_fd_ = -1;
    }
    file_.write(block_, used_);
    used_ = 0;
    const std::string head = header(s, how);
    file_.close("", 0, head.c_str());
  } catch (...) {
  }
}

void GraphWriter::lock_for_fork() noexcept {
  ++alloc::t_quiet;
  mu_.lock();
  file_.lock_for_fork();
}

void GraphWriter::unlock_in_parent() noexcept {
  file_.unlock_in_parent();
  mu_.unlock();
  --alloc::t_quiet;
}

// The child starts a graph of its own (its files are created at its first node): the parent's
// buffers, descriptions and libraries are forgotten, its files left to it.
void GraphWriter::reset_in_child() noexcept {
  file_.reset_in_child();
  file_.abandon();
  if (data_fd_ >= 0) ::close(data_fd_);
  data_fd_ = -1;
  data_used_ = 0;
  data_end_ = 0;
  if (data_buf_) ::munmap(data_buf_, kDataBuffer);
  data_buf_ = nullptr;
  used_ = 0;
  nodes_ = inputs_ = data_bytes_ = cut_at_ = 0;
  saving_.store(data_, std::memory_order_relaxed);
  if (files_.load() != Files::unwritable) files_.store(Files::not_open);
  memory_.clear();
  descs_.clear();
  libs_.clear();
  std::fill(lib_of_.begin(), lib_of_.end(), 0);
  lib_threads_.clear();
  owner_ = g_owners.fetch_add(1, std::memory_order_relaxed) +
           1;  // every thread's memory of the parent's graph goes
  mu_.unlock();
  --alloc::t_quiet;
}

}  // namespace sol::capture::trace
