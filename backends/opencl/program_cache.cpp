#include "backends/opencl/program_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/fs_safety.hpp"
#include "common/log.hpp"

namespace sol::backends::opencl {
namespace {

struct FileHeader {
  char magic[8];
  uint64_t check;  // hash64(key, 2): a file of another key or a corrupted name is rejected
  uint64_t size;   // bytes of binary after the header
};
constexpr char kMagic[8] = {'S', 'O', 'L', 'C', 'L', 'B', '1', '\0'};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool write_all(int fd, const void* data, size_t bytes) noexcept {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t w = ::write(fd, p, bytes);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    bytes -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes) noexcept {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t r = ::read(fd, p, bytes);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    bytes -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

uint64_t hash64(const std::string& data, uint64_t seed) noexcept {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::string trusted_cache_dir(const std::string& dir) {
  if (dir.empty()) return dir;
  const std::string why = fs_safety::untrusted_reason(dir, true);
  if (why.empty()) return dir;
  log::once(log::Level::warn, "opencl cache " + dir,
            "opencl: cache directory %s is not used (%s): another user could plant the compiled "
            "programs this process runs; each process compiles its own",
            dir.c_str(), why.c_str());
  return {};
}

cl_program ProgramCache::build(const char* name, const std::string& source, const std::string& options,
                               std::string& why) {
  last_origin_ = Origin::none;
  std::string path;
  uint64_t check = 0;
  if (!dir_.empty()) {
    std::string key = device_key_;
    key += '\0';
    key += options;
    key += '\0';
    key += source;
    char file[96];
    std::snprintf(file, sizeof file, "/%s-%016" PRIx64 ".clbin", name, hash64(key, 1));
    path = dir_ + file;
    check = hash64(key, 2);

    const auto t0 = std::chrono::steady_clock::now();
    if (cl_program program = load(path, check, options)) {
      last_origin_ = Origin::loaded;
      SOL_LOG(debug, "opencl: loaded cached program %s from %s (%.1f ms)", name, path.c_str(), ms_since(t0));
      return program;
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int err = CL_SUCCESS;
  cl_program program = cl_.clCreateProgramWithSource(context_, 1, &text, &length, &err);
  if (!program) {
    why = std::string("clCreateProgramWithSource: ") + status_name(err);
    return nullptr;
  }
  err = cl_.clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t size = 0;
    cl_.clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    if (size) cl_.clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    why = std::string("building ") + name + ": " + status_name(err) + "\n" + log;
    cl_.clReleaseProgram(program);
    return nullptr;
  }
  last_origin_ = Origin::compiled;
  SOL_LOG(debug, "opencl: compiled program %s (%.1f ms)", name, ms_since(t0));
  if (!path.empty()) store(path, check, program);
  return program;
}

cl_program ProgramCache::load(const std::string& path, uint64_t check, const std::string& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  FileHeader header;
  struct stat st;
  std::vector<unsigned char> binary;
  bool ok = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > sizeof header &&
            read_all(fd, &header, sizeof header) && std::memcmp(header.magic, kMagic, sizeof kMagic) == 0 &&
            header.check == check && header.size == static_cast<size_t>(st.st_size) - sizeof header;
  if (ok) {
    binary.resize(header.size);
    ok = read_all(fd, binary.data(), binary.size());
  }
  ::close(fd);
  if (!ok) {
    SOL_LOG(debug, "opencl: ignoring cache file %s (not a complete binary for this key)", path.c_str());
    return nullptr;
  }

  const unsigned char* data = binary.data();
  const size_t size = binary.size();
  cl_int binary_status = CL_SUCCESS;
  cl_int err = CL_SUCCESS;
  cl_program program =
      cl_.clCreateProgramWithBinary(context_, 1, &device_, &size, &data, &binary_status, &err);
  if (program && binary_status == CL_SUCCESS && err == CL_SUCCESS)
    err = cl_.clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  else if (err == CL_SUCCESS)
    err = binary_status;
  if (err != CL_SUCCESS) {
    SOL_LOG(debug, "opencl: the driver rejected cache file %s (%s); compiling instead", path.c_str(),
            status_name(err));
    if (program) cl_.clReleaseProgram(program);
    return nullptr;
  }
  return program;
}

void ProgramCache::store(const std::string& path, uint64_t check, cl_program program) {
  size_t size = 0;
  if (cl_.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return;
  std::vector<unsigned char> binary(size);
  unsigned char* data = binary.data();
  if (cl_.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr) != CL_SUCCESS) return;

  // Checked again once created: someone may have made a missing directory first.
  const std::string why = fs_safety::make_private_dir(dir_);
  if (!why.empty()) {
    SOL_LOG(debug, "opencl: cannot use cache directory %s: %s", dir_.c_str(), why.c_str());
    return;
  }
  // Unique per process and call: concurrent writers of the same program each rename a complete
  // file into place, and the last one wins with identical content.
  static std::atomic<unsigned> counter{0};
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%u", static_cast<long>(::getpid()), counter.fetch_add(1));
  const std::string tmp = path + suffix;
  std::string error;
  const int fd = fs_safety::open_new_private(tmp, 0, error);
  if (fd < 0) {
    SOL_LOG(debug, "opencl: cannot write %s", error.c_str());
    return;
  }
  FileHeader header;
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.check = check;
  header.size = size;
  bool ok = write_all(fd, &header, sizeof header) && write_all(fd, binary.data(), binary.size());
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    SOL_LOG(debug, "opencl: cannot write %s: %s", path.c_str(), std::strerror(errno));
    ::unlink(tmp.c_str());
  }
}

}  // namespace sol::backends::opencl
