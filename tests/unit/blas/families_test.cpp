// BLAS name families: how each spells the routines, the routine SOL calls back in a call's own
// family, and which backends take an ILP64 call's integers (capture/blas/check.cpp: fits_backend).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/reference/reference.hpp"
#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"

namespace sol::capture::blas {
namespace {

Sym named(const std::string& name) {
  for (size_t i = 0; i < kNumSymbols; ++i)
    if (name == symbol_name(static_cast<Sym>(i))) return static_cast<Sym>(i);
  ADD_FAILURE() << "no symbol " << name;
  return kNoRoutine;
}

TEST(Families, SpellTheNamesAsTheirLibrariesDo) {
  EXPECT_EQ(symbol_family(named("dgemm_")), Family::plain);
  EXPECT_EQ(symbol_family(named("cblas_dgemm64_")), Family::openblas64);
  EXPECT_EQ(symbol_family(named("cblas_dgemm_64")), Family::mkl64);
  EXPECT_EQ(symbol_family(named("scipy_dgemm_")), Family::scipy);
  EXPECT_EQ(symbol_family(named("scipy_cblas_cdotc_sub64_")), Family::scipy64);
  EXPECT_EQ(symbol_family(named("dnnl_sgemm")), Family::none);
  EXPECT_EQ(family_fortran_name(Family::scipy64, "xerbla"), "scipy_xerbla_64_");
  EXPECT_EQ(family_c_name(Family::scipy64, "openblas_get_config"), "scipy_openblas_get_config64_");
  EXPECT_EQ(family_c_name(Family::openblas64, "cblas_xerbla"), "cblas_xerbla64_");
  EXPECT_EQ(family_bits(Family::plain), 0);  // the library's own
  EXPECT_EQ(family_bits(Family::scipy), 32);
  EXPECT_EQ(family_bits(Family::scipy64), 64);
}

TEST(Families, AFamilysCallIsMeasuredAndVerifiedOnItsOwnFortranRoutine) {
  const Sym routine = fortran_routine(Op::gemm, DType::f64, false);
  EXPECT_EQ(routine, named("dgemm_"));
  EXPECT_EQ(in_family(routine, symbol_family(named("scipy_cblas_dgemm64_"))), named("scipy_dgemm_64_"));
  EXPECT_EQ(in_family(routine, Family::mkl64), named("dgemm_64"));
  EXPECT_EQ(in_family(named("csscal_"), Family::openblas64), named("csscal_64_"));
  EXPECT_EQ(in_family(routine, Family::none), kNoRoutine);
}

TEST(Families, AnIlp64CallBeyond32BitsFitsOnlyABackendCountingIn64) {
  const auto backend = backends::reference::create();
  hal::Backend* reference = backend.get();
  Node node(named("dscal_64_"), Op::scal, DType::f64);
  node.blas.n = (int64_t{1} << 32) + 1;
  node.blas.incx = 0;
  // LP64 calls always fit: their integers are 32-bit.
  EXPECT_EQ(fits_backend(node, *reference), hal::Reason::ok);
  node.ilp64 = true;
  EXPECT_EQ(fits_backend(node, *reference), hal::Reason::ok);  // reference: 64-bit loops
  struct Narrow final : hal::Backend {
    const char* name() const noexcept override { return "narrow"; }
    bool init(const config::Config&, std::string&) noexcept override { return true; }
    std::string device() const override { return "a backend with 32-bit integers"; }
    hal::Reason supports(const Node&) const noexcept override { return hal::Reason::ok; }
    hal::Reason run(Node&) noexcept override { return hal::Reason::ok; }
  } narrow;
  EXPECT_EQ(fits_backend(node, narrow), hal::Reason::dims_exceed_backend);
  node.blas.n = INT32_MAX;
  node.blas.incx = -INT32_MAX;
  EXPECT_EQ(fits_backend(node, narrow), hal::Reason::ok);
  node.blas.incx = INT32_MIN;  // -2^31: beyond what a 32-bit backend can negate
  EXPECT_EQ(fits_backend(node, narrow), hal::Reason::dims_exceed_backend);
}

}  // namespace
}  // namespace sol::capture::blas
