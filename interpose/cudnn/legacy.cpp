// Legacy cuDNN compute entry points as DNN nodes. Their descriptors are read with cuDNN's own
// getters (the program's library, never libsol's), so the set-up calls need no wrapping.
// Described: batch normalization (what PyTorch 2.x still calls through the legacy API). The other
// legacy calls are traced under their own names, op cudnn_legacy, with device time.
#include <cinttypes>
#include <cstdio>

#include "common/native.hpp"
#include "cudnn_slots.hpp"
#include "interpose/cudnn/detail.hpp"

namespace sol::interpose::cudnn::detail {
namespace {

namespace dnn = capture::dnn;
using capture::DType;
using capture::Sym;

struct Getters {
  cudnnStatus_t (*tensorNd)(const cudnnTensorDescriptor_t, int, cudnnDataType_t*, int*, int*, int*) = nullptr;
};

const Getters& getters() noexcept {
  static const Getters g = [] {
    Getters r;
    r.tensorNd = reinterpret_cast<decltype(r.tensorNd)>(find_native("cudnnGetTensorNdDescriptor"));
    return r;
  }();
  return g;
}

bool tensor(cudnnTensorDescriptor_t td, dnn::TensorDesc& out) noexcept {
  const Getters& g = getters();
  if (!g.tensorNd || !td) return false;
  cudnnDataType_t dt{};
  int nd = 0, dims[CUDNN_DIM_MAX], strides[CUDNN_DIM_MAX];
  if (g.tensorNd(td, CUDNN_DIM_MAX, &dt, &nd, dims, strides) != CUDNN_STATUS_SUCCESS || nd < 1 || nd > dnn::kMaxDims)
    return false;
  out.dtype = to_dtype(dt);
  dnn::Layout& l = out.layout;
  l = dnn::Layout{};
  l.ndims = nd;
  int64_t last = 0;
  for (int d = 0; d < nd; ++d) {
    l.dims[d] = l.padded[d] = dims[d];
    l.strides[d] = strides[d];
    if (dims[d] > 0) last += static_cast<int64_t>(dims[d] - 1) * strides[d];
  }
  out.bytes = l.elements() > 0 ? static_cast<size_t>(last + 1) * capture::dtype_size(out.dtype) : 0;
  return true;
}

// The BN parameters' descriptor is 1xCx1x1; SOL's IR has C.
dnn::TensorDesc vector_of(const dnn::TensorDesc& p) noexcept {
  dnn::TensorDesc v = p;
  dnn::Layout& l = v.layout;
  const int64_t c = p.layout.ndims >= 2 ? p.layout.dims[1] : p.layout.dims[0];
  l = dnn::Layout{};
  l.ndims = 1;
  l.dims[0] = l.padded[0] = c;
  l.strides[0] = 1;
  v.bytes = static_cast<size_t>(c) * capture::dtype_size(p.dtype);
  return v;
}

class Bn {
 public:
  Bn(dnn::Desc& d, void** data) : d_(d), data_(data) {}

  bool add(dnn::Arg arg, cudnnTensorDescriptor_t td, const void* p, bool vector = false) {
    if (!p) return true;  // an optional argument left out
    dnn::TensorDesc t;
    if (d_.ntensors == dnn::kMaxTensors || !tensor(td, t)) return false;
    data_[d_.ntensors] = const_cast<void*>(p);
    d_.tensors[d_.ntensors++] = dnn::Tensor{arg, 0, vector ? vector_of(t) : t};
    return true;
  }

