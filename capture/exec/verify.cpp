#include "capture/exec/verify.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>

#include "capture/dnn/operands.hpp"
#include "capture/trace/shape.hpp"
#include "capture/trace/text.hpp"
#include "capture/trace/trace.hpp"
#include "common/fs_safety.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::verify {
namespace {

std::atomic<bool> g_on{false};
std::atomic<uint64_t> g_checked{0}, g_mismatches{0};
std::mutex g_file_mu;
int g_fd = -1;
bool g_file_failed = false;
std::string* g_dir = nullptr;  // the trace directory; allocated once, never freed

bool single(DType d) noexcept {
  return d == DType::f32 || d == DType::c64;
}

double epsilon(DType d) noexcept {
  return single(d) ? 1.1920929e-7 : 2.220446049250313e-16;
}

// The tolerance of a result of element type d that ends a sum `depth` terms long, relative to
// the largest magnitude compared.
double tolerance(DType d, double depth) noexcept {
  return 64 * epsilon(d) * depth;
}

}  // namespace

// How long the sums behind each output element are: rounding errors grow with it.
double depth(const Node& node) noexcept {
  const BlasArgs& b = node.blas;
  const double m = static_cast<double>(b.m), n = static_cast<double>(b.n), k = static_cast<double>(b.k);
  switch (node.op) {
    case Op::gemm:
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k: return std::max(1.0, 2 * k);
    case Op::symm:
    case Op::hemm:
    case Op::trmm:
    case Op::trsm: return std::max({1.0, m, n});
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
    case Op::sdsdot:
    case Op::dsdot:
    case Op::asum:
    case Op::nrm2: return std::max(1.0, n);
    default: return std::max({1.0, m, n});
  }
}

namespace {

struct Diff {
  double max_abs = 0;  // largest |got - want|
  double scale = 0;    // largest |want| or |got|: errors are judged relative to it
  bool nan = false;    // one side NaN where the other is not
};

template <class T>
void compare_reals(const T* got, const T* want, size_t count, Diff& d) noexcept {
  for (size_t i = 0; i < count; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::isnan(g) || std::isnan(w)) {
      d.nan |= std::isnan(g) != std::isnan(w);
      continue;
    }
    if (std::isinf(g) || std::isinf(w)) {
      if (g != w) d.nan = true;
      continue;
    }
    d.max_abs = std::max(d.max_abs, std::fabs(g - w));
    d.scale = std::max({d.scale, std::fabs(g), std::fabs(w)});
  }
}

void compare_bytes(const void* got, const void* want, size_t bytes, DType d, Diff& out) noexcept {
  if (single(d))
    compare_reals(static_cast<const float*>(got), static_cast<const float*>(want), bytes / sizeof(float),
                  out);
  else
    compare_reals(static_cast<const double*>(got), static_cast<const double*>(want), bytes / sizeof(double),
                  out);
}

// Function results: the routine's return type by operation and element type.
void compare_result(const Node& node, const Node& ref, Diff& d, bool& exact_mismatch) noexcept {
  switch (node.op) {
    case Op::iamax: exact_mismatch = node.ret.get<int>() != ref.ret.get<int>(); return;
    case Op::dsdot: compare_bytes(node.ret.bytes, ref.ret.bytes, sizeof(double), DType::f64, d); return;
    case Op::sdsdot: compare_bytes(node.ret.bytes, ref.ret.bytes, sizeof(float), DType::f32, d); return;
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
      compare_bytes(node.ret.bytes, ref.ret.bytes, dtype_size(node.dtype), node.dtype, d);
      return;
    case Op::asum:
    case Op::nrm2:
    case Op::cabs1:
      compare_bytes(node.ret.bytes, ref.ret.bytes, single(node.dtype) ? 4 : 8, node.dtype, d);
      return;
    default: return;
  }
}

bool open_file() {
  if (g_fd >= 0) return true;
  if (g_file_failed) return false;
  const std::string& dir = *g_dir;
  for (size_t pos = 1; pos <= dir.size(); ++pos)
    if (pos == dir.size() || dir[pos] == '/') ::mkdir(dir.substr(0, pos).c_str(), 0755);
  const std::string path = dir + "/sol-" + trace::process_tag() + ".verify.jsonl";
  std::string error;
  g_fd = fs_safety::open_new_private(path, O_APPEND, error);  // never through a link planted in a shared dir
  if (g_fd < 0) {
    g_file_failed = true;
    log::write(log::Level::warn, "verify: cannot write %s (%s); mismatches are only counted", path.c_str(),
               error.c_str());
    return false;
  }
  return true;
}

