// Large allocations served from SOL's own pages, so that the lazy executor may guard them.
//
// The lazy executor protects the host pages of buffers whose valid copy is on a device
// (capture/lazy/guard.hpp). A page of glibc's heap also holds malloc's own metadata: the chunk
// headers of neighbouring blocks, the top chunk. Guarding one would make malloc fault while it
// holds its arena lock, and the flush that the fault starts (the device runtime) mallocs: a
// deadlock. So the lazy executor guards only memory whose pages belong to one block alone, and
// SOL serves such blocks itself: once serve_from() was called, every allocation of at least
// `min_bytes` (malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc, pvalloc
// with an alignment up to the page; interpose/alloc_hooks.cpp) gets page-aligned pages of its own.
//
// - The pages come from one region reserved at serve_from() (read-write, MAP_NORESERVE: only
//   touched pages cost memory). Blocks are carved from it in whole pages, first fit by size class,
//   neighbours coalesced when given back. Per page, the block that owns it: served_block() answers
//   for any interior address with two loads.
// - A block given back has fresh anonymous pages mapped over it: its memory goes back to the OS,
//   and its pages are read-write and zero for the next block, even if the executor left them
//   protected. Except for a few blocks of moderate size (at most 16, 64 MiB together: about what
//   glibc keeps at the top of its heap), which are only made read-write and kept as they are, so
//   that a program that frees and reallocates a large buffer in a loop does not take a page fault
//   per page each time it writes the new one. Such a block is zeroed when reused only for a
//   caller that asks for zero (allocate()'s `zero`: calloc); malloc's caller gets it as it is.
// - Below `min_bytes`, with a larger alignment, or with the region exhausted, allocations are the
//   next allocator's. Before serve_from(), and in every process that never calls it, all are.
// - Carving takes a mutex, held across fork() so that the child finds the free lists whole; its
//   served blocks are copies, as the rest of its memory. The lookup takes no lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace sol::capture::lazy {

// Starts serving every allocation of at least `min_bytes` (a page at least) from SOL's own
// mappings. Called once at start-up by the lazy executor (later calls change nothing and return
// the first call's result). false when no region could be reserved (one `sol: ` line):
// allocations stay the next allocator's.
bool serve_from(size_t min_bytes) noexcept;

// Whether serve_from() succeeded: the allocation hooks' one test.
extern std::atomic<bool> g_serving;
inline bool serving() noexcept {
  return g_serving.load(std::memory_order_relaxed);
}

// Whether `p` lies inside a live block SOL serves; if so, its pages [b, e): page-aligned, holding
// that block only, e - b at least the size asked. Lock-free and async-signal-safe (the SIGSEGV
// handler and every intercepted call's operands ask): O(1), no lock, no allocation.
bool served_block(const void* p, uintptr_t& b, uintptr_t& e) noexcept;

// Test-only: SOL_TEST_SERVE_FROM=<bytes> (a decimal byte count) calls serve_from(bytes) at libsol's
// start-up, until the lazy executor does (the allocation tests run real programs with blocks
// served). Not a configuration key: like every SOL_TEST_* variable, the configuration skips it.
void serve_from_test_env() noexcept;

// For the allocation hooks (interpose/alloc_hooks.cpp), valid only while serving():

// A new block of at least n bytes, page-aligned; zero unless `zero` is false (then its contents
// are unspecified: a reused cached block's old bytes). nullptr when n < min_bytes (a page at
// least) or the region is exhausted (the caller then asks the next allocator).
void* allocate(size_t n, bool zero = true) noexcept;

// Gives back the block that starts at b (served_block() said so).
void release(uintptr_t b) noexcept;

// Makes the block that starts at b hold n >= min_bytes bytes where it is (shrinking gives pages
// back, growing takes free pages after it, which are zero): false when it cannot grow there, or
// when n < min_bytes (the caller then moves the block).
bool resize(uintptr_t b, size_t n) noexcept;

}  // namespace sol::capture::lazy
