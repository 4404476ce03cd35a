// DNN nodes on the device (dnn.hpp): the checks, the data movement (DnnJob) and each kind's
// sequence of kernels.
#include "backends/opencl/dnn.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "backends/common/dnn_kinds.hpp"
#include "backends/common/dnn_workspace.hpp"
#include "backends/opencl/resident.hpp"
#include "backends/opencl/transfer.hpp"
#include "capture/dnn/validate.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"
#include "ir/dnn.hpp"

namespace sol::backends::opencl {
namespace {

using capture::DType;
using capture::Op;
using capture::dnn::addressable;
using capture::dnn::Alg;
using capture::dnn::Arg;
using capture::dnn::buffer_bytes;
using capture::dnn::Call;
using capture::dnn::ConvGeometry;
using capture::dnn::count_sources;
using capture::dnn::covers;
using capture::dnn::dense_canonical;
using capture::dnn::Desc;
using capture::dnn::forward;
using capture::dnn::has_attributes;
using capture::dnn::IpGeometry;
using capture::dnn::kMaxDims;
using capture::dnn::kMaxTensors;
using capture::dnn::Layout;
using capture::dnn::padded_elements;
using capture::dnn::PoolGeometry;
using capture::dnn::PostOp;
using capture::dnn::Prop;
using capture::dnn::TensorDesc;
using capture::dnn::uses_dst;
using capture::dnn::Window;
using hal::Reason;

// ------------------------------------------------------------------ kernel argument structs
// Mirrors of the structs of dnn_kernels.cl; every field is 8 bytes, so both sides lay them out
// alike.

struct ClLayout {
  cl_long ndims, nblocks, offset0, unused;
  cl_long dims[6], padded[6], strides[6];
  cl_long block[4], block_dim[4];
};
struct ClBcast {
  cl_long ndims, unused;
  cl_long dims[6], a[6], b[6];
};
struct ClConv {
  cl_long n, g, cx, cy;
  cl_long x[3], y[3], k[3], s[3], d[3], p[3];
  cl_long wg, wy, wx, unused;
};
struct ClBatch {
  cl_long nb, unused;
  cl_long dims[4], a[4], b[4], bias[6];
};
struct ClPool {
  cl_long planes, alg, unused0, unused1;
  cl_long x[3], y[3], k[3], s[3], d[3], p[3];
};
static_assert(kMaxDims == 6 && capture::dnn::kMaxBlocks == 4,
              "dnn_kernels.cl's sol_layout has 6 dims, 4 blocks");
static_assert(sizeof(ClLayout) == 30 * 8 && sizeof(ClConv) == 26 * 8 && sizeof(ClPool) == 22 * 8);

ClLayout cl_layout(const Layout& l) {
  ClLayout c{};
  c.ndims = l.ndims;
  c.nblocks = l.nblocks;
  c.offset0 = l.offset0;
  for (int d = 0; d < l.ndims; ++d)
    c.dims[d] = l.dims[d], c.padded[d] = l.padded[d], c.strides[d] = l.strides[d];
  for (int b = 0; b < l.nblocks; ++b) c.block[b] = l.block[b], c.block_dim[b] = l.block_dim[b];
  return c;
}

// The dense canonical (row-major, unpadded) layout of `dims`.
ClLayout dense_layout(int ndims, const int64_t* dims) {
  ClLayout c{};
  c.ndims = ndims;
  int64_t stride = 1;
  for (int d = ndims - 1; d >= 0; --d) {
    c.dims[d] = c.padded[d] = dims[d];
    c.strides[d] = stride;
    stride *= dims[d];
  }
  return c;
}

// ------------------------------------------------------------------------------ alg families

int64_t product(const int64_t* dims, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; ++d) n *= dims[d];
  return n;
}
// Dense strides of `t` against the dims of `full`, 0 along the dims `t` broadcasts.
void broadcast_strides(const Layout& t, const Layout& full, cl_long* strides) {
  int64_t stride = 1;
  for (int d = t.ndims - 1; d >= 0; --d) {
    strides[d] = t.dims[d] == full.dims[d] ? stride : 0;
    stride *= t.dims[d];
  }
}

// --------------------------------------------------------------------------------- geometry
// The kernels' views of a checked node's geometry (capture/dnn/validate.hpp).

template <class Cl>
void set_window(Cl& c, const Window& w) {
  for (int a = 0; a < 3; ++a)
    c.x[a] = w.x[a], c.y[a] = w.y[a], c.k[a] = w.k[a], c.s[a] = w.s[a], c.d[a] = w.d[a], c.p[a] = w.p[a];
}

ClConv cl_conv(const Desc& d) {
  ConvGeometry g;
  capture::dnn::conv_geometry(d, g);
  ClConv c{};
  set_window(c, g);
  c.n = g.n, c.g = g.g, c.cx = g.cx, c.cy = g.cy;
  const bool deconv = d.kind == Op::deconvolution;
  const int64_t kvol = g.volume();
  c.wg = c.cy * c.cx * kvol;
  c.wy = deconv ? kvol : c.cx * kvol;
  c.wx = deconv ? c.cy * kvol : kvol;
  return c;
}

ClPool cl_pool(const Desc& d) {
  PoolGeometry g;
  capture::dnn::pool_geometry(d, g);
  ClPool c{};
  set_window(c, g);
  c.planes = g.n * g.c;
  c.alg = static_cast<cl_long>(d.alg);
  return c;
}

// ------------------------------------------------------------------------------------ checks
// Each kind's check beyond capture/dnn/validate.hpp's: the workspaces, in SOL's formats
// (backends/common/dnn_workspace.hpp).

Reason check_pooling(const Desc& d) noexcept {
  if (Reason r = capture::dnn::check_pool_tensors(d); r != Reason::ok) return r;
  PoolGeometry g;
  capture::dnn::pool_geometry(d, g);
  return check_pool_workspace(d, g.volume());
}

Reason check_bnorm(const Desc& d) noexcept {
  if (Reason r = capture::dnn::check_bnorm_tensors(d); r != Reason::ok) return r;
  return check_bnorm_mask(d, d.desc(Arg::src)->layout.elements());
}

constexpr DnnKinds<DnnCheck> kChecks{
    .conv = capture::dnn::check_conv_tensors,
    .ip = capture::dnn::check_ip_tensors,
    .matmul = capture::dnn::check_matmul_tensors,
    .eltwise = capture::dnn::check_eltwise_tensors,
    .pooling = check_pooling,
    .bnorm = check_bnorm,
    .softmax = capture::dnn::check_softmax_tensors,
    .binary = capture::dnn::check_binary_tensors,
    .sum = capture::dnn::check_sum_tensors,
    .concat = capture::dnn::check_concat_tensors,
    .reorder = capture::dnn::check_reorder_tensors,
};

Reason check(const Device& dev, const capture::Node& node) {
  if (Reason r = capture::dnn::check_node(node); r != Reason::ok) return r;
  const Call* call = node.dnn;
  const Desc& d = *call->desc;
  for (int i = 0; i < d.ntensors; ++i) {
    const TensorDesc& t = d.tensors[i].desc;
    // A workspace is in this backend's own format (dnn.hpp): its kind checks its type.
    if (d.tensors[i].arg != Arg::workspace && t.dtype != DType::f32) return Reason::dtype_unsupported;
    if (capture::dtype_size(t.dtype) == 0) return Reason::workspace_unsupported;
    if (!addressable(t, call->data[i])) return Reason::layout_unsupported;
    const size_t dense_bytes = static_cast<size_t>(t.layout.elements()) * sizeof(float);
    if (std::max(buffer_bytes(t), dense_bytes) > dev.max_alloc()) return Reason::too_large;
  }
  if (Reason r = check_dnn_attributes(d); r != Reason::ok) return r;
  return check_dnn_kind(kChecks, d);
}

// -------------------------------------------------------------------------------------- DnnJob

// One node's trip through the device. Buffers come from the device's DNN slots (extra ones are
// created for the call); every command is tracked so that download() can tell that all of them
// succeeded. The first failure is kept and turns later calls into no-ops, so a kind's sequence
// of kernels reads straight through and checks once, at the end. Eagerly, the destructor waits
// for the queue: the uploads read the caller's memory asynchronously.
//
// Lazily (the device has an active Resident), each tensor's buffer is a raw copy the Resident
// keeps (resident.hpp): a read tensor is uploaded only when the device has no current copy of
// its bytes (synchronously), and results stay on the device, pending, until the host needs them;
// the temporaries stay slots (the queue is in order: the next node's use of a slot comes after
// this one's). The same kernels run on the same bytes either way, so the results are the same.
// A node whose written tensor overlaps another of its tensors (an in-place ReLU) would read and
// write one device copy where eagerly it has two buffers: it runs eagerly, on a current host.
class DnnJob {
 public:
  // `conv_bump`: added to a convolution's first output (SOL_TEST_WRONG_KERNEL, see Dnn::Dnn).
  DnnJob(Device& dev, const Call& call, float conv_bump)
      : dev_(dev), cl_(dev.cl()), call_(call), d_(*call.desc), conv_bump_(conv_bump) {
    Resident* res = dev.resident();
    if (!res || !res->active()) return;
    if (!aliased()) {
      res_ = res;
      return;
    }
    // Eagerly, within the lazy executor: what is pending where this node reads goes first, and
    // the copies where it writes go (their pages open for the results).
    eager_in_lazy_ = res;
    t0_ = monotonic_ns();
    hal::transfers::note_eager("a tensor it writes overlaps another of its tensors");
    for (int i = 0; i < d_.ntensors; ++i)
      res->host_ready(call_.data[i], buffer_bytes(d_.tensors[i].desc), d_.written(d_.tensors[i]));
  }
  DnnJob(const DnnJob&) = delete;
  DnnJob& operator=(const DnnJob&) = delete;
  ~DnnJob() {
    if (!res_) cl_.clFinish(dev_.queue());
    for (cl_event e : events_) cl_.clReleaseEvent(e);
    for (cl_mem m : transient_) cl_.clReleaseMemObject(m);
    if (res_)  // our references to the tensors' copies; the queue keeps them while it needs them
      for (int i = 0; i < d_.ntensors; ++i)
        if (bound_[i].buf) cl_.clReleaseMemObject(bound_[i].buf);
  }

