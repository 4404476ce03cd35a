// The per-call log (SOL_TRACE_LOG, [trace] log): one CSV line per computing call, BLAS or DNN
// execution, like ONEDNN_VERBOSE's, to stderr or a file, with or without the trace files:
//
//   sol,header,seq,time_ms,tid,api,symbol,op,dtype,backend,duration_ms,shape
//   sol,call,1,12.345,4242,blas,sgemm_,gemm,f32,native,0.052,m=128 n=32 k=512 transa=T transb=N
//
// time_ms: since the process started logging; duration_ms: the call, as routed; shape: the
// trace's shape text (quoted when it holds a comma or a quote). The columns are stable; new ones
// would go at the end. Set-up calls (oneDNN primitive creation and the like) are not logged. A
// file is appended to (several processes write whole lines), created 0600, never through a
// symbolic link; "%p" in its name is the pid. The header is written once per process to stderr,
// and to a file only when it is empty.
#pragma once

#include <cstdint>

#include "ir/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture::call_log {

// Opens the log; true when it is on. Once per process (a bad path gets one "sol: " line).
bool start(const config::Config& cfg) noexcept;
bool active() noexcept;

// One call that ran from t0 to t1 (sol::monotonic_ns) where `backend` says.
void record(const Node& node, const char* backend, uint64_t t0, uint64_t t1) noexcept;

}  // namespace sol::capture::call_log
