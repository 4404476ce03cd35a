// The oracle of the BLAS tests: netlib's reference BLAS and CBLAS 3.11 as Debian ships them
// (/usr/lib/x86_64-linux-gnu/blas/libblas.so.3), opened with dlopen and called through the same
// capture::Node a SOL wrapper would have built for the call. Its argument errors are captured by
// this executable's xerbla_ and cblas_xerbla, which the library binds to.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/node.hpp"

namespace sol::test {

// The BLAS symbols of symbols.inc, with what each names.
struct Routine {
  capture::Sym sym;
  capture::Api api;
  capture::Op op;
  capture::DType dtype;
  std::string name;  // "sgemm_", "sdotsub_", "cblas_sgemm", "dnnl_sgemm"
  int level;         // 1, 2 or 3
};
const std::vector<Routine>& blas_routines();
// How gtest prints a parameter: by name, not as bytes.
inline void PrintTo(const Routine& r, std::ostream* os) { *os << r.name; }

// The value the tests pass for an invalid CBLAS enum (the node's character is 0 for it, its
// blas.cblas field this value).
inline constexpr int kBadEnum = 77;

class Netlib {
 public:
  static Netlib& get();
  bool available() const { return lib_ != nullptr; }
  const std::string& error() const { return error_; }

  // Calls the routine of node.sym with node's arguments, as the program would have. Function
  // results go to the returned value, in the Fortran routine's convention (1-based i?amax).
  // dnnl_sgemm nodes are run as the equivalent row-major cblas_sgemm.
  capture::Ret call(const capture::Node& node);

  int row_major_strg() const { return row_major_strg_ ? *row_major_strg_ : -1; }

 private:
  Netlib();
  void* sym(const std::string& name);
  void* lib_ = nullptr;
  int* row_major_strg_ = nullptr;
  std::string error_;
};

// What the reference reported through xerbla_ / cblas_xerbla since reset_reports(). Only the
// first report counts: some CBLAS routines go on after one (cblas_sgemv with a bad TransA calls
// SGEMV anyway) and report again.
struct Report {
  enum Level { none, cblas, fortran } level = none;
  int info = 0;
  std::string routine;
  bool row_major = false;  // RowMajorStrg when reported
  std::string message;     // the cblas_xerbla format
  int value = 0;           // the cblas_xerbla argument, when the format has one
  int count = 0;           // number of reports
};
void reset_reports();
const Report& first_report();

}  // namespace sol::test
