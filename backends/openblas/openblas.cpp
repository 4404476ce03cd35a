#include "backends/openblas/openblas.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "capture/blas/call.hpp"
#include "capture/blas/libraries.hpp"
#include "common/cpu.hpp"
#include "common/fs_safety.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "common/openblas_core.hpp"
#include "config/config.hpp"

namespace sol::backends::openblas {
namespace {

// The openblas_get_config of the OpenBLAS instance behind `fn`: fn's own library's, or the one a
// front end (its own interface code, as Debian's libblas.so.3) reaches through its dependencies;
// nullptr when none. It names an instance: two front ends over one OpenBLAS give the same.
const void* openblas_config_of(const void* fn) noexcept {
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fname) return nullptr;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return nullptr;
  const void* config = dlsym(lib, "openblas_get_config");
  dlclose(lib);
  return config;
}

using capture::Node;
using capture::Sym;
using hal::Reason;

class OpenBlas final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "openblas"; }

  // Its workers spin for 2^28 counter ticks after their last work (0.13 s at 2 GHz).
  uint64_t spin_after_call_ns() const noexcept override { return openblas_core::spin_ns(); }

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
    fit_kernels();
    size_t found = 0;
    for (size_t i = 0; i < capture::kNumSymbols; ++i) {
      const auto sym = static_cast<Sym>(i);
      // Only the plain Fortran routines (name_, not the shims namesub_): call_fortran() calls those.
      const std::string n = capture::symbol_name(sym);
      if (capture::symbol_api(sym) != capture::Api::blas ||
          capture::symbol_family(sym) != capture::Family::plain || n.compare(n.size() - 4, 4, "sub_") == 0)
        continue;
      fns_[i] = dlsym(lib_, n.c_str());
      found += fns_[i] != nullptr;
    }
    if (!found) {
      why = cfg.openblas_library + " defines no BLAS routine";
      return false;
    }
    if (auto get = reinterpret_cast<const char* (*)()>(dlsym(lib_, "openblas_get_config"))) version_ = get();
    // The program's own OpenBLAS may be an ILP64 build (Debian's openblas64): called at its width.
    ilp64_ = capture::blas::int_bits(lib_, capture::Family::plain) == 64;
    auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(lib_, "openblas_set_num_threads"));
    // The thread count is the program's business when the library is the program's own, so a
    // private instance standing in for it starts with the program's count.
    if (set_threads && replaces_programs_ && programs_threads_ > 0)
      set_threads(programs_threads_);
    else if (set_threads && cfg.openblas_threads > 0 && !shared_ && !replaces_programs_)
      set_threads(static_cast<int>(cfg.openblas_threads));
    get_threads_ = reinterpret_cast<int (*)()>(dlsym(lib_, "openblas_get_num_threads"));
    // A private instance's constructor started its workers, and they spin for 2^28 counter ticks
    // (0.13 s at 2 GHz) waiting for work that may be far off: beside them, on two cores, oneDNN's
    // OpenMP team ran a 48^3 SGEMM in 5-8 ms instead of 9 us in the race that followed the
    // instance's set-up. Its pool goes until its first threaded call, which starts it again (as
    // after fork: OpenBLAS's exec_blas_async() runs blas_thread_init() when no pool is up).
    if (private_)
      if (const auto shutdown = reinterpret_cast<void (*)()>(dlsym(lib_, "blas_thread_shutdown_")))
        shutdown();
    return true;
  }

  std::string device() const override {
    std::string d = version_.empty() ? "BLAS library" : version_;
    if (!kernels_.empty()) d += ", " + kernels_ + " kernels";
    if (get_threads_) d += ", " + std::to_string(get_threads_()) + " threads";
    if (ilp64_) d += ", 64-bit integers";
    if (shared_) d += ", the program's own instance";
    if (!kernels_note_.empty()) d += ", " + kernels_note_;
    return d;
  }

  Reason supports(const Node& node) const noexcept override {
    if (capture::op_family(node.op)[0] != 'b') return Reason::not_blas;
    const Sym routine = capture::blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
    if (routine == capture::blas::kNoRoutine || !fns_[static_cast<size_t>(routine)])
      return Reason::op_unsupported;
    return Reason::ok;
  }

  bool runs_native_code(Sym routine, const void* native_fn) const noexcept override {
    if (!native_fn) return false;
    if (native_fn == fns_[static_cast<size_t>(routine)]) return true;
    if (!shared_) return false;  // a private instance or another library: code of its own
    const void* theirs = openblas_config_of(native_fn);
    return theirs && theirs == dlsym(lib_, "openblas_get_config");
  }

  bool wide_dims() const noexcept override { return ilp64_; }

  bool outclasses_native(Sym /*routine*/, const void* native_fn) const noexcept override {
    return replaces_programs_ && programs_config_ && native_fn && openblas_config_of(native_fn) == programs_config_;
  }

  Reason run(Node& node) noexcept override {
    const Sym routine = capture::blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
    if (routine == capture::blas::kNoRoutine) return Reason::op_unsupported;
    void* fn = fns_[static_cast<size_t>(routine)];
    if (!fn) return Reason::op_unsupported;
    capture::blas::call_fortran(routine, fn, node, ilp64_);
    return Reason::ok;
  }

 private:
  // OpenBLAS picks its kernels once, when it loads, from the CPU models it knows: on a CPU newer
  // than the build it runs old ones (0.3.21 on recent AVX-512 Xeons runs Prescott's, at a fraction
  // of the speed). When lib_ is such an instance, SOL's calls go to a private instance of the same
  // file loaded with the right kernels; the program's own calls still go to the program's.
  void fit_kernels() {
    openblas_core::Check check;
    if (!openblas_core::check(lib_, check)) return;  // not OpenBLAS: nothing to tell or fix
    kernels_ = check.core;
    if (!check.below_par) return;
    const std::string level = cpu::isa_name(cpu::info().isa);
    if (check.best.empty()) {
      kernels_note_ = "below this CPU's " + level + ": " + check.fix;
      SOL_LOG(warn, "openblas: %s: %s", check.library.c_str(), check.fix.c_str());
      return;
    }
    std::string why, core;
    void* mine = load_private(lib_, check, core, why);
    if (!mine) {
      kernels_note_ =
          "below this CPU's " + level + ", and no private instance with " + check.best + " kernels: " + why;
      SOL_LOG(warn, "openblas: %s runs %s kernels on this %s CPU; no private instance with %s kernels: %s",
              check.library.c_str(), check.core.c_str(), level.c_str(), check.best.c_str(), why.c_str());
      return;
    }
    SOL_LOG(info, "openblas: %s runs %s kernels on this %s CPU; SOL uses a private instance with %s kernels",
            check.library.c_str(), check.core.c_str(), level.c_str(), core.c_str());
    if (shared_) {
      kernels_note_ = "private instance (the program's runs " + check.core + " kernels)";
      replaces_programs_ = true;
      programs_config_ = dlsym(lib_, "openblas_get_config");
      if (auto get = reinterpret_cast<int (*)()>(dlsym(lib_, "openblas_get_num_threads")))
        programs_threads_ = get();
    } else {
      kernels_note_ = "private instance (loaded as usual, it runs " + check.core + " kernels)";
    }
    // The program's instance keeps its own references; SOL's own below-par instance goes, and its
    // thread pool with it (unless the program has loaded the same library meanwhile).
    dlclose(lib_);
    lib_ = mine;
    private_ = true;
    shared_ = false;
    kernels_ = core;
  }

  // A second instance of the OpenBLAS in `check.library` (which `loaded` is or depends on), loaded
  // so that it runs `check.best`'s kernels, with `core` the ones it reports; nullptr with `why`
  // when it cannot be had.
  //
  // dlmopen(LM_ID_NEWLM) loads the file afresh into a new link-map namespace, with its own copies
  // of its dependencies (libc, libgfortran): its constructor runs again and reads
  // OPENBLAS_CORETYPE again, and its symbols never mix with the program's (LD_PRELOAD applies to
  // the first namespace only, so the private instance's internal BLAS calls do not come back into
  // libsol). glibc allows 16 namespaces per process and reserves static TLS for a few of them; a
  // process that has used those up gets dlmopen's error here.
  //
  // The environment: the namespace's libc is loaded first and given a private copy of the
  // environment with OPENBLAS_CORETYPE set, through its own clearenv/setenv, before OpenBLAS
  // loads. The program's environment is never written: init() runs lazily, on whichever thread
  // first needs the backend, and a setenv() there could free the array another thread's getenv()
  // is reading. (Setting it in the namespace's copy directly would not do either: a new
  // namespace's libc starts with the program's very array, so changing a variable in place there
  // would change it for the program.)
  //
  // Fork: OpenBLAS shuts its thread pool down before fork() through pthread_atfork, but a
  // namespace's libc keeps its own atfork list, which the program's fork() never runs. Without the
  // handler registered in the program's libc, a child's first call would wait forever for worker
  // threads that fork did not copy. Hence the registration below, and never closing the instance
  // (the handler would outlive it).
  //
  // Threads: the private instance has a thread pool of its own beside the program's. OpenBLAS's
  // idle workers spin for a while before they sleep, so calls alternating between the two pools
  // (SOL's on one, the program's own LAPACK on the other) compete for the same cores.
  static void* load_private(void* loaded, const openblas_core::Check& check, std::string& core,
                            std::string& why) {
    if (check.library.empty()) {
      why = "dladdr does not say which file holds OpenBLAS";
      return nullptr;
    }
    // openblas_get_parallel(): 1 for OpenBLAS's own thread pool, which the fork handler below can
    // shut down; 2 for an OpenMP build, whose pool (the namespace's own libgomp) nothing outside
    // can make safe across fork.
    // 0 is a build without threads; a version without the function is taken to have a pool.
    const auto parallel = reinterpret_cast<int (*)()>(dlsym(loaded, "openblas_get_parallel"));
    const int threading = parallel ? parallel() : 1;
    if (threading == 2) {
      why = "its OpenMP thread pool would hang forked children in a private namespace";
      return nullptr;
    }
    if (threading != 0 && !dlsym(loaded, "blas_thread_shutdown_")) {
      why = "it exports no blas_thread_shutdown_ to keep its thread pool safe across fork";
      return nullptr;
    }
    // The file is the one already loaded (check.library is its realpath), so this loads no code
    // the existing rules did not accept; it must still be a file nobody else could have replaced
    // since, by the same rule as a configured path.
    if (const std::string unsafe = fs_safety::untrusted_reason(check.library); !unsafe.empty()) {
      why = check.library + " is not loaded again: " + unsafe;
      return nullptr;
    }
    void* libc = dlmopen(LM_ID_NEWLM, "libc.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!libc) {
      why = "dlmopen of a new namespace failed: " + dl_error();
      return nullptr;
    }
    Lmid_t ns = 0;
    const auto clear = reinterpret_cast<int (*)()>(dlsym(libc, "clearenv"));
    const auto set = reinterpret_cast<int (*)(const char*, const char*, int)>(dlsym(libc, "setenv"));
    if (dlinfo(libc, RTLD_DI_LMID, &ns) != 0 || !clear || !set) {
      why = "the new namespace's libc has no clearenv/setenv";
      dlclose(libc);
      return nullptr;
    }
    clear();
    for (char** e = environ; *e; ++e)
      if (const char* eq = std::strchr(*e, '='))
        set(std::string(*e, static_cast<size_t>(eq - *e)).c_str(), eq + 1, 1);
    if (set("OPENBLAS_CORETYPE", check.best.c_str(), 1) != 0) {
      why = "the new namespace's setenv failed";
      dlclose(libc);
      return nullptr;
    }
    void* lib = dlmopen(ns, check.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) why = "dlmopen of " + check.library + " failed: " + dl_error();
    dlclose(libc);  // the namespace's libc stays loaded as OpenBLAS's dependency
    if (!lib) return nullptr;

    // Whether it took: the core it reports, not the one asked for (a build may map a family it
    // lacks to another, or not know the name at all and detect again).
    openblas_core::Check now;
    if (!openblas_core::check(lib, now) || now.core_isa < openblas_core::core_isa(check.best)) {
      why = "loaded with OPENBLAS_CORETYPE=" + check.best + ", it still runs " +
            (now.core.empty() ? "unknown" : now.core) + " kernels";
      dlclose(lib);
      return nullptr;
    }
    const auto shutdown = reinterpret_cast<void (*)()>(dlsym(lib, "blas_thread_shutdown_"));
    if (shutdown && pthread_atfork(shutdown, nullptr, nullptr) != 0) {
      why = "pthread_atfork failed, so a forked child would hang in its first call";
      dlclose(lib);
      return nullptr;
    }
    core = now.core;
    return lib;
  }

  static std::string dl_error() {
    const char* e = dlerror();
    return e ? e : "no reason given";
  }

  void* lib_ = nullptr;
  bool shared_ = false;
  bool private_ = false;            // lib_ is a private instance (load_private())
  bool ilp64_ = false;              // lib_ takes 64-bit INTEGERs
  bool replaces_programs_ = false;  // lib_ is a private instance standing in for the program's
  int programs_threads_ = 0;        // the program's instance's thread count when that happened
  const void* programs_config_ = nullptr;  // the program's instance's openblas_get_config
  std::string kernels_;             // openblas_get_corename() of lib_: "Zen"
  std::string kernels_note_;        // how lib_'s kernels came about, when not as usual
  std::string version_;
  int (*get_threads_)() = nullptr;
  void* fns_[capture::kNumSymbols] = {};
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<OpenBlas>();
}

}  // namespace sol::backends::openblas
