#include "backends/onednn/onednn.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "backends/onednn/api.hpp"
#include "backends/onednn/dnn.hpp"
#include "backends/onednn/matmul.hpp"
#include "capture/blas/call.hpp"
#include "common/fs_safety.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "config/config.hpp"

namespace sol::backends::onednn {

bool Api::bind(void* lib, std::string& why) noexcept {
#define SOL_ONEDNN_BIND(name)                                                      \
  name = reinterpret_cast<decltype(name)>(dlsym(lib, "dnnl_" #name));              \
  if (!name) {                                                                     \
    why = "has no dnnl_" #name;                                                    \
    return false;                                                                  \
  }
  SOL_ONEDNN_FUNCTIONS(SOL_ONEDNN_BIND)
#undef SOL_ONEDNN_BIND
  omp_get_max_threads = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_max_threads"));
  omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(lib, "omp_set_num_threads"));
  return true;
}

namespace {

using capture::Node;
using hal::Reason;

// GNU OpenMP's worker threads do not survive fork(): in the child, the thread that forked still
// believes it has a team, and its next parallel region waits for threads that are gone, forever.
// A thread that ran oneDNN work (which starts such a team) therefore continues single-threaded in
// a forked child, as PyTorch does in its DataLoader workers; other threads start fresh teams.
// (Matmul keys its primitives by thread count, so that this thread gets single-threaded ones.)
thread_local bool t_ran_onednn = false;
void (*g_omp_set_num_threads)(int) = nullptr;  // from the libgomp libdnnl loaded; null: not OpenMP

void single_threaded_after_fork() {
  if (t_ran_onednn && g_omp_set_num_threads) g_omp_set_num_threads(1);
}

// How long GNU OpenMP's workers spin after a parallel region before they sleep: GOMP_SPINCOUNT
// rounds (300000 by default; none with OMP_WAIT_POLICY=passive, all but forever with =active).
// On the 2-core EPYC, OpenBLAS's 256^3 TN SGEMM ran at 6-22 GFLOP/s for the 10 ms after oneDNN's
// calls and at 170-188 after that; three times that for slower cores, and at most 0.3 s.
uint64_t gnu_openmp_spin_ns() noexcept {
  constexpr double kDefaultRounds = 300000, kDefaultNs = 30e6, kMaxNs = 300e6;
  double rounds = kDefaultRounds;
  if (const char* policy = secure_getenv("OMP_WAIT_POLICY")) {
    if (strcasecmp(policy, "passive") == 0) return 0;
    if (strcasecmp(policy, "active") == 0) return static_cast<uint64_t>(kMaxNs);
  }
  if (const char* count = secure_getenv("GOMP_SPINCOUNT")) {
    char* end = nullptr;
    const double v = std::strtod(count, &end);
    const char* suffixes = "kMGT";  // libgomp's: thousands, millions, ...
    const char* unit = end != count && *end ? std::strchr(suffixes, *end) : nullptr;
    if (end != count && v >= 0) rounds = unit ? v * std::pow(1e3, 1 + (unit - suffixes)) : v;
  }
  return static_cast<uint64_t>(std::min(kMaxNs, kDefaultNs * rounds / kDefaultRounds));
}

bool notrans(char t) noexcept {
  return t == 'N' || t == 'n';
}

class OneDnn final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "onednn"; }

  bool init(const config::Config& cfg, std::string& why) noexcept override {
    // The program's own libdnnl if loaded (PyTorch's), else the configured one.
    void* lib = nullptr;
    std::string path = cfg.onednn_library;
    if (void* any = find_native("dnnl_sgemm")) {
      Dl_info info{};
      if (dladdr(any, &info) && info.dli_fname) {
        lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
        if (lib) path = info.dli_fname;
      }
    }
    if (!lib) lib = fs_safety::open_library(cfg.onednn_library, RTLD_NOW | RTLD_LOCAL, why);
    if (!lib) return false;
    if (!api_.bind(lib, why)) {
      why = path + " " + why + " (oneDNN 2.x expected)";
      return false;
    }
    if (const dnnl_version_t* v = api_.version())
      version_ = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                 std::to_string(v->patch);
    static std::once_flag fork_handler;
    std::call_once(fork_handler, [this] {
      g_omp_set_num_threads = api_.omp_set_num_threads;
      pthread_atfork(nullptr, nullptr, single_threaded_after_fork);
    });
    choose_gemm(cfg.onednn_gemm);
    auto dnn = std::make_unique<DnnPrimitives>(api_);
    std::string dnn_why;
    if (dnn->init(lib, dnn_why)) dnn_ = dnn.release();  // never destroyed, as matmul_
    else dnn_note_ = "; no DNN nodes: " + path + " " + dnn_why;
    spin_ns_ = api_.omp_set_num_threads ? gnu_openmp_spin_ns() : 0;  // oneDNN on GNU OpenMP
    return true;
  }

  uint64_t spin_after_call_ns() const noexcept override { return spin_ns_; }

  std::string device() const override {
    const std::string v = version_.empty() ? "oneDNN" : version_;
    if (!matmul_) return v + ", dnnl_sgemm on the CPU" + note_ + dnn_note_;
    return v + ", matmul primitives (" + (impl_.empty() ? "?" : impl_) + ") on the CPU" + note_ + dnn_note_;
  }

  bool compiles_kernels() const noexcept override { return true; }

  // A program's dnnl_sgemm call run here on dnnl_sgemm is the program's own code (the matmul path
  // is not): auto measures it once, as native.
  bool runs_native_code(capture::Sym /*routine*/, const void* native_fn) const noexcept override {
    return !matmul_ && native_fn && native_fn == reinterpret_cast<const void*>(api_.sgemm);
  }

  // For DNN nodes oneDNN is the program's own library: asked for one, the router runs it natively.
  bool dnn_is_native() const noexcept override { return true; }

  Reason supports(const Node& node) const noexcept override {
    if (node.dnn) return dnn_ ? dnn_->supports(*node.dnn->desc) : Reason::op_unsupported;
    if (capture::op_family(node.op)[0] != 'b') return Reason::not_blas;
    if (node.op != capture::Op::gemm) return Reason::op_unsupported;
    if (node.dtype != capture::DType::f32) return Reason::dtype_unsupported;
    return Reason::ok;
  }

  Reason run(Node& node) noexcept override {
    if (node.dnn) {
      if (!dnn_) return Reason::op_unsupported;
      t_ran_onednn = true;
      return dnn_->run(*node.dnn);
    }
    const auto& b = node.blas;
    const int64_t m = b.m, n = b.n, k = b.k;
    float* c = static_cast<float*>(b.c);
    const float alpha = static_cast<float>(b.alpha.re), beta = static_cast<float>(b.beta.re);
    if (m == 0 || n == 0) return Reason::ok;
    // The reference's special case, which a plain GEMM does not honour: alpha == 0 or k == 0,
    // A and B are not read and C becomes beta*C (beta == 0: zeros, whatever C held).
    if (alpha == 0 || k == 0) {
      if (beta != 1) scale(c, m, n, b.ldc, beta);
      return Reason::ok;
    }
    t_ran_onednn = true;
    const auto* pa = static_cast<const float*>(b.a);
    const auto* pb = static_cast<const float*>(b.b);
    const char ta = notrans(b.transa) ? 'N' : 'T', tb = notrans(b.transb) ? 'N' : 'T';  // 'C' is 'T'
    if (matmul_) {
      // A problem oneDNN declines to create fails before C is touched: the next backend runs it.
      return matmul_->run(ta, tb, m, n, k, alpha, pa, b.lda, pb, b.ldb, beta, c, b.ldc) ? Reason::ok
                                                                                         : Reason::internal_error;
    }
    // beta == 0: C is not read, as BLAS has it (a NaN there does not survive). oneDNN's GEMMs,
    // reference and JIT, hold to that for k > 0 (k == 0 is handled above); the unit tests fill
    // every C with NaN for beta == 0 on each kernel path. Zeroing C first, as this backend did,
    // cost more than the product on small calls: 64^3 at 90 GFLOP/s instead of 139.
    const int status = capture::blas::call_dnnl_sgemm(reinterpret_cast<const void*>(api_.sgemm), node);
    return status == dnnl_success ? Reason::ok : Reason::internal_error;
  }

 private:
  // backends.onednn.gemm: sgemm, matmul, or auto: matmul where oneDNN has matmul kernels of its
  // own for f32 (brgemm, on AVX-512 and newer CPUs); elsewhere its matmul wraps the same GEMM as
  // dnnl_sgemm and only adds a few microseconds per call.
  void choose_gemm(const std::string& mode) noexcept {
    if (mode == "sgemm") return;
    auto mm = std::make_unique<Matmul>(api_);
    std::string why;
    if (!mm->init(why)) {
      if (mode == "matmul")
        SOL_LOG(warn, "onednn: matmul unavailable (%s); using dnnl_sgemm", why.c_str());
      else
        SOL_LOG(debug, "onednn: matmul unavailable (%s); using dnnl_sgemm", why.c_str());
      note_ = "; matmul unavailable: " + why;
      return;
    }
    impl_ = mm->probe_implementation();
    if (mode == "auto" && impl_.rfind("brg", 0) != 0) {
      note_ = "; its matmul would be " + (impl_.empty() ? std::string("unavailable") : impl_) +
              ", no faster (backends.onednn.gemm = \"auto\")";
      return;
    }
    // Never destroyed: at exit libdnnl may already be finalised (see Matmul).
    matmul_ = mm.release();
  }

  static void scale(float* c, int64_t m, int64_t n, int64_t ldc, float beta) noexcept {
    for (int64_t j = 0; j < n; ++j) {
      float* col = c + j * ldc;
      if (beta == 0)
        std::memset(col, 0, sizeof(float) * static_cast<size_t>(m));
      else
        for (int64_t i = 0; i < m; ++i) col[i] *= beta;
    }
  }

  Api api_;
  Matmul* matmul_ = nullptr;       // set: GEMM runs as matmul primitives
  DnnPrimitives* dnn_ = nullptr;   // DNN nodes (dnn.hpp); null when this libdnnl cannot make them
  std::string version_, impl_, note_, dnn_note_;
  uint64_t spin_ns_ = 0;
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<OneDnn>();
}

}  // namespace sol::backends::onednn