void record_mismatch(const Node& node, const char* backend, const char* against, const char* operand,
                     const Diff& d, double tolerance, bool exact) noexcept {
  const uint64_t n = g_mismatches.fetch_add(1, std::memory_order_relaxed) + 1;
  char buf[2048], shape_buf[512], params_buf[256];
  trace::Text shape(shape_buf, sizeof shape_buf), params(params_buf, sizeof params_buf);
  trace::blas_shape(node, shape);
  trace::blas_params(node, params);
  trace::Text line(buf, sizeof buf);
  line.lit("{\"mismatch\":").u64(n).lit(",\"symbol\":\"").str(symbol_name(node.sym)).lit("\",\"op\":\"");
  line.str(op_name(node.op)).lit("\",\"dtype\":\"").str(dtype_name(node.dtype)).lit("\",\"shape\":\"");
  line.raw(shape.data(), shape.size()).lit("\",\"params\":\"").raw(params.data(), params.size());
  line.lit("\",\"backend\":\"").str(backend).lit("\",\"against\":\"").str(against);
  line.lit("\",\"operand\":\"").str(operand).lit("\",\"max_abs_err\":").num(d.max_abs);
  line.lit(",\"max_rel_err\":").num(d.scale > 0 ? d.max_abs / d.scale : (d.max_abs > 0 ? 1.0 : 0.0));
  line.lit(",\"nan_mismatch\":")
      .boolean(d.nan)
      .lit(",\"exact_mismatch\":")
      .boolean(exact);
  line.lit(",\"tolerance\":").num(tolerance).lit("}\n");
  SOL_LOG(debug, "verify: %s on %s differs from %s in %s (max abs error %g)", symbol_name(node.sym), backend,
          against, operand, d.max_abs);
  std::lock_guard<std::mutex> lock(g_file_mu);
  if (open_file() && ::write(g_fd, line.data(), line.size()) < 0) {
    // Counted anyway; the line on stderr at exit still reports it.
  }
}

void record_dnn_mismatch(const Node& node, const char* backend, const char* tensor, const Diff& d,
                         double tolerance) noexcept {
  const uint64_t n = g_mismatches.fetch_add(1, std::memory_order_relaxed) + 1;
  const dnn::Desc& desc = *node.dnn->desc;
  char buf[2048];
  trace::Text line(buf, sizeof buf);
  line.lit("{\"mismatch\":").u64(n).lit(",\"symbol\":\"").str(symbol_name(node.sym)).lit("\",\"op\":\"");
  line.str(op_name(node.op)).lit("\",\"dtype\":\"").str(dtype_name(node.dtype)).lit("\",\"shape\":");
  line.json(desc.shape.c_str());
  line.lit(",\"backend\":\"").str(backend).lit("\",\"against\":\"native");
  line.lit("\",\"operand\":\"").str(tensor).lit("\",\"max_abs_err\":").num(d.max_abs);
  line.lit(",\"max_rel_err\":").num(d.scale > 0 ? d.max_abs / d.scale : (d.max_abs > 0 ? 1.0 : 0.0));
  line.lit(",\"nan_mismatch\":").boolean(d.nan).lit(",\"exact_mismatch\":false");
  line.lit(",\"tolerance\":").num(tolerance).lit("}\n");
  SOL_LOG(debug, "verify: %s on %s differs from native in %s (max abs error %g)", op_name(node.op), backend,
          tensor, d.max_abs);
  std::lock_guard<std::mutex> lock(g_file_mu);
  if (open_file() && ::write(g_fd, line.data(), line.size()) < 0) {
    // Counted anyway; the line on stderr at exit still reports it.
  }
}

}  // namespace

void start(const config::Config& cfg) noexcept {
  if (!cfg.verify) return;
  try {
    g_dir = new std::string(cfg.trace_dir);
  } catch (...) {
    return;
  }
  g_on.store(true, std::memory_order_release);
}

bool enabled() noexcept {
  return g_on.load(std::memory_order_relaxed);
}

bool Snapshot::take(const Node& node) noexcept {
  return copies_.take(node);
}

