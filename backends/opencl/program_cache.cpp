#include "backends/opencl/program_cache.hpp"

#include <dirent.h>
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
#include "hal/one_time.hpp"

namespace sol::backends::opencl {
namespace {

// A cache file: this header, then the build options (options_size bytes), then the binary
// (size bytes). Version 1 had neither options nor digest; its files are ignored and replaced.
struct FileHeader {
  char magic[8];
  uint64_t check;   // hash64(key, 2): a file of another key or a corrupted name is rejected
  uint64_t digest;  // digest64 of everything after the header: a corrupted file is rejected
  uint64_t options_size;
  uint64_t size;
};
constexpr char kMagic[8] = {'S', 'O', 'L', 'C', 'L', 'B', '2', '\0'};
constexpr size_t kMagicFamily = 6;  // "SOLCLB": a file of this cache in some version

std::atomic<int> g_loaded{0}, g_compiled{0};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// 64-bit digest of a file's contents, eight bytes at a time (a binary is up to a few MiB: FNV's
// byte-at-a-time loop would cost a millisecond per load). Not cryptographic: it catches a truncated
// or damaged file, while the directory's trust rules keep out files someone else wrote.
uint64_t digest64(const unsigned char* p, size_t n) noexcept {
  uint64_t h = 0x6a09e667f3bcc909ull ^ n;
  auto mix = [&h](uint64_t w) {
    w *= 0x9e3779b97f4a7c15ull;
    w ^= w >> 32;
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  };
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  mix(tail ^ (uint64_t{n} << 56));
  return h ^ (h >> 31);
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

// A damaged file is worth one line (a disk, a copy gone wrong); it is replaced by the compile that
// follows. One per file and damage in a process, which may read the file twice before that (the
// start-up, then the first call).
void report_corrupt(const std::string& path, const char* what) {
  log::once(log::Level::warn, "opencl cache file " + path + ": " + what,
            "opencl: cache file %s is corrupt (%s); compiling the program again", path.c_str(), what);
}

}  // namespace

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

void ProgramCache::count_compiled() noexcept {
  g_compiled.fetch_add(1, std::memory_order_relaxed);
  hal::one_time::note(hal::one_time::kernel_compile);
}

ProgramCache::Totals ProgramCache::totals() noexcept {
  return {g_loaded.load(std::memory_order_relaxed), g_compiled.load(std::memory_order_relaxed)};
}

ProgramCache::Entry ProgramCache::entry(const char* name, const std::string& key) const {
  Entry e;
  e.name = name;
  if (dir_.empty()) return e;
  // The format's magic in the key too: processes of two SOL versions on one machine then keep
  // files of their own instead of replacing each other's.
  std::string full(kMagic, sizeof kMagic);
  full += device_key_;
  full += '\0';
  full += key;
  char file[96];
  std::snprintf(file, sizeof file, "/%s-%016" PRIx64 ".clbin", name, hash64(full, 1));
  e.path = dir_ + file;
  e.check = hash64(full, 2);
  return e;
}

uint32_t ProgramCache::tag(const std::string& key) const {
  return static_cast<uint32_t>(hash64(device_key_ + '\0' + key, 3) >> 32);
}

bool ProgramCache::find(const char* name, Entry& out) const {
  if (dir_.empty()) return false;
  DIR* dir = ::opendir(dir_.c_str());
  if (!dir) return false;
  const std::string prefix = std::string(name) + '-';
  std::string file;
  while (const dirent* e = ::readdir(dir)) {
    const size_t len = std::strlen(e->d_name);
    if (len > prefix.size() + 6 && std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0 &&
        std::strcmp(e->d_name + len - 6, ".clbin") == 0) {
      file = e->d_name;
      break;
    }
  }
  ::closedir(dir);
  if (file.empty()) return false;
  out.name = name;
  out.path = dir_ + '/' + file;
  FileHeader header;
  const int fd = ::open(out.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = read_all(fd, &header, sizeof header) && std::memcmp(header.magic, kMagic, sizeof kMagic) == 0;
  ::close(fd);
  out.check = header.check;
  return ok;
}

cl_program ProgramCache::build(const char* name, const std::string& source, const std::string& options,
                               std::string& why) {
  last_origin_ = Origin::none;
  const Entry e = entry(name, options + '\0' + source);
  std::string stored_options;
  if (cl_program program = load(e, stored_options)) {
    if (stored_options == options) {  // always, the options being part of the key
      last_origin_ = Origin::loaded;
      return program;
    }
    cl_.clReleaseProgram(program);
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
  count_compiled();
  SOL_LOG(debug, "opencl: compiled program %s (%.1f ms)", name, ms_since(t0));
  store(e, options, program);
  return program;
}

cl_program ProgramCache::load(const Entry& entry, std::string& options) {
  if (entry.path.empty()) return nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const char* path = entry.path.c_str();
  const int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;  // not cached yet
  FileHeader header;
  struct stat st;
  std::vector<unsigned char> rest;
  const char* corrupt = nullptr;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
  if (!ok) {
    SOL_LOG(debug, "opencl: ignoring cache file %s (not a regular file of this user)", path);
  } else if (static_cast<size_t>(st.st_size) < sizeof header || !read_all(fd, &header, sizeof header)) {
    corrupt = "shorter than its header";
  } else if (std::memcmp(header.magic, kMagic, kMagicFamily) != 0) {
    corrupt = "not a program cache file";
  } else if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) {
    ok = false;  // another version of SOL wrote it: not damaged, just replaced
    SOL_LOG(debug, "opencl: ignoring cache file %s (another format version)", path);
  } else if (header.check != entry.check) {
    corrupt = "its header is not this program's";
  } else if (header.options_size > static_cast<uint64_t>(st.st_size) ||
             header.size != static_cast<uint64_t>(st.st_size) - sizeof header - header.options_size) {
    corrupt = "truncated or extended";
  } else {
    rest.resize(static_cast<size_t>(header.options_size + header.size));
    if (!read_all(fd, rest.data(), rest.size()))
      corrupt = "unreadable";
    else if (digest64(rest.data(), rest.size()) != header.digest)
      corrupt = "its contents do not match their digest";
  }
  ::close(fd);
  if (corrupt) report_corrupt(entry.path, corrupt);
  if (corrupt || !ok) return nullptr;

  const unsigned char* data = rest.data() + header.options_size;
  const size_t size = static_cast<size_t>(header.size);
  options.assign(reinterpret_cast<const char*>(rest.data()), static_cast<size_t>(header.options_size));
  cl_int binary_status = CL_SUCCESS;
  cl_int err = CL_SUCCESS;
  cl_program program =
      cl_.clCreateProgramWithBinary(context_, 1, &device_, &size, &data, &binary_status, &err);
  if (program && binary_status == CL_SUCCESS && err == CL_SUCCESS)
    err = cl_.clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  else if (err == CL_SUCCESS)
    err = binary_status;
  if (err != CL_SUCCESS) {
    SOL_LOG(info, "opencl: the driver rejected cache file %s (%s); compiling the program again", path,
            status_name(err));
    if (program) cl_.clReleaseProgram(program);
    return nullptr;
  }
  g_loaded.fetch_add(1, std::memory_order_relaxed);
  hal::one_time::note(hal::one_time::kernel_load);
  SOL_LOG(debug, "opencl: loaded cached program %s from %s (%.1f ms)", entry.name.c_str(), path, ms_since(t0));
  return program;
}

void ProgramCache::store(const Entry& entry, const std::string& options, cl_program program) {
  if (entry.path.empty()) return;
  size_t size = 0;
  if (cl_.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return;
  // The whole file in one buffer: header, options, binary (fs_safety::replace_file writes it to a
  // private temporary file and renames it into place).
  std::string file(sizeof(FileHeader) + options.size() + size, '\0');
  unsigned char* rest = reinterpret_cast<unsigned char*>(file.data()) + sizeof(FileHeader);
  std::memcpy(rest, options.data(), options.size());
  unsigned char* binary = rest + options.size();
  if (cl_.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary, nullptr) != CL_SUCCESS) return;
  FileHeader header;
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.check = entry.check;
  header.digest = digest64(rest, options.size() + size);
  header.options_size = options.size();
  header.size = size;
  std::memcpy(file.data(), &header, sizeof header);

  // Checked again once created: someone may have made a missing directory first.
  const std::string why = fs_safety::make_private_dir(dir_);
  if (!why.empty()) {
    SOL_LOG(debug, "opencl: cannot use cache directory %s: %s", dir_.c_str(), why.c_str());
    return;
  }
  std::string error;
  if (!fs_safety::replace_file(entry.path, file, error))
    SOL_LOG(debug, "opencl: cannot write %s: %s", entry.path.c_str(), error.c_str());
}

}  // namespace sol::backends::opencl
