// The cuBLAS frontend's part of every captured cuBLAS / cuBLASLt call: bookkeeping calls update
// the cuBLASLt descriptor tables, GEMMs and GEMVs are described (sizes, types, scalars, work) and,
// when traced, timed on the device.
#include <atomic>
#include <cmath>
#include <limits>
#include <complex>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "capture/trace/trace.hpp"
#include "common/native.hpp"
#include "interpose/cublas/cublas.hpp"
#include "interpose/cuda/device_time.hpp"

namespace sol::interpose::cublas {
namespace {

using capture::DeviceBlas;
using capture::DType;
using capture::NativeFn;
using capture::Node;
using capture::Scalar;
using capture::Sym;

// ------------------------------------------------------------------------------ descriptor tables

// The live cuBLASLt descriptors SOL saw created. PyTorch creates and destroys a set per matmul,
// so entries come and go at the rate of calls; a destroyed descriptor's address is often the
// next one's, which a create simply overwrites.
template <class T>
class Table {
 public:
  static Table& instance() noexcept {
    static Table* t = new Table;  // never destroyed: calls may come during exit
    return *t;
  }
  void put(const void* key, const T& v) noexcept {
    try {
      std::lock_guard lock(mu_);
      map_[key] = v;
    } catch (...) {  // out of memory: that descriptor stays unknown
    }
  }
  template <class F>
  void update(const void* key, F&& f) noexcept {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) f(it->second);
  }
  void erase(const void* key) noexcept {
    std::lock_guard lock(mu_);
    map_.erase(key);
  }
  bool get(const void* key, T& out) noexcept {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    out = it->second;
    return true;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void*, T> map_;
};

// An attribute's value when its buffer has the size of T (the documented type), else nothing.
template <class T>
bool read_attr(const void* buf, size_t size, T& out) noexcept {
  if (!buf || size != sizeof(T)) return false;
  std::memcpy(&out, buf, sizeof(T));
  return true;
}

// ------------------------------------------------------------------------------ types and text

DType dtype_of(int32_t t) noexcept {
  switch (t) {
    case abi::CUDA_R_32F: return DType::f32;
    case abi::CUDA_R_64F: return DType::f64;
    case abi::CUDA_C_32F: return DType::c64;
    case abi::CUDA_C_64F: return DType::c128;
    case abi::CUDA_R_16F: return DType::f16;
    case abi::CUDA_R_16BF: return DType::bf16;
    case abi::CUDA_R_8I: return DType::s8;
    case abi::CUDA_R_8U: return DType::u8;
    case abi::CUDA_R_32I: return DType::s32;
    default: return DType::none;  // fp8, complex half... named in the detail
  }
}

int32_t cuda_type_of(DType d) noexcept {
  switch (d) {
    case DType::f32: return abi::CUDA_R_32F;
    case DType::f64: return abi::CUDA_R_64F;
    case DType::c64: return abi::CUDA_C_32F;
    case DType::c128: return abi::CUDA_C_64F;
    default: return -1;
  }
}

size_t type_size(int32_t t) noexcept {
  switch (t) {
    case abi::CUDA_R_8I:
    case abi::CUDA_R_8U:
    case abi::CUDA_R_8F_E4M3:
    case abi::CUDA_R_8F_E5M2: return 1;
    case abi::CUDA_R_16F:
    case abi::CUDA_R_16BF: return 2;
    case abi::CUDA_R_32F:
    case abi::CUDA_R_32I:
    case abi::CUDA_C_16F:
    case abi::CUDA_C_16BF: return 4;
    case abi::CUDA_R_64F:
    case abi::CUDA_C_32F: return 8;
    case abi::CUDA_C_64F: return 16;
    default: return 0;
  }
}

bool is_complex_type(int32_t t) noexcept {
  return t == abi::CUDA_C_32F || t == abi::CUDA_C_64F || t == abi::CUDA_C_16F || t == abi::CUDA_C_16BF;
}

// IEEE half to double, exactly (every half is a double).
double half_value(uint16_t h) noexcept {
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(static_cast<double>(man), -24);
  else if (exp == 31)
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(static_cast<double>(man | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

// A scalar in host memory, of cudaDataType `t`. Absent for a null pointer or a type SOL does not
// read (the trace then shows "unread").
Scalar load_scalar(const void* p, int32_t t) noexcept {
  if (!p) return Scalar{};
  switch (t) {
    case abi::CUDA_R_32F: return Scalar::load(static_cast<const float*>(p));
    case abi::CUDA_R_64F: return Scalar::load(static_cast<const double*>(p));
    case abi::CUDA_C_32F: return Scalar::load(static_cast<const std::complex<float>*>(p));
    case abi::CUDA_C_64F: return Scalar::load(static_cast<const std::complex<double>*>(p));
    case abi::CUDA_R_32I: return Scalar(static_cast<double>(*static_cast<const int32_t*>(p)));
    case abi::CUDA_R_16F: {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return Scalar(half_value(h));
    }
    default: return Scalar{};
  }
}

// The type of alpha and beta for a compute type (cuBLAS's GemmEx rules).
int32_t scale_type_of(int32_t compute, int32_t atype) noexcept {
  const bool cx = is_complex_type(atype);
  switch (compute) {
    case abi::CUBLAS_COMPUTE_16F:
    case abi::CUBLAS_COMPUTE_16F_PEDANTIC: return abi::CUDA_R_16F;
    case abi::CUBLAS_COMPUTE_32F:
    case abi::CUBLAS_COMPUTE_32F_PEDANTIC:
    case abi::CUBLAS_COMPUTE_32F_FAST_16F:
    case abi::CUBLAS_COMPUTE_32F_FAST_16BF:
    case abi::CUBLAS_COMPUTE_32F_FAST_TF32: return cx ? abi::CUDA_C_32F : abi::CUDA_R_32F;
    case abi::CUBLAS_COMPUTE_64F:
    case abi::CUBLAS_COMPUTE_64F_PEDANTIC: return cx ? abi::CUDA_C_64F : abi::CUDA_R_64F;
    case abi::CUBLAS_COMPUTE_32I:
    case abi::CUBLAS_COMPUTE_32I_PEDANTIC: return abi::CUDA_R_32I;
    default: return -1;
  }
}

// The compute type a BLAS routine of that element type has: not worth a word in the shape, so
// that cublasGemmEx on f32 with CUBLAS_COMPUTE_32F reads like sgemm.
bool natural_compute(DType d, int32_t compute) noexcept {
  switch (d) {
    case DType::f32:
    case DType::c64: return compute == abi::CUBLAS_COMPUTE_32F;
    case DType::f64:
    case DType::c128: return compute == abi::CUBLAS_COMPUTE_64F;
    default: return false;
  }
}

// Detail texts are few and repeat at every call: interned, so a node holds a pointer and the
// trace hashes the pointer.
const char* intern(const std::string& text) noexcept {
  if (text.empty()) return nullptr;
  static std::mutex mu;
  static auto* set = new std::unordered_set<std::string>;  // never destroyed: calls during exit
  try {
    std::lock_guard lock(mu);
    return set->insert(text).first->c_str();
  } catch (...) {
    return nullptr;
  }
}

void add_word(std::string& s, const char* key, const char* value) {
  if (!s.empty()) s += ' ';
  s += key;
  if (value) s.append("=").append(value);
}

bool beta_zero(const Scalar& beta) noexcept {
  return beta.present && beta.re == 0 && beta.im == 0;
}

// The work of `batch` GEMMs (multiply-add = 2 real operations, 8 complex) and the bytes they
// read and write: A and B read, C read unless beta is known to be 0, D (= C for cuBLAS) written.
void gemm_work(DeviceBlas& dev, const capture::BlasArgs& b, bool complex, size_t sa, size_t sb, size_t sc,
               size_t sd) noexcept {
  const double m = capture::dim(b.m), n = capture::dim(b.n), k = capture::dim(b.k);
  const double members = dev.batch > 0 ? static_cast<double>(dev.batch) : 1.0;
  dev.flops = (complex ? 8.0 : 2.0) * m * n * k * members;
  const double c_read = beta_zero(b.beta) ? 0 : m * n * static_cast<double>(sc);
  dev.bytes = (m * k * static_cast<double>(sa) + k * n * static_cast<double>(sb) + c_read +
               m * n * static_cast<double>(sd)) * members;
}

// ------------------------------------------------------------------------------ the handle's state

// cuBLAS's own getters, from the program's libcublas (never libsol's wrappers).
template <class Fn>
Fn native_fn(std::atomic<Fn>& cache, std::atomic<bool>& looked, const char* name) noexcept {
  if (!looked.load(std::memory_order_acquire)) {
    cache.store(reinterpret_cast<Fn>(find_native(name)), std::memory_order_relaxed);
    looked.store(true, std::memory_order_release);
  }
  return cache.load(std::memory_order_relaxed);
}

struct HandleState {
  void* stream = nullptr;
  int pointer_mode = -1;
  int math_mode = -1;
};

HandleState handle_state(void* handle) noexcept {
  using GetStream = abi::cublasStatus_t (*)(abi::cublasHandle_t, abi::cudaStream_t*);
  using GetPointerMode = abi::cublasStatus_t (*)(abi::cublasHandle_t, abi::cublasPointerMode_t*);
  using GetMathMode = abi::cublasStatus_t (*)(abi::cublasHandle_t, abi::cublasMath_t*);
  static std::atomic<GetStream> get_stream{nullptr};
  static std::atomic<GetPointerMode> get_pointer_mode{nullptr};
  static std::atomic<GetMathMode> get_math_mode{nullptr};
  static std::atomic<bool> l1{false}, l2{false}, l3{false};
  HandleState st;
  if (!handle) return st;  // cuBLAS answers NOT_INITIALIZED; nothing to ask
  auto h = static_cast<abi::cublasHandle_t>(handle);
  if (auto f = native_fn(get_stream, l1, "cublasGetStream_v2")) {
    abi::cudaStream_t s = nullptr;
    if (f(h, &s) == abi::CUBLAS_STATUS_SUCCESS) st.stream = s;
  }
  if (auto f = native_fn(get_pointer_mode, l2, "cublasGetPointerMode_v2")) {
    abi::cublasPointerMode_t m{};
    if (f(h, &m) == abi::CUBLAS_STATUS_SUCCESS) st.pointer_mode = m;
  }
  if (auto f = native_fn(get_math_mode, l3, "cublasGetMathMode")) {
    abi::cublasMath_t m{};
    if (f(h, &m) == abi::CUBLAS_STATUS_SUCCESS) st.math_mode = m;
  }
  return st;
}

// ------------------------------------------------------------------------------ bookkeeping

void bookkeeping(Node& node, NativeFn native) noexcept {
  const auto& a = node.dnnl_call;
  switch (node.sym) {
    case Sym::cublasLtMatmulDescDestroy:
    case Sym::cublasLtMatrixLayoutDestroy:
      forget(a.arg<const void*>(0));
      return capture::submit(node, native);
    default: break;
  }
  capture::submit(node, native);
  if (node.ret.get<int>() != abi::CUBLAS_STATUS_SUCCESS) return;
  switch (node.sym) {
    case Sym::cublasLtMatmulDescCreate:
      if (auto* const* desc = a.arg<void* const*>(0)) matmul_desc_created(*desc, a.arg<int32_t>(1), a.arg<int32_t>(2));
      return;
    case Sym::cublasLtMatmulDescSetAttribute:
      return matmul_desc_set(a.arg<const void*>(0), a.arg<int32_t>(1), a.arg<const void*>(2), a.arg<size_t>(3));
    case Sym::cublasLtMatrixLayoutCreate:
      if (auto* const* layout = a.arg<void* const*>(0))
        layout_created(*layout, a.arg<int32_t>(1), a.arg<uint64_t>(2), a.arg<uint64_t>(3), a.arg<int64_t>(4));
      return;
    case Sym::cublasLtMatrixLayoutSetAttribute:
      return layout_set(a.arg<const void*>(0), a.arg<int32_t>(1), a.arg<const void*>(2), a.arg<size_t>(3));
    default: return;
  }
}

}  // namespace

// ------------------------------------------------------------------------------ tables

void matmul_desc_created(const void* desc, int32_t compute, int32_t scale) noexcept {
  if (!desc) return;
  LtMatmulDesc d;
  d.compute = compute;
  d.scale = scale;
  Table<LtMatmulDesc>::instance().put(desc, d);
}

void matmul_desc_set(const void* desc, int32_t attr, const void* buf, size_t size) noexcept {
  Table<LtMatmulDesc>::instance().update(desc, [&](LtMatmulDesc& d) {
    int32_t v32;
    uint32_t u32;
    int8_t i8;
    switch (attr) {
      case abi::CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: if (read_attr(buf, size, v32)) d.compute = v32; break;
      case abi::CUBLASLT_MATMUL_DESC_SCALE_TYPE: if (read_attr(buf, size, v32)) d.scale = v32; break;
      case abi::CUBLASLT_MATMUL_DESC_POINTER_MODE: if (read_attr(buf, size, v32)) d.pointer_mode = v32; break;
      case abi::CUBLASLT_MATMUL_DESC_TRANSA: if (read_attr(buf, size, v32)) d.transa = v32; break;
      case abi::CUBLASLT_MATMUL_DESC_TRANSB: if (read_attr(buf, size, v32)) d.transb = v32; break;
      case abi::CUBLASLT_MATMUL_DESC_EPILOGUE: if (read_attr(buf, size, u32)) d.epilogue = static_cast<int32_t>(u32); break;
      case abi::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: if (read_attr(buf, size, v32)) d.bias_type = v32; break;
      case abi::CUBLASLT_MATMUL_DESC_FAST_ACCUM: if (read_attr(buf, size, i8)) d.fast_accum = i8 != 0; break;
      default: break;
    }
  });
}

void layout_created(const void* layout, int32_t type, uint64_t rows, uint64_t cols, int64_t ld) noexcept {
  if (!layout) return;
  LtLayout l;
  l.type = type;
  l.rows = rows;
  l.cols = cols;
  l.ld = ld;
  Table<LtLayout>::instance().put(layout, l);
}

void layout_set(const void* layout, int32_t attr, const void* buf, size_t size) noexcept {
  Table<LtLayout>::instance().update(layout, [&](LtLayout& l) {
    int32_t v32;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    switch (attr) {
      case abi::CUBLASLT_MATRIX_LAYOUT_TYPE: if (read_attr(buf, size, u32)) l.type = static_cast<int32_t>(u32); break;
      case abi::CUBLASLT_MATRIX_LAYOUT_ORDER: if (read_attr(buf, size, v32)) l.order = v32; break;
      case abi::CUBLASLT_MATRIX_LAYOUT_ROWS: if (read_attr(buf, size, u64)) l.rows = u64; break;
      case abi::CUBLASLT_MATRIX_LAYOUT_COLS: if (read_attr(buf, size, u64)) l.cols = u64; break;
      case abi::CUBLASLT_MATRIX_LAYOUT_LD: if (read_attr(buf, size, i64)) l.ld = i64; break;
      case abi::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: if (read_attr(buf, size, v32)) l.batch = v32; break;
      case abi::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: if (read_attr(buf, size, i64)) l.stride = i64; break;
      default: break;
    }
  });
}

void forget(const void* p) noexcept {
  Table<LtMatmulDesc>::instance().erase(p);
  Table<LtLayout>::instance().erase(p);
}

bool find(const void* desc, LtMatmulDesc& out) noexcept {
  return Table<LtMatmulDesc>::instance().get(desc, out);
}
bool find(const void* layout, LtLayout& out) noexcept {
  return Table<LtLayout>::instance().get(layout, out);
}

// ------------------------------------------------------------------------------ names

const char* type_name(int32_t t) noexcept {
  switch (t) {
    case abi::CUDA_R_16F: return "f16";
    case abi::CUDA_C_16F: return "c16f";
    case abi::CUDA_R_16BF: return "bf16";
    case abi::CUDA_C_16BF: return "c16bf";
    case abi::CUDA_R_32F: return "f32";
    case abi::CUDA_C_32F: return "c64";
    case abi::CUDA_R_64F: return "f64";
    case abi::CUDA_C_64F: return "c128";
    case abi::CUDA_R_8I: return "s8";
    case abi::CUDA_R_8U: return "u8";
    case abi::CUDA_R_32I: return "s32";
    case abi::CUDA_R_8F_E4M3: return "e4m3";
    case abi::CUDA_R_8F_E5M2: return "e5m2";
    default: return "?";
  }
}

const char* compute_name(int32_t c) noexcept {
  switch (c) {
#define SOL_COMPUTE_NAME(name, value) \
  case abi::name: return #name + 15;  // without "CUBLAS_COMPUTE_"
    SOL_CUBLAS_COMPUTE(SOL_COMPUTE_NAME)
#undef SOL_COMPUTE_NAME
    default: return "?";
  }
}

const char* epilogue_name(int32_t e) noexcept {
  switch (e) {
#define SOL_EPILOGUE_NAME(name, value) \
  case abi::name: return #name + 18;  // without "CUBLASLT_EPILOGUE_"
    SOL_CUBLASLT_EPILOGUE(SOL_EPILOGUE_NAME)
#undef SOL_EPILOGUE_NAME
    default: return "?";
  }
}

// ------------------------------------------------------------------------------ describing calls

void describe_blas(Node& node, DeviceBlas& dev, int pointer_mode, int math_mode) noexcept {
  capture::BlasArgs& b = node.blas;
  const bool typed = dev.atype < 0;  // cublasSgemm..., not an Ex routine
  if (typed) dev.atype = dev.btype = dev.ctype = cuda_type_of(node.dtype);
  else node.dtype = dtype_of(dev.atype);
  const int32_t scale = typed ? dev.atype : scale_type_of(dev.compute, dev.atype);
  if (pointer_mode == abi::CUBLAS_POINTER_MODE_HOST) {
    b.alpha = load_scalar(dev.alpha, scale);
    b.beta = load_scalar(dev.beta, scale);
  }
  try {
    std::string detail;
    if (node.dtype == DType::none) add_word(detail, "a", type_name(dev.atype));
    if (dev.btype != dev.atype) add_word(detail, "b", type_name(dev.btype));
    if (dev.ctype != dev.atype) add_word(detail, "c", type_name(dev.ctype));
    if (!typed && !natural_compute(node.dtype, dev.compute)) add_word(detail, "compute", compute_name(dev.compute));
    if (math_mode > 0) {
      switch (math_mode & 0xf) {
        case abi::CUBLAS_TENSOR_OP_MATH: add_word(detail, "math", "tensor_op"); break;
        case abi::CUBLAS_PEDANTIC_MATH: add_word(detail, "math", "pedantic"); break;
        case abi::CUBLAS_TF32_TENSOR_OP_MATH: add_word(detail, "math", "tf32"); break;
        default: break;
      }
      if (math_mode & abi::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
        add_word(detail, "no_reduced_precision_reduction", nullptr);
    }
    dev.detail = intern(detail);
  } catch (...) {
  }
  const bool cx = is_complex_type(dev.atype);
  const size_t sa = type_size(dev.atype), sb = type_size(dev.btype), sc = type_size(dev.ctype);
  if (node.op == capture::Op::gemv) {
    const double m = capture::dim(b.m), n = capture::dim(b.n);
    const bool notrans = b.transa == 'N';
    dev.flops = (cx ? 8.0 : 2.0) * m * n;
    const double y = notrans ? m : n, x = notrans ? n : m;
    dev.bytes = (m * n + x + y * (beta_zero(b.beta) ? 1 : 2)) * static_cast<double>(sa);
    return;
  }
  gemm_work(dev, b, cx, sa, sb, sc, sc);
}

bool describe_lt(Node& node, DeviceBlas& dev) noexcept {
  LtMatmulDesc d;
  LtLayout a, bl, c, dl;
  if (!find(dev.lt[0], d) || !find(dev.lt[1], a) || !find(dev.lt[2], bl) || !find(dev.lt[3], c) ||
      !find(dev.lt[4], dl)) {
    dev.detail = intern("descriptors=unknown");
    return false;
  }
  capture::BlasArgs& b = node.blas;
  b.transa = trans(d.transa);
  b.transb = trans(d.transb);
  b.m = static_cast<int64_t>(dl.rows);
  b.n = static_cast<int64_t>(dl.cols);
  b.k = static_cast<int64_t>(b.transa == 'N' ? a.cols : a.rows);
  b.lda = a.ld;
  b.ldb = bl.ld;
  b.ldc = c.ld;
  if (dl.batch > 1) {
    dev.batch = dl.batch;
    dev.stridea = a.stride;
    dev.strideb = bl.stride;
    dev.stridec = c.stride;
  }
  dev.atype = a.type;
  dev.btype = bl.type;
  dev.ctype = c.type;
  dev.compute = d.compute;
  node.dtype = dtype_of(a.type);
  const int32_t scale = d.scale >= 0 ? d.scale : scale_type_of(d.compute, a.type);
  if (d.pointer_mode == abi::CUBLASLT_POINTER_MODE_HOST) {
    b.alpha = load_scalar(dev.alpha, scale);
    b.beta = load_scalar(dev.beta, scale);
  }
  try {
    std::string detail;
    if (node.dtype == DType::none) add_word(detail, "a", type_name(a.type));
    if (bl.type != a.type) add_word(detail, "b", type_name(bl.type));
    if (c.type != a.type) add_word(detail, "c", type_name(c.type));
    if (dl.type != c.type) add_word(detail, "d", type_name(dl.type));
    if (dev.d != b.c) add_word(detail, "out_of_place", nullptr);  // D is not C
    if (!natural_compute(node.dtype, d.compute)) add_word(detail, "compute", compute_name(d.compute));
    if (d.epilogue != abi::CUBLASLT_EPILOGUE_DEFAULT) add_word(detail, "epilogue", epilogue_name(d.epilogue));
    if (d.fast_accum) add_word(detail, "fast_accum", nullptr);
    if (a.order != abi::CUBLASLT_ORDER_COL || bl.order != abi::CUBLASLT_ORDER_COL ||
        c.order != abi::CUBLASLT_ORDER_COL || dl.order != abi::CUBLASLT_ORDER_COL) {
      char orders[5];
      const LtLayout* all[] = {&a, &bl, &c, &dl};
      for (int i = 0; i < 4; ++i) orders[i] = all[i]->order == abi::CUBLASLT_ORDER_ROW ? 'r' : all[i]->order == abi::CUBLASLT_ORDER_COL ? 'c' : '?';
      orders[4] = 0;
      add_word(detail, "order", orders);  // of A, B, C, D: c column-major, r row-major
    }
    dev.detail = intern(detail);
  } catch (...) {
  }
  gemm_work(dev, b, is_complex_type(a.type), type_size(a.type), type_size(bl.type), type_size(c.type),
            type_size(dl.type));
  return true;
}

void submit(Node& node, NativeFn native) noexcept {
  auto* dev = const_cast<DeviceBlas*>(node.device);  // the wrapper's, on its stack
  if (!dev) return bookkeeping(node, native);
  if (node.api == capture::Api::cublaslt) {
    describe_lt(node, *dev);
  } else {
    const HandleState st = handle_state(dev->handle);
    dev->stream = st.stream;
    describe_blas(node, *dev, st.pointer_mode, st.math_mode);
  }
  if (!capture::trace::active()) return capture::submit(node, native);
  cuda::DeviceTimer timer(dev->stream);
  capture::submit(node, native);
  timer.finish();
}

}  // namespace sol::interpose::cublas
