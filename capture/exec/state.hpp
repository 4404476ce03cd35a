// The executor's own state and the steps its files share: what runs a node on a backend (run.cpp),
// DNN nodes (dnn.cpp), results as each API returns them (deliver.cpp), the program's own library
// (native_library.cpp). Internal to capture/exec.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "auto/auto.hpp"
#include "capture/exec/executor.hpp"
#include "config/config.hpp"
#include "hal/registry.hpp"
#include "ir/native_fn.hpp"
#include "route/router.hpp"

namespace sol::capture::exec {

// The program's call on a backend, its result delivered (auto's races may make it there). (run.cpp)
hal::Reason call_on(hal::Backend& backend, Node& node) noexcept;

struct Executor {
  config::Config cfg;
  hal::Registry registry;
  route::Router router;
  autosel::Selector selector;
  bool strict;
  bool verify;
  // Under auto, the device backends prepared for their first use (Backend::StartWhen::first_use):
  // started once the process's first routed call has returned (start_devices()).
  std::vector<std::string> start_after_first_call;
  explicit Executor(const config::Config& c)
      : cfg(c),
        registry(cfg),
        router(cfg, registry),
        selector(cfg, registry, router, call_on),
        strict(c.strict),
        verify(c.verify) {}
};
extern std::atomic<Executor*> g_exec;

inline bool is_blas(Op op) noexcept {
  return op_family(op)[0] == 'b';
}

// A backend left a function's result in Fortran terms in node.ret: adapt it to what the
// intercepted API returns. (deliver.cpp)
void deliver_result(Node& node) noexcept;

// The kind of the program's own library for a native definition. `below_par`: an OpenBLAS that
// runs kernels older than this CPU's (one line says so, once). `family`: how the library spells
// OpenBLAS's openblas_get_config (scipy_openblas_get_config64_...). (native_library.cpp)
route::NativeKind classify(const void* native, Family family, bool& below_par) noexcept;

// A node a device backend computed: counted for the transfers line. (run.cpp)
void count_device_node(hal::Backend& backend, hal::Reason r) noexcept;
// A node about to run on the host while the lazy executor guards memory: what its operands need
// from the device comes first. (run.cpp)
void before_host_node(const Node& node) noexcept;
// A BLAS node on `backend`, in column-major terms, verified when verify mode is on. (run.cpp)
hal::Reason run_on(Executor& ex, hal::Backend& backend, Node& node) noexcept;
// A failure or decline of candidate `c` for `node`: the line a user reads, the decline listener,
// and SOL_STRICT's end. (run.cpp)
void declined(Executor& ex, const route::Candidate& c, const Node& node, hal::Reason r) noexcept;
// A DNN node along its plan, or where the node that wrote its state ran. (dnn.cpp)
const char* execute_dnn(Executor& ex, Node& node, NativeFn native) noexcept;

}  // namespace sol::capture::exec
