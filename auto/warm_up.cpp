#include "auto/warm_up.hpp"

#include <errno.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "auto/measure.hpp"
#include "auto/profile.hpp"
#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/startup.hpp"
#include "hal/registry.hpp"

namespace sol::autosel::warm_up {

namespace {

constexpr size_t kMaxClasses = 16;
// A process that ends within this of its start (a short script that loads NumPy) never pays for the
// warm-up: oneDNN's library and set-up, about 40 ms, which its exit would wait for.
constexpr std::chrono::milliseconds kNotBefore{200};
std::atomic<Startup*> g_startup{nullptr};  // set once, by the main thread at start-up
// When the warm-up's backends' workers stop spinning on the cores (monotonic ns).
std::atomic<uint64_t> g_quiet_ns{0};
constexpr int64_t kCap = 512;
constexpr autosel::profile::Profile::Gemm kSetUp{capture::DType::f32, 'N', 'N', 64, 64, 64};

// A settled profile's set-up, left to the first measurement (settle()): the backends that compile
// kernels, and whether a thread has taken it.
struct Deferred {
  hal::Registry* registry;
  std::vector<std::string> backends;
};
std::atomic<Deferred*> g_deferred{nullptr};
std::atomic<bool> g_deferred_taken{false};

// `b` ran its last call at `ended_ns`: a measurement waits until its workers stop spinning.
void spinning_until(const hal::Backend& b, uint64_t ended_ns) noexcept {
  const uint64_t quiet = ended_ns + b.spin_after_call_ns();
  if (quiet > g_quiet_ns.load(std::memory_order_relaxed)) g_quiet_ns.store(quiet, std::memory_order_release);
}

struct Plan {
  hal::Registry* registry;
  bool openblas = false;  // set the openblas backend up first
  std::vector<std::pair<std::string, std::vector<autosel::profile::Profile::Gemm>>>
      work;  // backend -> classes
};

// One GEMM of the class on zeros; C is written, never read (beta = 0).
void run_one(hal::Backend& b, const autosel::profile::Profile::Gemm& g) noexcept {
  const int64_t m = std::min(g.m, kCap), n = std::min(g.n, kCap), k = std::min(g.k, kCap);
  const size_t es = dtype_size(g.dtype);
  std::unique_ptr<unsigned char[]> a(new (std::nothrow) unsigned char[static_cast<size_t>(m * k) * es]()),
      bb(new (std::nothrow) unsigned char[static_cast<size_t>(k * n) * es]()),
      c(new (std::nothrow) unsigned char[static_cast<size_t>(m * n) * es]());
  if (!a || !bb || !c) return;
  Node node(blas::fortran_routine(Op::gemm, g.dtype, false), Op::gemm, g.dtype);
  blas::plain_gemm(node.blas, g.transa, g.transb, m, n, k, a.get(), bb.get(), c.get());
  if (b.supports(node) == hal::Reason::ok && b.run(node) == hal::Reason::ok)
    measure::warmed(b.name(), Op::gemm, g.dtype);
}

}  // namespace

void start(hal::Registry& registry, autosel::profile::Profile& profile) noexcept {
  try {
    auto plan = std::make_unique<Plan>();
    plan->registry = &registry;
    // Measuring times a backend on the program's first calls: its set-up (oneDNN's first small
    // SGEMM takes about 30 ms, the kernels of every later shape included) should not be what it
    // is timed on, nor what the program waits for. Where the profile is settled, a program that
    // calls its classes again measures nothing, and on few cores that set-up beside its first
    // calls cost it 4 % of a 0.75 s run (the MLP's eight SGEMMs from C, two cores): the first
    // measurement, if any, does it then.
    const bool speculative = profile.measuring() && !profile.settled();
    auto deferred = std::make_unique<Deferred>();
    deferred->registry = &registry;
    for (const hal::BackendEntry& e : hal::builtin_backends()) {
      if (!registry.compiles_kernels(e.name)) continue;
      auto classes = profile.gemms_for(e.name, kMaxClasses);
      if (speculative)
        classes.insert(classes.begin(), kSetUp);
      else if (profile.measuring() && classes.empty())  // else its classes set it up
        deferred->backends.emplace_back(e.name);
      if (!classes.empty()) plan->work.emplace_back(e.name, std::move(classes));
    }
    if (!deferred->backends.empty()) g_deferred.store(deferred.release(), std::memory_order_release);
    // The openblas backend's set-up, which auto measures or routes to: where the program's
    // OpenBLAS runs kernels older than the CPU's, a private instance of the library with the right
    // ones, its threads and buffers (0.32 s of a 16-core Xeon's first call), else a look at the
    // program's library or the opening of libopenblas.
    plan->openblas =
        registry.built("openblas") && (profile.measuring() || !profile.gemms_for("openblas", 1).empty());
    if (plan->work.empty() && !plan->openblas) return;
    Plan* p = plan.release();  // never freed: the thread may refer to it until exit
    Startup* s = Startup::begin(
        [p](bool, const std::atomic<bool>& stop) {
          if (p->openblas) {
            const uint64_t t0 = monotonic_ns();
            if (p->registry->get("openblas"))
              SOL_LOG(debug, "set openblas up ahead in %.1f ms",
                      static_cast<double>(monotonic_ns() - t0) * 1e-6);
          }
          for (const auto& [name, classes] : p->work) {
            hal::Backend* b = p->registry->get(name);
            if (!b) continue;
            const uint64_t t0 = monotonic_ns();
            size_t ran = 0;
            for (const auto& g : classes) {
              if (stop.load(std::memory_order_relaxed)) return;
              run_one(*b, g);
              ++ran;
            }
            const uint64_t t1 = monotonic_ns();
            spinning_until(*b, t1);
            SOL_LOG(debug, "warmed %s up for %zu class%s in %.1f ms", name.c_str(), ran, ran == 1 ? "" : "es",
                    static_cast<double>(t1 - t0) * 1e-6);
          }
        },
        kNotBefore);
    g_startup.store(s, std::memory_order_release);
  } catch (...) {  // out of memory: the first calls pay, as without warm-up
  }
}

void settle() noexcept {
  try {
    if (Startup* s = g_startup.load(std::memory_order_acquire)) s->take(std::chrono::seconds(1));
    // A settled profile's set-up, once, here: a thread that finds another one doing it goes on
    // (its measurement runs the backend's first call untimed), as does a child forked meanwhile.
    if (Deferred* d = g_deferred.load(std::memory_order_acquire);
        d && !g_deferred_taken.exchange(true, std::memory_order_acq_rel))
      for (const std::string& name : d->backends) {
        hal::Backend* b = d->registry->get(name);
        if (!b) continue;
        const uint64_t t0 = monotonic_ns();
        run_one(*b, kSetUp);
        const uint64_t t1 = monotonic_ns();
        spinning_until(*b, t1);
        SOL_LOG(debug, "set %s up for a measurement in %.1f ms", name.c_str(),
                static_cast<double>(t1 - t0) * 1e-6);
      }
  } catch (...) {  // out of memory: the measurement runs each backend's first call untimed
  }
  // Then the backends' workers, spinning after their last call: OpenBLAS's 256^3 TN SGEMM ran at
  // 8-12 GFLOP/s (190 after) beside oneDNN's team just after the warm-up, and a measurement that
  // took 0.9 ms sent that class to oneDNN.
  const uint64_t quiet = g_quiet_ns.load(std::memory_order_acquire), now = monotonic_ns();
  if (quiet > now) {
    const uint64_t ns = quiet - now;
    timespec t{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
  }
}

}  // namespace sol::autosel::warm_up
