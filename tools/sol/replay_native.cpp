#include "tools/sol/replay_native.hpp"

#include <dlfcn.h>
#include <sys/stat.h>


#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"
#include "common/fs_safety.hpp"
#include "common/native.hpp"

namespace sol::tools::replay {
namespace {

using capture::Node;
using hal::Reason;

// The one Native of a replaying process, for rerun() (verify calls it through a plain pointer).
Native* g_native = nullptr;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_dnnl(const Library& lib) {
  return basename(lib.path).rfind("libdnnl", 0) == 0;
}

}  // namespace

Native::Native(const std::vector<Graph*>& graphs, config::Config cfg) : cfg_(std::move(cfg)) {
  g_native = this;
  // Every library first, before any backend loads its own: the program's symbols are then the
  // first definitions a search of the loaded objects finds (verify's native, the onednn backend's
  // libdnnl).
  for (const Graph* g : graphs)
    for (const Library& lib : g->libs) {
      void* h = open(lib);
      if (h && is_dnnl(lib)) {
        Dl_info info{};
        if (void* any = dlsym(h, "dnnl_sgemm"); any && dladdr(any, &info) && info.dli_fname)
          cfg_.onednn_library = info.dli_fname;
      }
    }
  registry_ = std::make_unique<hal::Registry>(cfg_);
  openmp_ = {reinterpret_cast<int (*)()>(find_native("omp_get_max_threads")),
             reinterpret_cast<void (*)(int)>(find_native("omp_set_num_threads"))};
}

void* Native::open(const Library& lib) {
  if (auto it = handles_.find(lib.path); it != handles_.end()) return it->second;
  std::string why;
  void* h = nullptr;
  if (exists(lib.path)) {
    h = fs_safety::open_library(lib.path, RTLD_NOW | RTLD_LOCAL, why);
    if (h && !lib.identity.empty() && file_identity(lib.path) != lib.identity)
      notes.push_back(lib.path + " is another build than the program's (" + lib.identity +
                      "): native results may differ");
  } else {
    // Another machine: the library of that name that the loader finds here.
    const std::string name = basename(lib.path);
    h = fs_safety::open_library(name, RTLD_NOW | RTLD_LOCAL, why);
    if (h) notes.push_back(lib.path + " is not here: native runs on " + name + " as the loader finds it");
  }
  if (!h) notes.push_back(lib.path + " cannot be loaded (" + why + "): its nodes have no native run");
  handles_.emplace(lib.path, h);
  return h;
}

// The function a node of this description runs natively, from its library `lib`: the Fortran
// routine of its operation (Debian's OpenBLAS libblas.so.3 forwards to libopenblas.so.0, which
// dlsym on its handle also searches), or dnnl_sgemm itself.
void* Native::routine(void* lib, const Description& d) {
  const Node& n = d.node;
  if (n.api == capture::Api::dnnl) return dlsym(lib, "dnnl_sgemm");
  const capture::Sym r = capture::blas::fortran_routine(n.op, n.dtype, n.blas.real_alpha);
  return r != capture::blas::kNoRoutine ? dlsym(lib, capture::symbol_name(r)) : nullptr;
}

namespace {
// As many threads as asked for the scope of one native run, then as before.
class WithThreads {
 public:
  WithThreads(int (*get)(), void (*set)(int), int n) noexcept : set_(set) {
    if (!get || !set || n <= 0) return;
    before_ = get();
    if (before_ == n) return;
    set(n);
  }
  ~WithThreads() {
    if (before_ > 0) set_(before_);
  }

 private:
  void (*set_)(int);
  int before_ = 0;
};
}  // namespace

const void* Native::symbol(const Graph& g, const Description& d) {
  auto it = symbols_.find(&d);
  if (it != symbols_.end()) return it->second;
  void* s = nullptr;
  void* lib = d.lib > 0 && d.lib <= g.libs.size() ? open(g.libs[d.lib - 1]) : nullptr;
  if (lib && d.dnn) {
    // A DNN node runs natively where oneDNN can make its primitive.
    if (registry_->get("onednn")) s = dlsym(lib, d.key.symbol.c_str());
  } else if (lib) {
    void* fn = routine(lib, d);
    routines_[&d] = fn;
    blas_threads_[&d] = {reinterpret_cast<int (*)()>(dlsym(lib, "openblas_get_num_threads")),
                         reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"))};
    s = fn ? dlsym(lib, d.key.symbol.c_str()) : nullptr;
    if (fn && !s) s = fn;  // a libblas.so.3 without CBLAS: its Fortran routine stands for the library
  }
  symbols_.emplace(&d, s);
  return s;
}

void Native::prepare(const Node& node, int threads) noexcept {
  if (!node.dnn) return;
  const WithThreads team(openmp_.get, openmp_.set, threads);
  if (hal::Backend* onednn = registry_->get("onednn")) onednn->supports(node);
}

bool Native::run(Node& node, const Description& d, int threads) noexcept {
  if (node.dnn) {
    hal::Backend* onednn = registry_->get("onednn");
    const WithThreads team(openmp_.get, openmp_.set, threads);
    return onednn && onednn->supports(node) == Reason::ok && onednn->run(node) == Reason::ok;
  }
  auto it = routines_.find(&d);
  void* fn = it == routines_.end() ? nullptr : it->second;
  if (!fn) return false;
  const Threads& own = blas_threads_[&d];
  const WithThreads team(own.get, own.set, threads);
  const bool sgemm = node.api == capture::Api::dnnl;
  const capture::Sym r = capture::blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
  auto call = [&](Node& cm) noexcept {
    if (sgemm)
      capture::blas::call_dnnl_sgemm(fn, cm);
    else
      capture::blas::call_fortran(r, fn, cm);
    return Reason::ok;
  };
  return capture::blas::with_column_major(node, call) == Reason::ok;
}

bool Native::rerun(const capture::dnn::Call& call, void* const* data) noexcept {
  if (!g_native) return false;
  capture::dnn::Call other = call;
  for (int i = 0; i < call.desc->ntensors; ++i) other.data[i] = data[i];
  Node node(capture::Sym::dnnl_primitive_execute, call.desc->kind, call.desc->dtype);
  node.dnn = &other;
  hal::Backend* onednn = g_native->registry_->get("onednn");
  const WithThreads team(g_native->openmp_.get, g_native->openmp_.set, g_native->threads);
  return onednn && onednn->supports(node) == Reason::ok && onednn->run(node) == Reason::ok;
}

}  // namespace sol::tools::replay
