#include "backends/onednn/onednn.hpp"

#include <dlfcn.h>

#include <cstring>
#include <string>

#include "common/native.hpp"
#include "config/config.hpp"

namespace sol::backends::onednn {
namespace {

using capture::Node;
using hal::Reason;

// dnnl_status_t dnnl_sgemm(char transa, char transb, dnnl_dim_t M, N, K, float alpha, const float* A,
//                          dnnl_dim_t lda, const float* B, dnnl_dim_t ldb, float beta, float* C, dnnl_dim_t
//                          ldc):
// row-major.
using SgemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                        int64_t, float, float*, int64_t);
using VersionFn = const struct Version {
  int major, minor, patch;
  const char* hash;
  unsigned cpu_runtime, gpu_runtime;
} * (*)();

bool notrans(char t) noexcept {
  return t == 'N' || t == 'n';
}

class OneDnn final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "onednn"; }

  bool init(const config::Config& cfg, std::string& why) noexcept override {
    // The program's own libdnnl if loaded (PyTorch's), else the configured one.
    void* lib = nullptr;
    if (void* any = find_native("dnnl_sgemm")) {
      Dl_info info{};
      if (dladdr(any, &info) && info.dli_fname) lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }
    if (!lib) lib = dlopen(cfg.onednn_library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      why = e ? e : "cannot open " + cfg.onednn_library;
      return false;
    }
    sgemm_ = reinterpret_cast<SgemmFn>(dlsym(lib, "dnnl_sgemm"));
    if (!sgemm_) {
      why = cfg.onednn_library + " has no dnnl_sgemm";
      return false;
    }
    if (auto v = reinterpret_cast<VersionFn>(dlsym(lib, "dnnl_version")))
      if (const auto* ver = v())
        version_ = "oneDNN " + std::to_string(ver->major) + "." + std::to_string(ver->minor) + "." +
                   std::to_string(ver->patch);
    return true;
  }

  std::string device() const override {
    return (version_.empty() ? "oneDNN" : version_) + ", dnnl_sgemm on the CPU";
  }

  Reason supports(const Node& node) const noexcept override {
    if (capture::op_family(node.op)[0] != 'b') return Reason::not_blas;
    if (node.op != capture::Op::gemm) return Reason::op_unsupported;
    if (node.dtype != capture::DType::f32) return Reason::dtype_unsupported;
    return Reason::ok;
  }

  Reason run(Node& node) noexcept override {
    const auto& b = node.blas;
    const int64_t m = b.m, n = b.n, k = b.k;
    float* c = static_cast<float*>(b.c);
    const float alpha = static_cast<float>(b.alpha.re), beta = static_cast<float>(b.beta.re);
    if (m == 0 || n == 0) return Reason::ok;
    // The reference's special cases, which a plain GEMM does not honour. beta == 0: C is not read,
    // so a NaN in it must not survive (its old content does not matter either way, so zeroing it
    // first leaves nothing wrong behind should the call fail). alpha == 0 or k == 0: A and B are
    // not read, C becomes beta*C.
    if (beta == 0) scale(c, m, n, b.ldc, 0);
    if (alpha == 0 || k == 0) {
      if (beta != 0 && beta != 1) scale(c, m, n, b.ldc, beta);
      return Reason::ok;
    }
    // Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: swap the operands.
    const char ta = notrans(b.transa) ? 'N' : 'T', tb = notrans(b.transb) ? 'N' : 'T';
    const int status = sgemm_(tb, ta, n, m, k, alpha, static_cast<const float*>(b.b), b.ldb,
                              static_cast<const float*>(b.a), b.lda, beta, c, b.ldc);
    return status == 0 ? Reason::ok : Reason::internal_error;
  }

 private:
  static void scale(float* c, int64_t m, int64_t n, int64_t ldc, float beta) noexcept {
    for (int64_t j = 0; j < n; ++j) {
      float* col = c + j * ldc;
      if (beta == 0)
        std::memset(col, 0, sizeof(float) * static_cast<size_t>(m));
      else
        for (int64_t i = 0; i < m; ++i) col[i] *= beta;
    }
  }

  SgemmFn sgemm_ = nullptr;
  std::string version_;
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<OneDnn>();
}

}  // namespace sol::backends::onednn
