// sol backends: each backend, available or why not, what runs the work, and which routines it takes.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "capture/blas/call.hpp"
#include "capture/blas/libraries.hpp"
#include "common/human.hpp"
#include "config/config.hpp"
#include "hal/registry.hpp"
#include "ir/dnn.hpp"
#include "tools/sol/commands.hpp"
#include "tools/sol/native_blas.hpp"

namespace sol::tools {
namespace {

using capture::Sym;

// A small, valid node of a Fortran routine, to ask supports() about; never run.
capture::Node probe_node(Sym routine) {
  static double buffer[64];
  capture::Node n(routine, capture::symbol_op(routine), capture::symbol_dtype(routine));
  auto& b = n.blas;
  b.layout = 'C';
  b.transa = b.transb = 'N';
  b.uplo = 'U';
  b.side = 'L';
  b.diag = 'N';
  b.m = b.n = b.k = 4;
  b.kl = b.ku = 1;
  b.lda = b.ldb = b.ldc = 4;
  b.incx = b.incy = 1;
  b.alpha = b.beta = b.cs = b.sn = b.ry1 = capture::Scalar(1.0);
  for (void** p :
       {&b.a, &b.b, &b.c, &b.x, &b.y, &b.param, &b.ra, &b.rb, &b.rc, &b.rs, &b.rd1, &b.rd2, &b.rx1})
    *p = buffer;
  return n;
}

// The Fortran routines (sgemm_ ...), each with its real-alpha flag.
std::vector<std::pair<Sym, bool>> routines() {
  std::vector<std::pair<Sym, bool>> out;
  for (size_t i = 0; i < capture::kNumSymbols; ++i) {
    const Sym s = static_cast<Sym>(i);
    const std::string name = capture::symbol_name(s);
    if (capture::symbol_api(s) != capture::Api::blas || name.back() != '_' ||
        (name.size() > 4 && name.compare(name.size() - 4, 4, "sub_") == 0))
      continue;
    const capture::Node n = probe_node(s);
    for (bool real : {false, true})
      if (capture::blas::fortran_routine(n.op, n.dtype, real) == s) {
        out.emplace_back(s, real);
        break;
      }
  }
  return out;
}

// "takes 140 of 148 BLAS routines:", "gemm (f32 f64 c64 c128)", "axpy (f32)"...: what a backend
// takes, grouped by operation, as items to wrap.
std::vector<std::string> coverage(const hal::Backend& backend, size_t total) {
  std::map<std::string, std::vector<std::string>> by_op;
  std::vector<std::string> order;
  size_t count = 0;
  for (const auto& [routine, real] : routines()) {
    capture::Node n = probe_node(routine);
    n.blas.real_alpha = real;
    if (backend.supports(n) != hal::Reason::ok) continue;
    ++count;
    const std::string op = capture::op_name(n.op);
    if (!by_op.count(op)) order.push_back(op);
    by_op[op].push_back(std::string(capture::dtype_name(n.dtype)) + (real ? "/real-alpha" : ""));
  }
  if (count == total)
    return {"takes all " + std::to_string(total) + " BLAS routines (levels 1-3; f32 f64 c64 c128)"};
  if (count == 0) return {"takes no BLAS routine"};
  std::vector<std::string> items = {"takes " + std::to_string(count) + " of " + std::to_string(total) +
                                    " BLAS routines:"};
  for (const auto& op : order) {
    std::string item = op + " (";
    for (size_t i = 0; i < by_op[op].size(); ++i) item += (i ? " " : "") + by_op[op][i];
    items.push_back(item + ")");
  }
  return items;
}

// A small, consistent forward DNN node of `kind` (f32, plain layouts), to ask supports() about.
struct DnnProbe {
  capture::dnn::Desc desc;
  capture::dnn::Call call;
  float buffer[1024] = {};

