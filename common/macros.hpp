// Small portability macros shared by every layer.
#pragma once

#define SOL_LIKELY(x) __builtin_expect(!!(x), 1)
#define SOL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SOL_NOINLINE __attribute__((noinline))
#define SOL_EXPORT __attribute__((visibility("default")))
#define SOL_HIDDEN __attribute__((visibility("hidden")))
// libsol is preloaded or linked at start-up, so its thread-locals can live in the static TLS block:
// an access is one %fs-relative load instead of a __tls_get_addr call.
#define SOL_TLS __attribute__((tls_model("initial-exec"))) thread_local
