#include "capture/capture.hpp"

#include "capture/trace/trace.hpp"
#include "config/config.hpp"

namespace sol::capture {

bool start(const config::Config& cfg) noexcept {
  return trace::start(cfg);
}

void submit(Node& node, NativeFn native) noexcept {
  if (trace::active()) {
    trace::Span span(node);
    trace::before_call(node);
    native();
    trace::after_call(node);
    span.finish(node, "native");
    return;
  }
  native();
}

}  // namespace sol::capture
