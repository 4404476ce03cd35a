// The interface a backend implements. Small on purpose: a name, whether it can take a node and
// why not, running a node, and (device backends) memory.
//
// What a backend sees: BLAS nodes in column-major Fortran terms only (the executor turns CBLAS
// row-major calls into their column-major equivalent first, exactly as the reference CBLAS
// does), with arguments already checked (invalid calls never reach a backend: the executor
// reports them through the program's xerbla_ / cblas_xerbla). Quick-return cases (n == 0,
// alpha == 0 and beta == 1, ...) do reach backends, which must honour them as the reference does.
//
// A backend never includes interpose/: it knows nodes, not symbols or wrappers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::hal {

// Why a backend declines a node or a call fails. The names are the vocabulary of
// SOL_LOG=debug and `sol backends`; the texts are what a user reads.
enum class Reason : uint8_t {
#define SOL_REASON(name, text) name,
#include "hal/reasons.def"
#undef SOL_REASON
};
const char* reason_text(Reason r) noexcept;
const char* reason_name(Reason r) noexcept;

// Device memory, for backends whose memory is not the host's. The pointers it hands out may be
// opaque handles (cl_mem for OpenCL), usable only with these functions and the backend itself.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* alloc(size_t bytes) noexcept = 0;  // nullptr on failure
  virtual void free(void* ptr) noexcept = 0;
  virtual bool copy_to_device(void* dst, const void* src, size_t bytes) noexcept = 0;
  virtual bool copy_to_host(void* dst, const void* src, size_t bytes) noexcept = 0;
  virtual bool sync() noexcept { return true; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Stable name, as SOL_BACKEND and [[route]] spell it.
  virtual const char* name() const noexcept = 0;

  // Called once, lazily, before the backend sees its first node (never at program start, so an
  // unused backend costs nothing). false: unavailable, with `why` for the user
  // ("libopenblas.so.0: cannot open shared object file").
  virtual bool init(const config::Config& cfg, std::string& why) noexcept = 0;

  // Called at start-up, by the thread that initialises SOL (the main thread but in odd cases), for
  // a backend the configuration names (SOL_BACKEND, a [[route]]), and under auto for a device
  // backend that knows an accelerator is here: it may start what init() will need on a thread of
  // its own, so that the first call does not wait for all of it (a device backend opens its
  // device). `when`: as soon as a library SOL intercepts is loaded (a backend the user named), or
  // at start_now() (auto's devices, once the process's first routed call has returned: a process
  // that never calls BLAS creates no device context, which a child it forks could not have used
  // again). Must return at once and must leave the program unaffected whatever happens on that
  // thread; init() then reports any failure. A forked child must never get half of what the
  // thread set up.
  enum class StartWhen : uint8_t { library_loaded, first_use };
  virtual void prepare(const config::Config& /*cfg*/, StartWhen /*when*/) noexcept {}
  // A start-up prepared for its first use begins now.
  virtual void start_now() noexcept {}

  // Whether what prepare() started is still under way, or waits to begin, so that init() would
  // wait for it. Under auto, the router routes around a backend that is starting (calls never
  // wait for a device to come up) and asks again at later calls. Must be cheap and must not
  // initialise anything.
  virtual bool starting() const noexcept { return false; }

  // True for a CPU backend whose first call of a kind of problem in a process sets up far more
  // than it computes (oneDNN: its own start-up, then JIT-compiled kernels per transposition and
  // size regime): under auto with a profile, the classes it was chosen for are run once ahead, on
  // a thread of their own (auto/warm_up.hpp).
  virtual bool compiles_kernels() const noexcept { return false; }

  // How long this backend's worker threads keep spinning on the cores after a call before they
  // sleep (OpenBLAS's: 2^28 cycles, about 0.13 s at 2 GHz; oneDNN's GNU OpenMP team's, about
  // 10 ms). A library tried right after it runs beside them that long: auto's trial in use gives it
  // that long to show its speed, and a measurement after the warm-up waits that long.
  virtual uint64_t spin_after_call_ns() const noexcept { return 0; }

  // What runs the work, for `sol backends` and traces: "OpenBLAS 0.3.21 (2 threads)".
  virtual std::string device() const = 0;

  // True for accelerators: under auto they take a node only above their size threshold.
  virtual bool accelerator() const noexcept { return false; }

  // Before init(), whether this backend would be an accelerator here, if it can tell without
  // initialising (from a cached device inventory, say). auto asks every process that calls BLAS,
  // so it must be cheap; `unknown` makes the router initialise the backend to find out.
  enum class Hint : uint8_t { no, yes, unknown };
  virtual Hint accelerator_hint(const config::Config&) const noexcept { return Hint::no; }
  // Whether this backend would run `routine` (a Fortran symbol) with the very code and threads of
  // `native_fn`, the program's own function for it: the openblas backend on the program's own
  // OpenBLAS instance, called directly or through a libblas.so.3 that forwards to it (Debian's).
  // auto then does not measure the same code twice.
  virtual bool runs_native_code(capture::Sym /*routine*/, const void* /*native_fn*/) const noexcept {
    return false;
  }

  // Whether this backend runs the very library behind `native_fn` with kernels fit for this CPU
  // where the program's instance runs older ones (the openblas backend's private instance beside
  // an OpenBLAS that did not recognise the CPU): the same code, faster, for every call. auto then
  // neither measures native nor makes its slow call.
  virtual bool outclasses_native(capture::Sym /*routine*/, const void* /*native_fn*/) const noexcept {
    return false;
  }

  // Whether nodes run on a device with memory of its own (opencl, cuda), which may be the CPU
  // itself (pocl). Known without init(). Under auto such a backend is a candidate only when its
  // device is an accelerator: on the CPU it runs on the cores the CPU backends use, through a
  // portability layer, and measuring it would cost program compilations for nothing.
  virtual bool device_backend() const noexcept { return false; }

  // Whether this device backend defers its nodes and keeps data on the device when the lazy
  // executor is on (capture/lazy/coherence.hpp: it holds device copies of host memory). Known
  // without init(). The lazy executor starts (serving large allocations) only for such a backend.
  virtual bool runs_lazily() const noexcept { return false; }

  // Under auto, the least work (flops) worth considering sending here; 0 for CPU backends. For an
  // accelerator it comes from the device's measured costs (or an explicit configuration), never
  // from a constant: below it, the fixed costs of a launch and of moving the operands dominate.
  virtual double min_flops() const noexcept { return 0; }

  // Accelerators: the time in seconds this (BLAS) node would take here, operands moved to the
  // device and results back included, predicted from the device's measured transfer bandwidth,
  // launch latency and compute rate. < 0 when the backend cannot tell. auto compares it with the
  // CPU's measured time for the node's shape before measuring or choosing the device.
  virtual double estimate_seconds(const capture::Node& /*node*/, double /*flops*/) const noexcept { return -1; }

  // Whether BLAS nodes may have dimensions, leading dimensions and increments beyond 32 bits
  // here (an ILP64 call's). Where not, the executor declines such a node for the backend
  // (dims_exceed_backend) before supports() sees it.
  virtual bool wide_dims() const noexcept { return false; }

  // Reason::ok when run() would compute this node, else why not.
  virtual Reason supports(const capture::Node& node) const noexcept = 0;

  // Computes the node in place (outputs written through its pointers, function results into
  // node.ret). Reason::ok on success; anything else and the executor runs the node elsewhere,
  // so run() must not have written partial results when it fails (or must fail before writing).
  virtual Reason run(capture::Node& node) noexcept = 0;

  // True for a backend whose DNN implementation is the program's own library (onednn: oneDNN is
  // the native library of DNN nodes): the router sends DNN nodes it is asked for to native.
  virtual bool dnn_is_native() const noexcept { return false; }

  // Device memory, or nullptr for backends that compute in host memory.
  virtual DeviceMemory* memory() noexcept { return nullptr; }
};

using BackendFactory = std::unique_ptr<Backend> (*)();

}  // namespace sol::hal
