#include "capture/trace/shape.hpp"

#include <cstdint>

namespace sol::capture::trace {
namespace {

// One bit per value field of BlasArgs; symbols.inc says which fields each routine has.
enum : uint32_t {
  SOL_F_m = 1u << 0,
  SOL_F_n = 1u << 1,
  SOL_F_k = 1u << 2,
  SOL_F_kl = 1u << 3,
  SOL_F_ku = 1u << 4,
  SOL_F_transa = 1u << 5,
  SOL_F_transb = 1u << 6,
  SOL_F_uplo = 1u << 7,
  SOL_F_side = 1u << 8,
  SOL_F_diag = 1u << 9,
  SOL_F_layout = 1u << 10,
  SOL_F_lda = 1u << 11,
  SOL_F_ldb = 1u << 12,
  SOL_F_ldc = 1u << 13,
  SOL_F_incx = 1u << 14,
  SOL_F_incy = 1u << 15,
  SOL_F_alpha = 1u << 16,
  SOL_F_beta = 1u << 17,
  SOL_F_cs = 1u << 18,
  SOL_F_sn = 1u << 19,
  SOL_F_ry1 = 1u << 20,
};

constexpr uint32_t kFields[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) (fields),
#include "symbols.inc"
#undef SOL_SYMBOL
};

enum class Kind { integer, mode, scalar, layout };
struct Field {
  uint32_t bit;
  const char* name;
  Kind kind;
  int64_t BlasArgs::*integer;
  char BlasArgs::*mode;
  Scalar BlasArgs::*scalar;
};

constexpr Field kShape[] = {
    {SOL_F_m, "m", Kind::integer, &BlasArgs::m, nullptr, nullptr},
    {SOL_F_n, "n", Kind::integer, &BlasArgs::n, nullptr, nullptr},
    {SOL_F_k, "k", Kind::integer, &BlasArgs::k, nullptr, nullptr},
    {SOL_F_kl, "kl", Kind::integer, &BlasArgs::kl, nullptr, nullptr},
    {SOL_F_ku, "ku", Kind::integer, &BlasArgs::ku, nullptr, nullptr},
    {SOL_F_transa, "transa", Kind::mode, nullptr, &BlasArgs::transa, nullptr},
    {SOL_F_transb, "transb", Kind::mode, nullptr, &BlasArgs::transb, nullptr},
    {SOL_F_uplo, "uplo", Kind::mode, nullptr, &BlasArgs::uplo, nullptr},
    {SOL_F_side, "side", Kind::mode, nullptr, &BlasArgs::side, nullptr},
    {SOL_F_diag, "diag", Kind::mode, nullptr, &BlasArgs::diag, nullptr},
    {SOL_F_layout, "layout", Kind::layout, nullptr, &BlasArgs::layout, nullptr},
};

constexpr Field kParams[] = {
    {SOL_F_lda, "lda", Kind::integer, &BlasArgs::lda, nullptr, nullptr},
    {SOL_F_ldb, "ldb", Kind::integer, &BlasArgs::ldb, nullptr, nullptr},
    {SOL_F_ldc, "ldc", Kind::integer, &BlasArgs::ldc, nullptr, nullptr},
    {SOL_F_incx, "incx", Kind::integer, &BlasArgs::incx, nullptr, nullptr},
    {SOL_F_incy, "incy", Kind::integer, &BlasArgs::incy, nullptr, nullptr},
    {SOL_F_alpha, "alpha", Kind::scalar, nullptr, nullptr, &BlasArgs::alpha},
    {SOL_F_beta, "beta", Kind::scalar, nullptr, nullptr, &BlasArgs::beta},
    {SOL_F_cs, "c", Kind::scalar, nullptr, nullptr, &BlasArgs::cs},
    {SOL_F_sn, "s", Kind::scalar, nullptr, nullptr, &BlasArgs::sn},
    {SOL_F_ry1, "y1", Kind::scalar, nullptr, nullptr, &BlasArgs::ry1},
};

template <size_t N>
void print(const Node& node, const Field (&fields)[N], Text& out) {
  const uint32_t mask = kFields[static_cast<size_t>(node.sym)];
  const BlasArgs& b = node.blas;
  bool first = true;
  for (const Field& f : fields) {
    if (!(mask & f.bit)) continue;
    if (!first) out.ch(' ');
    first = false;
    out.str(f.name).ch('=');
    switch (f.kind) {
      case Kind::integer: out.i64(b.*f.integer); break;
      case Kind::mode: {
        const char c = b.*f.mode;
        if (c > ' ' && c < 127 && c != '"' && c != '\\')
          out.ch(c);
        else
          out.str("?");
        break;
      }
      case Kind::layout: out.str(b.layout == 'R' ? "row" : b.layout == 'C' ? "col" : "?"); break;
      case Kind::scalar: {
        const Scalar& s = b.*f.scalar;
        if (!s.present) {
          // A device call's scalar in device memory, or unknown. Literals: the length is known here.
          if (node.device)
            out.lit("unread");
          else
            out.lit("null");
        } else {
          out.num(s.re, false);
          if (s.im != 0) out.ch(s.im < 0 ? '-' : '+').num(s.im < 0 ? -s.im : s.im, false).ch('i');
        }
        break;
      }
    }
  }
}

}  // namespace

void blas_shape(const Node& node, Text& out) noexcept {
  print(node, kShape, out);
  if (const DeviceBlas* d = node.device) {
    if (d->batch > 0) out.str(" batch=").i64(d->batch);
    if (d->detail && *d->detail) out.ch(' ').str(d->detail);
  }
}
void blas_params(const Node& node, Text& out) noexcept {
  print(node, kParams, out);
  if (const DeviceBlas* d = node.device) {
    if (d->stridea || d->strideb || d->stridec)
      out.str(" stridea=").i64(d->stridea).str(" strideb=").i64(d->strideb).str(" stridec=").i64(d->stridec);
    out.str(" stream=").hex(reinterpret_cast<uintptr_t>(d->stream));
  }
}

}  // namespace sol::capture::trace

namespace sol::capture::trace {

std::string operand_shape(const Node& node, const blas::Operand& op) {
  using blas::Shape;
  std::string s;
  switch (op.shape) {
    case Shape::scalar:
    case Shape::vector: s = std::to_string(op.n); break;
    case Shape::packed: s = std::to_string(op.n) + "x" + std::to_string(op.n); break;
    case Shape::triangle: s = std::to_string(op.rows) + "x" + std::to_string(op.rows); break;
    case Shape::general:
    case Shape::band: {
      // Operands are described column-major; a row-major caller's m x n matrix is their n x m.
      const bool row = node.blas.layout == 'R';
      s = std::to_string(row ? op.cols : op.rows) + "x" + std::to_string(row ? op.rows : op.cols);
      break;
    }
  }
  return s + " " + dtype_name(node.dtype);
}

std::string tensor_shape(const dnn::Tensor& t) {
  std::string s;
  for (int d = 0; d < t.desc.layout.ndims; ++d) s += (d ? "x" : "") + std::to_string(t.desc.layout.dims[d]);
  return s + " " + dtype_name(t.desc.dtype);
}

}  // namespace sol::capture::trace
