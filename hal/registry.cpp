#include "hal/registry.hpp"

#include "common/clock.hpp"
#include "common/log.hpp"
#include "hal/one_time.hpp"

namespace sol::hal {

Registry::Registry(const config::Config& cfg) : cfg_(cfg) {
  for (const auto& e : builtin_backends()) {
    auto slot = std::make_unique<Slot>();
    slot->entry = &e;
    slots_.push_back(std::move(slot));
  }
}

Registry::Slot* Registry::find(std::string_view name) noexcept {
  for (auto& s : slots_)
    if (name == s->entry->name) return s.get();
  return nullptr;
}

bool Registry::built(std::string_view name) const noexcept {
  for (const auto& s : slots_)
    if (name == s->entry->name) return true;
  return false;
}

Backend* Registry::object(Slot& slot) noexcept {
  std::call_once(slot.create_once, [&] {
    try {
      slot.object = slot.entry->create();
    } catch (...) {
      slot.object.reset();
    }
  });
  return slot.object.get();
}

Backend* Registry::get(std::string_view name) noexcept {
  Slot* slot = find(name);
  if (!slot) return nullptr;
  std::call_once(slot->init_once, [&] {
    Backend* b = object(*slot);
    std::string why;
    const uint64_t t0 = monotonic_ns();
    const bool ok = b && b->init(cfg_, why);
    SOL_LOG(debug, "backend %s: set up in %.1f ms%s", slot->entry->name,
            static_cast<double>(monotonic_ns() - t0) * 1e-6, ok ? "" : ", unavailable");
    if (ok) {
      one_time::note(one_time::backend_start);
      SOL_LOG(info, "backend %s: %s", slot->entry->name, b->device().c_str());
      slot->ready = b;
    } else {
      slot->why = !b ? "out of memory while creating it" : why.empty() ? "initialisation failed" : why;
      SOL_LOG(info, "backend %s unavailable: %s", slot->entry->name, slot->why.c_str());
    }
    slot->initialised.store(true, std::memory_order_release);
  });
  return slot->ready;
}

void Registry::prepare(std::string_view name, Backend::StartWhen when) noexcept {
  Slot* slot = find(name);
  if (Backend* b = slot ? object(*slot) : nullptr) b->prepare(cfg_, when);
}

void Registry::start_now(std::string_view name) noexcept {
  Slot* slot = find(name);
  if (Backend* b = slot ? object(*slot) : nullptr) b->start_now();
}

bool Registry::starting(std::string_view name) noexcept {
  Slot* slot = find(name);
  if (!slot || slot->initialised.load(std::memory_order_acquire)) return false;
  Backend* b = object(*slot);
  return b && b->starting();
}

Backend::Hint Registry::accelerator_hint(std::string_view name) noexcept {
  Slot* slot = find(name);
  Backend* b = slot ? object(*slot) : nullptr;
  return b ? b->accelerator_hint(cfg_) : Backend::Hint::no;
}

bool Registry::device_backend(std::string_view name) noexcept {
  Slot* slot = find(name);
  Backend* b = slot ? object(*slot) : nullptr;
  return b && b->device_backend();
}

bool Registry::runs_lazily(std::string_view name) noexcept {
  Slot* slot = find(name);
  Backend* b = slot ? object(*slot) : nullptr;
  return b && b->runs_lazily();
}

bool Registry::compiles_kernels(std::string_view name) noexcept {
  Slot* slot = find(name);
  Backend* b = slot ? object(*slot) : nullptr;
  return b && b->compiles_kernels();
}

std::string Registry::why(std::string_view name) {
  Slot* slot = find(name);
  if (!slot) return "not built into this libsol";
  get(name);
  return slot->why;
}

}  // namespace sol::hal
