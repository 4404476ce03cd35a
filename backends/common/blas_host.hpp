// BLAS's quick returns, and the cases the reference computes without reading A, B or x (alpha == 0
// or k == 0: C := beta*C, y := beta*y, B := 0): a device backend does them on the host, where the
// data already is, rather than with two transfers. One copy for every device backend (opencl,
// cuda), so that each honours them alike and a new backend gets them for free.
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/common/blas_args.hpp"
#include "backends/common/device_operand.hpp"
#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends {

// A scalar argument as E.
template <class E>
E host_scalar(const capture::Scalar& s) {
  if constexpr (kComplex<E>)
    return E(static_cast<RealOf<E>>(s.re), static_cast<RealOf<E>>(s.im));
  else
    return static_cast<E>(s.re);
}

// Complex products as gfortran computes them (no C99 Annex G recovery of NaN results).
template <class E>
E times(E a, E b) {
  if constexpr (kComplex<E>)
    return E(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
  else
    return a * b;
}

// y scaled by beta (zeroed when beta == 0), n elements at increment inc.
template <class E>
void scale_vector(void* y, int64_t n, int64_t inc, const capture::Scalar& beta) {
  auto* p = static_cast<E*>(y);
  const E bv = host_scalar<E>(beta);
  for (int64_t i = 0; i < n; ++i) {
    E& v = p[vector_at(i, n, inc)];
    v = is_zero(beta) ? E{} : times(bv, v);
  }
}

// C scaled by beta (zeroed when beta == 0): its upper triangle (tri > 0), lower triangle (tri < 0)
// or all rows x cols (tri == 0). `herm`: beta is real and the diagonal is written as real, as
// cherk and cher2k do.
template <class E>
void scale_columns(void* c, int64_t rows, int64_t cols, int64_t ld, int tri, const capture::Scalar& beta, bool herm) {
  auto* p = static_cast<E*>(c);
  const E bv = host_scalar<E>(beta);
  for (int64_t j = 0; j < cols; ++j) {
    const int64_t first = tri < 0 ? j : 0;
    const int64_t last = tri > 0 ? j : rows - 1;
    for (int64_t i = first; i <= last; ++i) {
      E& v = p[i + j * ld];
      if (is_zero(beta)) {
        v = E{};
      } else if constexpr (kComplex<E>) {
        if (herm)
          v = i == j ? E(bv.real() * v.real(), 0) : E(bv.real() * v.real(), bv.real() * v.imag());
        else
          v = times(bv, v);
      } else {
        v = bv * v;
      }
    }
  }
}

// Lazily (the device keeps an active resident set, backends/common/resident.hpp), work done on the
// host needs the host's copies of the node's operands current, and writable where it writes (no
// fault may happen under the backend's lock). `Device` has resident().
template <class Device>
void make_host_current(Device& dev, const capture::Node& node) {
  auto* res = dev.resident();
  if (!res || !res->active()) return;
  DeviceOperand ops[kMaxJobOperands];
  const int n = describe_operands<DeviceOperand, kMaxJobOperands>(node, ops);
  for (int i = 0; i < n; ++i) res->host_ready(ops[i].ext.ptr, ops[i].ext.bytes, ops[i].ext.written);
}

// What no device backend takes, whatever its device: a node that is not BLAS (not_blas), and the
// scalar-only routines, which leave a device nothing to do (op_unsupported). ok otherwise.
inline hal::Reason device_blas_op(const capture::Node& node) noexcept {
  using capture::Op;
  if (std::strncmp(capture::op_family(node.op), "blas", 4) != 0) return hal::Reason::not_blas;
  switch (node.op) {
    case Op::rotg:
    case Op::rotmg:
    case Op::cabs1: return hal::Reason::op_unsupported;
    default: return hal::Reason::ok;
  }
}

// The same for the operands' strides: a row-major call (the executor turns those into
// column-major ones first) and a written vector at increment 0 (sequential_recurrence()) are
// stride_unsupported.
inline hal::Reason device_blas_strides(const capture::Node& node) noexcept {
  if (node.blas.layout == 'R' || sequential_recurrence(node)) return hal::Reason::stride_unsupported;
  return hal::Reason::ok;
}

// Runs a BLAS node by its element type E and level: `run(level, E{})` (1, 2 or 3) for f32, f64, c64
// and c128; dtype_unsupported for any other type.
template <class Run>
hal::Reason run_by_type_and_level(const capture::Node& node, Run&& run) {
  const int level = capture::op_family(node.op)[4] - '0';  // "blas1", "blas2", "blas3"
  switch (node.dtype) {
    case capture::DType::f32: return run(level, float{});
    case capture::DType::f64: return run(level, double{});
    case capture::DType::c64: return run(level, cfloat{});
    case capture::DType::c128: return run(level, cdouble{});
    default: return hal::Reason::dtype_unsupported;
  }
}

// What a node needs of the device, as the reference orders its quick returns.
enum class HostCase : uint8_t {
  device,       // nothing here: the device computes it
  done,         // an empty problem, or alpha == 0 / k == 0 computed here
  unsupported,  // not an op of the level asked
};
// What run() returns for a node that needs nothing of the device.
inline hal::Reason host_reason(HostCase c) noexcept {
  return c == HostCase::done ? hal::Reason::ok : hal::Reason::op_unsupported;
}

// Level 3 (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm, trsm). `before_write()` runs before
// the host writes C (or B): a lazy backend makes the host's copy current there.
template <class E, class BeforeWrite>
HostCase level3_on_host(const capture::Node& node, BeforeWrite&& before_write) {
  using capture::Op;
  const capture::BlasArgs& b = node.blas;
  const int tri = is_upper(b.uplo) ? 1 : -1;
  switch (node.op) {
    case Op::gemm:
    case Op::symm:
    case Op::hemm:
      if (b.m == 0 || b.n == 0) return HostCase::done;
      if (is_zero(b.alpha) || (node.op == Op::gemm && b.k == 0)) {
        if (!is_one(b.beta)) {
          before_write();
          scale_columns<E>(b.c, b.m, b.n, b.ldc, 0, b.beta, false);
        }
        return HostCase::done;
      }
      return HostCase::device;
    case Op::syrk:
    case Op::herk:
    case Op::syr2k:
    case Op::her2k:
      if (b.n == 0) return HostCase::done;
      if (is_zero(b.alpha) || b.k == 0) {
        if (!is_one(b.beta)) {
          before_write();
          scale_columns<E>(b.c, b.n, b.n, b.ldc, tri, b.beta, node.op == Op::herk || node.op == Op::her2k);
        }
        return HostCase::done;
      }
      return HostCase::device;
    case Op::trmm:
    case Op::trsm:
      if (b.m == 0 || b.n == 0) return HostCase::done;
      if (is_zero(b.alpha)) {
        before_write();
        scale_columns<E>(b.b, b.m, b.n, b.ldb, 0, capture::Scalar(0.0), false);
        return HostCase::done;
      }
      return HostCase::device;
    default: return HostCase::unsupported;
  }
}

// Level 2 (gemv, gbmv, symv, hemv, sbmv, hbmv, spmv, hpmv, the triangular ones, ger*, the rank
// updates): true when the node is done here. `before_write()` as for level 3 (before y).
template <class E, class BeforeWrite>
bool level2_on_host(const capture::Node& node, BeforeWrite&& before_write) {
  using capture::Op;
  const capture::BlasArgs& b = node.blas;
  switch (node.op) {
    case Op::gemv:
    case Op::gbmv:
    case Op::symv:
    case Op::hemv:
    case Op::sbmv:
    case Op::hbmv:
    case Op::spmv:
    case Op::hpmv: {
      const bool general = node.op == Op::gemv || node.op == Op::gbmv;
      if ((general && b.m == 0) || b.n == 0 || (is_zero(b.alpha) && is_one(b.beta))) return true;
      if (is_zero(b.alpha)) {
        before_write();
        scale_vector<E>(b.y, general && notrans(b.transa) ? b.m : b.n, b.incy, b.beta);
        return true;
      }
      return false;
    }
    case Op::trmv:
    case Op::tbmv:
    case Op::tpmv:
    case Op::trsv:
    case Op::tbsv:
    case Op::tpsv: return b.n == 0;
    case Op::ger:
    case Op::geru:
    case Op::gerc: return b.m == 0 || b.n == 0 || is_zero(b.alpha);
    default:  // syr, her, spr, hpr, syr2, her2, spr2, hpr2
      return b.n == 0 || is_zero(b.alpha);
  }
}

// Level 1: the quick returns, with the function's result where it has one. The reference's asum
// and iamax (3.11) return 0 for incx <= 0; nrm2 does not: it reads a negative increment from the
// far end and counts x(1) n times for incx == 0, which the gathered vector reproduces. rotm's
// flag -2 is the identity. Nothing is written to memory: no lazy copy needs to be current.
template <class E>
HostCase level1_on_host(capture::Node& node) {
  using capture::Op;
  using R = RealOf<E>;
  const capture::BlasArgs& b = node.blas;
  switch (node.op) {
    case Op::asum:
    case Op::nrm2:
    case Op::iamax:
      if (b.n <= 0 || (b.incx <= 0 && node.op != Op::nrm2)) {
        if (node.op == Op::iamax)
          node.ret.set(0);
        else
          node.ret.set(R(0));
        return HostCase::done;
      }
      if (node.op == Op::iamax && b.n == 1) {
        node.ret.set(1);
        return HostCase::done;
      }
      return HostCase::device;
    case Op::sdsdot:
    case Op::dsdot:
      if (b.n > 0) return HostCase::device;
      if (node.op == Op::sdsdot)
        node.ret.set(static_cast<float>(b.alpha.re));
      else
        node.ret.set(0.0);
      return HostCase::done;
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
      if (b.n > 0) return HostCase::device;
      node.ret.set(E{});
      return HostCase::done;
    case Op::axpy: return b.n <= 0 || is_zero(b.alpha) ? HostCase::done : HostCase::device;
    case Op::scal: return b.n <= 0 || b.incx <= 0 ? HostCase::done : HostCase::device;
    case Op::rotm:
      return b.n <= 0 || static_cast<const E*>(b.param)[0] + E(2) == E(0) ? HostCase::done : HostCase::device;
    case Op::copy:
    case Op::swap:
    case Op::rot: return b.n <= 0 ? HostCase::done : HostCase::device;
    default: return HostCase::unsupported;
  }
}

}  // namespace sol::backends
