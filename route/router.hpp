// Which backend runs a node: [[route]] rules, the configured preference, each backend's
// supports(), and for auto a default order. A plan lists candidates best first; the executor
// tries them in turn and falls back along the list.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/macros.hpp"
#include "hal/registry.hpp"
#include "ir/node.hpp"

namespace sol::config {
struct Config;
struct RouteRule;
}  // namespace sol::config

namespace sol::route {

using hal::Backend;
using hal::Registry;

// What the program's own library for a symbol is, as far as routing cares. `outclassed`: an
// OpenBLAS running kernels older than this CPU's, whose library SOL's openblas backend runs with
// the right ones (a private instance): the same code, faster, so it is no optimized library here.
enum class NativeKind : uint8_t { missing, other, openblas, mkl, blis, onednn, outclassed };
const char* native_kind_name(NativeKind k) noexcept;
// Libraries that are as fast as SOL's CPU backends: auto leaves work with them.
constexpr bool optimized(NativeKind k) noexcept {
  return k == NativeKind::openblas || k == NativeKind::mkl || k == NativeKind::blis ||
         k == NativeKind::onednn;
}

struct Candidate {
  Backend* backend;  // nullptr: the program's own library (native)
  bool requested;    // named by the user (SOL_BACKEND or a [[route]]) rather than chosen by auto
};

struct Plan {
  static constexpr int kMax = 8;
  Candidate at[kMax];
  int n = 0;
  const char* rule = nullptr;  // the [[route]] that matched, for logs

  void add(Backend* b, bool requested) noexcept;
  // Native runs whatever it is given: candidates after it would never be tried.
  bool closed() const noexcept { return n > 0 && at[n - 1].backend == nullptr; }
};

class Router {
 public:
  Router(const config::Config& cfg, Registry& registry);

  // The order in which to try backends for a BLAS `node` doing `flops` of work, its native library
  // being of kind `native`. `measured`: what auto measured fastest for the node's shape class
  // ("native" or a backend's name; auto/profile.hpp), nullptr when nothing was measured.
  void plan(const capture::Node& node, double flops, NativeKind native, Plan& out,
            const char* measured = nullptr);

  // Whether auto decides where this node runs: no [[route]] names another target for it and auto
  // comes first in the preference list. Only then is the node's shape class measured.
  bool automatic(const capture::Node& node, double flops) noexcept;

  // Routing by measurement (the executor turns it on when auto measures or a profile exists):
  // then an optimized native library no longer short-cuts auto, which must see calls to measure.
  void set_measured(bool on) noexcept { measured_ = on; }

  // Whether every node of this operation would go to native first: then its symbol's calls can
  // bypass SOL entirely (the process-wide passthrough, per symbol).
  bool always_native(capture::Op op, capture::DType dtype, NativeKind native);

  // Nodes of this operation doing less work than this go to native first, whatever else: the
  // executor skips planning for them. 0 when every node must be planned.
  double native_below(capture::Op op, capture::DType dtype, NativeKind native);

  // Whether every DNN node goes to native under this configuration: then oneDNN's entry points
  // can bypass SOL entirely.
  bool dnn_always_native();

  // Whether there is no accelerator, for sure (none is still starting): then a plan depends on
  // the node, the configuration and what was measured only.
  bool without_accelerators() noexcept { return accelerators().empty() && accelerators_known(); }

  // The accelerator backends found so far. Only looked for when a node is large enough for the
  // smallest threshold any could have (backends.opencl.min_flops). A device backend still starting
  // (Backend::starting: under auto the executor prepares each that may be an accelerator) is not
  // among them yet: calls route around it, and it is looked at again at later calls, until
  // accelerators_known().
  struct Found {
    Backend* const* at;
    int n;
    Backend* const* begin() const noexcept { return at; }
    Backend* const* end() const noexcept { return at + n; }
    bool empty() const noexcept { return n == 0; }
  };
  Found accelerators() noexcept;

