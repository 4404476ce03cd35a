// SOL's operation IR: one Node per intercepted call.
//
// A Node is built on the stack of the wrapper's slow path (no allocation) from the call's
// arguments. BLAS arguments are kept in the routine's own terms (BlasArgs, the spec's argument
// names); the layout field says whether they are column-major (Fortran BLAS, CBLAS ColMajor) or
// row-major (CBLAS RowMajor, dnnl_sgemm). Operands are pointers into the caller's memory.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ir/symbols.hpp"

namespace sol {
using cfloat = std::complex<float>;
using cdouble = std::complex<double>;
}  // namespace sol

namespace sol::capture {

namespace dnn {
class Call;
}
struct DeviceBlas;

enum class DType : uint8_t { none, f32, f64, c64, c128, bf16, f16, s8, u8, s32 };
const char* dtype_name(DType dtype) noexcept;
// Bytes of one element (0 for none); of its real part for c64 and c128.
constexpr size_t dtype_size(DType d) noexcept {
  switch (d) {
    case DType::f32:
    case DType::s32: return 4;
    case DType::f64:
    case DType::c64: return 8;
    case DType::c128: return 16;
    case DType::bf16:
    case DType::f16: return 2;
    case DType::s8:
    case DType::u8: return 1;
    case DType::none: return 0;
  }
  return 0;
}
constexpr size_t dtype_real_size(DType d) noexcept {
  return d == DType::c64 ? 4 : d == DType::c128 ? 8 : dtype_size(d);
}

enum class Op : uint8_t {
#define SOL_OP(name, family) name,
#include "ir/ops.def"
#undef SOL_OP
};
inline constexpr size_t kNumOps = 0
#define SOL_OP(name, family) +1
#include "ir/ops.def"
#undef SOL_OP
    ;
inline constexpr size_t kNumDTypes = static_cast<size_t>(DType::s32) + 1;
const char* op_name(Op op) noexcept;
const char* op_family(Op op) noexcept;

// The op and element type of every call of a symbol (interpose/spec): the same for all of them.
inline constexpr Op kSymbolOp[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) Op::op,
#include "symbols.inc"
#undef SOL_SYMBOL
};
inline constexpr DType kSymbolDType[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) DType::dtype,
#include "symbols.inc"
#undef SOL_SYMBOL
};
inline Op symbol_op(Sym s) noexcept {
  return kSymbolOp[static_cast<size_t>(s)];
}
inline DType symbol_dtype(Sym s) noexcept {
  return kSymbolDType[static_cast<size_t>(s)];
}

// float -> double with integer operations only. A floating-point conversion would set the FPU's
// sticky flags (denormal operand; invalid for a signalling NaN) for values the routine may never
// look at: the BLAS test programs pass uninitialised scalars to invalid calls, and gfortran
// reports such flags when the program stops. The value is the same; signalling NaNs stay so.
inline double widen(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint64_t sign = static_cast<uint64_t>(u >> 31) << 63;
  uint32_t exp = (u >> 23) & 0xff;
  uint64_t man = u & 0x7fffff;
  uint64_t bits;
  if (exp == 0xff) {
    bits = sign | (uint64_t{0x7ff} << 52) | (man << 29);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {                                                      // denormal: normalise the mantissa
      int shift = __builtin_clz(static_cast<uint32_t>(man)) - 8;  // leading zeros within 23 bits
      man = (man << shift) & 0x7fffff;
      bits = sign | (static_cast<uint64_t>(1023 - 126 - shift) << 52) | (man << 29);
    }
  } else {
    bits = sign | (static_cast<uint64_t>(exp - 127 + 1023) << 52) | (man << 29);
  }
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}
inline double widen(double d) noexcept {
  return d;
}

// A scalar argument (alpha, beta, the c and s of a rotation), widened to complex double.
// Widening is exact for every BLAS scalar type, so a backend narrows it back without loss.
struct Scalar {
  double re;
  double im;
  bool present;  // false when the caller passed a null pointer for it