  const Desc& desc() const noexcept { return d_; }
  float conv_bump() const noexcept { return conv_bump_; }

  // The device copy of tensor i in its own layout. Read tensors (and outputs whose layout leaves
  // bytes of the buffer unwritten) carry the caller's bytes.
  cl_mem raw(int i) {
    if (raw_[i] || !ok()) return raw_[i];
    const TensorDesc& t = d_.tensors[i].desc;
    const size_t bytes = buffer_bytes(t);
    const bool upload = d_.read(d_.tensors[i]) || !covers(t) || d_.tensors[i].arg == Arg::workspace;
    if (res_ && bytes) {
      Operand& o = bound_[i];
      o.ext.name = "dnn";
      o.ext.ptr = call_.data[i];
      o.ext.bytes = o.device_bytes = bytes;
      o.ext.read = upload;
      o.ext.written = d_.written(d_.tensors[i]);
      o.shape = Shape::raw;
      if (Reason r = res_->bind(o, 1); r != Reason::ok) {
        SOL_LOG(debug, "opencl: a lazy copy of %zu bytes failed", bytes);
        err_ = r;
      }
      return raw_[i] = o.buf;
    }
    raw_[i] = buffer(bytes);
    if (raw_[i] && upload && bytes) {
      cl_event ev = nullptr;
      const cl_int err =
          cl_.clEnqueueWriteBuffer(dev_.queue(), raw_[i], CL_FALSE, 0, bytes, call_.data[i], 0, nullptr, &ev);
      if (err == CL_SUCCESS) hal::transfers::to_device(bytes);
      track(err, ev, "clEnqueueWriteBuffer");
    }
    return raw_[i];
  }
  cl_mem raw(Arg a, int index = 0) {
    const int i = d_.find(a, index);
    return i < 0 ? nullptr : raw(i);
  }