  void finish(int mode, double epsilon) {
    d_.kind = capture::Op::batch_normalization;
    d_.epsilon = static_cast<float>(epsilon);
    d_.use_scale = d_.find(dnn::Arg::scale) >= 0 || d_.find(dnn::Arg::diff_scale) >= 0;
    d_.use_shift = d_.find(dnn::Arg::shift) >= 0 || d_.find(dnn::Arg::diff_shift) >= 0;
    const dnn::TensorDesc& x = d_.tensors[0].desc;
    d_.dtype = x.dtype;
    d_.flops = 5 * static_cast<double>(x.layout.elements());
    std::string s = "prop=" + std::string(dnn::prop_name(d_.prop)) + " ";
    const std::string flags = std::string(d_.global_stats ? "G" : "") + (d_.use_scale ? "C" : "") + (d_.use_shift ? "H" : "");
    if (!flags.empty()) s += "flags=" + flags + " ";
    char buf[128];
    std::snprintf(buf, sizeof buf, "mb%" PRId64 "ic%" PRId64, x.layout.dims[0], x.layout.ndims > 1 ? x.layout.dims[1] : 1);
    s += buf;
    for (int i = 2; i < x.layout.ndims && x.layout.ndims <= 5; ++i) {
      std::snprintf(buf, sizeof buf, "i%c%" PRId64, "dhw"[3 - (x.layout.ndims - 2) + (i - 2)], x.layout.dims[i]);
      s += buf;
    }
    static constexpr struct {
      dnn::Arg arg;
      const char* name;
    } kOrder[] = {{dnn::Arg::src, "src"},         {dnn::Arg::mean, "mean"},           {dnn::Arg::variance, "var"},
                  {dnn::Arg::scale, "scale"},     {dnn::Arg::shift, "shift"},         {dnn::Arg::diff_dst, "diff_dst"},
                  {dnn::Arg::dst, "dst"},         {dnn::Arg::diff_src, "diff_src"},   {dnn::Arg::diff_scale, "diff_scale"},
                  {dnn::Arg::diff_shift, "diff_shift"}};
    for (const auto& a : kOrder)
      for (int i = 0; i < d_.ntensors; ++i)
        if (d_.tensors[i].arg == a.arg)
          s += std::string(" ") + a.name + "=" + dtype_text(d_.tensors[i].desc.dtype) + ":" +
               format_name(d_.tensors[i].desc.layout);
    d_.shape = std::move(s);
    for (int i = 0; i < d_.ntensors; ++i) {
      const dnn::Tensor& t = d_.tensors[i];
      d_.bytes += static_cast<double>(t.desc.bytes) * ((d_.read(t) ? 1 : 0) + (d_.written(t) ? 1 : 0));
    }
    // cuDNN saves the inverse standard deviation where SOL's IR means the variance, and
    // per-activation mode normalizes each (c, h, w) separately.
    d_.unsupported = mode == CUDNN_BATCHNORM_PER_ACTIVATION ? "per-activation batch normalization"
                                                             : "a cuDNN call: its data is device memory, it runs natively";
  }