void Snapshot::check(const Node& node, const char* backend, const char* against,
                     blas::FunctionRef<hal::Reason(Node&)> run) noexcept {
  // The same call on the copies: written operands point into them, results stay in the node.
  Node& ref = copies_.node();
  if (blas::with_column_major(ref, run) != hal::Reason::ok) {
    SOL_LOG(debug, "verify: %s could not run %s; not checked", against, symbol_name(node.sym));
    return;
  }
  g_checked.fetch_add(1, std::memory_order_relaxed);
  const double tolerance = verify::tolerance(node.dtype, depth(node));
  for (const auto& c : copies_) {
    Diff d;
    const DType dt = (node.op == Op::dsdot || node.op == Op::sdsdot) ? DType::f32 : node.dtype;
    compare_bytes(c.op.ptr, c.copy, c.op.bytes, dt, d);
    if (d.nan || d.max_abs > tolerance * d.scale) {
      record_mismatch(node, backend, against, c.op.name, d, tolerance, false);
      return;
    }
  }
  Diff d;
  bool exact = false;
  compare_result(node, ref, d, exact);
  if (exact || d.nan || d.max_abs > tolerance * d.scale)
    record_mismatch(node, backend, against, "result", d, tolerance, exact);
}

bool DnnSnapshot::take(const Node& node) noexcept {
  const dnn::Call& call = *node.dnn;
  const dnn::Desc& d = *call.desc;
  if (!call.rerun_native) return false;
  for (int i = 0; i < d.ntensors; ++i)
    if (d.tensors[i].arg == dnn::Arg::workspace && d.read(d.tensors[i])) return false;
  try {
    for (int i = 0; i < d.ntensors; ++i) {
      if (!d.written(d.tensors[i]) || !call.data[i]) continue;
      const auto* p = static_cast<const unsigned char*>(call.data[i]);
      copies_.emplace_back(p, p + d.tensors[i].desc.bytes);
      tensor_.push_back(i);
    }
    return true;
  } catch (...) {
    copies_.clear();
    tensor_.clear();
    return false;
  }
}

void DnnSnapshot::check(const Node& node, const char* backend) noexcept {
  const dnn::Call& call = *node.dnn;
  const dnn::Desc& d = *call.desc;
  void* data[dnn::kMaxTensors];
  for (int i = 0; i < d.ntensors; ++i) data[i] = call.data[i];
  for (size_t c = 0; c < copies_.size(); ++c) data[tensor_[c]] = copies_[c].data();
  if (!call.rerun_native(call, data)) {
    SOL_LOG(debug, "verify: native could not run %s; not checked", op_name(node.op));
    return;
  }
  g_checked.fetch_add(1, std::memory_order_relaxed);
  for (size_t c = 0; c < copies_.size(); ++c) {
    const dnn::Tensor& t = d.tensors[tensor_[c]];
    // A workspace is private to whoever wrote it; only f32 results are compared.
    if (t.arg == dnn::Arg::workspace || t.desc.dtype != DType::f32) continue;
    Diff diff;
    compare_bytes(call.data[tensor_[c]], copies_[c].data(), copies_[c].size(), DType::f32, diff);
    const double tolerance = verify::tolerance(DType::f32, dnn::depth(d, t));
    if (diff.nan || diff.max_abs > tolerance * diff.scale) {
      record_dnn_mismatch(node, backend, dnn::arg_name(t.arg), diff, tolerance);
      return;
    }
  }
}

bool close_enough(const void* got, const void* want, size_t bytes, DType dtype, double depth) noexcept {
  Diff d;
  compare_bytes(got, want, bytes, dtype, d);
  return !d.nan && d.max_abs <= tolerance(dtype, depth) * d.scale;
}

Totals totals() noexcept {
  return Totals{g_checked.load(std::memory_order_relaxed), g_mismatches.load(std::memory_order_relaxed)};
}

void finish() noexcept {
  if (!enabled()) return;
  const uint64_t checked = g_checked.load(), mismatches = g_mismatches.load();
  if (checked == 0 && mismatches == 0) return;
  log::write(mismatches ? log::Level::error : log::Level::warn, "verify: %llu checked, %llu mismatches",
             static_cast<unsigned long long>(checked), static_cast<unsigned long long>(mismatches));
  std::lock_guard<std::mutex> lock(g_file_mu);
  if (g_fd >= 0) ::close(g_fd);
  g_fd = -1;
}

void reset_after_fork() noexcept {
  g_checked.store(0);
  g_mismatches.store(0);
  new (&g_file_mu) std::mutex;  // a lock held by a thread that does not exist in the child
  if (g_fd >= 0) ::close(g_fd);
  g_fd = -1;
  g_file_failed = false;
}

}  // namespace sol::capture::verify