  // Tensor (a, index) as a dense canonical f32 array, or nullptr when the node lacks it.
  cl_mem dense(Arg a, int index = 0) {
    const int i = d_.find(a, index);
    if (i < 0 || !ok()) return nullptr;
    if (dense_[i]) return dense_[i];
    const Layout& l = d_.tensors[i].desc.layout;
    if (dense_canonical(l)) return dense_[i] = raw(i);
    cl_mem out = temp(l.elements());
    const ClLayout from = cl_layout(l), to = dense_layout(l.ndims, l.dims);
    launch(DnnKernel::copy, l.elements(), raw(i), from, out, to, static_cast<cl_long>(l.elements()));
    return dense_[i] = out;
  }

  // Where output (a, index) is computed densely: the device copy itself when its layout is dense
  // canonical, unless a sum post-op still needs dst's old values there. nullptr when the node
  // lacks it.
  cl_mem output(Arg a, int index = 0) {
    const int i = d_.find(a, index);
    if (i < 0 || !ok()) return nullptr;
    if (out_[i]) return out_[i];
    const Layout& l = d_.tensors[i].desc.layout;
    const bool keep_old = a == Arg::dst && d_.has_sum_post_op();
    out_[i] = dense_canonical(l) && !keep_old ? raw(i) : temp(l.elements());
    return out_[i];
  }

  // A dense output into its tensor: output scale and post-ops (dst of kinds that take them), then
  // the scatter into its layout; it is then downloaded.
  void finish(Arg a, int index = 0) {
    const int i = d_.find(a, index);
    if (i < 0 || !ok()) return;
    const Layout& l = d_.tensors[i].desc.layout;
    cl_mem y = output(a, index);
    if (a == Arg::dst && has_attributes(d_)) epilogue(y, l);
    if (y != raw(i)) {
      const ClLayout from = dense_layout(l.ndims, l.dims), to = cl_layout(l);
      launch(DnnKernel::copy, padded_elements(l), y, from, raw(i), to,
             static_cast<cl_long>(padded_elements(l)));
    }
    stored_[i] = true;
  }
  // Tensor (a, index) written directly in its own layout (a workspace, a reorder's dst).
  void stored(Arg a, int index = 0) {
    if (const int i = d_.find(a, index); i >= 0) stored_[i] = true;
  }

  // A device buffer for `floats` f32 values (not initialised).
  cl_mem temp(int64_t floats) { return buffer(static_cast<size_t>(floats) * sizeof(float)); }

  // Enqueues kernel k over `total` work-items (rounded up to whole work-groups: every kernel
  // checks its range). Arguments: cl_mem (nullptr for an absent buffer) or scalars and structs.
  template <class... A>
  void launch(DnnKernel k, int64_t total, const A&... args) {
    if (!ok() || total <= 0) return;
    std::string why;
    cl_kernel kernel = dev_.kernel(k, why);
    if (!kernel) {
      log::once(log::Level::warn, "opencl: dnn program", "opencl: %s", why.c_str());
      err_ = Reason::device_error;
      return;
    }
    cl_uint index = 0;
    cl_int err = CL_SUCCESS;
    ((err = err == CL_SUCCESS ? cl_.clSetKernelArg(kernel, index++, sizeof args, &args) : err), ...);
    if (err != CL_SUCCESS) return fail(err, "clSetKernelArg");
    const size_t local = std::min<size_t>(64, dev_.max_work_group());
    const size_t global = (static_cast<size_t>(total) + local - 1) / local * local;
    cl_event ev = nullptr;
    err = cl_.clEnqueueNDRangeKernel(dev_.queue(), kernel, 1, nullptr, &global, &local, 0, nullptr, &ev);
    track(err, ev, "clEnqueueNDRangeKernel");
  }

