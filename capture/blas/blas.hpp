// BLAS semantics over capture::Node: argument checks as the reference reports them, the memory
// each operand touches, the work a call does, and CBLAS row-major calls as their column-major
// equivalent. Shared by the executor, the trace recorder and every backend, so that these rules
// exist once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::capture::blas {

// ------------------------------------------------------------------------- argument checks

// The first invalid argument of a call, as the reference BLAS / CBLAS report it.
struct ArgError {
  enum Level : uint8_t {
    none,     // the call is valid
    cblas,    // found by the CBLAS layer (layout, enums): report with cblas_xerbla(info, routine, ...)
    fortran,  // found by the Fortran routine: report with xerbla_(routine, &info, len)
  } level = none;
  int info = 0;           // parameter position as the reference reports it (1-based)
  char routine[16] = {};  // "SGEMM " (Fortran: six characters, blank-padded) or "cblas_sgemm"
  // For a CBLAS call whose error the Fortran routine reports: the value of the reference's
  // RowMajorStrg global at that moment (the program's cblas_xerbla reads it to renumber).
  bool row_major = false;
  // For level == cblas: the offending enum value, which the reference prints
  // ("Illegal TransA setting, %d").
  int bad_value = 0;
  const char* message = "";  // the reference's format for that message, e.g. "Illegal TransA setting, %d\n"
};

// Checks a BLAS node (Fortran, Fortran shim, CBLAS or row-major dnnl_sgemm) in the order and with
// the numbering of netlib's reference BLAS 3.11 and its CBLAS.
ArgError check(const Node& node) noexcept;

// Reports an invalid call as the reference BLAS / CBLAS would, through the program's own
// xerbla_ or cblas_xerbla (which may end the process). arg_errors.cpp.
void report_invalid(const Node& node, const ArgError& error) noexcept;

// Whether a backend takes the node's integers: hal::Reason::ok, or dims_exceed_backend for an
// ILP64 call with a dimension, leading dimension or increment beyond what the backend's integers
// hold (hal::Backend::wide_dims: 32 bits unless it says otherwise). For tests, the environment
// variable SOL_TEST_DIM_LIMIT=N makes every backend's bound N, for every BLAS node, so that small
// problems take the declined path.
hal::Reason fits_backend(const Node& node, const hal::Backend& backend) noexcept;

// ------------------------------------------------------------------------- memory and work

// How a routine indexes an operand.
enum class Shape : uint8_t {
  scalar,    // n elements (rotg's a, b, c, s; rotm's param: 5)
  vector,    // n elements at increment inc (negative: from the far end, as BLAS does)
  general,   // rows x cols, leading dimension ld
  triangle,  // one triangle (upper or not) of a rows x rows matrix, leading dimension ld
  band,      // band storage: cols columns of ld entries holding kl sub- and ku super-diagonals
             // of a rows x cols matrix
  packed,    // one triangle of an n x n matrix, n(n+1)/2 elements column by column
};

// One memory operand of a BLAS node: the bytes the routine may touch and how it indexes them.
// The geometry is in column-major storage terms whatever the node's layout: a row-major operand
// is described as the column-major view of the same memory (a row-major m x n matrix is an
// n x m one, its upper triangle a lower one, its band transposed).
struct Operand {
  const char* name = "";  // "a", "b", "c", "x", "y", "param", "ra", ...
  void* ptr = nullptr;    // lowest address touched (accounts for negative increments)
  size_t bytes = 0;       // extent from ptr; 0 when the call touches nothing (n == 0, ...)
  bool read = false;
  bool written = false;

  Shape shape = Shape::scalar;
  int64_t rows = 0, cols = 0, ld = 0;  // general, triangle, band
  int64_t kl = 0, ku = 0;              // band
  int64_t n = 0, inc = 1;              // scalar, vector, packed
  // triangle, packed and the band of a symmetric or triangular matrix: the upper triangle is the
  // one stored. A general band (gbmv) counts as upper: its diagonals are stored from the top.
  bool upper = false;
  bool hermitian = false;  // a Hermitian matrix: the imaginary parts of its diagonal are not read
  bool unit = false;       // unit triangular: its diagonal is not read
};
inline constexpr int kMaxOperands = 8;

// Fills `out` with the operands of a valid node (column- or row-major) and returns how many.
// Extents follow the routine's definition (a general m-by-n matrix with leading dimension lda
// spans lda*(n-1)+m elements; packed and band storage by their own rules), so a device backend
// can copy exactly them and the dataflow graph can compare address ranges; the geometry says
// which of those elements the routine reads.
int operands(const Node& node, Operand out[kMaxOperands]) noexcept;

// The BlasArgs pointer an operand of that name comes from ("c" -> &BlasArgs::c), or nullptr.
// The pointer is the operand's lowest address (Operand::ptr), so pointing it at a copy of the
// operand's bytes runs the routine on the copy.
void* BlasArgs::*operand_field(const char* name) noexcept;

// Work of a valid node: floating-point operations (multiply-add = 2, complex arithmetic counted
// in real operations: a complex multiply-add = 8) and bytes read plus written (each operand
// counted once per direction).
struct Cost {
  double flops = 0;
  double bytes = 0;
};
Cost cost(const Node& node) noexcept;
// Only the flops: cheap enough for routing every call. Generated from the spec's flops
// expressions (fortran_call.cpp in the build tree), which the wrappers also use.
double flops(const Node& node) noexcept;
// The same when the operands are already at hand (they give the bytes).
Cost cost(const Node& node, const Operand* ops, int count) noexcept;

// ------------------------------------------------------------------------- layouts

// A non-owning callable reference, for with_column_major().
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  FunctionRef() noexcept = default;  // refers to nothing: false
  template <class F>
  FunctionRef(F& f) noexcept
      : obj_(&f), call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(a...); }) {}
  R operator()(A... a) const { return call_(obj_, a...); }
  explicit operator bool() const noexcept { return call_ != nullptr; }

 private:
  void* obj_ = nullptr;
  R (*call_)(void*, A...) = nullptr;
};

// Runs a valid node through `run`, which only understands column-major Fortran semantics.
// Column-major nodes are passed through unchanged. Row-major nodes (CBLAS RowMajor, dnnl_sgemm)
// are turned into the column-major call netlib's CBLAS makes for them: swapped operands and
// dimensions, flipped transposes and triangles, and for the complex Hermitian and
// conjugate-transpose cases the conjugated temporaries and sign flips the reference applies
// around the call. Results are bit-identical to what the reference CBLAS computes when `run`
// computes like the reference BLAS.
//
// `run` gets a column-major copy of the node; a function result it stores in that copy's ret
// (or through its result pointer) is carried back. Returns what `run` returned, or
// hal::Reason::out_of_memory when a temporary could not be allocated.
hal::Reason with_column_major(Node& node, FunctionRef<hal::Reason(Node&)> run) noexcept;

// A GEMM of SOL's own (a warm-up, a measurement's probe), never a program's: column-major,
// C = op(A) * op(B) with alpha 1 and beta 0, on tightly packed buffers the caller owns.
void plain_gemm(BlasArgs& x, char transa, char transb, int64_t m, int64_t n, int64_t k, void* a, void* b,
                void* c) noexcept;

}  // namespace sol::capture::blas
