// A BLAS call's shape class: what auto measures once and routes by (auto/README.md, "class").
// A class is a 64-bit key; the profile (profile.hpp) keeps a row per class.
#pragma once

#include <cstdint>
#include <string>

#include "ir/node.hpp"

namespace sol::autosel::profile {

// A BLAS node's class: its routine, element type, layout, transposes and other character
// arguments, whether its vectors are contiguous, and the size class of each of m, n, k: an octave
// [2^b, 2^(b+1)) in two halves split at 1.5 * 2^b (256-383, 384-511), the largest sizes sharing
// one. A choice made at one size of a class holds for the others (bench/auto_sweep.py checks it);
// whole octaves hid two libraries' rates crossing (auto/README.md, R1).
uint64_t class_of(const capture::Node& node) noexcept;
// The same, readably: "gemm f32 transa=N transb=T m=256 n=384 k=64" (a dimension's class by its
// lower end; absent for one the routine does not have).
std::string class_text(uint64_t key);
// The class a size belongs to, by its lower end (300 -> 256, 400 -> 384); sizes from kLargest up
// share one.
int64_t class_floor(int64_t size) noexcept;
// Which of m, n, k (bits 0, 1, 2) lie in the upper half of their class's range (256-383: 320 up).
int halves_of(const capture::Node& node) noexcept;
// A class's sub-class by halves_of: where a class's two fastest candidates measured within
// kCloseRates of each other, their rates may cross inside it, so a call in other halves than the
// measured one is routed, and measured, by its sub-class ("gemm f32 transa=T transb=N m=320 n=320
// k=320"). So is a call of a class that left the program's library for a backend, however far
// ahead: a backend's rate can fall off inside a class where native's holds, and native is the
// choice that never runs below the program's own speed; with native left out, a class that went
// elsewhere than the openblas backend, which runs the program's library with this CPU's kernels.
// (auto/README.md, R2.)
uint64_t sub_class_of(const capture::Node& node) noexcept;
inline constexpr double kCloseRates = 1.15;
inline constexpr int64_t kLargest = 4096;

// The key's fields, for the profile's checks of its rows: `bits` bits from `shift`; dimension i's
// (m, n, k) size class, 0 where the routine lacks it.
uint64_t field(uint64_t key, int shift, int bits) noexcept;
int dim_class(uint64_t key, int i) noexcept;
// Which of m, n, k lie in the upper half of their class (halves_of's bits), and class `key`'s
// sub-class for a call in halves `h`.
int halves(int64_t m, int64_t n, int64_t k) noexcept;
uint64_t sub_class(uint64_t key, int h) noexcept;
inline constexpr const char* kTrans = "NTC";
// A sub-class sets this bit of its key, and its halves from bit kHalvesShift.
inline constexpr uint64_t kSubClass = uint64_t{1} << 41;
inline constexpr int kHalvesShift = 42;  // transa/transb's codes in a key, from 1

}  // namespace sol::autosel::profile
