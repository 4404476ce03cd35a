// sol backends: each backend, available or why not, what runs the work, and which routines it takes.
#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "capture/blas/call.hpp"
#include "config/config.hpp"
#include "hal/registry.hpp"
#include "tools/sol/commands.hpp"

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

// "gemm (f32 f64 c64 c128), axpy (f32)...": what a backend takes, grouped by operation.
std::string coverage(const hal::Backend& backend, size_t& count, size_t total) {
  std::map<std::string, std::vector<std::string>> by_op;
  std::vector<std::string> order;
  count = 0;
  for (const auto& [routine, real] : routines()) {
    capture::Node n = probe_node(routine);
    n.blas.real_alpha = real;
    if (backend.supports(n) != hal::Reason::ok) continue;
    ++count;
    const std::string op = capture::op_name(n.op);
    if (!by_op.count(op)) order.push_back(op);
    by_op[op].push_back(std::string(capture::dtype_name(n.dtype)) + (real ? "/real-alpha" : ""));
  }
  if (count == total) return "all " + std::to_string(total) + " BLAS routines (levels 1-3; f32 f64 c64 c128)";
  if (count == 0) return "no BLAS routine";
  std::string out = std::to_string(count) + " of " + std::to_string(total) + " BLAS routines:";
  for (const auto& op : order) {
    out += " " + op + " (";
    for (size_t i = 0; i < by_op[op].size(); ++i) out += (i ? " " : "") + by_op[op][i];
    out += ")";
  }
  return out;
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

}  // namespace

int cmd_backends(const Args& args) {
  for (const auto& a : args) return fail(2, "backends: unknown option '" + a + "'");
  const config::Config cfg = config::load();
  for (const auto& p : cfg.problems) std::fprintf(stderr, "sol: %s\n", p.c_str());
  hal::Registry registry(cfg);
  const size_t total = routines().size();

  // The backends first: probing the system's libraries below loads them into this process.
  std::string lines;
  char buf[1024];
  for (const auto& e : hal::builtin_backends()) {
    hal::Backend* b = registry.get(e.name);
    if (!b) {
      std::snprintf(buf, sizeof buf, "%-10s unavailable: %s\n", e.name, registry.why(e.name).c_str());
      lines += buf;
      continue;
    }
    size_t count = 0;
    const std::string ops = coverage(*b, count, total);
    std::snprintf(buf, sizeof buf, "%-10s available%s: %s\n%-10s   takes %s\n", e.name,
                  b->accelerator() ? " (accelerator)" : "", b->device().c_str(), "", ops.c_str());
    lines += buf;
    if (b->accelerator()) {
      std::snprintf(buf, sizeof buf, "%-10s   under auto: nodes of at least %.0f flops\n", "",
                    b->min_flops());
      lines += buf;
    }
  }
  std::printf("%-10s %s\n", "native", "the program's own library, found per symbol when first called;");
  std::printf("%-10s   here: libblas.so.3 is %s\n", "", system_library("libblas.so.3", "sgemm_").c_str());
  std::printf("%-10s         libdnnl.so.2 is %s\n", "",
              system_library("libdnnl.so.2", "dnnl_version").c_str());
  std::fputs(lines.c_str(), stdout);
  std::printf("\nconfigured: backend = %s\n", config::format_value(cfg, config::Key::backend).c_str());
  return 0;
}

}  // namespace sol::tools
