// Builds OpenCL programs, keeping their binaries on disk so that the next process loads them
// instead of compiling (pocl spends seconds in clang/LLVM per program; GPU drivers less, but
// still far more than a call).
//
// One file per program: <dir>/<name>-<hash>.clbin, where the hash covers everything the binary
// depends on (platform and device name and version, driver version, build options, source).
// A file is written to a temporary name and renamed into place, so concurrent processes never
// see a partial file; a file that does not load (truncated, from another driver, rejected by
// clBuildProgram) is ignored and replaced by a fresh compile.
//
// The binaries are native code that this process runs: a directory another user can write
// (fs_safety::untrusted_reason) is not used, and SOL creates its directories 0700 and its files 0600.
#pragma once

#include <cstdint>
#include <string>

#include "backends/opencl/api.hpp"

namespace sol::backends::opencl {

// `dir` when SOL may keep compiled programs (or what it learnt about devices) there, else "" after
// one line saying why not. A directory that does not exist yet is judged by its existing part.
std::string trusted_cache_dir(const std::string& dir);

// FNV-1a from a seeded basis, finished with the splitmix64 mixer: stable across processes and
// builds, for cache file names. Two seeds give a file name and an independent check stored inside.
uint64_t hash64(const std::string& data, uint64_t seed) noexcept;

class ProgramCache {
 public:
  // `dir` empty or not trusted: no disk cache, every program is compiled. `device_key`
  // identifies the device and driver (see Device::open).
  ProgramCache(const ClApi& cl, cl_context context, cl_device_id device, std::string dir,
               std::string device_key)
      : cl_(cl),
        context_(context),
        device_(device),
        dir_(trusted_cache_dir(dir)),
        device_key_(std::move(device_key)) {}

  // A built program, or nullptr with `why` (the build log for a compile error).
  cl_program build(const char* name, const std::string& source, const std::string& options, std::string& why);

  // What the last build() did, for tests and `sol backends`.
  enum class Origin { none, compiled, loaded };
  Origin last_origin() const noexcept { return last_origin_; }

 private:
  cl_program load(const std::string& path, uint64_t check, const std::string& options);
  void store(const std::string& path, uint64_t check, cl_program program);

  const ClApi& cl_;
  cl_context context_;
  cl_device_id device_;
  std::string dir_;
  std::string device_key_;
  Origin last_origin_ = Origin::none;
};

}  // namespace sol::backends::opencl