  // The least work any accelerator could take (an explicit floor, else kSmallFlops).
  double accelerator_floor() const noexcept { return min_accelerator_flops_; }

  // Whether every backend that may be an accelerator has been looked at (none is still starting):
  // until then what depends on them holds for the call at hand only.
  bool accelerators_known() noexcept {
    accelerators();
    return accelerators_done_.load(std::memory_order_acquire);
  }

  // Calls below this much work stay with the native library under auto, unmeasured: a library
  // call's fixed cost decides there (the reference BLAS beats OpenBLAS on 2x2 matrices), and no
  // device launch and transfer could pay off; measuring them would cost more than it could save.
  static constexpr double kSmallFlops = 20000;
  // auto measures calls from this much work up too (a 22x22x22 GEMM, about 1 us): routing a class
  // that stays native costs 1 % of such a call, and a native library can run far below the others
  // on such calls (auto/README.md, R3).
  static constexpr double kMeasureFlops = kSmallFlops;
  // Under a native library below par (an OpenBLAS running kernels older than the CPU's, which the
  // openblas backend outclasses, or no optimized library at all), auto measures from a 16^3 GEMM,
  // the smallest where the right kernels won over a call's fixed costs (auto/README.md, R3).
  static constexpr double kMeasureBelowParFlops = 8192;
  // Calls from this much work up are measured under auto, given the native library's kind.
  static constexpr double measure_flops(NativeKind native) noexcept {
    return optimized(native) ? kMeasureFlops : kMeasureBelowParFlops;
  }

 private:
  // A backend looked up by name once, at its first use: backends initialise only when a node
  // may go to them, and every later lookup is one atomic load.
  class Lazy {
   public:
    Lazy() = default;
    // `named`: the configuration names this backend (SOL_BACKEND, a [[route]]): if it cannot be
    // initialised, one warning says so and why (its nodes then run on the next candidate).
    explicit Lazy(std::string name, bool named = false) : name_(std::move(name)), named_(named) {}
    Lazy(const Lazy& o) : name_(o.name_), named_(o.named_) {}
    Backend* get(Registry& registry) noexcept;
    const std::string& name() const noexcept { return name_; }

   private:
    std::string name_;
    bool named_ = false;
    std::atomic<Backend*> backend_{nullptr};
    std::atomic<bool> done_{false};
  };
  // An entry of the preference list or the target of a rule.
  struct Target {
    enum Kind : uint8_t { backend, native, automatic } kind;
    Lazy lazy;
  };
  struct Rule {
    const config::RouteRule* rule;
    Target target;
  };

  static Target target(const std::string& name);
  void add_auto(const capture::Node& node, double flops, NativeKind native, const char* measured, Plan& out);
  void add_target(Target& t, bool requested, const capture::Node& node, double flops, NativeKind native,
                  const char* measured, Plan& out);
  Rule* rule_for(const capture::Node& node, double flops) noexcept;

  std::vector<config::RouteRule> rule_config_;
  std::vector<Rule> rules_;
  std::vector<Target> preference_;
  Registry& registry_;
  Lazy openblas_{"openblas"}, onednn_{"onednn"}, reference_{"reference"};
  double min_accelerator_flops_;
  bool measured_ = false;
  static constexpr int kMaxAccelerators = 8;
  static constexpr size_t kMaxBackends = 32;
  std::mutex accelerators_mu_;
  std::atomic<bool> accelerators_done_{false};
  Backend* accelerators_[kMaxAccelerators] = {};  // appended under the mutex, then counted
  std::atomic<int> naccelerators_{0};
  uint32_t looked_ = 0;               // under the mutex: builtin_backends() entries settled, by index
  uint8_t hints_[kMaxBackends] = {};  // under the mutex: each one's accelerator_hint() + 1, 0 unasked
};

}  // namespace sol::route
