#include "tools/sol/replay_graph.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

#include "capture/graph/format.hpp"

namespace sol::tools::replay {
namespace {

namespace fs = std::filesystem;
namespace dnn = capture::dnn;
namespace graph = capture::graph;
using capture::DType;
using capture::Op;
using nlohmann::json;

// A record that does not say what its format says it must: the graph is corrupt there.
struct Corrupt : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The value an enum's name stands for, by the IR's own names.
template <class E, class NameOf>
E by_name(const std::string& name, size_t count, NameOf name_of, const char* what) {
  for (size_t i = 0; i < count; ++i)
    if (name == name_of(static_cast<E>(i))) return static_cast<E>(i);
  throw Corrupt(std::string("unknown ") + what + " '" + name + "'");
}
Op op_of(const std::string& s) {
  return by_name<Op>(s, capture::kNumOps, capture::op_name, "op");
}
DType dtype_of(const std::string& s) {
  return by_name<DType>(s, capture::kNumDTypes, capture::dtype_name, "element type");
}

capture::Sym symbol_of(const std::string& name) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string, capture::Sym>;
    for (size_t i = 0; i < capture::kNumSymbols; ++i)
      m->emplace(capture::symbol_name(static_cast<capture::Sym>(i)), static_cast<capture::Sym>(i));
    return m;
  }();
  auto it = index->find(name);
  if (it == index->end()) throw Corrupt("symbol '" + name + "' is not one this build of SOL intercepts");
  return it->second;
}

// A member that must be there, of the type asked.
const json& need(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw Corrupt(std::string("no \"") + key + "\"");
  return *it;
}
template <class T>
T get(const json& j, const char* key) {
  const json& v = need(j, key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw Corrupt(std::string("\"") + key + "\" is not a string");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw Corrupt(std::string("\"") + key + "\" is not true or false");
  } else {
    if (!v.is_number()) throw Corrupt(std::string("\"") + key + "\" is not a number");
  }
  return v.get<T>();
}
template <class T>
T get_or(const json& j, const char* key, T otherwise) {
  return j.contains(key) && !j[key].is_null() ? get<T>(j, key) : otherwise;
}

// A number as the writer writes it: JSON, or "nan", "inf", "-inf".
double real(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
  }
  throw Corrupt("a number that is not one");
}

capture::Scalar scalar(const json& v) {
  if (v.is_array() && v.size() == 2) return capture::Scalar(real(v[0]), real(v[1]));
  return capture::Scalar(real(v));
}

