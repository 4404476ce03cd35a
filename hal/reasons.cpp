#include "hal/backend.hpp"

namespace sol::hal {

const char* reason_text(Reason r) noexcept {
  switch (r) {
#define SOL_REASON(name, text) \
  case Reason::name:           \
    return text;
#include "hal/reasons.def"
#undef SOL_REASON
  }
  return "?";
}

const char* reason_name(Reason r) noexcept {
  switch (r) {
#define SOL_REASON(name, text) \
  case Reason::name:           \
    return #name;
#include "hal/reasons.def"
#undef SOL_REASON
  }
  return "?";
}

}  // namespace sol::hal