  // Reads every stored tensor into host staging, waits, checks every command, and only then
  // copies them into the caller's memory. Lazily, results the Resident keeps stay on the device
  // and, when all of them do, nothing is waited for: the node is pending.
  Reason download() {
    bool kept[kMaxTensors] = {};
    if (res_) {
      if (!ok()) {
        // A command failed (another backend will run the node): a kept copy it may have written
        // must not be read again. What is pending is written back and the node's results' copies
        // go, so that the host, current, is what the next attempt sees.
        for (int i = 0; i < d_.ntensors; ++i)
          if (bound_[i].buf && bound_[i].ext.written) res_->host_ready(bound_[i].ext.ptr, bound_[i].ext.bytes, true);
        return err_;
      }
      bool waits = false;
      for (int i = 0; i < d_.ntensors; ++i) {
        if (!stored_[i] || !raw_[i]) continue;
        kept[i] = bound_[i].buf && bound_[i].ext.written && res_->keep(bound_[i]);
        waits |= !kept[i];
      }
      if (!waits) {
        res_->deferred();
        return Reason::ok;
      }
      // The results that come back now go into open pages (another tensor's copy may have made
      // their block read-only since bind()).
      for (int i = 0; i < d_.ntensors; ++i)
        if (stored_[i] && raw_[i] && !kept[i]) res_->host_ready(call_.data[i], buffer_bytes(d_.tensors[i].desc), true);
      t0_ = monotonic_ns();
    }
    uint64_t back = 0;
    unsigned char* staged[kMaxTensors] = {};
    int slot = Device::kFirstDnnSlot;
    for (int i = 0; i < d_.ntensors && ok(); ++i) {
      const size_t bytes = buffer_bytes(d_.tensors[i].desc);
      if (!stored_[i] || !raw_[i] || bytes == 0 || kept[i]) continue;
      back += bytes;
      staged[i] = static_cast<unsigned char*>(dev_.staging(slot++, bytes));
      cl_event ev = nullptr;
      const cl_int err =
          cl_.clEnqueueReadBuffer(dev_.queue(), raw_[i], CL_FALSE, 0, bytes, staged[i], 0, nullptr, &ev);
      if (err == CL_SUCCESS) hal::transfers::to_host(bytes);
      track(err, ev, "clEnqueueReadBuffer");
    }
    if (const cl_int err = cl_.clFinish(dev_.queue()); err != CL_SUCCESS) fail(err, "clFinish");
    for (cl_event e : events_) {
      if (!ok()) break;
      cl_int status = CL_COMPLETE;
      const cl_int err =
          cl_.clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
      if (err != CL_SUCCESS)
        fail(err, "clGetEventInfo");
      else if (status < 0)
        fail(status, "a device command");
    }
    if (!ok()) return err_;
    for (int i = 0; i < d_.ntensors; ++i)
      if (staged[i]) std::memcpy(call_.data[i], staged[i], buffer_bytes(d_.tensors[i].desc));
    if (Resident* res = res_ ? res_ : eager_in_lazy_) res->waited(hal::transfers::Cause::eager, t0_, back);
    return Reason::ok;
  }

  bool ok() const noexcept { return err_ == Reason::ok; }

 private:
  // Output scale, then each post-op, on dense dst values y (layout l gives the dims).
  void epilogue(cl_mem y, const Layout& l) {
    const cl_long n = l.elements();
    if (d_.output_scale != 1) launch(DnnKernel::axpby, n, y, y, n, d_.output_scale, 0.f);
    for (int p = 0; p < d_.npost_ops; ++p) {
      const PostOp& po = d_.post_ops[p];
      switch (po.kind) {
        case PostOp::Kind::sum: launch(DnnKernel::axpby, n, dense(Arg::dst), y, n, po.scale, 1.f); break;
        case PostOp::Kind::eltwise:
          launch(DnnKernel::eltwise_fwd, n, y, y, n, static_cast<cl_int>(po.alg), po.alpha, po.beta,
                 po.scale);
          break;
        case PostOp::Kind::binary: {
          ClBcast s{};
          s.ndims = l.ndims;
          const ClLayout yl = dense_layout(l.ndims, l.dims);
          for (int d = 0; d < l.ndims; ++d) s.dims[d] = l.dims[d], s.a[d] = yl.strides[d];
          broadcast_strides(d_.desc(Arg::post_op_src, p)->layout, l, s.b);
          launch(DnnKernel::binary, n, y, dense(Arg::post_op_src, p), y, s, n, static_cast<cl_int>(po.alg));
          break;
        }
      }
    }
  }