 private:
  dnn::Desc& d_;
  void** data_;
};

template <class T>
T arg(const capture::Node& n, int i) noexcept {
  return n.dnnl_call.arg<T>(i);
}

}  // namespace

bool describe_legacy(const capture::Node& node, dnn::Desc& d, void** data) noexcept {
  try {
    Bn bn(d, data);
    switch (node.sym) {
      case Sym::cudnnBatchNormalizationForwardTrainingEx: {
        using S = slot::cudnnBatchNormalizationForwardTrainingEx;
        // A fused activation (bnOps != CUDNN_BATCHNORM_OPS_BN) is a post-op SOL does not describe.
        if (arg<int>(node, S::bnOps) != CUDNN_BATCHNORM_OPS_BN) return false;
        d.prop = dnn::Prop::forward_training;
        const auto bnd = arg<cudnnTensorDescriptor_t>(node, S::bnScaleBiasMeanVarDesc);
        if (!bn.add(dnn::Arg::src, arg<cudnnTensorDescriptor_t>(node, S::xDesc), arg<const void*>(node, S::xData)) ||
            !bn.add(dnn::Arg::scale, bnd, arg<const void*>(node, S::bnScale), true) ||
            !bn.add(dnn::Arg::shift, bnd, arg<const void*>(node, S::bnBias), true) ||
            !bn.add(dnn::Arg::mean, bnd, arg<const void*>(node, S::resultSaveMean), true) ||
            !bn.add(dnn::Arg::variance, bnd, arg<const void*>(node, S::resultSaveInvVariance), true) ||
            !bn.add(dnn::Arg::dst, arg<cudnnTensorDescriptor_t>(node, S::yDesc), arg<const void*>(node, S::yData)))
          return false;
        bn.finish(arg<int>(node, S::mode), arg<double>(node, S::epsilon));
        return true;
      }
      case Sym::cudnnBatchNormalizationForwardTraining: {
        using S = slot::cudnnBatchNormalizationForwardTraining;
        d.prop = dnn::Prop::forward_training;
        const auto bnd = arg<cudnnTensorDescriptor_t>(node, S::bnScaleBiasMeanVarDesc);
        if (!bn.add(dnn::Arg::src, arg<cudnnTensorDescriptor_t>(node, S::xDesc), arg<const void*>(node, S::x)) ||
            !bn.add(dnn::Arg::scale, bnd, arg<const void*>(node, S::bnScale), true) ||
            !bn.add(dnn::Arg::shift, bnd, arg<const void*>(node, S::bnBias), true) ||
            !bn.add(dnn::Arg::mean, bnd, arg<const void*>(node, S::resultSaveMean), true) ||
            !bn.add(dnn::Arg::variance, bnd, arg<const void*>(node, S::resultSaveInvVariance), true) ||
            !bn.add(dnn::Arg::dst, arg<cudnnTensorDescriptor_t>(node, S::yDesc), arg<const void*>(node, S::y)))
          return false;
        bn.finish(arg<int>(node, S::mode), arg<double>(node, S::epsilon));
        return true;
      }
      case Sym::cudnnBatchNormalizationForwardInference: {
        using S = slot::cudnnBatchNormalizationForwardInference;
        d.prop = dnn::Prop::forward_inference;
        d.global_stats = true;
        const auto bnd = arg<cudnnTensorDescriptor_t>(node, S::bnScaleBiasMeanVarDesc);
        if (!bn.add(dnn::Arg::src, arg<cudnnTensorDescriptor_t>(node, S::xDesc), arg<const void*>(node, S::x)) ||
            !bn.add(dnn::Arg::mean, bnd, arg<const void*>(node, S::estimatedMean), true) ||
            !bn.add(dnn::Arg::variance, bnd, arg<const void*>(node, S::estimatedVariance), true) ||
            !bn.add(dnn::Arg::scale, bnd, arg<const void*>(node, S::bnScale), true) ||
            !bn.add(dnn::Arg::shift, bnd, arg<const void*>(node, S::bnBias), true) ||
            !bn.add(dnn::Arg::dst, arg<cudnnTensorDescriptor_t>(node, S::yDesc), arg<const void*>(node, S::y)))
          return false;
        bn.finish(arg<int>(node, S::mode), arg<double>(node, S::epsilon));
        return true;
      }
      case Sym::cudnnBatchNormalizationBackwardEx:
      case Sym::cudnnBatchNormalizationBackward: {
        const bool ex = node.sym == Sym::cudnnBatchNormalizationBackwardEx;
        using E = slot::cudnnBatchNormalizationBackwardEx;
        using B = slot::cudnnBatchNormalizationBackward;
        auto at = [ex](int e, int b) { return ex ? e : b; };  // the same parameter in either function
        if (ex && arg<int>(node, E::bnOps) != CUDNN_BATCHNORM_OPS_BN) return false;
        d.prop = dnn::Prop::backward;
        const auto bnd = arg<cudnnTensorDescriptor_t>(node, at(E::dBnScaleBiasDesc, B::dBnScaleBiasDesc));
        if (!bn.add(dnn::Arg::src, arg<cudnnTensorDescriptor_t>(node, at(E::xDesc, B::xDesc)),
                    arg<const void*>(node, at(E::xData, B::x))) ||
            !bn.add(dnn::Arg::mean, bnd, arg<const void*>(node, at(E::savedMean, B::savedMean)), true) ||
            !bn.add(dnn::Arg::variance, bnd, arg<const void*>(node, at(E::savedInvVariance, B::savedInvVariance)), true) ||
            !bn.add(dnn::Arg::scale, bnd, arg<const void*>(node, at(E::bnScaleData, B::bnScale)), true) ||
            !bn.add(dnn::Arg::diff_dst, arg<cudnnTensorDescriptor_t>(node, at(E::dyDesc, B::dyDesc)),
                    arg<const void*>(node, at(E::dyData, B::dy))) ||
            !bn.add(dnn::Arg::diff_src, arg<cudnnTensorDescriptor_t>(node, at(E::dxDesc, B::dxDesc)),
                    arg<const void*>(node, at(E::dxData, B::dx))) ||
            !bn.add(dnn::Arg::diff_scale, bnd, arg<const void*>(node, at(E::dBnScaleData, B::dBnScaleResult)), true) ||
            !bn.add(dnn::Arg::diff_shift, bnd, arg<const void*>(node, at(E::dBnBiasData, B::dBnBiasResult)), true))
          return false;
        bn.finish(arg<int>(node, at(E::mode, B::mode)), arg<double>(node, at(E::epsilon, B::epsilon)));
        return true;
      }
      default: return false;
    }
  } catch (...) {
    return false;
  }
}

}  // namespace sol::interpose::cudnn::detail
