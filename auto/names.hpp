// auto works on the IR's nodes and their BLAS semantics: the names it takes from there unqualified.
#pragma once

#include "ir/node.hpp"

namespace sol::capture::blas {}

namespace sol::autosel {

using capture::Api;
using capture::BlasArgs;
using capture::DType;
using capture::Node;
using capture::Op;
using capture::Sym;
namespace blas = capture::blas;

}  // namespace sol::autosel
