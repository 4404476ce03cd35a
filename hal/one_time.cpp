#include "hal/one_time.hpp"

#include "common/macros.hpp"

namespace sol::hal::one_time {
namespace {
constinit SOL_TLS uint8_t t_kinds = 0;
constinit SOL_TLS uint64_t t_measuring_ns = 0;
}  // namespace

void note(Kind kind) noexcept {
  t_kinds |= kind;
}

void note_measuring(uint64_t ns) noexcept {
  t_kinds |= measuring;
  t_measuring_ns += ns;
}

Work take() noexcept {
  const Work work{t_kinds, t_measuring_ns};
  t_kinds = 0;
  t_measuring_ns = 0;
  return work;
}

std::string names(uint8_t kinds) {
  static constexpr std::pair<Kind, const char*> kNames[] = {{kernel_compile, "kernel compile"},
                                                            {kernel_load, "kernel load"},
                                                            {backend_start, "backend start"},
                                                            {measuring, "auto's measuring"}};
  std::string out;
  for (const auto& [kind, name] : kNames)
    if (kinds & kind) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace sol::hal::one_time