  explicit DnnProbe(capture::Op kind) {
    namespace dnn = capture::dnn;
    desc.kind = kind;
    desc.dtype = capture::DType::f32;
    desc.prop = dnn::Prop::forward_inference;
    const bool nd_data = kind != capture::Op::matmul;
    auto add = [&](dnn::Arg arg, std::vector<int64_t> dims, int index = 0) {
      dnn::Tensor& t = desc.tensors[desc.ntensors];
      t.arg = arg;
      t.index = static_cast<uint8_t>(index);
      t.desc.dtype = capture::DType::f32;
      t.desc.layout.ndims = static_cast<int>(dims.size());
      int64_t stride = 1;
      for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
        t.desc.layout.dims[d] = t.desc.layout.padded[d] = dims[static_cast<size_t>(d)];
        t.desc.layout.strides[d] = stride;
        stride *= dims[static_cast<size_t>(d)];
      }
      t.desc.bytes = static_cast<size_t>(stride) * sizeof(float);
      call.data[desc.ntensors++] = buffer;
    };
    const std::vector<int64_t> data = nd_data ? std::vector<int64_t>{1, 4, 4, 4} : std::vector<int64_t>{4, 4};
    desc.nsp = 2;
    switch (kind) {
      case capture::Op::convolution:
      case capture::Op::deconvolution:
        desc.alg = dnn::Alg::direct;
        add(dnn::Arg::src, data), add(dnn::Arg::weights, {4, 4, 1, 1}), add(dnn::Arg::dst, data);
        break;
      case capture::Op::inner_product:
        add(dnn::Arg::src, data), add(dnn::Arg::weights, {4, 4, 4, 4}), add(dnn::Arg::dst, {1, 4});
        break;
      case capture::Op::matmul: add(dnn::Arg::src, data), add(dnn::Arg::weights, data), add(dnn::Arg::dst, data); break;
      case capture::Op::prelu: add(dnn::Arg::src, data), add(dnn::Arg::weights, data), add(dnn::Arg::dst, data); break;
      case capture::Op::binary:
        desc.alg = dnn::Alg::add;
        add(dnn::Arg::src, data), add(dnn::Arg::src1, data), add(dnn::Arg::dst, data);
        break;
      case capture::Op::sum:
        desc.prop = dnn::Prop::none;
        desc.sum_scales[0] = desc.sum_scales[1] = 1;
        add(dnn::Arg::multi_src, data, 0), add(dnn::Arg::multi_src, data, 1), add(dnn::Arg::dst, data);
        break;
      case capture::Op::concat:
        desc.prop = dnn::Prop::none;
        desc.axis = 1;
        add(dnn::Arg::multi_src, data, 0), add(dnn::Arg::multi_src, data, 1), add(dnn::Arg::dst, {1, 8, 4, 4});
        break;
      default:
        desc.alg = kind == capture::Op::eltwise      ? dnn::Alg::relu
                   : kind == capture::Op::pooling    ? dnn::Alg::pool_max
                   : kind == capture::Op::lrn        ? dnn::Alg::lrn_across
                   : kind == capture::Op::resampling ? dnn::Alg::nearest
                   : kind == capture::Op::reduction  ? dnn::Alg::reduce_sum
                                                     : dnn::Alg::none;
        desc.axis = 1;
        desc.group_size = 1;
        desc.local_size = 1;
        if (kind == capture::Op::reorder) desc.prop = dnn::Prop::none;
        add(dnn::Arg::src, data), add(dnn::Arg::dst, data);
        break;
    }
    call.desc = &desc;
  }
};

// "convolution pooling ...": the DNN kinds a backend takes (forward, f32, plain layouts).
std::string dnn_coverage(const hal::Backend& backend) {
  if (backend.dnn_is_native()) return "DNN nodes it is given run on the program's own oneDNN";
  std::string kinds;
  for (size_t i = 0; i < capture::kNumOps; ++i) {
    const auto op = static_cast<capture::Op>(i);
    if (std::string(capture::op_family(op)) != "dnn" || op == capture::Op::rnn) continue;
    auto probe = std::make_unique<DnnProbe>(op);
    capture::Node n(Sym::dnnl_primitive_execute, op, capture::DType::f32);
    n.dnn = &probe->call;
    if (backend.supports(n) == hal::Reason::ok) kinds += (kinds.empty() ? "" : " ") + std::string(capture::op_name(op));
  }
  return kinds.empty() ? "no DNN node" : "DNN nodes (f32): " + kinds;
}

// What a program started from here would get as its native library.
std::string system_library(const char* soname, const char* marker) {
  void* lib = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return std::string(soname) + ": not installed";
  std::string path = soname;
  if (void* any = dlsym(lib, marker)) {
    Dl_info info{};
    if (dladdr(any, &info) && info.dli_fname) path = info.dli_fname;
  }
  std::string what = path;
  if (auto cfg = reinterpret_cast<const char* (*)()>(dlsym(lib, "openblas_get_config")))
    what += " (" + std::string(cfg()) + ")";
  return what;
}

// The BLAS and oneDNN names this process's libraries define, per name family: the system's BLAS
// libraries (each loaded here as a program linked to it would load it) and those named with --load.
// false when one of those cannot be loaded.
bool print_name_families(const std::vector<std::string>& load) {
  bool ok = true;
  for (const char* soname : {"libblas.so.3", "libcblas.so.3", "libblas64.so.3", "libopenblas.so.0",
                             "libopenblas64.so.0", "libdnnl.so.2"})
    dlopen(soname, RTLD_LAZY | RTLD_LOCAL);  // absent ones are simply not listed
  for (const std::string& lib : load) {
    if (dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL)) continue;
    const char* e = dlerror();
    std::fprintf(stderr, "sol: --load %s: %s\n", lib.c_str(), e ? e : "cannot be loaded");
    ok = false;
  }
  std::printf("\nBLAS names by family in this process's libraries (--load LIB adds one):\n");
  using namespace capture::blas;
  for (const Library& lib : survey(kNames | kWidths | kOwn)) {
    std::string families;
    for (size_t f = 1; f < capture::kNumFamilies; ++f) {
      const auto family = static_cast<capture::Family>(f);
      if (!lib.names[f]) continue;
      const int bits = family == capture::Family::plain ? lib.plain_bits : capture::family_bits(family);
      families += (families.empty() ? "" : ", ") + std::string(capture::family_name(family)) + " " +
                  std::to_string(lib.names[f]) + (bits ? " (" + std::to_string(bits) + "-bit)" : "");
    }
    if (lib.dnnl_names)
      families += (families.empty() ? "" : ", ") + ("oneDNN " + std::to_string(lib.dnnl_names));
    if (families.empty()) families = "no intercepted name";
    std::printf("  %s: %s; %s code%s\n", lib.path.c_str(), families.c_str(), lib.code,
                lib.own ? " (loaded by a SOL backend)" : "");
  }
  std::printf("  the families:\n");
  for (size_t f = 1; f < capture::kNumFamilies; ++f) {
    const auto family = static_cast<capture::Family>(f);
    std::printf("    %-10s %s\n", capture::family_name(family), capture::family_what(family));
  }
  return ok;
}

}  // namespace