void blas_args(const json& j, Description& d) {
  capture::BlasArgs& b = d.node.blas;
  const json& a = need(j, "args");
#define SOL_READ_INT(f) b.f = get_or<int64_t>(a, #f, 0);
  SOL_GRAPH_BLAS_INTS(SOL_READ_INT)
#undef SOL_READ_INT
#define SOL_READ_MODE(f)                                                 \
  if (a.contains(#f)) {                                                  \
    const std::string m = get<std::string>(a, #f);                       \
    if (m.size() != 1) throw Corrupt("\"" #f "\" is not one character"); \
    b.f = m[0];                                                          \
  }
  SOL_GRAPH_BLAS_MODES(SOL_READ_MODE)
#undef SOL_READ_MODE
#define SOL_READ_SCALAR(f) \
  if (a.contains(#f)) b.f = scalar(a[#f]);
  SOL_GRAPH_BLAS_SCALARS(SOL_READ_SCALAR)
#undef SOL_READ_SCALAR
  b.real_alpha = get_or<bool>(a, "real_alpha", false);
  if (j.contains("device")) {
    const json& v = j["device"];
    d.device = std::make_unique<capture::DeviceBlas>();
#define SOL_READ_DEV(f) d.device->f = get_or<decltype(d.device->f)>(v, #f, d.device->f);
    SOL_GRAPH_DEVICE_INTS(SOL_READ_DEV)
#undef SOL_READ_DEV
    // A single GEMM or GEMV whose matrices are of the node's own type is a host BLAS call once its
    // operands are host memory: a replay runs it so. Batched and mixed-type calls have no host
    // routine. (cudaDataType: CUDA_R_32F 0, CUDA_R_64F 1, CUDA_C_32F 4, CUDA_C_64F 5.)
    const int own = d.node.dtype == DType::f32   ? 0
                    : d.node.dtype == DType::f64 ? 1
                    : d.node.dtype == DType::c64 ? 4
                                                 : 5;
    auto plain = [&](int32_t t) { return t == -1 || t == own; };
    if (d.device->batch != 0 || !plain(d.device->atype) || !plain(d.device->btype) || !plain(d.device->ctype))
      d.why_not = "a batched or mixed-precision device GEMM, which no host routine computes";
  }
}

// The operands of a BLAS description, by position, from blas::operands of the template with
// stand-in addresses (it lists none without one).
void blas_operands(Description& d) {
  capture::Node probe = d.node;
  alignas(64) static unsigned char stand_in[64];
  for (const char* name : {"a", "b", "c", "x", "y", "param", "ra", "rb", "rc", "rs", "rd1", "rd2", "rx1"})
    probe.blas.*capture::blas::operand_field(name) = stand_in;
  d.geometry.resize(capture::blas::kMaxOperands);
  d.geometry.resize(static_cast<size_t>(capture::blas::operands(probe, d.geometry.data())));
  for (const auto& g : d.geometry)
    d.operands.push_back(
        {capture::blas::operand_field(g.name), g.bytes, g.read, g.written, d.node.dtype, {}});
  if (d.operands.empty() && d.why_not.empty()) d.why_not = "its operand is a scalar the graph does not hold";
  // A call the reference rejects computed nothing (its library reported it): nothing to replay.
  if (!d.device && capture::blas::check(probe).level != capture::blas::ArgError::none)
    d.why_not = "the reference BLAS rejects its arguments";
}

void layout(const json& t, dnn::Layout& l) {
  const json& dims = need(t, "dims");
  const json& padded = need(t, "padded");
  const json& strides = need(t, "strides");
  if (!dims.is_array() || dims.size() > static_cast<size_t>(dnn::kMaxDims) || padded.size() != dims.size() ||
      strides.size() != dims.size())
    throw Corrupt("a tensor's dims, padded dims and strides do not agree");
  l.ndims = static_cast<int>(dims.size());
  for (int i = 0; i < l.ndims; ++i) {
    l.dims[i] = dims[i].get<int64_t>();
    l.padded[i] = padded[i].get<int64_t>();
    l.strides[i] = strides[i].get<int64_t>();
    if (l.dims[i] < 0 || l.padded[i] < l.dims[i] || l.strides[i] < 0)
      throw Corrupt("a tensor of negative size");
  }
  l.offset0 = get<int64_t>(t, "offset0");
  const json& blocks = need(t, "blocks");
  if (!blocks.is_array() || blocks.size() > static_cast<size_t>(dnn::kMaxBlocks))
    throw Corrupt("too many inner blocks");
  l.nblocks = static_cast<int>(blocks.size());
  for (int b = 0; b < l.nblocks; ++b) {
    l.block_dim[b] = static_cast<int8_t>(blocks[b].at(0).get<int>());
    l.block[b] = blocks[b].at(1).get<int64_t>();
    if (l.block_dim[b] < 0 || l.block_dim[b] >= l.ndims || l.block[b] <= 0)
      throw Corrupt("an inner block of no dim");
  }
}

void dnn_tensors(const json& j, dnn::Desc& d) {
  const json& tensors = need(j, "tensors");
  if (!tensors.is_array() || tensors.size() > static_cast<size_t>(dnn::kMaxTensors))
    throw Corrupt("too many tensors");
  for (const json& t : tensors) {
    dnn::Tensor& x = d.tensors[d.ntensors++];
    x.arg = by_name<dnn::Arg>(get<std::string>(t, "arg"), static_cast<size_t>(dnn::Arg::post_op_src) + 1,
                              dnn::arg_name, "tensor role");
    x.index = static_cast<uint8_t>(get<int>(t, "index"));
    x.desc.dtype = dtype_of(get<std::string>(t, "dtype"));
    layout(t, x.desc.layout);
    x.desc.bytes = get<size_t>(t, "bytes");
  }
}

void dnn_desc(const json& j, Description& out) {
  const json& v = need(j, "dnn");
  auto d = std::make_unique<dnn::Desc>();
  d->kind = op_of(get<std::string>(v, "kind"));
  if (std::strcmp(capture::op_family(d->kind), "dnn") != 0)
    throw Corrupt("a DNN description of a kind that is none");
  d->prop = by_name<dnn::Prop>(get<std::string>(v, "prop"), static_cast<size_t>(dnn::Prop::backward) + 1,
                               dnn::prop_name, "propagation");
  d->alg = by_name<dnn::Alg>(get<std::string>(v, "alg"),
                             static_cast<size_t>(dnn::Alg::reduce_norm_lp_power_p_sum) + 1, dnn::alg_name,
                             "algorithm");
  d->dtype = dtype_of(get<std::string>(v, "dtype"));
#define SOL_READ_INT(f) d->f = get<decltype(d->f)>(v, #f);
  SOL_GRAPH_DNN_INTS(SOL_READ_INT)
#undef SOL_READ_INT
#define SOL_READ_FLOAT(f) d->f = static_cast<float>(real(need(v, #f)));
  SOL_GRAPH_DNN_FLOATS(SOL_READ_FLOAT)
#undef SOL_READ_FLOAT
#define SOL_READ_FLAG(f) d->f = get<bool>(v, #f);
  SOL_GRAPH_DNN_FLAGS(SOL_READ_FLAG)
#undef SOL_READ_FLAG
  if (d->nsp < 0 || d->nsp > 3) throw Corrupt("more than 3 spatial dims");
#define SOL_READ_SPATIAL(f)                                         \
  {                                                                 \
    const json& a = need(v, #f);                                    \
    if (!a.is_array() || a.size() != static_cast<size_t>(d->nsp))   \
      throw Corrupt("\"" #f "\" has not nsp entries");              \
    for (int i = 0; i < d->nsp; ++i) d->f[i] = a[i].get<int64_t>(); \
  }
  SOL_GRAPH_DNN_SPATIAL(SOL_READ_SPATIAL)
#undef SOL_READ_SPATIAL
  dnn_tensors(v, *d);
  if (v.contains("sum_scales")) {
    const json& s = v["sum_scales"];
    for (size_t i = 0; i < s.size() && i < static_cast<size_t>(dnn::kMaxTensors); ++i)
      d->sum_scales[i] = static_cast<float>(real(s[i]));
  }
  const json& pos = need(v, "post_ops");
  if (!pos.is_array() || pos.size() > static_cast<size_t>(dnn::kMaxPostOps))
    throw Corrupt("too many post-ops");
  for (const json& p : pos) {
    dnn::PostOp& o = d->post_ops[d->npost_ops++];
    const std::string kind = get<std::string>(p, "kind");
    o.kind = kind == "sum"       ? dnn::PostOp::Kind::sum
             : kind == "eltwise" ? dnn::PostOp::Kind::eltwise
                                 : dnn::PostOp::Kind::binary;
    o.alg = by_name<dnn::Alg>(get<std::string>(p, "alg"),
                              static_cast<size_t>(dnn::Alg::reduce_norm_lp_power_p_sum) + 1, dnn::alg_name,
                              "algorithm");
    o.scale = static_cast<float>(real(need(p, "scale")));
    o.alpha = static_cast<float>(real(need(p, "alpha")));
    o.beta = static_cast<float>(real(need(p, "beta")));
    o.sum_dtype = dtype_of(get<std::string>(p, "sum_dtype"));
  }
  d->flops = real(need(v, "flops"));
  d->bytes = real(need(v, "bytes"));
  d->shape = out.key.shape;
  if (v.contains("unsupported")) {
    out.unsupported = get<std::string>(v, "unsupported");
    d->unsupported = out.unsupported.c_str();  // `out` lives behind a unique_ptr: the string stays put
    out.why_not = "SOL could not describe it for its backends: " + out.unsupported;
  }
  for (int i = 0; i < d->ntensors; ++i) {
    const dnn::Tensor& t = d->tensors[i];
    // The bytes its layout reaches, which a corrupt graph could put past its buffer's end.
    out.operands.push_back(
        {nullptr, dnn::buffer_bytes(t.desc), d->read(t), d->written(t), t.desc.dtype, t.arg});
  }
  out.node = capture::Node(out.node.sym, d->kind, d->dtype);
  out.dnn = std::move(d);
}

std::unique_ptr<Description> parse_desc(const json& j) {
  auto d = std::make_unique<Description>();
  d->key = {get<std::string>(j, "api"), get<std::string>(j, "symbol"), get<std::string>(j, "op"),
            get<std::string>(j, "dtype"), get<std::string>(j, "shape")};
  d->lib = get<uint32_t>(j, "lib");
  const capture::Sym sym = symbol_of(d->key.symbol);
  d->node = capture::Node(sym, capture::symbol_op(sym), capture::symbol_dtype(sym));
  if (std::strcmp(capture::op_family(d->node.op), "dnnl") != 0 && j.contains("args")) {
    d->family = get<std::string>(j, "family");
    if (op_of(d->key.op) != d->node.op) throw Corrupt("a description whose op is not its symbol's");
    blas_args(j, *d);
    blas_operands(*d);
    // Integers of another width than the LP64 routines SOL calls would be misread.
    if (d->family != "lp64" && d->why_not.empty())
      d->why_not = "its name family '" + d->family + "' is not one a replay calls";
  } else if (j.contains("dnn")) {
    dnn_desc(j, *d);
  } else {
    d->why_not = "SOL does not describe it: " + get_or<std::string>(j, "unsupported", "an opaque call");
  }
  return d;
}

Ref ref(const json& v, const Graph& g, const Description::Operand& op) {
  if (v.is_null()) return Ref{};
  if (!v.is_array() || v.size() != 3) throw Corrupt("an operand that is not [buffer, offset, version]");
  Ref r{v[0].get<uint32_t>(), v[1].get<uint64_t>(), v[2].get<uint32_t>()};
  if (r.buf == 0 || r.buf > g.buffers.size()) throw Corrupt("an operand in a buffer the graph has not made");
  if (r.off + op.bytes > g.buffers[r.buf - 1].bytes) throw Corrupt("an operand reaching past its buffer");
  return r;
}

NodeRecord parse_node(const json& j, const Graph& g) {
  NodeRecord n;
  n.number = get<uint64_t>(j, "node");
  n.tid = get<int64_t>(j, "t");
  n.seq = get<uint64_t>(j, "seq");
  n.desc = get<uint32_t>(j, "desc");
  if (n.desc == 0 || n.desc > g.descs.size()) throw Corrupt("a node of a description the graph has not made");
  const Description& d = *g.descs[n.desc - 1];
  const json& ops = need(j, "ops");
  if (!ops.is_array() || ops.size() != d.operands.size())
    throw Corrupt("a node with other operands than its description's");
  for (size_t i = 0; i < ops.size(); ++i) n.ops.push_back(ref(ops[i], g, d.operands[i]));
  n.unbound = get_or<std::string>(j, "unbound", "");
  n.threads = get_or<int>(j, "threads", 0);
  if (j.contains("out")) {
    n.hashed = true;
    for (const json& h : need(j, "out")) n.out.push_back(std::stoull(h.get<std::string>(), nullptr, 16));
    if (j.contains("res"))
      for (const json& at : j["res"]) n.res.push_back(at.get<uint64_t>());
    if (j.contains("ret")) {
      if (j["ret"].is_array())
        for (const json& v : j["ret"]) n.ret.push_back(real(v));
      else
        n.ret.push_back(real(j["ret"]));
    }
  }
  return n;
}

void parse_header(const json& h, Graph& g) {
  g.sol = get<std::string>(h, "sol");
  g.pid = get<int64_t>(h, "pid");
  g.tag = get<std::string>(h, "tag");
  const json& m = need(h, "machine");
  g.host = get<std::string>(m, "host");
  g.cpu = get<std::string>(m, "cpu");
  g.isa = get<std::string>(m, "isa");
  g.cpus = get<int64_t>(m, "cpus");
  g.data = get<bool>(h, "data");
  g.complete = get<bool>(h, "complete");
  g.exit = get_or<std::string>(h, "exit", "");
  g.data_cut_at = get_or<uint64_t>(h, "data_cut_at", 0);
  for (const json& a : need(h, "argv")) g.command += (g.command.empty() ? "" : " ") + a.get<std::string>();
}

// Whether the data file holds the bytes of a node's results that it names.
bool results_there(const NodeRecord& n, const Description& d, const Graph& g) {
  if (n.res.empty() || !g.bytes) return true;
  size_t k = 0;
  for (size_t i = 0; i < d.operands.size(); ++i) {
    if (!n.ops[i].buf || !d.operands[i].written) continue;
    if (k >= n.res.size()) throw Corrupt("a node naming fewer results than it wrote");
    if (n.res[k] < graph::kDataMagicBytes || n.res[k] + d.operands[i].bytes > g.size) return false;
    ++k;
  }
  return true;
}

void parse_buffer(const json& j, Graph& g) {
  if (get<uint32_t>(j, "buf") != g.buffers.size() + 1) throw Corrupt("buffers out of order");
  BufferRecord b{get<uint64_t>(j, "bytes"), {}};
  if (j.contains("parts"))
    for (const json& p : j["parts"]) {
      const uint32_t id = p.at(0).get<uint32_t>();
      if (id == 0 || id > g.buffers.size()) throw Corrupt("a buffer joining one the graph has not made");
      b.parts.push_back({id, p.at(1).get<uint64_t>()});
    }
  g.buffers.push_back(std::move(b));
  g.events.push_back({Event::buffer, static_cast<uint32_t>(g.buffers.size() - 1)});
}

// false: the data file lacks the input's bytes (the process was killed before writing them).
bool parse_input(const json& j, Graph& g) {
  Input in{get<uint32_t>(j, "buf"), get<uint64_t>(j, "off"), get<uint64_t>(j, "bytes"),
           get<uint64_t>(j, "data")};
  if (in.buf == 0 || in.buf > g.buffers.size() || in.off + in.bytes > g.buffers[in.buf - 1].bytes)
    throw Corrupt("an input outside its buffer");
  if (g.bytes && (in.data < graph::kDataMagicBytes || in.data + in.bytes > g.size)) return false;
  g.inputs.push_back(in);
  g.events.push_back({Event::input, static_cast<uint32_t>(g.inputs.size() - 1)});
  return true;
}

// One record, by the key that names its kind. A node also names its description, an input its
// buffer, a description its library: their own keys are looked for first. false: the graph ends
// before this record (an input without its bytes).
bool parse_record(const json& j, Graph& g) {
  if (j.contains("node")) {
    g.nodes.push_back(parse_node(j, g));
    if (!results_there(g.nodes.back(), *g.descs[g.nodes.back().desc - 1], g)) {
      g.nodes.pop_back();
      return false;
    }
    g.events.push_back({Event::node, static_cast<uint32_t>(g.nodes.size() - 1)});
  } else if (j.contains("in")) {
    return parse_input(j, g);
  } else if (j.contains("buf")) {
    parse_buffer(j, g);
  } else if (j.contains("desc")) {
    if (get<uint32_t>(j, "desc") != g.descs.size() + 1) throw Corrupt("descriptions out of order");
    g.descs.push_back(parse_desc(j));
  } else if (j.contains("lib")) {
    g.libs.push_back({get<std::string>(j, "path"), get_or<std::string>(j, "identity", "")});
  } else {
    throw Corrupt("a record of no kind this sol knows");
  }
  return true;
}

// The header line: a graph of this format, or the one-line reason why not.
bool check_header(const std::string& first, Graph& g, std::string& error) {
  const std::string where = g.path + ": ";
  const json h = json::parse(first, nullptr, false);
  if (h.is_discarded() || !h.is_object() || !h.contains("format") || !h["format"].is_string()) {
    error = where + "not a SOL primitive graph (its first line is no graph header)";
    return false;
  }
  const std::string format = h["format"].get<std::string>();
  if (format != graph::kFormat) {
    error = where + (format.rfind("sol-graph/", 0) == 0
                         ? "graph format " + format + " (written by SOL " + h.value("sol", std::string("?")) +
                               "); this sol reads " + graph::kFormat
                         : "not a SOL primitive graph (format '" + format + "')");
    return false;
  }
  try {
    parse_header(h, g);
  } catch (const std::exception& e) {
    error = where + "corrupt header: " + e.what();
    return false;
  }
  return true;
}

void map_data(Graph& g) {
  if (!g.data) return;
  g.data_path = g.path.substr(0, g.path.size() - std::strlen(graph::kSuffix)) + graph::kDataSuffix;
  const int fd = ::open(g.data_path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(graph::kDataMagicBytes)) {
    if (fd >= 0) ::close(fd);
    g.warnings.push_back(g.data_path + " is missing or empty: inputs are generated, not the program's");
    return;
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED || std::memcmp(m, graph::kDataMagic, graph::kDataMagicBytes) != 0) {
    if (m != MAP_FAILED) ::munmap(m, static_cast<size_t>(st.st_size));
    g.warnings.push_back(g.data_path + " is not this graph's data file: inputs are generated");
    return;
  }
  g.bytes = static_cast<const unsigned char*>(m);
  g.size = static_cast<size_t>(st.st_size);
}

}  // namespace

Graph::~Graph() {
  if (bytes) ::munmap(const_cast<unsigned char*>(bytes), size);
}

bool read_graph(const std::string& path, Graph& g, std::string& error) {
  g.path = path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": " + std::strerror(errno);
    return false;
  }
  std::string line;
  if (!std::getline(in, line) || !check_header(line, g, error)) {
    if (error.empty()) error = path + ": not a SOL primitive graph (empty)";
    return false;
  }
  map_data(g);
  size_t number = 1;
  std::string cut;
  while (std::getline(in, line)) {
    ++number;
    if (in.eof()) {  // no newline: the last record was being written when the process stopped
      cut = "its last record is cut short";
      break;
    }
    const json j = json::parse(line, nullptr, false);
    try {
      if (j.is_discarded() || !j.is_object()) throw Corrupt("not a JSON object");
      if (!parse_record(j, g)) {
        cut = "the data file lacks bytes a record names";
        break;
      }
    } catch (const std::exception& e) {
      error = path + ":" + std::to_string(number) + ": corrupt graph: " + e.what();
      return false;
    }
  }
  // Whatever followed the last node is of no use to a replay.
  while (!g.events.empty() && g.events.back().kind != Event::node) g.events.pop_back();
  if (!cut.empty() || !g.complete)
    g.warnings.push_back(path + ": the process did not finish its graph (" +
                         (cut.empty() ? std::string("killed, or still running") : cut) + "): replaying its " +
                         std::to_string(g.nodes.size()) + " complete nodes");
  if (g.data_cut_at)
    g.warnings.push_back(path + ": trace.data_max cut the program's data at node " +
                         std::to_string(g.data_cut_at) + ": later nodes run on generated inputs");
  return true;
}

bool find_graphs(const std::string& run, std::vector<std::string>& paths, std::string& note,
                 std::string& error) {
  std::error_code e;
  const fs::file_status st = fs::status(run, e);
  if (e || !fs::exists(st)) {
    error = run + ": no such file or directory";
    return false;
  }
  if (!fs::is_directory(st)) {
    paths.push_back(run);
    return true;
  }
  auto graphs_in = [&](const fs::path& dir) {
    std::vector<std::string> found;
    for (auto it = fs::directory_iterator(dir, e); !e && it != fs::directory_iterator(); it.increment(e)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("sol-", 0) == 0 && name.size() > std::strlen(graph::kSuffix) &&
          name.compare(name.size() - std::strlen(graph::kSuffix), std::string::npos, graph::kSuffix) == 0)
        found.push_back(it->path().string());
    }
    std::sort(found.begin(), found.end());
    return found;
  };
  paths = graphs_in(run);
  if (paths.empty()) {
    // A trace directory: its latest run.
    std::vector<std::pair<fs::file_time_type, std::string>> runs;
    for (auto it = fs::directory_iterator(run, e); !e && it != fs::directory_iterator(); it.increment(e))
      if (it->path().filename().string().rfind("run-", 0) == 0 && it->is_directory(e))
        runs.push_back({fs::last_write_time(it->path(), e), it->path().string()});
    std::sort(runs.begin(), runs.end());
    if (!runs.empty()) {
      paths = graphs_in(runs.back().second);
      if (runs.size() > 1)
        note = run + " holds " + std::to_string(runs.size()) + " runs; replaying the latest, " +
               runs.back().second;
    }
  }
  if (paths.empty()) {
    error = run + ": no primitive graph (sol-*" + std::string(graph::kSuffix) +
            ") there; a traced run writes one";
    return false;
  }
  return true;
}

}  // namespace sol::tools::replay
