// The cuda backend of a libsol built without the CUDA headers: listed, never available.
#include <memory>
#include <string>

#include "hal/backend.hpp"

namespace sol::backends::cuda {
namespace {

class UnbuiltCudaBackend final : public hal::Backend {
 public:
  const char* name() const noexcept override { return "cuda"; }
  bool init(const config::Config&, std::string& why) noexcept override {
    why = "this libsol was built without the CUDA headers (cuda_runtime_api.h, cublas_v2.h)";
    return false;
  }
  std::string device() const override { return "not built"; }
  bool device_backend() const noexcept override { return true; }
  hal::Reason supports(const capture::Node&) const noexcept override { return hal::Reason::unavailable; }
  hal::Reason run(capture::Node&) noexcept override { return hal::Reason::unavailable; }
};

}  // namespace

std::unique_ptr<hal::Backend> create() {
  return std::make_unique<UnbuiltCudaBackend>();
}

}  // namespace sol::backends::cuda