  Scalar() = default;
  constexpr explicit Scalar(double r, double i = 0) noexcept : re(r), im(i), present(true) {}
  explicit Scalar(float r) noexcept : re(widen(r)), im(0), present(true) {}
  template <class T>
  explicit Scalar(std::complex<T> c) noexcept : re(widen(c.real())), im(widen(c.imag())), present(true) {}

  // Reads a scalar passed by reference. BLAS may never read it (quick returns), so a null
  // pointer is recorded as absent rather than dereferenced.
  template <class T>
  static Scalar load(const T* p) noexcept {
    if (!p) return Scalar{};
    return Scalar(*p);
  }
};

// The arguments of a BLAS routine, named as in interpose/spec/blas.toml. Only the fields the
// routine has are meaningful; the rest are zero.
struct BlasArgs {
  char layout;                            // 'C' column-major, 'R' row-major, 0 an invalid CBLAS_LAYOUT
  char transa, transb, uplo, side, diag;  // as passed (Fortran) or mapped from the CBLAS enums
  bool real_alpha;  // alpha is real although the data is complex (csscal, zdscal, cher, cherk...)
  int64_t m, n, k, kl, ku;
  int64_t lda, ldb, ldc, incx, incy;
  Scalar alpha, beta;
  Scalar cs, sn;  // rot
  Scalar ry1;     // rotmg
  void *a, *b, *c, *x, *y;
  void* param;              // rotm (read), rotmg (written)
  void *ra, *rb, *rc, *rs;  // rotg: a, b, c, s
  void *rd1, *rd2, *rx1;    // rotmg: d1, d2, x1
  // The CBLAS enums as the program passed them: the reference's error message prints an invalid
  // one's value (the characters above hold 0 for it).
  struct {
    int32_t layout, transa, transb, uplo, side, diag;
  } cblas;
};

// dnnl_primitive_execute
struct DnnlExec {
  const void* primitive;
  void* stream;
  int nargs;
  const void* args;  // const dnnl_exec_arg_t*
};

// Any other oneDNN call: its first parameters as raw bits (pointers, integers, enums, floats; the
// C API passes nothing larger by value). The trace layer reads the few it needs
// (dnnl_primitive_create's primitive and descriptor, say). cuDNN calls use it too, with up to 16
// parameters (the spec's `keep` picks them for longer functions; interpose/cudnn).
struct DnnlCall {
  static constexpr int kMaxArgs = 16;
  uint64_t raw[kMaxArgs];
  int nargs;  // parameters of the function (may exceed kMaxArgs)

  template <class T>
  T arg(int i) const noexcept {
    static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, &raw[i], sizeof v);
    return v;
  }
  template <class T>
  void set(int i, T v) noexcept {
    static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
    std::memcpy(&raw[i], &v, sizeof v);
  }
};

// The value a function returns (sdot_, cdotc_, isamax_, dnnl_* status...), whoever computed it.
struct Ret {
  alignas(16) unsigned char bytes[16];

  // The bytes past a narrower value are zero: an INTEGER result set at 32 bits reads the same at 64.
  template <class T>
  void set(T v) noexcept {
    static_assert(sizeof(T) <= sizeof bytes && std::is_trivially_copyable_v<T>);
    std::memset(bytes, 0, sizeof bytes);
    std::memcpy(bytes, &v, sizeof v);
  }
  template <class T>
  T get() const noexcept {
    T v;
    std::memcpy(&v, bytes, sizeof v);
    return v;
  }
};

