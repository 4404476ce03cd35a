#include "backends/opencl/device.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "backends/opencl/clblast_programs.hpp"
#include "common/log.hpp"
#include "common/native.hpp"
#include "config/config.hpp"
#include "ir/dnn.hpp"

namespace sol::backends::opencl {

extern const char kKernelSource[];     // kernels.cl, embedded by CMake (kernels_source.cpp)
extern const char kDnnKernelSource[];  // dnn_kernels.cl, likewise (dnn_kernels_source.cpp)

namespace {

constexpr const char* kOpenclLibrary = "libOpenCL.so.1";
constexpr const char* kClblastLibrary = "libclblast.so.1";

const char* const kKernelNames[kNumKernels] = {"sol_rot",   "sol_rotm",  "sol_scal_real",
                                               "sol_asum",  "sol_nrm2",  "sol_iamax",
                                               "sol_dsdot", "sol_tsv_n", "sol_tsv_t"};
const char* const kProgramNames[kNumPrecs] = {"sol_blas_s", "sol_blas_d", "sol_blas_c", "sol_blas_z"};
const char* const kProgramOptions[kNumPrecs] = {"-cl-std=CL1.2 -DSOL_PREC_S", "-cl-std=CL1.2 -DSOL_PREC_D",
                                                "-cl-std=CL1.2 -DSOL_PREC_C", "-cl-std=CL1.2 -DSOL_PREC_Z"};

const char* const kDnnKernelNames[kNumDnnKernels] = {
#define SOL_DNN_KERNEL(name) "sol_dnn_" #name,
#include "backends/opencl/dnn_kernels.def"
#undef SOL_DNN_KERNEL
};

// The DNN program's options: the number of every capture::dnn::Alg, as SOL_ALG_<name>.
std::string dnn_program_options() {
  std::string options = "-cl-std=CL1.2";
  int value = 0;
#define SOL_DNN_ALG_DEFINE(name) options += " -DSOL_ALG_" #name "=" + std::to_string(value++);
  SOL_DNN_ALGS(SOL_DNN_ALG_DEFINE)
#undef SOL_DNN_ALG_DEFINE
  return options;
}

template <class Get>
std::string info_string(Get get) {
  size_t size = 0;
  if (get(0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string s(size, '\0');
  if (get(size, s.data(), nullptr) != CL_SUCCESS) return {};
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string platform_info(const ClApi& cl, cl_platform_id p, cl_platform_info what) {
  return info_string([&](size_t n, void* v, size_t* r) { return cl.clGetPlatformInfo(p, what, n, v, r); });
}

std::string device_info(const ClApi& cl, cl_device_id d, cl_device_info what) {
  return info_string([&](size_t n, void* v, size_t* r) { return cl.clGetDeviceInfo(d, what, n, v, r); });
}

bool is_index(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool contains_nocase(const std::string& haystack, const std::string& needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                        [](unsigned char a, unsigned char b) { return std::tolower(a) == std::tolower(b); });
  return it != haystack.end();
}

// Whether `spec` (empty, an index, or a name substring) selects item `index` named `name`.
bool matches(const std::string& spec, size_t index, const std::string& name) {
  if (spec.empty()) return true;
  if (is_index(spec)) return std::strtoull(spec.c_str(), nullptr, 10) == index;
  return contains_nocase(name, spec);
}

// Set once exit() has begun: ICDs tear themselves down in their own exit handlers, after which
// releasing OpenCL objects (or enqueuing work) may crash or hang. Registered after the ICD was
// loaded, so that it runs before the ICD's own handlers.
std::atomic<bool> g_exiting{false};

void at_exit() {
  g_exiting.store(true, std::memory_order_release);
  const ProgramCache::Totals t = ProgramCache::totals();
  if (t.loaded + t.compiled > 0)
    SOL_LOG(debug, "opencl: %d programs from the cache, %d compiled", t.loaded, t.compiled);
}

}  // namespace

bool process_exiting() noexcept {
  return g_exiting.load(std::memory_order_acquire);
}

Device::~Device() {
  if (process_exiting()) return;  // leak on purpose: see g_exiting
  for (auto& per_prec : kernels_)
    for (cl_kernel k : per_prec)
      if (k) cl_.clReleaseKernel(k);
  for (cl_program p : programs_)
    if (p) cl_.clReleaseProgram(p);
  for (cl_kernel k : dnn_kernels_)
    if (k) cl_.clReleaseKernel(k);
  if (dnn_program_) cl_.clReleaseProgram(dnn_program_);
  for (Slot& s : slots_)
    if (s.mem) cl_.clReleaseMemObject(s.mem);
  if (queue_) {
    cl_.clFinish(queue_);
    cl_.clReleaseCommandQueue(queue_);
  }
  // CLBlast keeps the programs it built for our context; release them with the context.
  clblast_programs::remove(context_);
  if (clblast_.ClearCache) clblast_.ClearCache();
  if (context_) cl_.clReleaseContext(context_);
}

bool Device::open(const config::Config& cfg, std::string& why) {
  if (!load(cl_, kOpenclLibrary, why)) return false;
  // CLBlast before the device: finding the platforms starts every ICD's driver (pocl's LLVM), for
  // nothing when CLBlast is missing. On an H200's host with pocl's ICD and no CLBlast, an auto
  // process's first call, which looks for an OpenCL accelerator, took 0.14-0.21 s, most of it
  // that look; now 7-15 ms, the look 0.6 ms.
  clblast_programs::note_preexisting(kClblastLibrary);
  if (!load(clblast_, kClblastLibrary, why)) return false;
  if (!pick(cfg, why)) return false;
  static std::once_flag exit_hook;
  std::call_once(exit_hook, [] { std::atexit(at_exit); });

  std::string uncached;
  if (!clblast_programs::install(kClblastLibrary, cl_, uncached))
    log::once(log::Level::debug, "opencl: clblast uncached", "opencl: CLBlast's programs are not cached on disk: %s",
              uncached.c_str());

  cl_int err = CL_SUCCESS;
  context_ = cl_.clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
  if (!context_) {
    why = std::string("clCreateContext: ") + status_name(err);
    return false;
  }
  queue_ = cl_.clCreateCommandQueue(context_, device_, 0, &err);
  if (!queue_) {
    why = std::string("clCreateCommandQueue: ") + status_name(err);
    return false;
  }

  const std::string platform_name = platform_info(cl_, platform_, CL_PLATFORM_NAME);
  const std::string device_name = device_info(cl_, device_, CL_DEVICE_NAME);
  const std::string driver = device_info(cl_, device_, CL_DRIVER_VERSION);
  description_ = platform_name + ": " + device_name + " (driver " + driver + ")";

  cl_device_fp_config fp64 = 0;
  cl_.clGetDeviceInfo(device_, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, nullptr);
  fp64_ = fp64 != 0;
  cl_device_type type = 0;
  cl_.clGetDeviceInfo(device_, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
  accelerator_ = (type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)) != 0;
  cl_ulong max_alloc = 0;
  cl_.clGetDeviceInfo(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, nullptr);
  max_alloc_ = static_cast<size_t>(max_alloc);
  cl_.clGetDeviceInfo(device_, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_work_group_, &max_work_group_,
                      nullptr);
  max_work_group_ = std::max<size_t>(max_work_group_, 1);

  identity_ = platform_name + '\n' + platform_info(cl_, platform_, CL_PLATFORM_VERSION) + '\n' + device_name +
              '\n' + device_info(cl_, device_, CL_DEVICE_VERSION) + '\n' +
              device_info(cl_, device_, CL_DEVICE_VENDOR) + '\n' + driver;
  cache_ = std::make_unique<ProgramCache>(cl_, context_, device_, cfg.opencl_cache_dir, identity_);
  // What CLBlast's programs depend on besides the device and their source: the library, whose
  // build options follow its version, and the variable that adds to them.
  const char* extra_options = std::getenv("CLBLAST_BUILD_OPTIONS");
  clblast_programs::add(context_, cache_.get(),
                        "CLBlast " + library_identity(reinterpret_cast<const void*>(clblast_.ClearCache)) +
                            "\nCLBLAST_BUILD_OPTIONS=" + (extra_options ? extra_options : ""));
  SOL_LOG(debug, "opencl: using %s%s", description_.c_str(), fp64_ ? "" : " (no double precision)");
  return true;
}

bool Device::pick(const config::Config& cfg, std::string& why) {
  cl_uint count = 0;
  cl_int err = cl_.clGetPlatformIDs(0, nullptr, &count);
  if (err != CL_SUCCESS || count == 0) {
    why =
        "no OpenCL platform: the ICD loader found none (is an ICD such as pocl-opencl-icd installed "
        "under /etc/OpenCL/vendors?)";
    return false;
  }
  std::vector<cl_platform_id> platforms(count);
  if (cl_.clGetPlatformIDs(count, platforms.data(), nullptr) != CL_SUCCESS) {
    why = "clGetPlatformIDs failed";
    return false;
  }

  const std::string& pspec = cfg.opencl_platform;
  const std::string& dspec = cfg.opencl_device;
  std::string seen_platforms, seen_devices;
  for (size_t p = 0; p < platforms.size(); ++p) {
    const std::string pname = platform_info(cl_, platforms[p], CL_PLATFORM_NAME);
    seen_platforms += (seen_platforms.empty() ? "'" : ", '") + pname + "'";
    if (!matches(pspec, p, pname)) continue;

    cl_uint ndev = 0;
    if (cl_.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &ndev) != CL_SUCCESS || ndev == 0)
      continue;
    std::vector<cl_device_id> devices(ndev);
    if (cl_.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, ndev, devices.data(), nullptr) != CL_SUCCESS)
      continue;
    for (size_t d = 0; d < devices.size(); ++d) {
      const std::string dname = device_info(cl_, devices[d], CL_DEVICE_NAME);
      seen_devices += (seen_devices.empty() ? "'" : ", '") + dname + "'";
      if (!matches(dspec, d, dname)) continue;
      cl_bool available = CL_FALSE, compiler = CL_FALSE;
      cl_.clGetDeviceInfo(devices[d], CL_DEVICE_AVAILABLE, sizeof available, &available, nullptr);
      cl_.clGetDeviceInfo(devices[d], CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, nullptr);
      if (!available || !compiler) continue;
      platform_ = platforms[p];
      device_ = devices[d];
      return true;
    }
  }
  if (seen_devices.empty()) {
    why = pspec.empty() ? "no OpenCL device on any platform (" + seen_platforms + ")"
                        : "no OpenCL platform with a device matches backends.opencl.platform = '" + pspec +
                              "' (platforms: " + seen_platforms + ")";
  } else {
    why = "no available OpenCL device with a compiler matches backends.opencl.device = '" + dspec +
          "' (devices: " + seen_devices + ")";
  }
  return false;
}

cl_int Device::buffer(int slot, size_t bytes, cl_mem& out) {
  Slot& s = slots_[slot];
  bytes = std::max<size_t>(bytes, 64);
  if (s.bytes < bytes) {
    // Grow geometrically so that a sequence of slightly larger calls does not reallocate each
    // time, but never past what the device allows for one buffer.
    size_t want = std::max(bytes, std::min(s.bytes + s.bytes / 2, max_alloc_));
    want = (want + 4095) & ~size_t{4095};
    if (want > max_alloc_) want = bytes;
    if (s.mem) cl_.clReleaseMemObject(s.mem);
    s.mem = nullptr;
    s.bytes = 0;
    cl_int err = CL_SUCCESS;
    s.mem = cl_.clCreateBuffer(context_, CL_MEM_READ_WRITE, want, nullptr, &err);
    if (!s.mem) return err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE;
    s.bytes = want;
  }
  out = s.mem;
  return CL_SUCCESS;
}

void* Device::staging(int slot, size_t bytes) {
  auto& v = staging_[slot];
  if (v.size() < bytes) v.resize(bytes);
  return v.data();
}

void Device::release_larger_than(size_t keep) noexcept {
  for (Slot& s : slots_)
    if (s.mem && s.bytes > keep) {
      cl_.clReleaseMemObject(s.mem);
      s = Slot{};
    }
  for (auto& v : staging_)
    if (v.capacity() > keep) std::vector<unsigned char>().swap(v);
}

cl_kernel Device::kernel(Prec prec, Kernel k, std::string& why) {
  const int p = static_cast<int>(prec);
  const int i = static_cast<int>(k);
  if (kernels_[p][i]) return kernels_[p][i];
  if (!programs_[p]) {
    if (program_errors_[p].empty())
      programs_[p] = cache_->build(kProgramNames[p], kKernelSource, kProgramOptions[p], program_errors_[p]);
    if (!programs_[p]) {
      why = program_errors_[p];
      return nullptr;
    }
  }
  cl_int err = CL_SUCCESS;
  kernels_[p][i] = cl_.clCreateKernel(programs_[p], kKernelNames[i], &err);
  if (!kernels_[p][i]) why = std::string("clCreateKernel ") + kKernelNames[i] + ": " + status_name(err);
  return kernels_[p][i];
}

cl_kernel Device::kernel(DnnKernel k, std::string& why) {
  const int i = static_cast<int>(k);
  if (dnn_kernels_[i]) return dnn_kernels_[i];
  if (!dnn_program_) {
    if (dnn_program_error_.empty())
      dnn_program_ = cache_->build("sol_dnn", kDnnKernelSource, dnn_program_options(), dnn_program_error_);
    if (!dnn_program_) {
      why = dnn_program_error_;
      return nullptr;
    }
  }
  cl_int err = CL_SUCCESS;
  dnn_kernels_[i] = cl_.clCreateKernel(dnn_program_, kDnnKernelNames[i], &err);
  if (!dnn_kernels_[i]) why = std::string("clCreateKernel ") + kDnnKernelNames[i] + ": " + status_name(err);
  return dnn_kernels_[i];
}

}  // namespace sol::backends::opencl