  cl_mem buffer(size_t bytes) {
    if (!ok()) return nullptr;
    cl_mem out = nullptr;
    cl_int err = CL_SUCCESS;
    if (next_slot_ < Device::kNumSlots) {
      err = dev_.buffer(next_slot_++, bytes, out);
    } else {  // more buffers than slots (a concat of many sources): for this call only
      out = cl_.clCreateBuffer(dev_.context(), CL_MEM_READ_WRITE, std::max<size_t>(bytes, 64), nullptr, &err);
      if (out) transient_.push_back(out);
    }
    if (!out) fail(err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE, "allocation");
    return out;
  }

  void track(cl_int err, cl_event ev, const char* what) {
    if (ev) events_.push_back(ev);
    if (err != CL_SUCCESS) fail(err, what);
  }

  void fail(int status, const char* what) {
    SOL_LOG(debug, "opencl: %s failed: %s (%d)", what, status_name(status), status);
    if (ok()) err_ = reason_of(status);
  }

  // Whether a tensor the node writes overlaps another of its tensors.
  bool aliased() const noexcept {
    for (int i = 0; i < d_.ntensors; ++i) {
      if (!d_.written(d_.tensors[i])) continue;
      const auto* b = static_cast<const unsigned char*>(call_.data[i]);
      const size_t n = buffer_bytes(d_.tensors[i].desc);
      for (int j = 0; j < d_.ntensors; ++j) {
        const auto* o = static_cast<const unsigned char*>(call_.data[j]);
        const size_t m = buffer_bytes(d_.tensors[j].desc);
        if (j != i && n && m && b && o && o < b + n && b < o + m) return true;
      }
    }
    return false;
  }

