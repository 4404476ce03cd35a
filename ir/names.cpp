// Names of the IR's enums, for traces, reports and logs.
#include "ir/node.hpp"
#include "ir/setup.hpp"

namespace sol::capture {

const char* api_name(Api api) noexcept {
  switch (api) {
    case Api::blas: return "blas";
    case Api::cblas: return "cblas";
    case Api::dnnl: return "dnnl";
    case Api::cublas: return "cublas";
    case Api::cublaslt: return "cublaslt";
    case Api::cudnn: return "cudnn";
  }
  return "?";
}

const char* dtype_name(DType d) noexcept {
  switch (d) {
    case DType::none: return "none";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::c64: return "c64";
    case DType::c128: return "c128";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::s8: return "s8";
    case DType::u8: return "u8";
    case DType::s32: return "s32";
  }
  return "?";
}

namespace {
constexpr const char* kOpNames[] = {
#define SOL_OP(name, family) #name,
#include "ir/ops.def"
#undef SOL_OP
};
constexpr const char* kOpFamilies[] = {
#define SOL_OP(name, family) #family,
#include "ir/ops.def"
#undef SOL_OP
};
constexpr const char* kSymbolNames[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) #id,
#include "symbols.inc"
#undef SOL_SYMBOL
};
static_assert(sizeof kSymbolNames / sizeof kSymbolNames[0] == kNumSymbols);
}  // namespace

const char* op_name(Op op) noexcept {
  return kOpNames[static_cast<size_t>(op)];
}
const char* op_family(Op op) noexcept {
  return kOpFamilies[static_cast<size_t>(op)];
}
bool is_setup(Op op) noexcept {
  return op == Op::dnnl_api || op == Op::cublas_api || op == Op::cudnn_api;
}
bool is_setup(std::string_view name) noexcept {
  for (Op op : {Op::dnnl_api, Op::cublas_api, Op::cudnn_api})
    if (name == op_name(op)) return true;
  return false;
}
const char* symbol_name(Sym s) noexcept {
  return kSymbolNames[static_cast<size_t>(s)];
}

namespace {
struct FamilySpelling {
  const char* name;
  const char *fortran_prefix, *fortran_suffix, *c_prefix, *c_suffix;
  int bits;
  const char* what;
};
constexpr FamilySpelling kFamilies[] = {
    {"none", "", "", "", "", 0, "not a BLAS name"},
#define SOL_FAMILY(id, fortran_prefix, fortran_suffix, c_prefix, c_suffix, bits, what) \
  {#id, fortran_prefix, fortran_suffix, c_prefix, c_suffix, bits, what},
#include "families.inc"
#undef SOL_FAMILY
};
static_assert(sizeof kFamilies / sizeof kFamilies[0] == kNumFamilies);
}  // namespace

const char* family_name(Family f) noexcept {
  return kFamilies[static_cast<size_t>(f)].name;
}
const char* family_what(Family f) noexcept {
  return kFamilies[static_cast<size_t>(f)].what;
}
int family_bits(Family f) noexcept {
  return kFamilies[static_cast<size_t>(f)].bits;
}
std::string family_fortran_name(Family f, const char* base) {
  const FamilySpelling& s = kFamilies[static_cast<size_t>(f)];
  return std::string(s.fortran_prefix) + base + s.fortran_suffix;
}
std::string family_c_name(Family f, const char* base) {
  const FamilySpelling& s = kFamilies[static_cast<size_t>(f)];
  return std::string(s.c_prefix) + base + s.c_suffix;
}

}  // namespace sol::capture
