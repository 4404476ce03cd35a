// Every native symbol SOL forwards to, generated from interpose/spec (see symbols.inc in the
// build tree). A Sym is a small integer: traces store it, names are looked up only when printing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sol::capture {

// API families, one interposition frontend each.
enum class Api : uint8_t { blas, cblas, dnnl, cublas, cublaslt, cudnn };
const char* api_name(Api api) noexcept;

enum class Sym : uint16_t {
#define SOL_SYMBOL(id, api, op, dtype, fields) id,
#include "symbols.inc"
#undef SOL_SYMBOL
};

inline constexpr Api kSymbolApi[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields) Api::api,
#include "symbols.inc"
#undef SOL_SYMBOL
};
inline constexpr size_t kNumSymbols = sizeof kSymbolApi / sizeof kSymbolApi[0];

inline Api symbol_api(Sym s) noexcept {
  return kSymbolApi[static_cast<size_t>(s)];
}
const char* symbol_name(Sym s) noexcept;

}  // namespace sol::capture
