// Every native symbol SOL forwards to, generated from interpose/spec (see symbols.inc in the
// build tree). A Sym is a small integer: traces store it, names are looked up only when printing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sol::capture {

// API families, one interposition frontend each.
enum class Api : uint8_t { blas, cblas, dnnl, cublas, cublaslt, cudnn };
const char* api_name(Api api) noexcept;

// BLAS name families (interpose/spec/blas.toml): how a library spells the BLAS and CBLAS names
// (dgemm_, dgemm_64_, scipy_cblas_dgemm64_...) and how wide its INTEGERs are. none: another API.
enum class Family : uint8_t {
  none,
#define SOL_FAMILY(id, fortran_prefix, fortran_suffix, c_prefix, c_suffix, bits, what) id,
#include "families.inc"
#undef SOL_FAMILY
};
inline constexpr size_t kNumFamilies = 1
#define SOL_FAMILY(id, fortran_prefix, fortran_suffix, c_prefix, c_suffix, bits, what) +1
#include "families.inc"
#undef SOL_FAMILY
    ;
const char* family_name(Family f) noexcept;
// What the family is ("scipy-openblas64, bundled in pip's NumPy wheels (ILP64)").
const char* family_what(Family f) noexcept;
// Bits of the family's INTEGERs: 32, 64, or 0 where the library's own width decides (the plain
// names, which Debian's ILP64 libraries define too).
int family_bits(Family f) noexcept;
// A name as the family spells it: fortran_name(scipy64, "xerbla") is "scipy_xerbla_64_",
// c_name(scipy64, "cblas_dgemm") is "scipy_cblas_dgemm64_".
std::string family_fortran_name(Family f, const char* base);
std::string family_c_name(Family f, const char* base);

enum class Sym : uint16_t {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) id,
#include "symbols.inc"
#undef SOL_SYMBOL
};

inline constexpr Api kSymbolApi[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) Api::api,
#include "symbols.inc"
#undef SOL_SYMBOL
};
inline constexpr size_t kNumSymbols = sizeof kSymbolApi / sizeof kSymbolApi[0];
inline constexpr Family kSymbolFamily[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) Family::family,
#include "symbols.inc"
#undef SOL_SYMBOL
};

inline Api symbol_api(Sym s) noexcept {
  return kSymbolApi[static_cast<size_t>(s)];
}
inline Family symbol_family(Sym s) noexcept {
  return kSymbolFamily[static_cast<size_t>(s)];
}
const char* symbol_name(Sym s) noexcept;

}  // namespace sol::capture
