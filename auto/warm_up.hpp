// Profiled runs under auto route from the first call. A CPU backend the profile chose for a class
// pays its own set-up on the first call it gets in a process, more than a short training loop
// saves on the classes it wins by a few percent (auto/README.md, R11); a first run's measurement
// would time that set-up instead of the backend. warm_up() runs each such class once ahead, on
// scratch operands, on a thread of its own (common/startup.hpp: begun once a library SOL intercepts
// is loaded, while a Python program still imports its modules; exit and fork wait for it), so that
// the program's first call finds the kernels compiled.
#pragma once

namespace sol::hal {
class Registry;
}
namespace sol::autosel::profile {
class Profile;
}

namespace sol::autosel::warm_up {

// First the openblas backend's set-up, when auto may measure or the profile sends classes there
// (a private instance of the program's OpenBLAS with this CPU's kernels, where it runs older
// ones). Then for every backend that compiles kernels (Backend::compiles_kernels): at most 16 of the GEMM
// classes the profile sends there, each dimension capped at 512 (the kernel a size regime gets is
// what matters, not the work), and, when auto may measure, a 64x64x64 SGEMM first: the backend's
// own set-up, which measuring its first call would otherwise time. Where the profile is settled
// (Profile::settled()), that set-up is left to the first measurement, if any (settle()). Only from
// the main thread, at start-up; the registry and profile must outlive the process.
void start(hal::Registry& registry, autosel::profile::Profile& profile) noexcept;

// Before a measurement: waits for the warm-up to end (runs it here when its thread has not begun),
// up to a second, runs the set-up a settled profile left to it (once per process), and then waits
// for the backends' workers to stop spinning (spin_after_call_ns). A measurement beside them would
// time a backend on its set-up, and the others beside busy cores.
void settle() noexcept;

}  // namespace sol::autosel::warm_up
