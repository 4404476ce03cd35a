// Until the allocation server lands: nothing is served, so the lazy executor guards nothing and
// every device node runs eagerly.
#include "capture/lazy/served.hpp"

namespace sol::capture::lazy {
std::atomic<bool> g_serving{false};
bool serve_from(size_t) noexcept { return false; }
bool served_block(const void*, uintptr_t&, uintptr_t&) noexcept { return false; }
void serve_from_test_env() noexcept {}
void* allocate(size_t) noexcept { return nullptr; }
void release(uintptr_t) noexcept {}
bool resize(uintptr_t, size_t) noexcept { return false; }
}  // namespace sol::capture::lazy
