// Random BLAS calls for the tests: valid ones with buffers sized to what the routine touches
// (plus slack that must stay untouched), and arbitrary, often invalid ones for the argument
// checks.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir/node.hpp"
#include "netlib.hpp"

namespace sol::test {

// Every array a BLAS call may touch, as raw bytes.
struct Buffers {
  std::vector<unsigned char> a, b, c, x, y, param, ra, rb, rc, rs, rd1, rd2, rx1;
};

struct Case {
  capture::Node node;  // the call; its pointers are set by bind()
  Buffers buffers;
};

// Points the node's array arguments at `buffers` (null for an empty buffer).
void bind(capture::Node& node, Buffers& buffers);

// A readable account of a call, for failure messages.
std::string describe(const capture::Node& node);

// Calls the reference cannot be compared on:
// - a row-major cblas_[cz]gemv or cblas_[cz]gbmv with ConjTrans and M <= 0 < N loops forever in
//   netlib's CBLAS (it negates y with a stride it never set);
// - SROTMG/DROTMG leave SFLAG undefined when 1 - H12*H21 <= 0 (only for d2 < 0), and rescale
//   forever once d1 or d2 is infinite or d1 negative (again only for d2 < 0).
bool reference_hangs(const capture::Node& node);
bool reference_undefined(const capture::Node& node);

class CaseMaker {
 public:
  CaseMaker(const Routine& routine, uint64_t seed) : r_(routine), rng_(seed) {}

  // A random call in the given layout ('C', or 'R' for CBLAS row-major and dnnl_sgemm), valid
  // but for an occasional zero increment of a level 2 routine (invalid, except where row-major
  // CBLAS replaces the vector by a conjugated copy; netlib decides): shapes including 0 and 1,
  // leading dimensions above the minimum, negative and non-unit increments, every
  // transpose/triangle/side/diagonal, special scalars (0, 1, -1), exact zeros in the data and, in
  // some calls, Inf and NaN; outputs that the call must not read (beta == 0) are sometimes
  // filled with NaN.
  Case valid(char layout);

  // A call with every argument drawn from a small range that includes invalid values (negative
  // dimensions, zero increments, short leading dimensions, bad characters and enums), over
  // buffers large enough for any valid draw.
  Case arbitrary(char layout);
  // The same without the buffers, for reusing one set of them.
  capture::Node arbitrary_call(char layout);

  std::mt19937_64& rng() { return rng_; }

 private:
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class C>
  auto one_of(const C& values) {
    return values[size_t(pick(0, int64_t(std::size(values)) - 1))];
  }
  char letter(const char* valid);  // a valid option, in lower case now and then for Fortran
  int64_t inc(double zero_chance);
  capture::Scalar scalar(bool real_only);
  double element();
  void fill(std::vector<unsigned char>& buf, int64_t elements, bool real_elements = false);
  void poison(std::vector<unsigned char>& buf);
  size_t elem_size() const;
  size_t real_size() const;

  const Routine& r_;
  std::mt19937_64 rng_;
  bool special_ = false;  // this call's data may hold Inf and NaN
  bool wide_ = false;     // this call's data spans the exponent range
};

}  // namespace sol::test