int cmd_backends(const BackendsOptions& options) {
  const config::Config cfg = config::load();
  for (const auto& p : cfg.problems) std::fprintf(stderr, "sol: %s\n", p.c_str());
  hal::Registry registry(cfg);
  const size_t total = routines().size();

  // The backends first: probing the system's libraries below loads them into this process. Built as
  // strings: the list of routines can be longer than any fixed buffer. At a terminal the lists
  // wrap, indented under the line they continue; into a pipe each stays one line, for programs.
  const size_t columns = terminal_columns(STDOUT_FILENO);
  const size_t width = columns > 40 ? columns - 15 : columns ? 25 : SIZE_MAX;
  std::string lines;
  for (const auto& e : hal::builtin_backends()) {
    hal::Backend* b = registry.get(e.name);
    char buf[1024];
    if (!b) {
      std::snprintf(buf, sizeof buf, "%-10s unavailable: %s\n", e.name, registry.why(e.name).c_str());
      lines += buf;
      continue;
    }
    // An accelerator measures its costs at the first question about them: asked first, so that
    // device() below already shows the figures.
    if (b->accelerator()) b->min_flops();
    std::snprintf(buf, sizeof buf, "%-10s available%s: ", e.name, b->accelerator() ? " (accelerator)" : "");
    lines += buf + b->device() + "\n";
    for (const auto& what : {coverage(*b, total), std::vector<std::string>{"and " + dnn_coverage(*b)}}) {
      const std::vector<std::string> wrapped = what.size() > 1 ? wrap(what, width) : wrap(what[0], width);
      for (size_t i = 0; i < wrapped.size(); ++i) lines += std::string(i ? 15 : 13, ' ') + wrapped[i] + "\n";
    }
    if (b->accelerator()) {
      std::snprintf(buf, sizeof buf, "%-10s   under auto: nodes of at least %.0f flops\n", "",
                    b->min_flops());
      lines += buf;
    }
  }
  print_native_blas(stdout);
  std::printf("%-10s %s\n", "native", "the program's own library, found per symbol when first called;");
  std::printf("%-10s   here: libblas.so.3 is %s\n", "", system_library("libblas.so.3", "sgemm_").c_str());
  std::printf("%-10s         libdnnl.so.2 is %s\n", "",
              system_library("libdnnl.so.2", "dnnl_version").c_str());
  std::fputs(lines.c_str(), stdout);
  const bool loaded = print_name_families(options.load);
  std::printf("\nconfigured: backend = %s\n", config::format_value(cfg, config::Key::backend).c_str());
  return loaded ? 0 : 1;
}

}  // namespace sol::tools