// What a cuBLAS / cuBLASLt GEMM or GEMV says beyond BlasArgs (which holds its sizes, transposes,
// leading dimensions and operand pointers, column-major as cuBLAS is). The wrapper fills the
// arguments; the frontend (interpose/cublas) completes the rest before the call runs.
struct DeviceBlas {
  int64_t batch = 0;                              // GEMMs of a batched call; 0: one, not batched
  int64_t stridea = 0, strideb = 0, stridec = 0;  // elements between members (strided batched)
  void* handle = nullptr;                         // cublasHandle_t / cublasLtHandle_t
  void* stream = nullptr;                         // cudaStream_t the call is queued on
  const void* alpha = nullptr;                    // the scalars as passed: host or device memory
  const void* beta = nullptr;
  int32_t atype = -1, btype = -1, ctype = -1;  // cudaDataType of A, B, C (-1: the routine's own)
  int32_t compute = -1;                        // cublasComputeType_t (-1: the routine's own)
  const void* lt[5] = {};                      // cublasLtMatmul: computeDesc, Adesc, Bdesc, Cdesc, Ddesc
  void* d = nullptr;                           // cublasLtMatmul: D (C is then only read)
  const char* detail = nullptr;  // interned text added to the shape: "ab=f16 c=f16 compute=32F epilogue=BIAS"
  double flops = 0, bytes = 0;   // the whole call's work, from the frontend
};

struct Node {
  Sym sym;
  Api api;
  Op op;
  DType dtype;
  // The call's INTEGERs are 64-bit: it came through an ILP64 name family, or through plain names
  // that an ILP64 library defines (capture::Family). BlasArgs holds them at 64 bits either way;
  // this says how wide they are where SOL hands them back to the program's own library (its
  // routines called to measure or verify, a Fortran shim's INTEGER result, xerbla_'s INFO).
  bool ilp64;
  Ret ret;
  void* result;        // where a Fortran shim (sdotsub_) or CBLAS _sub routine stores its result
  const void* native;  // the symbol's native definition; nullptr: none, SOL's backends must serve it
  // Where on the stack the caller's return address is (its value is where the call came from);
  // lets the tracer recognise a stack it has seen without walking it. 0 when unknown.
  uintptr_t ret_slot;
  // A DNN node (op of the "dnn" family): what the primitive computes and this call's tensors
  // (ir/dnn.hpp). Set by the frontend; nullptr for every other node.
  const dnn::Call* dnn;
  // A device BLAS call (cuBLAS, cuBLASLt): what BlasArgs cannot say (batch, types, stream...).
  // Set by the wrapper, on its stack; nullptr for every other node. Such a node always runs
  // natively: its operands are device memory.
  const DeviceBlas* device;
  union {
    BlasArgs blas;
    DnnlExec dnnl;
    DnnlCall dnnl_call;
  };

  Node(Sym s, Op o, DType d) noexcept
      : sym(s),
        api(symbol_api(s)),
        op(o),
        dtype(d),
        ilp64(false),
        ret{},
        result(nullptr),
        native(nullptr),
        ret_slot(0),
        dnn(nullptr),
        device(nullptr) {
    std::memset(static_cast<void*>(&blas), 0, sizeof blas);
  }
};

// CBLAS enums in the Fortran vocabulary, one function per enum type so that a value of another
// enum (CblasNonUnit passed as a transpose, say) is as invalid as the reference finds it.
// An invalid value maps to 0, which every argument check rejects.
template <class E>
inline char cblas_trans(E e) noexcept {
  switch (static_cast<int>(e)) {
    case 111: return 'N';  // CblasNoTrans
    case 112: return 'T';  // CblasTrans
    case 113: return 'C';  // CblasConjTrans
    default: return 0;
  }
}
template <class E>
inline char cblas_uplo(E e) noexcept {
  switch (static_cast<int>(e)) {
    case 121: return 'U';  // CblasUpper
    case 122: return 'L';  // CblasLower
    default: return 0;
  }
}
template <class E>
inline char cblas_diag(E e) noexcept {
  switch (static_cast<int>(e)) {
    case 131: return 'N';  // CblasNonUnit
    case 132: return 'U';  // CblasUnit
    default: return 0;
  }
}
template <class E>
inline char cblas_side(E e) noexcept {
  switch (static_cast<int>(e)) {
    case 141: return 'L';  // CblasLeft
    case 142: return 'R';  // CblasRight
    default: return 0;
  }
}
template <class E>
inline char cblas_layout(E e) noexcept {
  switch (static_cast<int>(e)) {
    case 101: return 'R';  // CblasRowMajor
    case 102: return 'C';  // CblasColMajor
    default: return 0;
  }
}

}  // namespace sol::capture
