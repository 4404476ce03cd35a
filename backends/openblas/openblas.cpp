#include "backends/openblas/openblas.hpp"

#include <dlfcn.h>

#include <string>

#include "capture/blas/call.hpp"
#include "common/fs_safety.hpp"
#include "common/native.hpp"
#include "config/config.hpp"

namespace sol::backends::openblas {
namespace {

using capture::Node;
using capture::Sym;
using hal::Reason;

class OpenBlas final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "openblas"; }

  bool init(const config::Config& cfg, std::string& why) noexcept override {
    // The program's own OpenBLAS if it has one loaded (possibly privately, as NumPy and PyTorch
    // load theirs) and no other library was configured explicitly; else the configured one.
    const bool configured =
        cfg.source[static_cast<size_t>(config::Key::openblas_library)].kind != config::Source::by_default;
    if (void* get_config = configured ? nullptr : find_native("openblas_get_config")) {
      Dl_info info{};
      if (dladdr(get_config, &info) && info.dli_fname) lib_ = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
      shared_ = lib_ != nullptr;
    }
    if (!lib_) lib_ = fs_safety::open_library(cfg.openblas_library, RTLD_NOW | RTLD_LOCAL, why);
    if (!lib_) return false;
    size_t found = 0;
    for (size_t i = 0; i < capture::kNumSymbols; ++i) {
      const auto sym = static_cast<Sym>(i);
      // Only the Fortran routines (name_, not the shims namesub_): call_fortran() calls those.
      const std::string n = capture::symbol_name(sym);
      if (capture::symbol_api(sym) != capture::Api::blas || n.size() < 2 || n.back() != '_' ||
          n.compare(n.size() - 4, 4, "sub_") == 0)
        continue;
      fns_[i] = dlsym(lib_, n.c_str());
      found += fns_[i] != nullptr;
    }
    if (!found) {
      why = cfg.openblas_library + " defines no BLAS routine";
      return false;
    }
    if (auto get = reinterpret_cast<const char* (*)()>(dlsym(lib_, "openblas_get_config"))) version_ = get();
    auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(lib_, "openblas_set_num_threads"));
    // The thread count is the program's business when the library is the program's own.
    if (set_threads && cfg.openblas_threads > 0 && !shared_)
      set_threads(static_cast<int>(cfg.openblas_threads));
    get_threads_ = reinterpret_cast<int (*)()>(dlsym(lib_, "openblas_get_num_threads"));
    return true;
  }

  std::string device() const override {
    std::string d = version_.empty() ? "BLAS library" : version_;
    if (get_threads_) d += ", " + std::to_string(get_threads_()) + " threads";
    if (shared_) d += ", the program's own instance";
    return d;
  }

  Reason supports(const Node& node) const noexcept override {
    if (capture::op_family(node.op)[0] != 'b') return Reason::not_blas;
    const Sym routine = capture::blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
    if (routine == capture::blas::kNoRoutine || !fns_[static_cast<size_t>(routine)])
      return Reason::op_unsupported;
    return Reason::ok;
  }

  Reason run(Node& node) noexcept override {
    const Sym routine = capture::blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
    if (routine == capture::blas::kNoRoutine) return Reason::op_unsupported;
    void* fn = fns_[static_cast<size_t>(routine)];
    if (!fn) return Reason::op_unsupported;
    capture::blas::call_fortran(routine, fn, node);
    return Reason::ok;
  }

 private:
  void* lib_ = nullptr;
  bool shared_ = false;
  std::string version_;
  int (*get_threads_)() = nullptr;
  void* fns_[capture::kNumSymbols] = {};
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<OpenBlas>();
}

}  // namespace sol::backends::openblas
