// What every device backend's Device has (device_backend.hpp): one per backend, never copied; a
// description for `sol backends` and an identity that what was measured or compiled on it is
// keyed by, both set when it opens; the lazy executor's copies once attached.
#pragma once

#include <string>

namespace sol::backends {

template <class Resident>
class DeviceBase {
 public:
  DeviceBase(const DeviceBase&) = delete;
  DeviceBase& operator=(const DeviceBase&) = delete;

  // What `sol backends` and the log say the device is.
  const std::string& description() const noexcept { return description_; }
  // Everything a measured figure or a compiled program depends on besides its own inputs (names,
  // versions, the link).
  const std::string& identity() const noexcept { return identity_; }

  // The lazy executor's device copies (the backend's resident.hpp), or nullptr when nodes run
  // eagerly.
  Resident* resident() const noexcept { return resident_; }
  void set_resident(Resident* r) noexcept { resident_ = r; }

 protected:
  DeviceBase() = default;
  ~DeviceBase() = default;

  std::string description_, identity_;

 private:
  Resident* resident_ = nullptr;
};

}  // namespace sol::backends
