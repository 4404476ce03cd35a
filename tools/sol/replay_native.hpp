// "native" in a replay: the libraries the traced program called, opened by `sol replay` itself.
//
// A replay has no program to forward to, so it calls the program's libraries the way SOL's own
// backends call theirs: a BLAS node through its column-major Fortran routine (a CBLAS row-major
// call in the column-major form the reference CBLAS gives it, as verify mode does), dnnl_sgemm as
// itself, and a DNN node through the onednn backend, whose primitives are made back from the
// node's description on the program's own libdnnl (backends/onednn/dnn.hpp). Each library is
// opened from the path the graph records, when it is here and may be trusted, else by its name
// through the loader's search; a node whose library is nowhere has no native run.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "hal/registry.hpp"
#include "ir/node.hpp"
#include "tools/sol/replay_graph.hpp"

namespace sol::tools::replay {

class Native {
 public:
  // `cfg`: the replay's configuration (the onednn backend's library is set from the graphs').
  Native(const std::vector<Graph*>& graphs, config::Config cfg);

  // The native definition of a description's symbol (what the executor classifies the library
  // by), or nullptr when its library is not here. Asked before any run() of the description.
  const void* symbol(const Graph& g, const Description& d);
  // Makes ready what a node's first native run would otherwise do while timed (a oneDNN primitive,
  // for `threads` as run() has them).
  void prepare(const capture::Node& node, int threads) noexcept;
  // Runs a bound node on the program's library, with as many threads as the program's call had
  // (`threads`, 0: the library's default), so that reductions split across threads come out the
  // same. false when nothing here can.
  bool run(capture::Node& node, const Description& d, int threads) noexcept;
  // The same for DNN calls on other buffers (verify's check of a backend's result), with the
  // threads of the node being run (`threads`, set before it runs).
  static bool rerun(const capture::dnn::Call& call, void* const* data) noexcept;
  int threads = 0;

  // What a user should know: libraries not found, or found elsewhere than the program's.
  std::vector<std::string> notes;

 private:
  void* open(const Library& lib);
  void* routine(void* lib, const Description& d);

  // The libraries' thread counts: the OpenMP team oneDNN sizes its work by, a BLAS library's own.
  struct Threads {
    int (*get)() = nullptr;
    void (*set)(int) = nullptr;
  };
  Threads openmp_;
  std::unordered_map<const Description*, Threads> blas_threads_;

  config::Config cfg_;
  std::unique_ptr<hal::Registry> registry_;                 // onednn for DNN nodes
  std::unordered_map<std::string, void*> handles_;          // by recorded path
  std::unordered_map<const Description*, void*> routines_;  // BLAS: the function run() calls
  std::unordered_map<const Description*, const void*> symbols_;
};

}  // namespace sol::tools::replay
