// Set-up calls: an API's bookkeeping (oneDNN's descriptors, memory objects, engines; cuBLAS's and
// cuDNN's handles and descriptors), which computes nothing. The one rule by which every view of a
// trace (the exit table, sol report and sol diff, the flame graph, Perfetto) leaves them out unless
// asked for them.
#pragma once

#include <string_view>

#include "ir/node.hpp"

namespace sol::capture {

bool is_setup(Op op) noexcept;
// By name, for the op names that trace files hold ("dnnl_api").
bool is_setup(std::string_view op_name) noexcept;

}  // namespace sol::capture