  Device& dev_;
  const ClApi& cl_;
  const Call& call_;
  const Desc& d_;
  const float conv_bump_;
  Reason err_ = Reason::ok;
  int next_slot_ = Device::kFirstDnnSlot;
  cl_mem raw_[kMaxTensors] = {}, dense_[kMaxTensors] = {}, out_[kMaxTensors] = {};
  bool stored_[kMaxTensors] = {};
  Resident* res_ = nullptr;            // lazily: the tensors are raw copies it keeps
  Resident* eager_in_lazy_ = nullptr;  // lazily, but this node runs eagerly (aliased())
  Operand bound_[kMaxTensors];         // lazily: tensor i's copy (bound_[i].buf, our reference)
  uint64_t t0_ = 0;                    // lazily, when waiting began (the trace's flush)
  std::vector<cl_event> events_;
  std::vector<cl_mem> transient_;
};

// How many chunks to cut a reduction of `len` terms into when `outputs` values are reduced: enough
// work-items to fill a device, at least 64 terms per chunk.
cl_long chunks_for(int64_t outputs, int64_t len) {
  const int64_t want = (16384 + outputs - 1) / std::max<int64_t>(outputs, 1);
  return std::max<int64_t>(1, std::min(want, len / 64));
}

// Per-channel sums of dense (n, c, s) arrays into `out` (see sol_dnn_channel_sums), times `scale`.
void channel_sums(DnnJob& job, cl_mem a, cl_mem b, cl_mem mean, cl_mem mask, cl_long n, cl_long c, cl_long s,
                  cl_int mode, cl_mem out, float scale) {
  const cl_long count = mode == 2 ? 2 * c : c;
  const cl_long chunks = chunks_for(c, n * s);
  cl_mem partial = job.temp(count * chunks);
  const cl_int use_mask = mask ? 1 : 0;
  job.launch(DnnKernel::channel_sums, c * chunks, a, b, mean, mask, use_mask, n, c, s, chunks, mode, partial);
  job.launch(DnnKernel::reduce_chunks, count, partial, out, count, chunks, scale);
}

// N, C and the product of the remaining dims of a data tensor.
void ncs(const Layout& l, cl_long& n, cl_long& c, cl_long& s) {
  n = l.dims[0];
  c = l.ndims > 1 ? l.dims[1] : 1;
  s = product(l.dims, 2, l.ndims);
}

// ------------------------------------------------------------------------------------- kinds

void run_conv(DnnJob& job) {
  const Desc& d = job.desc();
  const ClConv c = cl_conv(d);
  const bool deconv = d.kind == Op::deconvolution;
  const cl_long xsize = c.n * c.g * c.cx * c.x[0] * c.x[1] * c.x[2];
  const cl_long ysize = c.n * c.g * c.cy * c.y[0] * c.y[1] * c.y[2];
  const cl_int no_bias = 0;
  const cl_mem none = nullptr;
  switch (d.prop) {
    case Prop::backward_data:
      if (deconv) {  // diff_src (y side) = corr(diff_dst, w^T)
        job.launch(DnnKernel::conv_fwd, ysize, job.dense(Arg::diff_dst), job.dense(Arg::weights), none,
                   no_bias, job.output(Arg::diff_src), c, 0.f);
      } else {
        job.launch(DnnKernel::conv_bwd_data, xsize, job.dense(Arg::diff_dst), job.dense(Arg::weights), none,
                   no_bias, job.output(Arg::diff_src), c);
      }
      job.finish(Arg::diff_src);
      return;
    case Prop::backward_weights: {
      const capture::dnn::ConvSides sd = capture::dnn::conv_sides(d);
      const cl_long wsize = c.g * c.wg;
      const cl_long chunks = chunks_for(wsize, c.n * c.y[0] * c.y[1] * c.y[2]);
      cl_mem partial = job.temp(wsize * chunks);
      job.launch(DnnKernel::conv_bwd_weights, wsize * chunks, job.dense(sd.x), job.dense(sd.y), partial, c,
                 chunks);
      job.launch(DnnKernel::reduce_chunks, wsize, partial, job.output(Arg::diff_weights), wsize, chunks, 1.f);
      job.finish(Arg::diff_weights);
      if (cl_mem bias = job.output(Arg::diff_bias)) {  // sums of diff_dst per channel
        cl_long n, ch, s;
        ncs(d.desc(Arg::diff_dst)->layout, n, ch, s);
        channel_sums(job, job.dense(Arg::diff_dst), none, none, none, n, ch, s, 0, bias, 1.f);
        job.finish(Arg::diff_bias);
      }
      return;
    }
    default: {
      cl_mem bias = job.dense(Arg::bias);
      const cl_int has_bias = bias ? 1 : 0;
      if (deconv) {
        job.launch(DnnKernel::conv_bwd_data, xsize, job.dense(Arg::src), job.dense(Arg::weights), bias,
                   has_bias, job.output(Arg::dst), c);
      } else {
        job.launch(DnnKernel::conv_fwd, ysize, job.dense(Arg::src), job.dense(Arg::weights), bias, has_bias,
                   job.output(Arg::dst), c, job.conv_bump());
      }
      job.finish(Arg::dst);
      return;
    }
  }
}

void run_ip(DnnJob& job) {
  const Desc& d = job.desc();
  IpGeometry g;
  capture::dnn::ip_geometry(d, g);
  const cl_mem none = nullptr;
  const cl_int no_bias = 0;
  ClBatch bt{};  // no batch dims; bias (when present) per output column
  bt.bias[1] = 1;
  switch (d.prop) {
    case Prop::backward_data:  // diff_src (N x K) = diff_dst (N x O) * W (O x K)
      job.launch(DnnKernel::gemm, g.n * g.k, job.dense(Arg::diff_dst), job.dense(Arg::weights), none, no_bias,
                 job.output(Arg::diff_src), g.n, g.k, g.o, g.o, cl_long{1}, g.k, cl_long{1}, bt, g.n * g.k);
      job.finish(Arg::diff_src);
      return;
    case Prop::backward_weights: {  // diff_weights (O x K) = diff_dst^T (O x N) * src (N x K)
      cl_mem dy = job.dense(Arg::diff_dst);
      job.launch(DnnKernel::gemm, g.o * g.k, dy, job.dense(Arg::src), none, no_bias,
                 job.output(Arg::diff_weights), g.o, g.k, g.n, cl_long{1}, g.o, g.k, cl_long{1}, bt,
                 g.o * g.k);
      job.finish(Arg::diff_weights);
      if (cl_mem bias = job.output(Arg::diff_bias)) {
        channel_sums(job, dy, none, none, none, g.n, g.o, 1, 0, bias, 1.f);
        job.finish(Arg::diff_bias);
      }
      return;
    }
    default: {  // dst (N x O) = src (N x K) * W^T (K x O) + bias
      cl_mem bias = job.dense(Arg::bias);
      const cl_int has_bias = bias ? 1 : 0;
      job.launch(DnnKernel::gemm, g.n * g.o, job.dense(Arg::src), job.dense(Arg::weights), bias, has_bias,
                 job.output(Arg::dst), g.n, g.o, g.k, g.k, cl_long{1}, cl_long{1}, g.k, bt, g.n * g.o);
      job.finish(Arg::dst);
      return;
    }
  }
}

void run_matmul(DnnJob& job) {
  const Desc& d = job.desc();
  const Layout &al = d.desc(Arg::src)->layout, &bl = d.desc(Arg::weights)->layout,
               &yl = d.desc(Arg::dst)->layout;
  const int nd = yl.ndims;
  const cl_long m = yl.dims[nd - 2], n = yl.dims[nd - 1], k = al.dims[nd - 1];
  ClBatch bt{};
  bt.nb = nd - 2;
  cl_long as[kMaxDims], bs[kMaxDims];
  broadcast_strides(al, yl, as);
  broadcast_strides(bl, yl, bs);
  for (int i = 0; i < nd - 2; ++i) bt.dims[i] = yl.dims[i], bt.a[i] = as[i], bt.b[i] = bs[i];
  cl_mem bias = job.dense(Arg::bias);
  if (bias) broadcast_strides(d.desc(Arg::bias)->layout, yl, bt.bias);
  const cl_int has_bias = bias ? 1 : 0;
  const cl_long total = yl.elements();
  job.launch(DnnKernel::gemm, total, job.dense(Arg::src), job.dense(Arg::weights), bias, has_bias,
             job.output(Arg::dst), m, n, k, k, cl_long{1}, n, cl_long{1}, bt, total);
  job.finish(Arg::dst);
}

void run_eltwise(DnnJob& job) {
  const Desc& d = job.desc();
  const cl_int alg = static_cast<cl_int>(d.alg);
  if (forward(d)) {
    const cl_long n = d.desc(Arg::dst)->layout.elements();
    job.launch(DnnKernel::eltwise_fwd, n, job.dense(Arg::src), job.output(Arg::dst), n, alg, d.alpha, d.beta,
               1.f);
    job.finish(Arg::dst);
    return;
  }
  const cl_long n = d.desc(Arg::diff_src)->layout.elements();
  job.launch(DnnKernel::eltwise_bwd, n, job.dense(Arg::diff_dst),
             job.dense(uses_dst(d.alg) ? Arg::dst : Arg::src), job.output(Arg::diff_src), n, alg, d.alpha,
             d.beta);
  job.finish(Arg::diff_src);
}

void run_pooling(DnnJob& job) {
  const Desc& d = job.desc();
  const ClPool g = cl_pool(d);
  const TensorDesc* ws =
      d.alg == Alg::pool_max && d.prop != Prop::forward_inference ? d.desc(Arg::workspace) : nullptr;
  const ClLayout wl = ws ? cl_layout(ws->layout) : ClLayout{};
  const cl_int ws_kind = ws ? static_cast<cl_int>(capture::dtype_size(ws->dtype)) : 0;
  cl_mem wsbuf = ws ? job.raw(Arg::workspace) : nullptr;
  const cl_long channels = d.desc(forward(d) ? Arg::src : Arg::diff_src)->layout.dims[1];
  if (forward(d)) {
    job.launch(DnnKernel::pool_fwd, g.planes * g.y[0] * g.y[1] * g.y[2], job.dense(Arg::src),
               job.output(Arg::dst), g, wsbuf, ws_kind, wl, channels);
    job.finish(Arg::dst);
    if (ws) job.stored(Arg::workspace);
    return;
  }
  job.launch(DnnKernel::pool_bwd, g.planes * g.x[0] * g.x[1] * g.x[2], job.dense(Arg::diff_dst),
             job.output(Arg::diff_src), g, wsbuf, ws_kind, wl, channels);
  job.finish(Arg::diff_src);
}

void run_bnorm(DnnJob& job) {
  const Desc& d = job.desc();
  cl_long n, c, s;
  ncs(d.desc(Arg::src)->layout, n, c, s);
  const cl_long total = n * c * s, len = n * s;
  const bool mask = bnorm_mask(d);
  const cl_mem none = nullptr;
  cl_mem x = job.dense(Arg::src);
  cl_mem scale = d.use_scale ? job.dense(Arg::scale) : nullptr;
  cl_mem ws = mask ? job.raw(Arg::workspace) : nullptr;
  const float inv_len = len ? 1.f / static_cast<float>(len) : 0.f;

  if (forward(d)) {
    cl_mem mean, var;
    if (d.global_stats) {
      mean = job.dense(Arg::mean), var = job.dense(Arg::variance);
    } else {  // computed, and written when the node has them (forward_training)
      mean = d.find(Arg::mean) >= 0 ? job.output(Arg::mean) : job.temp(c);
      var = d.find(Arg::variance) >= 0 ? job.output(Arg::variance) : job.temp(c);
      channel_sums(job, x, none, none, none, n, c, s, 0, mean, inv_len);
      channel_sums(job, x, none, mean, none, n, c, s, 1, var, inv_len);
    }
    const cl_int flags = (d.use_scale ? 1 : 0) | (d.use_shift ? 2 : 0) | (d.fuse_relu ? 4 : 0);
    cl_mem y = job.output(Arg::dst);
    job.launch(DnnKernel::bnorm_fwd, total, x, mean, var, scale, d.use_shift ? job.dense(Arg::shift) : none,
               flags, y, c, s, d.epsilon, total);
    if (mask) {
      job.launch(DnnKernel::bnorm_mask, (total + 7) / 8, y, ws, total);
      job.stored(Arg::workspace);
    }
    job.finish(Arg::dst);
    if (!d.global_stats) job.finish(Arg::mean), job.finish(Arg::variance);
    return;
  }

  cl_mem dy = job.dense(Arg::diff_dst), mean = job.dense(Arg::mean), var = job.dense(Arg::variance);
  cl_mem sums = job.temp(2 * c);
  const bool params = d.prop == Prop::backward;
  if (!d.global_stats || params) channel_sums(job, x, dy, mean, ws, n, c, s, 2, sums, 1.f);
  const cl_int flags = (d.use_scale ? 1 : 0) | (mask ? 4 : 0) | (d.global_stats ? 8 : 0);
  job.launch(DnnKernel::bnorm_bwd, total, x, dy, mean, var, scale, sums, ws, flags, job.output(Arg::diff_src),
             c, s, len, d.epsilon, total);
  job.finish(Arg::diff_src);
  if (!params) return;
  cl_mem dscale = d.find(Arg::diff_scale) >= 0 ? job.output(Arg::diff_scale) : job.temp(c);
  cl_mem dshift = d.find(Arg::diff_shift) >= 0 ? job.output(Arg::diff_shift) : job.temp(c);
  job.launch(DnnKernel::bnorm_diff_params, c, sums, var, d.epsilon, c, dscale, dshift);
  job.finish(Arg::diff_scale);
  job.finish(Arg::diff_shift);
}

void run_softmax(DnnJob& job) {
  const Desc& d = job.desc();
  const Layout& l = d.desc(Arg::dst)->layout;
  const cl_long outer = product(l.dims, 0, d.axis), c = l.dims[d.axis],
                inner = product(l.dims, d.axis + 1, l.ndims);
  const cl_int log_softmax = d.kind == Op::logsoftmax ? 1 : 0;
  if (forward(d)) {
    job.launch(DnnKernel::softmax_fwd, outer * inner, job.dense(Arg::src), job.output(Arg::dst), outer, c,
               inner, log_softmax);
    job.finish(Arg::dst);
    return;
  }
  job.launch(DnnKernel::softmax_bwd, outer * inner, job.dense(Arg::dst), job.dense(Arg::diff_dst),
             job.output(Arg::diff_src), outer, c, inner, log_softmax);
  job.finish(Arg::diff_src);
}

void run_binary(DnnJob& job) {
  const Desc& d = job.desc();
  const Layout& yl = d.desc(Arg::dst)->layout;
  ClBcast s{};
  s.ndims = yl.ndims;
  for (int i = 0; i < yl.ndims; ++i) s.dims[i] = yl.dims[i];
  broadcast_strides(d.desc(Arg::src)->layout, yl, s.a);
  broadcast_strides(d.desc(Arg::src1)->layout, yl, s.b);
  const cl_long n = yl.elements();
  job.launch(DnnKernel::binary, n, job.dense(Arg::src), job.dense(Arg::src1), job.output(Arg::dst), s, n,
             static_cast<cl_int>(d.alg));
  job.finish(Arg::dst);
}

void run_sum(DnnJob& job) {
  const Desc& d = job.desc();
  const cl_long n = d.desc(Arg::dst)->layout.elements();
  cl_mem y = job.output(Arg::dst);
  for (int i = 0, count = count_sources(d); i < count; ++i)
    job.launch(DnnKernel::axpby, n, job.dense(Arg::multi_src, i), y, n, d.sum_scales[i], i == 0 ? 0.f : 1.f);
  job.finish(Arg::dst);
}

// Each source is copied from its own layout straight into its slab of dense dst.
void run_concat(DnnJob& job) {
  const Desc& d = job.desc();
  const Layout& yl = d.desc(Arg::dst)->layout;
  const ClLayout dense_y = dense_layout(yl.ndims, yl.dims);
  cl_mem y = job.output(Arg::dst);
  int64_t at = 0;
  for (int i = 0, count = count_sources(d); i < count; ++i) {
    const Layout& l = d.desc(Arg::multi_src, i)->layout;
    ClLayout slab = dense_y;
    for (int k = 0; k < l.ndims; ++k) slab.dims[k] = slab.padded[k] = l.dims[k];
    slab.offset0 = at * dense_y.strides[d.axis];
    at += l.dims[d.axis];
    job.launch(DnnKernel::copy, l.elements(), job.raw(Arg::multi_src, i), cl_layout(l), y, slab,
               static_cast<cl_long>(l.elements()));
  }
  job.finish(Arg::dst);
}

void run_reorder(DnnJob& job) {
  const Desc& d = job.desc();
  const Layout &xl = d.desc(Arg::src)->layout, &yl = d.desc(Arg::dst)->layout;
  if (!has_attributes(d)) {  // one pass, layout to layout
    const cl_long total = padded_elements(yl);
    job.launch(DnnKernel::copy, total, job.raw(Arg::src), cl_layout(xl), job.raw(Arg::dst), cl_layout(yl),
               total);
    job.stored(Arg::dst);
    return;
  }
  const cl_long n = yl.elements();
  job.launch(DnnKernel::axpby, n, job.dense(Arg::src), job.output(Arg::dst), n, 1.f, 0.f);
  job.finish(Arg::dst);
}

constexpr DnnKinds<void (*)(DnnJob&)> kRuns{
    .conv = run_conv,
    .ip = run_ip,
    .matmul = run_matmul,
    .eltwise = run_eltwise,
    .pooling = run_pooling,
    .bnorm = run_bnorm,
    .softmax = run_softmax,
    .binary = run_binary,
    .sum = run_sum,
    .concat = run_concat,
    .reorder = run_reorder,
};

}  // namespace

Dnn::Dnn(Device& device) : device_(device) {
  // Test-only: SOL_TEST_WRONG_KERNEL=convolution makes every convolution forward pass add 1 to its
  // first output element, so that tests of verify mode (tests/integration/test_dnn.py) can check
  // that a wrong backend result is caught. Not a configuration key: nothing but a test sets it.
  const char* wrong = secure_getenv("SOL_TEST_WRONG_KERNEL");
  if (wrong && std::string_view(wrong) == "convolution") conv_bump_ = 1.f;
}

Reason Dnn::supports(const capture::Node& node) const noexcept {
  return check(device_, node);
}

Reason Dnn::run(capture::Node& node) {
  const auto* run = kRuns.of(node.op);
  if (!run) return Reason::op_unsupported;  // excluded by check()
  DnnJob job(device_, *node.dnn, conv_bump_);
  (*run)(job);
  return job.download();
}

}  // namespace sol::backends::opencl
